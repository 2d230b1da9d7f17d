package smarttd

// The daemon's tests run recovery.mode: ec, so they link the erasure code as smarttd does.
import _ "github.com/smartt-transport/smartt/transport/ec"
