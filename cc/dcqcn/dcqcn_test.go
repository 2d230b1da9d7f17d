package dcqcn

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
	"testing"
)

func params(t testing.TB) *Params { return ccunit.Params(t, DefaultConfig(), NewParams) }

const line = 100_000_000_000 / 8 // bytes/s

// TestCNPCutsByAlphaHalfAndIsRateLimited: the first CNP (alpha = 1) halves the rate and
// sets the target to the old rate; a second within the CNP interval is ignored.
func TestCNPCutsByAlphaHalfAndIsRateLimited(t *testing.T) {
	d := New(params(t))
	d.OnAck(cc.Ack{Now: 1000, Bytes: 4096, CE: true})
	if d.PacingRate() != line/2 || d.TargetRate() != line || d.Alpha() != 1 {
		t.Fatalf("rate %d target %d alpha %v after one CNP", d.PacingRate(), d.TargetRate(), d.Alpha())
	}
	d.OnAck(cc.Ack{Now: 40_000, Bytes: 4096, CE: true})
	if d.PacingRate() != line/2 || d.CCStats().Cuts != 1 {
		t.Fatal("a second CNP within 50us cut again")
	}
	d.OnAck(cc.Ack{Now: 52_000, Bytes: 4096, CE: true})
	if d.CCStats().Cuts != 2 {
		t.Fatal("no cut 51us after the first")
	}
}

// TestAlphaDecaysPerK: without notifications alpha decays by (1 - 1/256) per 55us.
func TestAlphaDecaysPerK(t *testing.T) {
	d := New(params(t))
	d.OnAck(cc.Ack{Now: 0, Bytes: 4096, CE: true})
	a0 := d.s.alpha
	d.OnAck(cc.Ack{Now: 3*55_000 + 10, Bytes: 4096})
	want := a0
	for range 3 {
		want -= want >> 8
	}
	if d.s.alpha != want {
		t.Fatalf("alpha %d after 3 K, want %d", d.s.alpha, want)
	}
}

// TestRecoveryStages: after a cut, timer events first halve the distance to the target
// (fast recovery, F = 5 events), then add R_AI to the target; with both the timer and
// the byte counter past F, R_HAI.
func TestRecoveryStages(t *testing.T) {
	p := params(t)
	d := New(p)
	d.OnAck(cc.Ack{Now: 0, Bytes: 4096, CE: true})
	rt := d.s.rt
	now := int64(0)
	for i := range 5 {
		want := (int64(d.s.rt) + int64(d.s.rc)) / 2
		now += 55_000
		d.OnAck(cc.Ack{Now: now, Bytes: 0})
		if d.s.rt != rt || int64(d.s.rc) != want {
			t.Fatalf("fast recovery step %d: rt %d rc %d, want rt %d rc %d", i, d.s.rt, d.s.rc, rt, want)
		}
	}
	// Line rate is the cap: the target cannot grow beyond it, so lower it to see AI.
	d.s.rt, d.s.rc = uint32(p.line/2), uint32(p.line/2)
	now += 55_000
	d.OnAck(cc.Ack{Now: now})
	if int64(d.s.rt) != p.line/2+p.ai {
		t.Fatalf("additive increase: rt %d, want %d", d.s.rt, p.line/2+p.ai)
	}
	d.s.tcnt, d.s.bcnt = 5, 5 // the next timer event: tcnt 6, bcnt 5, one hyper step
	rt0 := int64(d.s.rt)
	now += 55_000
	d.OnAck(cc.Ack{Now: now})
	if int64(d.s.rt) != rt0+p.hai {
		t.Fatalf("hyper increase: rt %d, want %d", d.s.rt, rt0+p.hai)
	}
}

// TestByteCounterDrivesIncrease: every 10 MB acknowledged is one increase event.
func TestByteCounterDrivesIncrease(t *testing.T) {
	d := New(params(t))
	d.OnAck(cc.Ack{Now: 0, Bytes: 4096, CE: true})
	rc := d.s.rc
	d.OnAck(cc.Ack{Now: 1, Bytes: 10_000_000})
	if d.s.bcnt != 1 || d.s.rc <= rc {
		t.Fatalf("bcnt %d, rc %d -> %d", d.s.bcnt, rc, d.s.rc)
	}
}

// BenchmarkOnAck measures one ACK (one in 7 marked, ACKs 330 ns apart).
func BenchmarkOnAck(b *testing.B) {
	d := New(params(b))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d.OnAck(cc.Ack{Now: int64(i) * 330, Bytes: 4096, CE: i%7 == 0})
	}
}
