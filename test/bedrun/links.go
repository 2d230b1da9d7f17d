package bedrun

// The testbed runs scenarios in every loss-recovery mode, so it links the erasure code of
// recovery.mode: ec (the operator CLI, smartt, does not).
import _ "github.com/smartt-transport/smartt/transport/ec"
