package switchport

import "github.com/smartt-transport/smartt/transport/wire"

// INT is the in-band telemetry (HPCC, Li et al., SIGCOMM 2019) of one output port: the
// record an INT-capable switch writes into a data packet as it leaves the port (the
// caller writes it into the packet with wire.StampINT). It keeps the port's transmitted
// byte counter, which must see every departure in service order (Pop's order), stamped
// or not.
type INT struct {
	tx uint64 // bytes serialised by the port before the next departure
}

// Record returns the INT record of the next departure of a port whose rate is rate
// bits/s (Port.Rate): its service start, the bytes the port serialised before it, the
// data queue waiting behind it and the rate in Mbit/s; it counts the departure's bytes.
func (x *INT) Record(start int64, size int, qlen uint32, rate int64) wire.INTHop {
	h := wire.INTHop{TS: uint32(start), TxBytes: uint32(x.tx), QLen: qlen, Rate: uint32(min(rate/1_000_000, 1<<32-1))}
	x.tx += uint64(size)
	return h
}

// Count counts a departure that is not stamped (a control packet).
func (x *INT) Count(size int) { x.tx += uint64(size) }
