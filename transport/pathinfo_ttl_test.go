package transport

import (
	"testing"
)

func TestHopsFromTTL(t *testing.T) {
	for ttl, want := range map[uint8]int{0: -1, 1: 63, 64: 0, 61: 3, 65: 63, 128: 0, 125: 3, 129: 126, 255: 0, 250: 5} {
		if got := HopsFromTTL(ttl); got != want {
			t.Errorf("HopsFromTTL(%d) = %d, want %d", ttl, got, want)
		}
	}
}

// TestPathHopsFromTTL: a connection learns the fewest hops its peer's packets showed,
// only with hops_from_ttl, and only from packets of a proven connection.
func TestPathHopsFromTTL(t *testing.T) {
	for _, on := range []bool{true, false} {
		cfg := DefaultConfig()
		cfg.HopsFromTTL = on
		p := newPair(t, cfg, 3000)
		ttl := map[*Endpoint]uint8{}
		p.ttl = func(from *Endpoint, b []byte) uint8 { return ttl[from] }
		id, _ := p.a.Dial(0, p.bAddr)
		send := func(bTTL, aTTL uint8) {
			ttl[p.b], ttl[p.a] = bTTL, aTTL
			m, _ := p.a.Send(p.now, id, make([]byte, 9000))
			p.runUntil(t, p.now+1e9, func() bool {
				for _, ev := range events(p.a) {
					if ev.Kind == MessageSent && ev.MsgID == m {
						return true
					}
				}
				return false
			})
			events(p.b)
		}
		hops := func(e *Endpoint) int {
			cs := e.Conns(nil)
			if len(cs) != 1 {
				t.Fatalf("%d connections", len(cs))
			}
			return cs[0].PathHops
		}
		// b's packets crossed 3 routers, a's 2; b has not seen a echo its ID yet
		// (a's whole first message left before b's first ACK): b learns nothing.
		check := func(bTTL, aTTL uint8, wantA, wantB int) {
			t.Helper()
			send(bTTL, aTTL)
			if !on {
				wantA, wantB = -1, -1
			}
			if hops(p.a) != wantA || hops(p.b) != wantB {
				t.Fatalf("hops_from_ttl %v: a learnt %d, b %d; want %d, %d", on, hops(p.a), hops(p.b), wantA, wantB)
			}
		}
		check(61, 62, 3, -1)
		check(61, 60, 3, 4) // a's packets now name b's ID: b's connection is proven
		check(63, 62, 1, 2) // shorter paths lower both
		check(60, 59, 1, 2) // longer ones do not raise them
	}
}

// TestUnprovenTTLIgnored: packets of a connection whose peer has not proven its address
// (a possibly spoofed first packet) teach nothing.
func TestUnprovenTTLIgnored(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HopsFromTTL = true
	p := newPair(t, cfg, 3000)
	buf := make([]byte, 9000)
	id, _ := p.a.Dial(0, p.bAddr)
	p.a.Send(0, id, []byte("x"))
	tx, ok := p.a.PollTransmit(0, buf)
	if !ok {
		t.Fatal("nothing to send")
	}
	p.b.HandlePacket(1000, buf[:tx.N], RxMeta{From: p.aAddr, TTL: 1})
	b := p.b
	cs := b.Conns(nil)
	if len(cs) != 1 || cs[0].PathHops != -1 {
		t.Fatalf("unproven connection learnt hops: %+v", cs)
	}
}
