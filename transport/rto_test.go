package transport

import (
	"testing"

	"github.com/smartt-transport/smartt/config"
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
