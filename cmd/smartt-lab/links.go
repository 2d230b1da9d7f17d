package main

// The research tools link every optional part of the engine: the erasure code of
// recovery.mode: ec (the operator CLI, smartt, does not).
import _ "github.com/smartt-transport/smartt/transport/ec"
