package bedrun

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/client"
)

func TestSoakScenario(t *testing.T) {
	sc, err := ParseSoak(nil)
	if err != nil {
		t.Fatalf("default soak.yaml: %v", err)
	}
	c := sc.Soak
	if c.Duration != fiveMin || sc.Topology.Hosts != 8 || len(c.Sizes) != 3 || c.Restart.At != 0.55 || c.Sizes[0].Min != 64 || c.Sizes[2].Max != 4<<20 {
		t.Errorf("defaults: duration %v, hosts %d, %d size classes %+v, restart at %v", c.Duration, sc.Topology.Hosts, len(c.Sizes), c.Sizes, c.Restart.At)
	}
	// A file overrides what it names and keeps the rest.
	sc, err = ParseSoak([]byte("seed: 99\nsoak: {duration: 1m, flaky: {links: 1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Seed != 99 || sc.Soak.Duration != oneMin || sc.Soak.Flaky.Links != 1 || sc.Soak.Flaky.Every != tenSec || sc.Soak.Rate != 4 {
		t.Errorf("override: %+v", sc.Soak)
	}
	for _, bad := range []string{
		"soak: {bogus: 1}",
		"soak: {rate: -1}",
		"soak: {patterns: [tornado]}",
		"soak: {sizes: [{weight: 1, min: 8, max: 100}]}",
		"soak: {restart: {at: 0.99}}",
		"soak: {flaps: {every: 1s}}",
		"soak: {max_outstanding: 0}",
		"soak: {warmup: 3m, cooldown: 3m}",
	} {
		if _, err := ParseSoak([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

const (
	fiveMin = 5 * 60e9
	oneMin  = 60e9
	tenSec  = 10e9
)

// TestSoakPlan: the workload and the faults are drawn from the seed alone, and have the
// shape the config asks for.
func TestSoakPlan(t *testing.T) {
	sc, err := ParseSoak(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &sc.Soak
	const hosts = 8
	eps, bursts := c.plan(13, hosts)
	eps2, bursts2 := c.plan(13, hosts)
	if !reflect.DeepEqual(eps, eps2) || !reflect.DeepEqual(bursts, bursts2) {
		t.Fatal("plan differs for the same seed")
	}
	if len(eps) != 20 {
		t.Fatalf("%d epochs of 15 s in 5 min", len(eps))
	}
	kinds := map[uint8]int{}
	for i, e := range eps {
		if e.pattern != c.Patterns[i%3] {
			t.Errorf("epoch %d: %s", i, e.pattern)
		}
		for h, d := range e.perm {
			if d == h {
				t.Errorf("epoch %d: permutation sends h%d to itself", i, h)
			}
		}
	}
	for _, b := range bursts {
		kinds[b.Kind]++
		e := eps[int(b.At/time.Duration(c.Epoch))]
		switch b.Kind {
		case msgIncast:
			if e.pattern != "incast" || len(b.Src) != hosts-1 || slices.Contains(b.Src, e.victim) || slices.ContainsFunc(b.Dst, func(d int) bool { return d != e.victim }) {
				t.Errorf("incast burst at %v: %v -> %v, victim %d", b.At, b.Src, b.Dst, e.victim)
			}
		case msgAllToAll:
			if e.pattern != "all_to_all" || len(b.Src) != hosts*(hosts-1) {
				t.Errorf("all-to-all burst at %v: %d messages", b.At, len(b.Src))
			}
			pairs := map[[2]int]bool{}
			for k := range b.Src {
				pairs[[2]int{b.Src[k], b.Dst[k]}] = b.Src[k] != b.Dst[k]
			}
			if len(pairs) != hosts*(hosts-1) || slices.Contains(slices.Collect(mapValues(pairs)), false) {
				t.Errorf("all-to-all burst at %v: not every ordered pair once", b.At)
			}
		}
	}
	if kinds[msgIncast] != 7*5 || kinds[msgAllToAll] != 6*3 {
		t.Errorf("bursts: %d incast, %d all-to-all; want 35 and 18", kinds[msgIncast], kinds[msgAllToAll])
	}

	// Background: the same sequence for the same seed, sizes in their classes in about
	// their weights, never to itself, the epoch's destination.
	g1, g2 := newBackground(c, eps, 13, 3, hosts), newBackground(c, eps, 13, 3, hosts)
	var cls [3]int
	n := 0
	for ; ; n++ {
		t1, m1 := g1.pop()
		t2, m2 := g2.pop()
		if t1 != t2 || m1 != m2 {
			t.Fatalf("background %d differs: %v %+v, %v %+v", n, t1, m1, t2, m2)
		}
		if t1 >= time.Duration(c.Duration) {
			break
		}
		if m1.dst == 3 || m1.size < 64 || m1.size > 4<<20 {
			t.Fatalf("background %d: %+v", n, m1)
		}
		e := eps[int(t1/time.Duration(c.Epoch))]
		if (e.pattern == "permutation" && m1.dst != e.perm[3]) || (e.pattern == "incast" && e.victim != 3 && m1.dst != e.victim) {
			t.Fatalf("background %d at %v: to h%d in a %s epoch (%+v)", n, t1, m1.dst, e.pattern, e)
		}
		cls[classOf(int32(m1.size))]++
	}
	if n < 1000 || n > 1400 { // 4/s for 300 s
		t.Errorf("%d background messages in 5 min at 4/s", n)
	}
	if cls[0] < n*40/100 || cls[2] < n*10/100 || cls[2] > n*20/100 {
		t.Errorf("size classes %v of %d; weights 50/35/15", cls, n)
	}

	// Faults: sorted, inside [warmup, duration - cooldown], each link's faults alternate,
	// every third flap on a host link, the kill after a burst with messages in flight.
	links := []string{"h0-leaf0", "h1-leaf0", "leaf0-spine0", "leaf0-spine1", "leaf1-spine0"}
	host := func(l string) bool { return strings.HasPrefix(l, "h") }
	evs := c.schedule(13, links, host, hosts, bursts)
	if !reflect.DeepEqual(evs, c.schedule(13, links, host, hosts, bursts)) || reflect.DeepEqual(evs, c.schedule(14, links, host, hosts, bursts)) {
		t.Fatal("schedule: not a function of the seed")
	}
	state := map[string]string{}
	var flaps, hostFlaps, kills, restarts int
	var killAt time.Duration
	for i, e := range evs {
		if i > 0 && e.At < evs[i-1].At {
			t.Fatalf("event %d (%v) before its predecessor", i, e)
		}
		if e.At < time.Duration(c.Warmup) || e.At > time.Duration(c.Duration-c.Cooldown) {
			t.Errorf("%v at %v: outside the fault window", e, e.At)
		}
		prev := state[e.Link]
		switch e.Kind {
		case "flaky", "down":
			if prev == e.Kind {
				t.Errorf("%v at %v: already %s", e, e.At, prev)
			}
			state[e.Link+"/"+e.Kind] = "x"
			if e.Kind == "down" {
				flaps++
				if host(e.Link) {
					hostFlaps++
				}
				if state[e.Link+"/down-now"] == "1" {
					t.Errorf("%v at %v: link already down", e, e.At)
				}
				state[e.Link+"/down-now"] = "1"
			}
		case "up":
			if state[e.Link+"/down-now"] != "1" {
				t.Errorf("%v at %v: link not down", e, e.At)
			}
			state[e.Link+"/down-now"] = ""
		case "kill":
			kills++
			killAt = e.At
		case "restart":
			restarts++
			if e.At-killAt != time.Duration(c.Restart.Down) {
				t.Errorf("restart %v after the kill", e.At-killAt)
			}
		}
	}
	if flaps < 18 || hostFlaps != flaps/3 || kills != 1 || restarts != 1 {
		t.Errorf("%d flaps (%d of host links), %d kills, %d restarts", flaps, hostFlaps, kills, restarts)
	}
	i := slices.IndexFunc(bursts, func(b burst) bool { return b.At >= 165e9 })
	if killAt != bursts[i].At+50e6 || bursts[i].Kind != msgAllToAll {
		t.Errorf("kill at %v; the first burst from 165 s is at %v", killAt, bursts[i].At)
	}
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestSoakTally: the checker counts every kind of outcome and delivery right and names the
// violations, the killed daemon's losses included.
func TestSoakTally(t *testing.T) {
	addrs := []netip.AddrPort{netip.MustParseAddrPort("10.1.0.1:23600"), netip.MustParseAddrPort("10.1.0.3:23600"), netip.MustParseAddrPort("10.1.1.1:23600")}
	s := &soaker{r: &Run{Addrs: addrs}, sc: &SoakScenario{Seed: 5}, reasonIx: map[string]uint16{}, recvErrs: map[string]int{},
		killAt: -1, killHost: -1, start: time.Now()}
	s.msgs = make([][]msgRec, len(addrs))
	type msg struct {
		src int
		seq uint64
		b   []byte
	}
	submit := func(src, dst, size int) msg {
		b := make([]byte, size)
		seq := uint64(len(s.msgs[src]))
		crc := fill(b, 5, uint64(src)<<40|seq)
		s.msgs[src] = append(s.msgs[src], msgRec{size: int32(size), dst: int16(dst), crc: crc, submitted: s.now()})
		return msg{src, seq, b}
	}
	deliver := func(m msg, at int, life int) {
		s.delivered(at, life, &client.Message{From: addrs[m.src], Data: m.b})
	}
	ok := submit(0, 1, 100)
	deliver(ok, 1, 0)
	s.outcome(0, ok.seq, nil)
	twice := submit(0, 1, 5000)
	deliver(twice, 1, 0)
	deliver(twice, 1, 0)
	s.outcome(0, twice.seq, nil)
	lost := submit(0, 2, 300<<10)
	s.outcome(0, lost.seq, nil)
	failed := submit(1, 0, 64)
	s.outcome(1, failed.seq, errors.New("message failed: transport: peer reset the connection (it holds no state for it)"))
	failedDelivered := submit(1, 2, 64)
	deliver(failedDelivered, 2, 0)
	s.outcome(1, failedDelivered.seq, errors.New("smarttd session ended: EOF"))
	submit(2, 0, 64) // no outcome
	corrupt := submit(2, 1, 64)
	corrupt.b[40] ^= 1
	deliver(corrupt, 1, 0)
	s.outcome(2, corrupt.seq, nil)
	wrongHost := submit(2, 1, 64)
	deliver(wrongHost, 0, 0)
	s.outcome(2, wrongHost.seq, nil)
	s.delivered(0, 0, &client.Message{From: addrs[1], Data: []byte("not a soak message at all")})
	// The crash: h2's daemon killed at 100 s, restarted at 103 s.
	s.killHost, s.killAt, s.restAt = 2, 100e9, 103e9
	crashed := submit(0, 2, 64) // acknowledged by the old daemon 1 s before the kill, never read
	s.outcome(0, crashed.seq, nil)
	s.msgs[0][crashed.seq].outcomeAt = 99e9
	early := submit(1, 2, 64) // acknowledged 20 s before the kill, never read: lost by the daemon
	s.outcome(1, early.seq, nil)
	s.msgs[1][early.seq].outcomeAt = 80e9
	afterRestart := submit(1, 2, 64) // reported sent after the restart, never delivered
	s.outcome(1, afterRestart.seq, nil)
	s.msgs[1][afterRestart.seq].outcomeAt = 104e9
	s.msgs[0][lost.seq].outcomeAt = 50e9 // outside the crash window

	tl := s.tally()
	want := SoakTally{Planned: 11, Submitted: 11, Sent: 8, Failed: 2, NoOutcome: 1, Delivered: 3, DeliveredTwice: 1, Corrupted: 3,
		SentNotDelivered: 5, LostInCrash: 1, FailedDelivered: 1}
	got := tl
	got.FailReasons, got.ByKind, got.Bytes, got.ByClass, got.Completion = nil, nil, 0, [3]int{}, [3]CompletionPercents{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tally\n got %+v\nwant %+v", got, want)
	}
	if tl.FailReasons["peer reset the connection (it holds no state for it)"] != 1 || tl.FailReasons["session ended (own daemon killed)"] != 1 {
		t.Errorf("reasons %v", tl.FailReasons)
	}
	if tl.ByClass != [3]int{9, 1, 1} {
		t.Errorf("classes %v", tl.ByClass)
	}
	if len(s.corrupt) != 3 || !strings.Contains(s.corrupt[0], "content differs") || !strings.Contains(s.corrupt[1], "for h1") || !strings.Contains(s.corrupt[2], "without the soak header") {
		t.Errorf("corruption descriptions: %q", s.corrupt)
	}
	rep := &SoakReport{Tally: tl, Memory: SoakMemory{MaxGrowth: 32 << 20, MaxGoroutines: 4,
		Start: MemSample{HeapAlloc: 100 << 20, Goroutines: 50, RecvBuffered: []uint64{0, 0}, Pending: []int{0, 0}},
		End:   MemSample{HeapAlloc: 140 << 20, Goroutines: 60, RecvBuffered: []uint64{0, 4096}, Pending: []int{2, 0}}}}
	rep.Violations = rep.check()
	v := strings.Join(rep.Violations, "\n")
	for _, w := range []string{"1 messages without an outcome", "1 messages delivered more than once", "3 corrupted deliveries",
		"5 messages reported sent and never delivered", "Go heap after the drain 140.0 MiB", "60 goroutines",
		"h1's daemon still holds 4096 bytes", "h0's daemon still has 2 messages"} {
		if !strings.Contains(v, w) {
			t.Errorf("violations lack %q:\n%s", w, v)
		}
	}
	var b strings.Builder
	rep.Write(&b)
	if !strings.Contains(b.String(), "verdict: 8 violation(s): FAIL") {
		t.Errorf("report:\n%s", b.String())
	}
	rep = &SoakReport{Tally: SoakTally{Submitted: 1, Delivered: 1}, Memory: SoakMemory{MaxGrowth: 1}}
	if v := rep.check(); len(v) != 0 {
		t.Errorf("clean soak: %v", v)
	}
}

// TestSoakFill: a message's content is a function of the seed and its id, and its CRC
// covers every body byte.
func TestSoakFill(t *testing.T) {
	a, b := make([]byte, 1000), make([]byte, 1000)
	ca, cb := fill(a, 1, 7), fill(b, 1, 7)
	if ca != cb || string(a) != string(b) {
		t.Fatal("same id, different content")
	}
	if c := fill(b, 1, 8); c == ca {
		t.Fatal("different ids, same CRC")
	}
	for _, n := range []int{soakHeader, soakHeader + 1, 64, 4099} {
		m := make([]byte, n)
		crc := fill(m, 3, 9)
		if string(m[:4]) != "SoaK" || fmt.Sprint(crc) == "" {
			t.Fatalf("%d bytes: %x", n, m[:4])
		}
	}
}
