package sim

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/smartt-transport/smartt/transport/wire"
)

// flow is one message from src to dst.
type flow struct {
	src, dst    int32
	size        int64
	at          int64 // scheduled start of an independent flow
	start       int64 // actual start (-1: not yet)
	rx          int64 // receiver has the whole message (-1: not yet)
	tx          int64 // sender has every ACK (-1: not yet)
	idealRx     int64 // isolated (empty fabric) time to rx
	idealTx     int64 // isolated flow completion time
	depsLeft    int32
	depLo       int32 // dependents: s.deps[depLo:depHi]
	depHi       int32
	releaseOnTx bool // dependents start when this flow's sender is done (else its receiver)
	failed      bool
	phase       int32 // collective step
}

type workload struct {
	kind          string
	ideal         int64 // lower bound on the completion of the whole workload
	closeWhenDone bool
}

// websearch is the web-search flow-size CDF (DCTCP paper, as distributed with HPCC):
// (bytes, cumulative probability), linearly interpolated.
var websearch = [][2]float64{
	{0, 0}, {10000, 0.15}, {20000, 0.2}, {30000, 0.3}, {50000, 0.4}, {80000, 0.53},
	{200000, 0.6}, {1000000, 0.7}, {2000000, 0.8}, {5000000, 0.9}, {10000000, 0.97}, {30000000, 1},
}

func cdfSample(cdf [][2]float64, u float64) int64 {
	for i := 1; i < len(cdf); i++ {
		if u <= cdf[i][1] {
			a, b := cdf[i-1], cdf[i]
			return max(1, int64(a[0]+(b[0]-a[0])*(u-a[1])/(b[1]-a[1])))
		}
	}
	return int64(cdf[len(cdf)-1][0])
}

func cdfMean(cdf [][2]float64) float64 {
	m := 0.0
	for i := 1; i < len(cdf); i++ {
		m += (cdf[i][0] + cdf[i-1][0]) / 2 * (cdf[i][1] - cdf[i-1][1])
	}
	return m
}

// buildWorkload creates the flows of wc and schedules the independent ones.
func (s *Sim) buildWorkload(wc *WorkloadConfig, mtu int) (*workload, error) {
	H := len(s.hosts)
	rng := rand.New(rand.NewPCG(s.sc.Seed, 0x77)) // the workload's own stream
	w := &workload{kind: wc.Kind}
	size := int64(wc.Size)
	needSize := func() error {
		if size < 1 || size > int64(s.sc.Transport.MaxMessage) {
			return fmt.Errorf("workload.size = %d: must be in 1..max_message (%d) bytes", size, s.sc.Transport.MaxMessage)
		}
		return nil
	}
	var deps [][2]int32 // (parent, child)
	add := func(src, dst int, sz int64, at int64) int32 {
		s.flows = append(s.flows, flow{src: int32(src), dst: int32(dst), size: max(sz, 1), at: at, start: -1, rx: -1, tx: -1})
		return int32(len(s.flows) - 1)
	}
	jitter := func() int64 {
		if wc.Jitter <= 0 {
			return 0
		}
		return rng.Int64N(int64(wc.Jitter) + 1)
	}
	if wc.Jitter < 0 {
		return nil, fmt.Errorf("workload.jitter = %v: must be >= 0", wc.Jitter)
	}
	participants := wc.Participants
	if participants == 0 {
		participants = H
	}
	if participants < 2 || participants > H {
		return nil, fmt.Errorf("workload.participants = %d: must be in 2..hosts (%d)", wc.Participants, H)
	}
	switch wc.Kind {
	case "permutation", "tornado":
		if err := needSize(); err != nil {
			return nil, err
		}
		var dst []int
		if wc.Kind == "tornado" {
			for i := range H {
				dst = append(dst, (i+H/2)%H)
			}
		} else {
			dst = derangement(rng, H)
		}
		for i := range H {
			add(i, dst[i], size, jitter())
		}
	case "incast":
		if err := needSize(); err != nil {
			return nil, err
		}
		n := wc.Senders
		if n == 0 {
			n = H - 1
		}
		if n < 1 || n > H-1 || wc.Receiver < 0 || wc.Receiver >= H {
			return nil, fmt.Errorf("workload: incast needs 1 <= senders (%d) <= hosts-1 (%d) and 0 <= receiver (%d) < hosts", wc.Senders, H-1, wc.Receiver)
		}
		others := make([]int, 0, H-1)
		for i := range H {
			if i != wc.Receiver {
				others = append(others, i)
			}
		}
		rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
		src := others[:n]
		slices.Sort(src)
		for _, i := range src {
			add(i, wc.Receiver, size, jitter())
		}
	case "all_to_all":
		if err := needSize(); err != nil {
			return nil, err
		}
		k := wc.Window
		if k == 0 {
			k = 1
		}
		if k < 1 || k > participants-1 {
			return nil, fmt.Errorf("workload.window = %d: must be in 1..participants-1 (%d)", wc.Window, participants-1)
		}
		w.closeWhenDone = true
		ids := make([][]int32, participants)
		for i := range participants {
			for j := 1; j < participants; j++ {
				at := int64(-1)
				if j <= k {
					at = jitter()
				}
				ids[i] = append(ids[i], add(i, (i+j)%participants, size, at))
			}
		}
		for i := range participants {
			for j := k; j < len(ids[i]); j++ {
				s.flows[ids[i][j-k]].releaseOnTx = true
				deps = append(deps, [2]int32{ids[i][j-k], ids[i][j]})
			}
		}
	case "ring_allreduce", "butterfly_allreduce":
		if err := needSize(); err != nil {
			return nil, err
		}
		n := participants
		dsts, sizes, err := AllReduceSteps(wc.Kind, n, size)
		if err != nil {
			return nil, err
		}
		host, err := rankHosts(wc.Interleave, n)
		if err != nil {
			return nil, err
		}
		prev := make([]int32, n) // per host, the flow it received in the previous step
		for step := range dsts {
			cur := make([]int32, n)
			for i := range n {
				at := int64(-1)
				if step == 0 {
					at = jitter()
				}
				id := add(host[i], host[dsts[step][i]], sizes[step], at)
				s.flows[id].phase = int32(step)
				if step > 0 {
					// i's next step needs what it received in the previous one.
					deps = append(deps, [2]int32{prev[i], id})
				}
				cur[dsts[step][i]] = id
			}
			prev = cur
		}
	case "websearch", "facebook_hadoop":
		cdf := flowSizeCDFs[wc.Kind]
		if wc.Load <= 0 || wc.Load > 1 {
			return nil, fmt.Errorf("workload.load = %v: must be in (0, 1]", wc.Load)
		}
		if wc.Duration <= 0 {
			return nil, fmt.Errorf("workload.duration = %v: must be > 0", wc.Duration)
		}
		maxFlows := wc.MaxFlows
		if maxFlows == 0 {
			maxFlows = 100000
		}
		// Poisson arrivals per host at load * link rate, merged in time order.
		meanGap := cdfMean(cdf) * 8 / (wc.Load * float64(s.tp.rate)) * 1e9
		type arr struct {
			t   int64
			src int
		}
		var arrs []arr
		for i := range participants {
			t := 0.0
			for {
				t += rng.ExpFloat64() * meanGap
				if t > float64(wc.Duration) {
					break
				}
				arrs = append(arrs, arr{int64(t), i})
			}
		}
		slices.SortFunc(arrs, func(a, b arr) int {
			if a.t != b.t {
				return int(a.t - b.t)
			}
			return a.src - b.src
		})
		if len(arrs) > maxFlows {
			arrs = arrs[:maxFlows]
		}
		for _, a := range arrs {
			d := rng.IntN(participants - 1)
			if d >= a.src {
				d++
			}
			sz := min(cdfSample(cdf, rng.Float64()), int64(s.sc.Transport.MaxMessage))
			add(a.src, d, sz, a.t)
		}
		if len(arrs) == 0 {
			return nil, fmt.Errorf("workload: %s produced no flows (duration too short)", wc.Kind)
		}
	case "connection_matrix", "flows":
		specs := wc.Flows
		if wc.Kind == "connection_matrix" {
			if wc.File == "" {
				return nil, fmt.Errorf("workload.file: connection_matrix needs a file")
			}
			path := wc.File
			if !filepath.IsAbs(path) && s.sc.Dir != "" {
				path = filepath.Join(s.sc.Dir, path)
			}
			f, err := os.Open(path)
			if err != nil {
				return nil, fmt.Errorf("workload.file: %w", err)
			}
			specs, err = ParseConnectionMatrix(f, H, s.sc.Transport.MaxMessage)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("workload.file %s: %w", wc.File, err)
			}
			if len(specs) == 0 {
				return nil, fmt.Errorf("workload.file %s: no connections", wc.File)
			}
		} else if err := checkFlows(specs, H, s.sc.Transport.MaxMessage); err != nil {
			return nil, err
		}
		for _, f := range specs {
			add(f.Src, f.Dst, int64(f.Size), int64(f.Start))
		}
	default:
		return nil, fmt.Errorf("workload.kind = %q: must be one of incast, permutation, tornado, all_to_all, ring_allreduce, butterfly_allreduce, websearch, facebook_hadoop, connection_matrix, flows", wc.Kind)
	}
	if wc.CloseWhenDone != nil {
		w.closeWhenDone = *wc.CloseWhenDone
	}
	maxSize := int64(0)
	for i := range s.flows {
		maxSize = max(maxSize, s.flows[i].size)
	}
	s.msgBuf = make([]byte, maxSize)
	// Dependencies as a compact adjacency list.
	slices.SortStableFunc(deps, func(a, b [2]int32) int { return int(a[0] - b[0]) })
	s.deps = make([]int32, len(deps))
	for i, d := range deps {
		s.deps[i] = d[1]
		s.flows[d[1]].depsLeft++
	}
	for i := 0; i < len(deps); {
		j := i
		for j < len(deps) && deps[j][0] == deps[i][0] {
			j++
		}
		s.flows[deps[i][0]].depLo, s.flows[deps[i][0]].depHi = int32(i), int32(j)
		i = j
	}
	for i := range s.flows {
		f := &s.flows[i]
		f.idealRx, f.idealTx = s.isolated(f.size, s.tp.linksBetween(f.src, f.dst), mtu)
	}
	// Listed flows differ in size, start and path: each host is bounded by its own.
	w.ideal = s.idealCompletion(mtu, wc.Kind == "connection_matrix" || wc.Kind == "flows")
	return w, nil
}

// rankHosts maps collective ranks to hosts: identity, or interleaved over l groups
// (WorkloadConfig.Interleave).
func rankHosts(l, n int) ([]int, error) {
	if l < 0 || l > n || (l > 1 && n%l != 0) {
		return nil, fmt.Errorf("workload.interleave = %d: must be 0, 1 or a divisor of the %d participants", l, n)
	}
	h := make([]int, n)
	for r := range n {
		h[r] = r
		if l > 1 {
			h[r] = (r%l)*(n/l) + r/l
		}
	}
	return h, nil
}

// AllReduceSteps lays out an all-reduce of size bytes per host over n hosts, step by
// step: in step s host i sends sizes[s] bytes to dsts[s][i], and starts step s once it
// holds the message it received in step s-1. ring_allreduce: 2(n-1) steps of size/n to
// the next host (reduce-scatter, then all-gather); butterfly_allreduce (n a power of two):
// recursive halving to partner i^2^j with size/2^(j+1), then doubling back.
func AllReduceSteps(kind string, n int, size int64) (dsts [][]int, sizes []int64, err error) {
	switch kind {
	case "ring_allreduce":
		chunk := max(1, size/int64(n))
		for range 2 * (n - 1) {
			d := make([]int, n)
			for i := range n {
				d[i] = (i + 1) % n
			}
			dsts, sizes = append(dsts, d), append(sizes, chunk)
		}
	case "butterfly_allreduce":
		if n&(n-1) != 0 {
			return nil, nil, fmt.Errorf("workload: butterfly_allreduce needs a power-of-two number of participants, not %d", n)
		}
		L := bits.Len(uint(n)) - 1
		step := func(j int) {
			d := make([]int, n)
			for i := range n {
				d[i] = i ^ 1<<j
			}
			dsts, sizes = append(dsts, d), append(sizes, max(1, size>>(j+1)))
		}
		for j := range L { // reduce-scatter: halving
			step(j)
		}
		for j := L - 1; j >= 0; j-- { // all-gather: doubling
			step(j)
		}
	default:
		return nil, nil, fmt.Errorf("workload: %q is not an all-reduce", kind)
	}
	return dsts, sizes, nil
}

// derangement returns a random permutation of 0..n-1 with no fixed point.
func derangement(rng *rand.Rand, n int) []int {
	p := rng.Perm(n)
	for i := range n {
		if p[i] == i {
			j := (i + 1) % n
			p[i], p[j] = p[j], p[i]
		}
	}
	return p
}

// wireBytes is what a message of size bytes puts on the wire.
func (s *Sim) wireBytes(size int64, mtu int) int64 {
	pkts := (size + int64(mtu) - 1) / int64(mtu)
	return size + pkts*int64(wire.DataHdrLen+s.ovh)
}

// isolated returns the time a message of size bytes over a path of links links takes on
// an empty fabric until the receiver has it (rx) and until the sender has its last ACK
// (tx): the sender's NIC serialises every packet back to back, then the last packet is
// stored and forwarded over the remaining links and its ACK comes back.
func (s *Sim) isolated(size int64, links, mtu int) (rx, tx int64) {
	last := size - (size-1)/int64(mtu)*int64(mtu)
	nic := s.wireBytes(size, mtu) * 8_000_000_000 / s.tp.rate
	sw := int64(links - 1)
	oneWay := int64(links)*s.tp.prop + sw*s.tp.swLat
	rx = nic + sw*s.ser(int(last)+wire.DataHdrLen, s.tp.rate) + oneWay
	tx = rx + int64(links)*s.ackSer() + oneWay
	return rx, tx
}

// idealCompletion bounds the whole workload from below: the longest chain of dependent
// flows each taking its isolated time, and the busiest host NIC (or, oversubscribed,
// ToR uplink bundle) moving its bytes at line rate plus the slowest flow's tail (perHost:
// see volumeBound).
func (s *Sim) idealCompletion(mtu int, perHost bool) int64 {
	n := len(s.flows)
	ready := make([]int64, n) // earliest start given the dependencies
	left := make([]int32, n)
	var queue []int32
	for i := range s.flows {
		left[i] = s.flows[i].depsLeft
		if left[i] == 0 {
			ready[i] = s.flows[i].at
			queue = append(queue, int32(i))
		}
	}
	crit := int64(0)
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		f := &s.flows[i]
		crit = max(crit, ready[i]+f.idealTx)
		rel := ready[i] + f.idealRx
		if f.releaseOnTx {
			rel = ready[i] + f.idealTx
		}
		for _, c := range s.deps[f.depLo:f.depHi] {
			ready[c] = max(ready[c], rel)
			if left[c]--; left[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	return max(crit, s.volumeBound(mtu, perHost))
}

// volumeBound is the busiest host NIC (or, oversubscribed, ToR uplink bundle) moving its
// bytes at line rate plus a flow's tail (its isolated time after its NIC time). Uniform
// workloads take the first start and the slowest tail of all flows; perHost takes each
// host's (and bundle's) own first start and shortest tail, a bound that holds for flows
// of mixed sizes, starts and path lengths (listed workloads), where the slowest tail of
// all is not a lower bound for the busiest host.
func (s *Sim) volumeBound(mtu int, perHost bool) int64 {
	if perHost {
		return s.perHostBound(mtu)
	}
	// Volume bounds.
	out := make([]int64, len(s.hosts))
	in := make([]int64, len(s.hosts))
	ntor := (len(s.hosts) + s.tp.perToR - 1) / s.tp.perToR
	torOut := make([]int64, ntor)
	torIn := make([]int64, ntor)
	tail, first := int64(0), int64(math.MaxInt64)
	for i := range s.flows {
		f := &s.flows[i]
		b := s.wireBytes(f.size, mtu)
		out[f.src] += b
		in[f.dst] += b
		if int(f.src)/s.tp.perToR != int(f.dst)/s.tp.perToR {
			torOut[int(f.src)/s.tp.perToR] += b
			torIn[int(f.dst)/s.tp.perToR] += b
		}
		tail = max(tail, f.idealTx-s.wireBytes(f.size, mtu)*8_000_000_000/s.tp.rate)
		if f.depsLeft == 0 {
			first = min(first, f.at)
		}
	}
	vol := int64(0)
	for i := range out {
		vol = max(vol, out[i], in[i])
	}
	bound := vol * 8_000_000_000 / s.tp.rate
	if s.tp.torUplinks > 0 {
		up := int64(s.tp.torUplinks) * s.tp.rate
		for i := range torOut {
			bound = max(bound, torOut[i]*8_000_000_000/up, torIn[i]*8_000_000_000/up)
		}
	}
	if first == math.MaxInt64 {
		first = 0
	}
	return first + bound + tail
}

// perHostBound is volumeBound's per-host form: for every host (and ToR uplink bundle) and
// direction, the first start of its flows, its bytes at line rate, and its flows'
// shortest tail.
func (s *Sim) perHostBound(mtu int) int64 {
	type side struct{ first, bytes, tail int64 }
	mk := func(n int) []side {
		v := make([]side, n)
		for i := range v {
			v[i] = side{math.MaxInt64, 0, math.MaxInt64}
		}
		return v
	}
	ntor := (len(s.hosts) + s.tp.perToR - 1) / s.tp.perToR
	out, in, torOut, torIn := mk(len(s.hosts)), mk(len(s.hosts)), mk(ntor), mk(ntor)
	add := func(x *side, f *flow, b int64) {
		x.first = min(x.first, f.at)
		x.bytes += b
		x.tail = min(x.tail, f.idealTx-b*8_000_000_000/s.tp.rate)
	}
	for i := range s.flows {
		f := &s.flows[i]
		b := s.wireBytes(f.size, mtu)
		add(&out[f.src], f, b)
		add(&in[f.dst], f, b)
		if st, dt := int(f.src)/s.tp.perToR, int(f.dst)/s.tp.perToR; st != dt {
			add(&torOut[st], f, b)
			add(&torIn[dt], f, b)
		}
	}
	bound := int64(0)
	each := func(v []side, rate int64) {
		for _, x := range v {
			if x.bytes > 0 {
				bound = max(bound, max(x.first, 0)+x.bytes*8_000_000_000/rate+x.tail)
			}
		}
	}
	each(out, s.tp.rate)
	each(in, s.tp.rate)
	if s.tp.torUplinks > 0 {
		each(torOut, int64(s.tp.torUplinks)*s.tp.rate)
		each(torIn, int64(s.tp.torUplinks)*s.tp.rate)
	}
	return bound
}

// start schedules the independent flows, the failures and the sampler.
func (s *Sim) start() {
	for i := range s.flows {
		if s.flows[i].depsLeft == 0 && s.own(s.flows[i].src) {
			s.schedule(s.flows[i].at, evStart, int32(i), 0)
		}
	}
	for i := range s.faults {
		s.schedule(int64(s.faults[i].cfg.At), evFault, int32(i), 0)
		if s.faults[i].cfg.Until > 0 {
			s.schedule(int64(s.faults[i].cfg.Until), evFault, int32(i), 1)
		}
	}
	s.smp.start(s)
}

func (s *Sim) startFlow(fi int32) {
	f := &s.flows[fi]
	h := &s.hosts[f.src]
	c := h.conns[f.dst]
	if c == nil {
		id, err := h.ep.Dial(s.now, s.hosts[f.dst].addr)
		if err != nil {
			s.flowFail(fi)
			return
		}
		c = &sconn{id: id}
		h.conns[f.dst] = c
		if s.sc.PerFlowBaseRTT {
			h.ep.SetPathHops(id, s.tp.linksBetween(f.src, f.dst)-1)
		}
	}
	msg, err := h.ep.Send(s.now, c.id, s.msgBuf[:f.size])
	if err != nil {
		s.flowFail(fi)
		return
	}
	if len(c.flows) == 0 {
		c.base = msg
	}
	if msg-c.base != uint32(len(c.flows)) {
		panic("sim: engine message IDs are not consecutive")
	}
	c.flows = append(c.flows, fi)
	c.pending++
	if s.own(f.dst) {
		s.hosts[f.dst].rxFlows[rxKey(f.src, msg)] = fi
	} else {
		// The message reaches the other part a link between the parts later at the
		// earliest, after this window's barrier.
		s.xann = append(s.xann, xann{dst: f.dst, src: f.src, fi: fi, msg: msg})
	}
	f.start = s.now
	if s.firstStart < 0 {
		s.firstStart = s.now
	}
	s.service(f.src)
	s.engineEvents(f.src)
}

func (s *Sim) release(fi int32) { s.releaseAt(fi, s.now) }

// releaseAt counts flow fi as done for its dependents; those it was the last for start at at.
func (s *Sim) releaseAt(fi int32, at int64) {
	f := &s.flows[fi]
	for _, c := range s.deps[f.depLo:f.depHi] {
		if s.flows[c].depsLeft--; s.flows[c].depsLeft == 0 {
			s.schedule(at, evStart, c, 0)
		}
	}
}

func (s *Sim) flowRx(fi int32) {
	f := &s.flows[fi]
	if f.rx >= 0 {
		return
	}
	f.rx = s.now
	if !f.releaseOnTx {
		s.release(fi)
	}
}

func (s *Sim) flowTx(fi int32) {
	f := &s.flows[fi]
	if f.tx >= 0 || f.failed {
		return
	}
	f.tx = s.now
	s.flowsDone++
	s.lastDone = s.now
	if f.releaseOnTx {
		s.release(fi)
	}
	s.connDone(f)
}

func (s *Sim) flowFail(fi int32) {
	f := &s.flows[fi]
	if f.failed || f.tx >= 0 {
		return
	}
	f.failed = true
	s.flowsFailed++
	if f.depHi > f.depLo { // let the rest of the workload go on
		switch {
		case f.releaseOnTx:
			s.release(fi)
		case !s.own(f.dst):
			// Whether the receiver holds the message is the other part's to tell: it
			// releases the dependents at the window's barrier unless it does.
			s.xrel = append(s.xrel, fi)
		case f.rx < 0:
			s.release(fi)
		}
	}
	s.connDone(f)
}

func (s *Sim) connDone(f *flow) {
	if f.start < 0 {
		return // never sent
	}
	h := &s.hosts[f.src]
	c := h.conns[f.dst]
	if c == nil {
		return
	}
	c.pending--
	if c.pending == 0 && s.wl.closeWhenDone {
		_ = h.ep.Close(s.now, c.id)
		delete(h.conns, f.dst)
		s.service(f.src)
	}
}
