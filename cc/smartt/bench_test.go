package smartt

import (
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/cc"
)

// benchAcks is a fixed mix of feedback that visits every branch: RTTs spread over
// 1..2.5 base RTTs, a third of them CE-marked, a trim every 512 ACKs.
func benchAcks() []cc.Ack {
	rng := rand.New(rand.NewPCG(1, 2))
	acks := make([]cc.Ack, 4096)
	now := int64(0)
	for i := range acks {
		now += 330
		acks[i] = cc.Ack{Now: now, Bytes: 4096, Packets: 1, RTT: 12_000 + rng.Int64N(18_000),
			CE: rng.IntN(3) == 0, InFlight: 100_000}
	}
	return acks
}

func benchController(b *testing.B, c cc.Controller) {
	acks := benchAcks()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := acks[i&(len(acks)-1)]
		a.Now += int64(i>>12) * 4096 * 330 // time keeps moving across laps
		if i&511 == 511 {
			c.OnLoss(cc.Loss{Now: a.Now, Bytes: 4096, Cause: cc.LossTrim, InFlight: 100_000})
		}
		c.OnAck(a)
	}
	if c.Window() <= 0 {
		b.Fatal("window collapsed")
	}
}

// BenchmarkOnAckFloat and BenchmarkOnAckFixed measure one ACK (plus a trim every 512)
// through the float and the fixed-point controller; goal <= 40 ns, 0 allocs.
func BenchmarkOnAckFloat(b *testing.B) {
	p, _ := NewParams(DefaultConfig(), refNet, true)
	benchController(b, NewFloat(p))
}

func BenchmarkOnAckFixed(b *testing.B) {
	p, _ := NewParams(DefaultConfig(), refNet, true)
	benchController(b, NewFixed(p))
}

// TestOnAckAllocs pins zero allocations per ACK and per loss for both implementations.
func TestOnAckAllocs(t *testing.T) {
	p, _ := NewParams(DefaultConfig(), refNet, true)
	acks := benchAcks()
	for _, c := range []cc.Controller{NewFloat(p), NewFixed(p)} {
		i := 0
		n := testing.AllocsPerRun(1000, func() {
			c.OnAck(acks[i&4095])
			c.OnLoss(cc.Loss{Now: acks[i&4095].Now, Bytes: 4096, Cause: cc.LossTrim, InFlight: 1})
			i++
		})
		if n != 0 {
			t.Errorf("%T: %.1f allocs per ACK", c, n)
		}
	}
}
