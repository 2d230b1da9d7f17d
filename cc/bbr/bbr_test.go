package bbr

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
	"testing"
)

func params(t testing.TB, mod ...func(*Config)) *Params {
	return ccunit.Params(t, DefaultConfig(), NewParams, mod...)
}

// feed delivers rate bytes/s for the given number of 12 us rounds, ACKs every 1 us.
func feed(b *BBR, now *int64, rounds int, rate int64, inflight int) {
	per := rate / 1_000_000 // bytes per us
	for range rounds * 12 {
		*now += 1000
		b.OnAck(cc.Ack{Now: *now, Bytes: int(per), Packets: 1, RTT: 12_000, InFlight: inflight})
	}
}

// TestStateMachine: STARTUP paces at 2.885x; three rounds without 25 % bandwidth growth
// move it to DRAIN, which ends once in flight is at most the BDP; PROBE_BW then cycles
// its pacing gain 5/4, 3/4, 1 x 6, one min RTT per phase.
func TestStateMachine(t *testing.T) {
	b := New(params(t))
	now := int64(0)
	if b.Mode() != Startup || b.pacingGain() != highGain {
		t.Fatal("not in STARTUP at 2.885")
	}
	feed(b, &now, 5, 12_500_000_000, 1<<30) // flat at line rate, a huge in flight
	if b.Mode() != Drain || b.pacingGain() != drainGain {
		t.Fatalf("mode %d after flat rounds, want DRAIN", b.Mode())
	}
	feed(b, &now, 1, 12_500_000_000, 1000)
	if b.Mode() != ProbeBW {
		t.Fatalf("mode %d after draining, want PROBE_BW", b.Mode())
	}
	seen := map[int64]int{}
	for range 16 {
		feed(b, &now, 1, 12_500_000_000, 1000)
		seen[b.pacingGain()]++
	}
	if seen[320] == 0 || seen[192] == 0 || seen[unit] < 8 {
		t.Fatalf("gain cycle %v", seen)
	}
}

// TestBwFilterIsWindowedMax: the bandwidth estimate is the maximum delivery rate over
// the last 10..20 rounds: a drop shows only once the old maximum has aged out.
func TestBwFilterIsWindowedMax(t *testing.T) {
	b := New(params(t))
	now := int64(0)
	feed(b, &now, 12, 10_000_000_000, 1000)
	hi := b.bw()
	feed(b, &now, 5, 2_000_000_000, 1000)
	if b.bw() != hi {
		t.Fatalf("estimate %d fell to the new rate within the window (max %d)", b.bw(), hi)
	}
	feed(b, &now, 25, 2_000_000_000, 1000)
	if b.bw() > 2_100_000 || b.bw() < 1_900_000 {
		t.Fatalf("estimate %d kB/s after the window, want ~2,000,000", b.bw())
	}
	if w := int64(b.Window()); b.Mode() == ProbeBW && w != max(b.bdp()*2, 4*4096) {
		t.Fatalf("window %d, want 2 x BDP %d", w, b.bdp())
	}
}

// TestMinRTTFilterAndProbeRTT: a lower RTT is taken at once; when the min RTT was not
// refreshed for min_rtt_window, PROBE_RTT holds the window at 4 packets for
// probe_rtt_time, then PROBE_BW resumes.
func TestMinRTTFilterAndProbeRTT(t *testing.T) {
	b := New(params(t, func(c *Config) { c.MinRTTWindow = 2_000_000; c.ProbeRTTTime = 200_000 }))
	now := int64(0)
	feed(b, &now, 8, 12_500_000_000, 1000)
	b.OnAck(cc.Ack{Now: now + 1000, Bytes: 4096, RTT: 10_000, InFlight: 1000})
	if b.s.minRTT != 10_000 {
		t.Fatalf("min RTT %d, want 10000", b.s.minRTT)
	}
	if b.Mode() != ProbeBW {
		t.Fatalf("mode %d", b.Mode())
	}
	now += 3_000_000
	b.OnAck(cc.Ack{Now: now, Bytes: 4096, RTT: 13_000, InFlight: 1000})
	if b.Mode() != ProbeRTT || b.Window() != 4*4096 {
		t.Fatalf("mode %d window %d after the min RTT expired", b.Mode(), b.Window())
	}
	now += 250_000
	b.OnAck(cc.Ack{Now: now, Bytes: 4096, RTT: 13_000, InFlight: 1000})
	if b.Mode() != ProbeBW {
		t.Fatalf("mode %d after probe_rtt_time", b.Mode())
	}
}

// BenchmarkOnAck measures one ACK.
func BenchmarkOnAck(b *testing.B) {
	c := New(params(b))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.OnAck(cc.Ack{Now: int64(i) * 330, Bytes: 4096, RTT: 12_000 + int64(i%5000), InFlight: 100_000})
	}
}
