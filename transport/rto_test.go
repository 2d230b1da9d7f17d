package transport

import (
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/wire"
)

// TestRTOAboveSteadyRTT: on a path whose RTT hardly varies (a deterministic fabric, here
// 1 ms) rttvar decays toward zero, and an RTO of max(MinRTO, srtt + 4 rttvar) collapsed
// onto srtt: an ACK held up a little (every 16th by 150 us, less than MinRTO, as behind a
// data packet on the receiver's NIC) then timed out its packet, and the spurious
// retransmissions loaded the path further. With RTO = srtt + max(MinRTO, 4 rttvar) (Linux's
// floor on the variation term) nothing times out.
func TestRTOAboveSteadyRTT(t *testing.T) {
	cfg := DefaultConfig()
	cfg.InitialRTO = config.Duration(5e6) // above the first RTT
	p := newPair(t, cfg, 500_000)
	acks := 0
	p.extra = func(from *Endpoint, b []byte) int64 {
		if from != p.b {
			return 0
		}
		acks++
		if acks%16 == 0 {
			return 150_000
		}
		return 0
	}
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, 10e9, func() bool { return p.a.Stats().MsgsSent == 1 })
	st := p.a.Stats()
	if st.Timeouts != 0 || st.RetxTimeout != 0 {
		t.Fatalf("%d timer expiries, %d timeout retransmissions over a steady 1 ms path with ACK jitter below MinRTO; want 0", st.Timeouts, st.RetxTimeout)
	}
}

// TestFixedRTO: a packet that never gets through is retransmitted every FixedRTO, with no
// backoff (the papers' simulator); by default the timeout doubles per retransmission.
func TestFixedRTO(t *testing.T) {
	gaps := func(cfg Config) []int64 {
		e := newEndpoint(t, cfg)
		id, err := e.Dial(0, netip.MustParseAddrPort("10.0.0.2:4791"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Send(0, id, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<16)
		var sent []int64
		for now := int64(0); len(sent) < 6; {
			for {
				tx, ok := e.PollTransmit(now, buf)
				if !ok {
					break
				}
				if tx.Type == wire.TypeData {
					sent = append(sent, now)
				}
			}
			dl, ok := e.NextTimeout()
			if !ok {
				t.Fatal("no timer armed with a packet in flight")
			}
			now = dl
			e.HandleTimeout(now)
		}
		var g []int64
		for i := 1; i < len(sent); i++ {
			g = append(g, sent[i]-sent[i-1])
		}
		return g
	}
	cfg := DefaultConfig()
	cfg.FixedRTO = 50_000
	for i, g := range gaps(cfg) {
		if g != 50_000 {
			t.Fatalf("fixed_rto 50us: retransmission %d after %d ns, want 50000 (all gaps %v)", i+1, g, gaps(cfg))
		}
	}
	g := gaps(DefaultConfig())
	if g[len(g)-1] < 4*g[0] {
		t.Fatalf("adaptive RTO did not back off: gaps %v", g)
	}
	// Limits: 0 (adaptive) and 1us..10s.
	for _, c := range []struct {
		v  config.Duration
		ok bool
	}{{0, true}, {1_000, true}, {10_000_000_000, true}, {999, false}, {10_000_000_001, false}, {-1, false}} {
		cfg := DefaultConfig()
		cfg.FixedRTO = c.v
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("fixed_rto = %d: Validate() = %v, want ok=%v", c.v, err, c.ok)
		}
	}
}
