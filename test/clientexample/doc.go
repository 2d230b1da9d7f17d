// Package clientexample holds the Go client's examples that run against real daemons: the
// client is its own module (importable from Go 1.24) and cannot import the daemon's, so
// its examples with daemons live here, in the daemon's module.
package clientexample
