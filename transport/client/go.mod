module github.com/smartt-transport/smartt/transport/client

// Its own module at go 1.24 so that programs on Go 1.24 and 1.25 can import the client
// without their go line being raised to the daemon's (docs/api.md, "Go client").
go 1.24.0

require (
	github.com/smartt-transport/smartt/transport/apitypes v0.0.0
	github.com/smartt-transport/smartt/transport/bufpool v0.0.0
	golang.org/x/sys v0.41.0
)

// In this repository the sibling modules are used from the checkout; a release tags
// transport/apitypes/vX.Y.Z and transport/bufpool/vX.Y.Z with the client.
replace (
	github.com/smartt-transport/smartt/transport/apitypes => ../apitypes
	github.com/smartt-transport/smartt/transport/bufpool => ../bufpool
)
