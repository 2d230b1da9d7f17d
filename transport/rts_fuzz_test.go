package transport

import (
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// FuzzReturnedHeaders: an on-path switch that, per data packet of a's (one input byte
// each, cycling), forwards it, forwards it and returns a copy (an injector), drops it and
// returns its header (an honest return-to-sender switch), drops it silently, or returns a
// corrupted copy; resends are never dropped. Every message is delivered intact, and the
// returns proven false that were acted on stay within the trust in returns: the initial
// credit plus what real drops earned back.
func FuzzReturnedHeaders(f *testing.F) {
	f.Add([]byte{0, 1, 1, 1, 2, 0, 3, 1})
	f.Add([]byte{1})
	f.Add([]byte{2, 2, 2, 4, 0})
	f.Fuzz(func(t *testing.T, plan []byte) {
		if len(plan) == 0 || len(plan) > 256 {
			return
		}
		cfg := DefaultConfig()
		cfg.Trimming, cfg.ReturnToSender = true, true
		p := newPair(t, cfg, 5000)
		n, drops := 0, 0
		p.drop = func(from *Endpoint, b []byte) bool {
			if from != p.a || wire.Type(b[0]&0x0f) != wire.TypeData || len(b) < wire.DataHdrLen {
				return false
			}
			op := plan[n%len(plan)] % 5
			n++
			if (op == 2 || op == 3) && wire.Flags(b[1])&wire.FlagRetx != 0 {
				op = 0 // resends get through: the messages must complete
			}
			ret := func(h []byte) {
				p.inflight = append(p.inflight, flight{at: p.now + p.delay/2, to: p.a, from: p.bAddr, data: h})
			}
			switch op {
			case 1:
				ret(returnHeader(b))
			case 2:
				ret(returnHeader(b))
				drops++
				return true
			case 3:
				drops++
				return true
			case 4:
				h := returnHeader(b)
				h[24+int(plan[0])%(len(h)-24)] ^= 0x40 // somewhere past the IDs
				ret(h)
			}
			return false
		}
		msgs := [][]byte{patterned(64<<10, 1), patterned(5000, 2), patterned(100<<10, 3)}
		recoveryRun(t, p, msgs) // delivered intact, in order
		if s := p.a.Stats(); s.ReturnedFalse > rtsCredit+uint64(drops) {
			t.Fatalf("%d returns proven false acted on with %d packets really dropped (bound %d)", s.ReturnedFalse, drops, rtsCredit+drops)
		}
	})
}
