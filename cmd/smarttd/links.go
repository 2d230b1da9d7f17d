package main

// The daemon links every optional part of the engine: the erasure code of
// recovery.mode: ec (the operator CLI's in-process demo daemons do not).
import _ "github.com/smartt-transport/smartt/transport/ec"
