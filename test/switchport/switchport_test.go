package switchport

import (
	"math"
	"net/netip"
	"testing"
)

func newPort(t *testing.T, cfg Config) *Port[int] {
	t.Helper()
	p, err := New[int](cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func drain(p *Port[int]) []Departure[int] {
	var out []Departure[int]
	for {
		d, ok := p.Pop()
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// runAll advances the port to the end and collects every departure.
func runAll(p *Port[int]) []Departure[int] {
	p.Advance(math.MaxInt64 / 2)
	return drain(p)
}

func TestSerialisationBackToBack(t *testing.T) {
	// 100 Gbit/s: 1000 bytes take 80 ns; 3 bytes take 0.24 ns, carried as a remainder.
	p := newPort(t, Config{Rate: 100e9})
	for i := range 5 {
		if v := p.Arrive(0, i, 1000, true, false); v != Queued {
			t.Fatalf("packet %d: %v", i, v)
		}
	}
	ds := runAll(p)
	if len(ds) != 5 {
		t.Fatalf("%d departures", len(ds))
	}
	for i, d := range ds {
		if d.Item != i || d.Start != int64(80*i) || d.End != int64(80*(i+1)) {
			t.Fatalf("departure %d: %+v", i, d)
		}
	}
	// Remainders add up: 1000 packets of 3 bytes = 24000 bits = 240 ns exactly.
	q := newPort(t, Config{Rate: 100e9})
	for i := range 1000 {
		q.Arrive(0, i, 3, true, false)
	}
	ds = runAll(q)
	if got := ds[len(ds)-1].End; got != 240 {
		t.Fatalf("1000 x 3 bytes end at %d ns, want 240", got)
	}
}

func TestIdleArrivalStartsAtArrival(t *testing.T) {
	p := newPort(t, Config{Rate: 8e9}) // 1 byte per ns
	p.Arrive(100, 1, 50, true, false)
	p.Arrive(500, 2, 50, true, false)
	ds := runAll(p)
	if ds[0].Start != 100 || ds[0].End != 150 || ds[1].Start != 500 || ds[1].End != 550 {
		t.Fatalf("%+v", ds)
	}
}

func TestControlPriority(t *testing.T) {
	p := newPort(t, Config{Rate: 8e9})
	p.Arrive(0, 1, 100, true, false) // in service 0..100
	p.Arrive(1, 2, 100, true, false) // queued data
	p.Arrive(2, 3, 100, true, false)
	p.Arrive(50, 4, 10, false, false) // control overtakes the queued data
	ds := runAll(p)
	order := []int{ds[0].Item, ds[1].Item, ds[2].Item, ds[3].Item}
	if order[0] != 1 || order[1] != 4 || order[2] != 2 || order[3] != 3 {
		t.Fatalf("order %v", order)
	}
	if !ds[1].Control || ds[1].Start != 100 || ds[1].End != 110 {
		t.Fatalf("control departure %+v", ds[1])
	}
}

func TestTrimAndDrop(t *testing.T) {
	// Data queue holds 2 packets of 1000 (plus the one in service); control 2 headers.
	p := newPort(t, Config{Rate: 8e9, DataBytes: 2000, ControlBytes: 128, Trim: true})
	var vs []Verdict
	for i := range 7 {
		vs = append(vs, p.Arrive(0, i, 1000, true, true))
	}
	want := []Verdict{Queued, Queued, Queued, Trimmed, Trimmed, Dropped, Dropped}
	for i := range want {
		if vs[i] != want[i] {
			t.Fatalf("verdicts %v, want %v", vs, want)
		}
	}
	s := p.Stats()
	if s.Trims != 2 || s.Drops != 2 || s.MaxControlBytes != 128 || s.MaxDataBytes != 2000 {
		t.Fatalf("stats %+v", s)
	}
	ds := runAll(p)
	// Packet 0 in service, then the two trimmed headers (control), then data 1, 2.
	if ds[1].Item != 3 || !ds[1].Trimmed || ds[1].Size != 64 || ds[2].Item != 4 || ds[3].Item != 1 {
		t.Fatalf("departures %+v", ds)
	}
	// Drop-tail without trimming.
	q := newPort(t, Config{Rate: 8e9, DataBytes: 2000})
	vs = vs[:0]
	for i := range 4 {
		vs = append(vs, q.Arrive(0, i, 1000, true, true))
	}
	if vs[3] != Dropped || q.Stats().Trims != 0 {
		t.Fatalf("drop-tail verdicts %v", vs)
	}
	// Control traffic is never trimmed; it is dropped when its queue is full.
	r := newPort(t, Config{Rate: 8e9, ControlBytes: 100, Trim: true})
	r.Arrive(0, 0, 100, false, false) // in service
	r.Arrive(0, 1, 100, false, false)
	if v := r.Arrive(0, 2, 100, false, false); v != Dropped {
		t.Fatalf("control overflow: %v", v)
	}
}

func TestREDMarking(t *testing.T) {
	const pkt = 1000
	cfg := Config{Rate: 8e9, KminBytes: 10 * pkt, KmaxBytes: 30 * pkt}
	// A burst of 41 packets: packet i (0-based) is served leaving 40-i packets behind,
	// except packet 0, which starts while the others have not arrived yet.
	p := newPort(t, cfg)
	for i := range 41 {
		p.Arrive(0, i, pkt, true, true)
	}
	p.Advance(0) // serve packet 0 first at t=0 ... then queue forms
	ds := runAll(p)
	for _, d := range ds {
		left := 40 - d.Item
		if d.Item == 0 {
			left = 0
		}
		switch {
		case left*pkt <= cfg.KminBytes && d.Marked:
			t.Fatalf("packet %d marked with %d bytes behind (<= kmin)", d.Item, left*pkt)
		case left*pkt >= cfg.KmaxBytes && !d.Marked:
			t.Fatalf("packet %d not marked with %d bytes behind (>= kmax)", d.Item, left*pkt)
		}
	}
	// Non-ECT packets are never marked.
	q := newPort(t, cfg)
	for i := range 41 {
		q.Arrive(0, i, pkt, true, false)
	}
	for _, d := range runAll(q) {
		if d.Marked {
			t.Fatal("non-ECT packet marked")
		}
	}
	// Between Kmin and Kmax the probability is linear: at the midpoint about 1/2.
	marked, n := 0, 20000
	r := newPort(t, Config{Rate: 8e9, KminBytes: 0, KmaxBytes: 2 * pkt})
	for i := range n {
		// Two packets arrive together: the first starts at once (nothing behind when it
		// was alone), the second leaves the queue with 0 behind. Use three: the second
		// leaves 1 packet (the midpoint) behind.
		t0 := int64(i) * 10 * pkt
		r.Arrive(t0, 0, pkt, true, true)
		r.Arrive(t0, 1, pkt, true, true)
		r.Arrive(t0, 2, pkt, true, true)
		for _, d := range runAllUntil(r, t0+5*pkt) {
			if d.Item == 1 && d.Marked {
				marked++
			}
		}
	}
	if f := float64(marked) / float64(n); f < 0.47 || f > 0.53 {
		t.Fatalf("marking fraction at the midpoint %.3f, want ~0.5", f)
	}
}

func runAllUntil(p *Port[int], t int64) []Departure[int] {
	p.Advance(t)
	return drain(p)
}

// A caller that only wakes up now and then (passing each packet's own arrival time) gets
// the same departures, marks and trims as one that advances the port at every instant.
func TestCoarseCallerIsExact(t *testing.T) {
	cfg := Config{Rate: 8e9, DataBytes: 8000, ControlBytes: 1000, KminBytes: 2000, KmaxBytes: 6000, Trim: true}
	type arr struct {
		t    int64
		size int
		data bool
	}
	var arrs []arr
	x := uint64(7)
	var now int64
	for range 2000 {
		x = mix(x)
		now += int64(x % 700)
		arrs = append(arrs, arr{now, 100 + int(x>>20)%1400, x&7 != 0})
	}
	fine := newPort(t, cfg)
	coarse := newPort(t, cfg)
	var a, b []Departure[int]
	for i, r := range arrs {
		// fine: advance exactly to every departure in between, then offer.
		for {
			s, ok := fine.NextStart()
			if !ok || s > r.t {
				break
			}
			fine.Advance(s)
		}
		fine.Arrive(r.t, i, r.size, r.data, true)
		a = append(a, drain(fine)...)
		coarse.Arrive(r.t, i, r.size, r.data, true)
		if i%50 == 49 { // collect only now and then
			b = append(b, drain(coarse)...)
		}
	}
	a = append(a, runAll(fine)...)
	b = append(b, runAll(coarse)...)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d departures", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("departure %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
	if fine.Stats() != coarse.Stats() || fine.Stats().Trims == 0 || fine.Stats().Marks == 0 {
		t.Fatalf("stats %+v vs %+v", fine.Stats(), coarse.Stats())
	}
}

func TestSetRateAndFlush(t *testing.T) {
	p := newPort(t, Config{Rate: 8e9})
	p.Arrive(0, 0, 100, true, false)
	p.Arrive(0, 1, 100, true, false)
	p.SetRate(50, 4e9) // packet 0 keeps its end (100), packet 1 goes at half rate
	ds := runAll(p)
	if ds[0].End != 100 || ds[1].Start != 100 || ds[1].End != 300 {
		t.Fatalf("%+v", ds)
	}
	p.Arrive(1000, 2, 100, true, false)
	p.Arrive(1000, 3, 100, true, false)
	var dropped []int
	p.Flush(func(i int) { dropped = append(dropped, i) })
	if len(dropped) != 1 || dropped[0] != 3 || p.DataBytes() != 0 {
		t.Fatalf("flushed %v", dropped)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{}, {Rate: 1, DataBytes: -1}, {Rate: 1, KminBytes: 5, KmaxBytes: 5}} {
		if _, err := New[int](c, 0); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
}

func TestECMPHash(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.1.7")
	ft := FiveTuple{Src: a, Dst: b, Proto: 17, SrcPort: 1000, DstPort: 23600}
	if ft.Hash(1) != ft.Hash(1) {
		t.Fatal("not deterministic")
	}
	// Spread over 8 next hops by EV, and independent across salts.
	const n, evs = 8, 8000
	var cnt [n]int
	same := 0
	for ev := range evs {
		ft.SrcPort = uint16(1000 + ev)
		h1, h2 := ft.Hash(1), ft.Hash(2)
		cnt[Pick(h1, n)]++
		if Pick(h1, n) == Pick(h2, n) {
			same++
		}
		if Hash4(1, 1, 2, 17, uint16(ev), 23600) == Hash4(2, 1, 2, 17, uint16(ev), 23600) {
			t.Fatal("salt ignored")
		}
	}
	for i, c := range cnt {
		if c < evs/n*8/10 || c > evs/n*12/10 {
			t.Fatalf("next hop %d chosen %d times of %d", i, c, evs)
		}
	}
	if same > evs/n*13/10 {
		t.Fatalf("salts correlated: %d of %d same choice", same, evs)
	}
}

func BenchmarkPort(b *testing.B) {
	p, _ := New[int](Config{Rate: 800e9, DataBytes: 1 << 20, KminBytes: 200 << 10, KmaxBytes: 800 << 10, Trim: true}, 1)
	b.ReportAllocs()
	var now int64
	for i := 0; b.Loop(); i++ {
		now += 40
		p.Arrive(now, i, 4160, true, true)
		for {
			if _, ok := p.Pop(); !ok {
				break
			}
		}
	}
}

// TestEvict: with Evict, a data packet finding the queue full takes the head's place
// about that often (the head is trimmed, or dropped and handed to PopEvicted); with 0
// (the default) the arriving one is always trimmed; the choices repeat for a seed; with
// EvictNewest the most recently queued packet goes instead.
func TestEvict(t *testing.T) {
	newest := false
	run := func(evict float64, trim bool, seed uint64) (arrivingCut, headCut int, evicted []int, st Stats) {
		p, err := New[int](Config{Rate: 8e9, DataBytes: 300, ControlBytes: 1 << 20, Trim: trim, Evict: evict, EvictNewest: newest}, seed)
		if err != nil {
			t.Fatal(err)
		}
		p.Arrive(0, 0, 100, true, false) // in service 0..100 ns
		for i := 1; i <= 3; i++ {
			p.Arrive(0, i, 100, true, false) // fills the data queue: 1, 2, 3
		}
		// Each arrival finds the queue full; between arrivals nothing is served (t = 1).
		for i := 4; i < 1004; i++ {
			v := p.Arrive(1, i, 100, true, false)
			if v == Trimmed || v == Dropped {
				arrivingCut++
			} else {
				headCut++
			}
			if p.DataBytes() != 300 {
				t.Fatalf("data queue %d bytes after arrival %d, want full (300)", p.DataBytes(), i)
			}
			for {
				x, ok := p.PopEvicted()
				if !ok {
					break
				}
				evicted = append(evicted, x)
			}
		}
		return arrivingCut, headCut, evicted, p.Stats()
	}
	a, h, ev, st := run(0, true, 1)
	if a != 1000 || h != 0 || len(ev) != 0 || st.Trims != 1000 {
		t.Fatalf("evict 0: %d arriving cut, %d heads, %d evicted, %+v; want every arriving packet trimmed", a, h, len(ev), st)
	}
	a, h, ev, st = run(0.5, true, 1)
	if h < 430 || h > 570 || a+h != 1000 || len(ev) != 0 || st.Trims != 1000 || st.Drops != 0 {
		t.Fatalf("evict 0.5 with trimming: %d heads of 1000 (want about half), %d evicted, %+v", h, len(ev), st)
	}
	// The trimmed heads are served from the control queue with Trimmed set; the queue
	// keeps the newest packets.
	a2, h2, _, _ := run(0.5, true, 1)
	if a2 != a || h2 != h {
		t.Fatalf("same seed, different choices: %d/%d vs %d/%d", a, h, a2, h2)
	}
	// Without trimming, an evicted head is dropped and handed out once.
	a, h, ev, st = run(1, false, 1)
	if h != 1000 || len(ev) != 1000 || st.Drops != 1000 || st.Enqueued != st.Dequeued+uint64(3)+1000 {
		t.Fatalf("evict 1, drop-tail: %d heads, %d evicted, %+v", h, len(ev), st)
	}
	for i, x := range ev {
		if x != i+1 { // the oldest waiting packet goes first: 1, 2, 3, 4, ...
			t.Fatalf("evicted[%d] = %d, want %d", i, x, i+1)
		}
	}
	// Newest: each arrival evicts the packet queued just before it (3, then 4, ...).
	newest = true
	_, h, ev, _ = run(1, false, 1)
	for i, x := range ev {
		if x != i+3 {
			t.Fatalf("evict_newest: evicted[%d] = %d, want %d", i, x, i+3)
		}
	}
	// Limits: the probability must be in [0, 1].
	for _, bad := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := New[int](Config{Rate: 1, Evict: bad}, 1); err == nil {
			t.Errorf("evict %v accepted", bad)
		}
	}
	if _, err := New[int](Config{Rate: 1, Evict: 1}, 1); err != nil {
		t.Errorf("evict 1 refused: %v", err)
	}
}

// TestSetTrimBytes: later arrivals are trimmed to the new size (a packet shorter than it
// keeps its own), packets already queued keep theirs, and the size is checked at and
// beyond its limits.
func TestSetTrimBytes(t *testing.T) {
	p := newPort(t, Config{Rate: 8e9, DataBytes: 1000, Trim: true})
	p.Arrive(0, 0, 1000, true, false) // in service
	p.Arrive(0, 1, 1000, true, false) // fills the data queue
	p.Arrive(0, 2, 1000, true, false) // trimmed to the default 64
	p.SetTrimBytes(100)
	p.Arrive(0, 3, 1000, true, false) // trimmed to 100
	p.Arrive(0, 4, 80, true, false)   // does not fit either: keeps its 80 bytes
	if c := p.Config().TrimBytes; c != 100 {
		t.Errorf("Config().TrimBytes = %d after SetTrimBytes(100)", c)
	}
	ds := runAll(p)
	want := map[int]int{2: 64, 3: 100, 4: 80}
	for _, d := range ds {
		if w, ok := want[d.Item]; ok && (!d.Trimmed || d.Size != w) {
			t.Errorf("packet %d: trimmed %v, %d bytes, want %d", d.Item, d.Trimmed, d.Size, w)
		}
	}
	if len(ds) != 5 {
		t.Fatalf("%d departures, want 5", len(ds))
	}
	p.SetTrimBytes(1)
	p.SetTrimBytes(1<<31 - 1)
	for _, n := range []int{0, -1, 1 << 31} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetTrimBytes(%d) did not panic", n)
				}
			}()
			p.SetTrimBytes(n)
		}()
	}
}
