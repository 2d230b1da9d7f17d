package uswitch_test

import (
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/test/uswitch"
)

func TestL3Router(t *testing.T) {
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}}
	peer := func(p int) [6]byte { return [6]byte{2, 9, 9, 9, 9, byte(p)} }
	var gotN int
	choose := func(src, dst uint32, proto uint8, sp, dp uint16, n int) int {
		gotN = n
		return int(sp) % n
	}
	r, err := uswitch.NewL3Router(macs, []uswitch.L3Route{
		{Dst: netip.MustParsePrefix("10.3.0.0/16"), Hops: []uswitch.NextHop{{Port: 1, MAC: peer(1)}, {Port: 2, MAC: peer(2)}}},
		{Dst: netip.MustParsePrefix("10.3.0.2/32"), Hops: []uswitch.NextHop{{Port: 0, MAC: peer(0)}}},
	}, choose)
	if err != nil {
		t.Fatal(err)
	}
	// 10.3.0.1 -> 10.3.0.2: the /32 wins over the /16.
	f := uswitch.NewTestFrame(dataFrame(100, 2), 34, 6)
	if p := r.Route(f, 1); p != 0 {
		t.Fatalf("routed to port %d, want 0 (longest prefix)", p)
	}
	d := f.Data()
	if [6]byte(d[0:6]) != peer(0) || [6]byte(d[6:12]) != macs[0] || d[22] != 63 {
		t.Fatalf("rewrite: dst %x src %x ttl %d", d[0:6], d[6:12], d[22])
	}
	checkSums(t, d)

	// To 10.3.9.9: ECMP over ports 1 and 2 by the source port (40000 % 2 = 0 -> port 1).
	fr := dataFrame(100, 2)
	fr[30], fr[31], fr[32], fr[33] = 10, 3, 9, 9
	fixIP(fr)
	f = uswitch.NewTestFrame(fr, 34, 6)
	if p := r.Route(f, 0); p != 1 || gotN != 2 {
		t.Fatalf("ECMP routed to port %d choosing among %d", p, gotN)
	}

	// No route, TTL running out, and non-IPv4 frames are dropped.
	fr = dataFrame(100, 2)
	fr[30] = 192
	fixIP(fr)
	if p := r.Route(uswitch.NewTestFrame(fr, 34, 6), 0); p != uswitch.Drop {
		t.Fatalf("unroutable frame went to port %d", p)
	}
	fr = dataFrame(100, 2)
	fr[22] = 1
	fixIP(fr)
	if p := r.Route(uswitch.NewTestFrame(fr, 34, 6), 0); p != uswitch.Drop {
		t.Fatalf("frame with TTL 1 went to port %d", p)
	}
	fr = dataFrame(100, 2)
	fr[12], fr[13] = 0x08, 0x06 // ARP
	if p := r.Route(uswitch.NewTestFrame(fr, 34, 6), 0); p != uswitch.Drop {
		t.Fatalf("ARP frame went to port %d", p)
	}

	if _, err := uswitch.NewL3Router(macs, nil, nil); err == nil {
		t.Fatal("router without a choice function accepted")
	}
	if _, err := uswitch.NewL3Router(macs, []uswitch.L3Route{{Dst: netip.MustParsePrefix("10.0.0.0/8"), Hops: []uswitch.NextHop{{Port: 3}}}}, choose); err == nil {
		t.Fatal("route to a port that does not exist accepted")
	}
}

// fixIP recomputes the IPv4 header checksum (and the UDP one, which covers the addresses).
func fixIP(fr []byte) {
	ip := fr[14:34]
	ip[10], ip[11] = 0, 0
	c := ^fold(sum(ip))
	ip[10], ip[11] = byte(c>>8), byte(c)
	u := fr[34:]
	u[6], u[7] = 0, 0
	c = ^fold(pseudo(ip, len(u)) + sum(u))
	u[6], u[7] = byte(c>>8), byte(c)
}

func BenchmarkL3Route(b *testing.B) {
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}, {2, 0, 0, 0, 0, 4}}
	var routes []uswitch.L3Route
	for l := 0; l < 16; l++ {
		routes = append(routes, uswitch.L3Route{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(l), 0}), 24),
			Hops: []uswitch.NextHop{{Port: 1}, {Port: 2}, {Port: 3}}})
	}
	routes = append(routes, uswitch.L3Route{Dst: netip.MustParsePrefix("10.3.0.0/16"), Hops: []uswitch.NextHop{{Port: 1}, {Port: 2}, {Port: 3}}})
	r, _ := uswitch.NewL3Router(macs, routes, func(src, dst uint32, proto uint8, sp, dp uint16, n int) int { return int(sp) % n })
	f := uswitch.NewTestFrame(dataFrame(4000, 2), 34, 6)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.Data()[22] = 64 // keep the TTL from running out
		if r.Route(f, 0) < 0 {
			b.Fatal("dropped")
		}
	}
}

// SetDown takes a next hop out of the ECMP choice for the routes to a destination (and
// only those); SetDown(false) puts it back; a route with every hop down drops.
func TestL3RouterSetDown(t *testing.T) {
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}}
	choose := func(src, dst uint32, proto uint8, sp, dp uint16, n int) int { return int(sp) % n }
	hops := []uswitch.NextHop{{Port: 1}, {Port: 2}}
	r, err := uswitch.NewL3Router(macs, []uswitch.L3Route{
		{Dst: netip.MustParsePrefix("10.3.0.0/16"), Hops: hops},
		{Dst: netip.MustParsePrefix("10.4.0.0/16"), Hops: hops},
	}, choose)
	if err != nil {
		t.Fatal(err)
	}
	route := func(b byte, sport uint16) int {
		fr := dataFrame(100, 2)
		fr[30], fr[31], fr[32], fr[33] = 10, b, 9, 9
		fr[34], fr[35] = byte(sport>>8), byte(sport)
		fixIP(fr)
		return r.Route(uswitch.NewTestFrame(fr, 34, 6), 0)
	}
	count := func(b byte) [3]int {
		var c [3]int
		for sp := uint16(1000); sp < 1100; sp++ {
			if p := route(b, sp); p >= 0 {
				c[p]++
			}
		}
		return c
	}
	if c := count(3); c[1] != 50 || c[2] != 50 {
		t.Fatalf("before: %v", c)
	}
	r.SetDown(netip.MustParsePrefix("10.3.0.0/24"), 1, true)
	if c := count(3); c[1] != 0 || c[2] != 100 {
		t.Fatalf("port 1 down toward 10.3: %v", c)
	}
	if c := count(4); c[1] != 50 || c[2] != 50 {
		t.Fatalf("10.4 must be unaffected: %v", c)
	}
	r.SetDown(netip.MustParsePrefix("10.3.0.0/24"), 2, true)
	if p := route(3, 1000); p != uswitch.Drop {
		t.Fatalf("every hop down: routed to %d", p)
	}
	r.SetDown(netip.Prefix{}, 1, false)
	r.SetDown(netip.Prefix{}, 2, false)
	if c := count(3); c[1] != 50 || c[2] != 50 {
		t.Fatalf("after recovery: %v", c)
	}
}
