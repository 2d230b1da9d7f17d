// Package pacing decides when the next packet of a connection may leave, for rate-based
// congestion control. The engine asks the pacer before each data packet.
package pacing

// Pacer spaces a connection's packets at a rate using earliest-departure times.
// The zero value is ready: with rate 0 it never delays.
type Pacer struct {
	next int64 // earliest departure time of the next packet, ns
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
	// An idle connection earns no credit: it may not burst when it resumes.
	start := p.next
	if start < now {
		start = now
	}
	p.next = start + int64(size)*1_000_000_000/rate
}
