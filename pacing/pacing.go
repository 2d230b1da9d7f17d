// Package pacing decides when the next packet of a connection may leave, for rate-based
// congestion control and for windows below one MTU, and waits for that time on a real
// host. The engine asks a connection's Pacer before each data packet (earliest-departure
// time scheduling; the engine's NextTimeout is the earliest departure over all
// connections); the daemon's loop waits for that deadline with a Waiter.
package pacing

// Pacer spaces a connection's packets at a rate using earliest-departure times, with an
// optional token-bucket depth. The zero value is ready: strict spacing, and with rate 0
// it never delays.
type Pacer struct {
	next int64 // earliest departure time of the next packet, ns
	// Burst is the bucket depth in bytes: a connection that sends late (its driver woke
	// up late, or it was blocked) may send up to Burst bytes ahead of strict spacing to
	// make up for it, so the average rate holds despite wake-up jitter. 0 is strict EDT:
	// lateness is lost, and idle time earns nothing.
	Burst int
}

// Earliest returns the earliest time (ns) the next packet may leave at the given rate
// (bytes/s); with rate 0 the answer is now.
func (p *Pacer) Earliest(now, rate int64) int64 {
	if rate <= 0 || p.next <= now {
		return now
	}
	return p.next
}

// OnSend records that a packet of size bytes left at now at the given rate (bytes/s).
func (p *Pacer) OnSend(now int64, size int, rate int64) {
	if rate <= 0 {
		p.next = now
		return
	}
	// Late or idle time earns at most Burst bytes of credit.
	start := p.next
	if floor := now - int64(p.Burst)*1_000_000_000/rate; start < floor {
		start = floor
	}
	p.next = start + int64(size)*1_000_000_000/rate
}

// WindowRate is the rate that spreads a window smaller than one packet over an RTT:
// window/srtt bytes/s when window < size and srtt > 0, else 0 (the window alone governs).
// Without it a sub-MTU window would send one whole packet per RTT, size/window times too
// fast.
func WindowRate(window, size int, srtt int64) int64 {
	if window >= size || srtt <= 0 || window <= 0 {
		return 0
	}
	return max(int64(window)*1_000_000_000/srtt, 1)
}
