package udp

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBusyPoll: with Config.BusyPoll a read that finds the socket empty may keep polling
// (as busyPolicy allows: TestBusyPolicy), so datagrams that come meanwhile are read
// without the goroutine sleeping (RxBusyPollHits counts them); every datagram arrives;
// without it nothing is counted; and Close still ends a read that is polling or asleep.
func TestBusyPoll(t *testing.T) {
	for _, spin := range []time.Duration{0, MaxBusyPoll} {
		dst := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, BusyPoll: spin})
		src := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
		const n = 40
		got := make(chan error, 1)
		go func() {
			readN(t, dst, n, 2048)
			got <- nil
		}()
		for i := range n {
			// Gaps well inside the poll window: the reader is polling when most arrive.
			time.Sleep(50 * time.Microsecond)
			if _, err := src.WriteBatch([]Packet{{Buf: payload(i), N: len(payload(i)), Addr: dst.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("busy_poll %v: not every datagram arrived", spin)
		}
		hits := dst.Stats().RxBusyPollHits
		if spin == 0 && hits > 0 {
			t.Fatalf("busy_poll %v: %d reads found datagrams while polling", spin, hits)
		}
		t.Logf("busy_poll %v: %d of %d datagrams read while polling", spin, hits, n)
		closeUnblocks(t, dst) // a read that polls, then sleeps, on an empty socket
	}
}

// policyRun feeds busyPolicy datagrams arriving gaps[i] ns after the socket ran dry and
// returns the ns it polled and the datagrams found while polling.
func policyRun(p *busyPolicy, gaps []int64) (spun int64, hits int) {
	for _, g := range gaps {
		d := p.budget()
		switch {
		case d > 0 && g <= d:
			p.polled(g, true)
			spun += g
			hits++
		case d > 0:
			p.polled(d, false)
			spun += d
			p.slept(g - d)
		default:
			p.slept(g)
		}
	}
	return spun, hits
}

// TestBusyPolicy: the busy-poll policy polls only while it pays. A trickle of 1,000
// datagrams a second with busy_poll 1ms (each datagram would be found by polling for
// its whole gap) costs one BusyPoll of polling in all, not 90 % of a core; traffic whose
// gaps are shorter than a wake-up is polled for (at least 90 % hits); and whatever the
// gaps (random, bursts and pauses), polling never exceeds one wake-up's cost per datagram
// plus one BusyPoll.
func TestBusyPolicy(t *testing.T) {
	const ms = int64(time.Millisecond)
	trickle := make([]int64, 1000)
	for i := range trickle {
		trickle[i] = ms - 1000 // the gap after a read (a little under the period)
	}
	p := newBusyPolicy(ms)
	spun, hits := policyRun(&p, trickle)
	t.Logf("trickle of 1,000/s for 1 s: polled %d us (%.2f %% of a core), %d hits", spun/1000, float64(spun)/float64(ms*10), hits)
	if spun > ms+busyWakeup*int64(hits) || spun > ms*2 {
		t.Fatalf("a 1,000/s trickle polled %d ns in 1 s, want at most one BusyPoll and the wake-ups saved", spun)
	}
	dense := make([]int64, 10000)
	for i := range dense {
		dense[i] = 2000
	}
	p = newBusyPolicy(ms)
	if _, hits := policyRun(&p, dense); hits < len(dense)*9/10 {
		t.Fatalf("2 us gaps: %d of %d datagrams found polling, want at least 90 %%", hits, len(dense))
	}
	rng := rand.New(rand.NewPCG(26, 9))
	for round := 0; round < 50; round++ {
		gaps := make([]int64, 2000)
		for i := range gaps {
			switch rng.IntN(3) {
			case 0:
				gaps[i] = rng.Int64N(busyWakeup) // dense
			case 1:
				gaps[i] = rng.Int64N(ms) // within the window
			default:
				gaps[i] = ms + rng.Int64N(10*ms) // a pause beyond it
			}
		}
		p = newBusyPolicy(ms)
		spun, hits := policyRun(&p, gaps)
		if spun > ms+busyWakeup*int64(len(gaps)) {
			t.Fatalf("round %d: polled %d ns for %d datagrams (%d found polling), more than one BusyPoll and a wake-up each", round, spun, len(gaps), hits)
		}
	}
}

// BenchmarkBusyPollTrickle: the process CPU (user + system, per second of wall time) of a
// reader with busy_poll 1ms receiving a trickle of 1,000 datagrams a second (200 per op),
// reported as cpu/wall; "off" is the same without busy polling.
func BenchmarkBusyPollTrickle(b *testing.B) {
	for _, spin := range []time.Duration{0, MaxBusyPoll} {
		name := "off"
		if spin > 0 {
			name = "1ms"
		}
		b.Run(name, func(b *testing.B) {
			dst := open(b, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, BusyPoll: spin})
			src := open(b, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
			const n = 200
			var cpu, wall time.Duration
			for i := 0; i < b.N; i++ {
				done := make(chan struct{})
				go func() {
					readN(b, dst, n, 2048)
					close(done)
				}()
				c0, w0 := processCPU(), time.Now()
				next := w0
				for k := range n {
					next = next.Add(time.Millisecond)
					time.Sleep(time.Until(next))
					if _, err := src.WriteBatch([]Packet{{Buf: payload(k), N: len(payload(k)), Addr: dst.LocalAddr()}}); err != nil {
						b.Fatal(err)
					}
				}
				<-done
				cpu += processCPU() - c0
				wall += time.Since(w0)
			}
			b.ReportMetric(float64(cpu)/float64(wall), "cpu/wall")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
