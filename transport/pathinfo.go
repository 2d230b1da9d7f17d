package transport

// hopSetter is a controller whose base RTT (SMaRTT) or target (Swift) depends on the
// path's length.
type hopSetter interface{ SetHops(n int) }

// MaxPathHops bounds the hop count SetPathHops accepts (an IP TTL cannot count more).
const MaxPathHops = 255

// SetPathHops tells connection id's congestion controller how many switches its path
// crosses (the simulator knows it from the topology; a daemon learns it from the IP
// TTL, Config.HopsFromTTL), so that a controller with per-hop base RTTs (smartt.base_rtt_per_hop) or a
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

// HopsFromTTL is how many routers a packet that arrived with this IP TTL (IPv6 hop
// limit) crossed, assuming its sender started from the nearest common initial value
// (64 on Linux and most hosts, 128 on Windows, 255 on network gear); -1 for a TTL of 0.
func HopsFromTTL(ttl uint8) int {
	switch {
	case ttl == 0:
		return -1
	case ttl <= 64:
		return 64 - int(ttl)
	case ttl <= 128:
		return 128 - int(ttl)
	default:
		return 255 - int(ttl)
	}
}

// learnHops keeps the fewest hops c's peer's packets have shown and tells c's controller
// when that number falls (paths of one connection differ in length only when the fabric
// does; the shortest is the one the base RTT belongs to).
func (e *Endpoint) learnHops(c *conn, ttl uint8) {
	h := HopsFromTTL(ttl)
	if h < 0 || (c.hopsSeen && h >= int(c.ttlHops)) {
		return
	}
	c.ttlHops, c.hopsSeen = uint8(h), true
	if hs, ok := c.cc.(hopSetter); ok {
		hs.SetHops(h)
	}
}
