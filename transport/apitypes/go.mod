module github.com/smartt-transport/smartt/transport/apitypes

go 1.24.0
