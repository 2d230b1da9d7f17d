package transport

// hopSetter is a controller whose base RTT (SMaRTT) or target (Swift) depends on the
// path's length.
type hopSetter interface{ SetHops(n int) }

// MaxPathHops bounds the hop count SetPathHops accepts (an IP TTL cannot count more).
const MaxPathHops = 255

// SetPathHops tells connection id's congestion controller how many switches its path
// crosses (the simulator knows it from the topology; a daemon could read it from the IP
// TTL), so that a controller with per-hop base RTTs (smartt.base_rtt_per_hop) or a
// hop-scaled target (Swift) uses the path's own. It reports false for an unknown
// connection, a hop count outside 0..MaxPathHops, or a controller without hop input.
func (e *Endpoint) SetPathHops(id ConnID, hops int) bool {
	c := e.conns[uint64(id)]
	if c == nil || hops < 0 || hops > MaxPathHops {
		return false
	}
	hs, ok := c.cc.(hopSetter)
	if ok {
		hs.SetHops(hops)
	}
	return ok
}
