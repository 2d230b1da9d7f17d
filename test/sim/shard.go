package sim

import (
	"fmt"
	"runtime"
)

// Sharding: the fabric split in two halves (parts), each with its own event queue, run
// in lock-step windows of the lookahead, the shortest latency of a link between the
// halves. Within a window [t, t+lookahead) a part processes its own events only: a
// packet it puts on a link into the other half arrives at t+lookahead or later, so it
// waits in the part's outbox until the window ends, and at the barrier the outboxes are
// moved into the receiving pipes, part 0's first, each in the order it was filled. A
// part's run is therefore a function of its own state and of what it received at
// barriers, whether the parts run one after the other on one goroutine (sim.shards 1)
// or side by side on two (sim.shards 2): the two give the same result bit for bit.
//
// The split is the same whatever the number of shards (it depends on the topology and
// the workload only): hosts [0, split) and the switches below them in part 0, the rest
// in part 1, the switches that span both halves (spines, cores) shared out half and
// half in their order. Scenarios that cannot be split (one switch, no latency between
// switches, or a workload where a flow's completion releases a flow sent from the other
// half) run as one part. A flow that fails at its sender releases the flows its
// receiver waits for; in the other half that happens at the end of the window.

// RunConfig says how the simulator runs a scenario (not what it simulates).
type RunConfig struct {
	// Shards is the number of goroutines (cores) that run the two halves of the fabric:
	// 1 (default) or 2. The result is the same for both.
	Shards int `yaml:"shards"`
}

// shards coordinates the parts of a sharded run (nil: one part).
type shards struct {
	nodePart  []int8 // by node: hosts, then switches
	lookahead int64  // window length: the shortest latency of a link between parts, ns
	workers   int    // goroutines: 1 or 2
	parts     []*Sim
	done      int // flows done or failed, as of the last barrier
	// With one worker the parts take turns with one pair of slot pools (handed to the
	// part whose window runs), so a packet crossing at a barrier keeps its slot: no copy,
	// and one pool's peak instead of two.
	pools [2]slotPool
	// Thread CPU time (Linux; 0 elsewhere) each part spent in windows, the sum over
	// windows of the larger of the two (what two dedicated cores would take), and the
	// number of windows, ns.
	cpu     [2]int64
	crit    int64
	windows int64
}

// ShardStats is how a split run's work fell on the two halves (Sim.ShardStats).
type ShardStats struct {
	Parts     int   // 1: the scenario was not split
	Workers   int   // goroutines that ran them
	Windows   int64 // lock-step windows
	Lookahead int64 // window length, ns
	// CPU is the thread CPU seconds each half spent in its windows; Critical the sum over
	// windows of the larger of the two: the least time two dedicated cores would take,
	// whatever else the machine runs. Sum(CPU) / Critical bounds the speed-up.
	CPU      [2]float64
	Critical float64
}

// ShardStats reports the split of the last Run.
func (s *Sim) ShardStats() ShardStats {
	if s.sh == nil {
		return ShardStats{Parts: 1, Workers: 1}
	}
	sh := s.sh
	return ShardStats{Parts: 2, Workers: sh.workers, Windows: sh.windows, Lookahead: sh.lookahead,
		CPU: [2]float64{float64(sh.cpu[0]) / 1e9, float64(sh.cpu[1]) / 1e9}, Critical: float64(sh.crit) / 1e9}
}

// xpkt is a packet on its way into the other part: it joins pipe pi at the barrier
// (at: when its last bit left, the pipe's latency still to add).
type xpkt struct {
	pi int32
	at int64
	pk pkt
}

// xann tells the receiving part that host src's message msg to host dst is flow fi.
type xann struct {
	dst, src, fi int32
	msg          uint32
}

// splitTopology assigns every node to part 0 or 1 (nil: the topology does not split).
func splitTopology(tp *topo) []int8 {
	H := int32(tp.hosts)
	if len(tp.sws) < 2 || H < 4 {
		return nil
	}
	// The split is the host boundary nearest the middle that no ToR straddles.
	split := int32(-1)
	for d := int32(0); d < H/2 && split < 0; d++ {
		for _, c := range []int32{H/2 - d, H/2 + d} {
			if c <= 0 || c >= H {
				continue
			}
			ok := true
			for i := range tp.sws {
				sw := &tp.sws[i]
				if sw.tier == 0 && sw.lo < c && sw.hi > c {
					ok = false
					break
				}
			}
			if ok {
				split = c
				break
			}
		}
	}
	if split < 0 {
		return nil
	}
	np := make([]int8, int(H)+len(tp.sws))
	for h := range H {
		if h >= split {
			np[h] = 1
		}
	}
	// Switches entirely on one side go there; those spanning both are shared out half
	// and half in their order, tier by tier.
	var spanning [3][]int
	for i := range tp.sws {
		sw := &tp.sws[i]
		switch {
		case sw.hi <= split:
			np[int(H)+i] = 0
		case sw.lo >= split:
			np[int(H)+i] = 1
		default:
			spanning[min(int(sw.tier), 2)] = append(spanning[min(int(sw.tier), 2)], i)
		}
	}
	for _, l := range spanning {
		for k, i := range l {
			if 2*k >= len(l) {
				np[int(H)+i] = 1
			}
		}
	}
	return np
}

// initShards decides whether the run is split in two (it is whenever the scenario
// allows, whatever the number of shards) and, if so, makes the parts.
func (s *Sim) initShards() error {
	n := s.sc.Sim.Shards
	if n == 0 {
		n = 1
	}
	if n < 1 || n > 2 {
		return fmt.Errorf("sim.shards = %d: must be 1 or 2", s.sc.Sim.Shards)
	}
	why := ""
	lookahead := int64(-1)
	switch {
	case s.nodePart == nil:
		why = "the topology has no two halves (one switch, or ToRs straddling the middle)"
	case !s.depsSplit():
		why = "a flow's completion releases a flow sent from the other half (workload dependencies)"
	default:
		for i := range s.tp.ports {
			p := &s.tp.ports[i]
			if s.nodePart[p.owner] != s.nodePart[p.peer] {
				if l := int64(s.pipes[i].lat); lookahead < 0 || l < lookahead {
					lookahead = l
				}
			}
		}
		if lookahead <= 0 {
			why = "links between the halves have no latency"
		}
	}
	if why != "" {
		s.nodePart = nil
		if n > 1 {
			return fmt.Errorf("sim.shards = %d: this scenario cannot be split: %s", n, why)
		}
		return nil
	}
	sh := &shards{nodePart: s.nodePart, lookahead: lookahead, workers: n}
	for i := range s.tp.ports {
		p := &s.tp.ports[i]
		if sh.nodePart[p.owner] != sh.nodePart[p.peer] {
			s.pflag[i] |= pfCross
		}
	}
	s.sh = sh
	for k := range 2 {
		// Padded: each part writes its own fields (now, the queue's cursor) at every event.
		p := &new(struct {
			_ [128]byte
			Sim
			_ [128]byte
		}).Sim
		*p = *s
		p.part = int8(k)
		p.q = eventQueue{}
		p.dataHdrs, p.ctlHdrs = slotPool{}, slotPool{}
		p.tx = make([]byte, len(s.tx))
		p.rx = make([]byte, len(s.rx))
		p.rxCtl = make([]byte, len(s.rxCtl))
		p.down = append([]bool(nil), s.down...)
		p.pflag = append([]uint8(nil), s.pflag...) // written at every wake: no line shared
		p.smp.times = nil
		p.progress = nil
		sh.parts = append(sh.parts, p)
	}
	if n == 1 {
		sh.parts[1].direct = sh.parts[0]
	}
	return nil
}

// depsSplit reports whether every dependency stays within a half: the flows a flow's
// completion releases (on receipt: at its receiver; on its last ACK: at its sender) are
// sent from that host's half, so no release crosses between the parts in a window.
func (s *Sim) depsSplit() bool {
	for i := range s.flows {
		f := &s.flows[i]
		rel := f.dst
		if f.releaseOnTx {
			rel = f.src
		}
		for _, c := range s.deps[f.depLo:f.depHi] {
			if s.nodePart[s.flows[c].src] != s.nodePart[rel] {
				return false
			}
		}
	}
	return true
}

// own reports whether node belongs to this part.
func (s *Sim) own(node int32) bool { return s.sh == nil || s.sh.nodePart[node] == s.part }

// partOf returns node's part (0 unsplit).
func (s *Sim) partOf(node int32) int8 {
	if s.nodePart == nil {
		return 0
	}
	return s.nodePart[node]
}

// allDone reports whether every flow is done or failed: at once in one part, as of the
// last barrier when split (so that both parts see the same).
func (s *Sim) allDone() bool {
	if s.sh != nil {
		return s.sh.done >= len(s.flows)
	}
	return s.flowsDone+s.flowsFailed >= len(s.flows)
}

// runShards is Run for a split scenario: windows of the lookahead until the workload
// is complete, nothing is left to do, or the deadline passes.
func (s *Sim) runShards(deadline int64) {
	sh := s.sh
	for k, p := range sh.parts {
		// The counters as s has them (a caller may have reset them for another run).
		p.flowsDone, p.flowsFailed = 0, 0
		if k == 0 {
			p.flowsDone, p.flowsFailed = s.flowsDone, s.flowsFailed
		}
		p.start()
	}
	sh.done = s.flowsDone + s.flowsFailed
	sh.cpu, sh.crit, sh.windows = [2]int64{}, 0, 0
	// Each goroutine keeps its thread, so that thread CPU clocks measure its part.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var work chan int64
	var fin chan int64
	if sh.workers > 1 {
		work, fin = make(chan int64), make(chan int64)
		defer close(work)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for end := range work {
				c := threadCPU()
				sh.parts[1].runWindow(end)
				fin <- threadCPU() - c
			}
		}()
	}
	t := int64(0)
	for sh.done < len(s.flows) {
		next, any := int64(0), false
		for _, p := range sh.parts {
			if at, ok := p.q.nextAt(); ok && (!any || at < next) {
				next, any = at, true
			}
		}
		if !any || next > deadline {
			break
		}
		t = max(t, next)
		end := min(t+sh.lookahead, deadline+1) - 1 // the last time of the window
		var c [2]int64
		if work != nil {
			work <- end
			c0 := threadCPU()
			sh.parts[0].runWindow(end)
			c[0] = threadCPU() - c0
			c[1] = <-fin
		} else {
			for k, p := range sh.parts {
				c0 := threadCPU()
				p.dataHdrs, p.ctlHdrs = sh.pools[0], sh.pools[1]
				p.runWindow(end)
				sh.pools[0], sh.pools[1] = p.dataHdrs, p.ctlHdrs
				p.dataHdrs, p.ctlHdrs = slotPool{}, slotPool{}
				c[k] = threadCPU() - c0
			}
		}
		sh.cpu[0] += c[0]
		sh.cpu[1] += c[1]
		sh.crit += max(c[0], c[1])
		sh.windows++
		s.barrier(end)
		t = end + 1
		if s.progress != nil {
			s.mergeParts()
			s.printProgress()
		}
	}
	s.mergeParts()
}

// runWindow processes the part's events due at or before end.
func (s *Sim) runWindow(end int64) {
	s.winEnd = end
	for s.q.len() > 0 {
		e, ok := s.q.popUntil(end)
		if !ok {
			return
		}
		s.step(e)
	}
}

// barrier moves the packets and flow announcements of the window ending at end into
// the receiving parts (part 0's first, each in the order sent), releases the dependents
// of flows that failed at their sender unless the receiver holds the message, and
// counts the finished flows.
func (s *Sim) barrier(end int64) {
	sh := s.sh
	done := 0
	for _, src := range sh.parts {
		for _, x := range src.xout {
			dst := sh.parts[sh.nodePart[s.pipes[x.pi].to]]
			if sh.workers > 1 { // each part its own pools: the bytes move
				id := dst.allocPkt(!x.pk.data())
				copy(dst.slot(id), src.slot(x.pk.id))
				src.freePkt(x.pk.id)
				x.pk.id = id
			}
			dst.enter(x, end)
		}
		src.xout = src.xout[:0]
		for _, a := range src.xann {
			s.hosts[a.dst].rxFlows[rxKey(a.src, a.msg)] = a.fi
		}
		src.xann = src.xann[:0]
		for _, fi := range src.xrel {
			if f := &s.flows[fi]; f.rx < 0 {
				sh.parts[sh.nodePart[f.dst]].releaseAt(fi, end+1)
			}
		}
		src.xrel = src.xrel[:0]
		done += src.flowsDone + src.flowsFailed
	}
	sh.done = done
}

// cross passes packet pk, whose last bit leaves port pid into the other part at time
// end, to that part: at once when it has run this window already (one worker, part 1
// into part 0: at the barrier they would be the first pushes into part 0 after its own
// window, so the pushes and their order stay the same), else through the outbox.
func (s *Sim) cross(pid int32, end int64, pk pkt) {
	if s.direct != nil {
		s.direct.enter(xpkt{pid, end, pk}, s.winEnd)
		return
	}
	s.xout = append(s.xout, xpkt{pid, end, pk})
}

// enter puts x, sent in the other part's window ending at winEnd, on its pipe.
func (s *Sim) enter(x xpkt, winEnd int64) {
	at := x.at + int64(s.pipes[x.pi].lat)
	if at <= winEnd {
		// A port serialises a packet from the moment it starts (its wake), so this
		// cannot happen; if it did, the receiver would have run past the arrival.
		panic(fmt.Sprintf("sim: a packet into the other half arrives at %d ns, within the window it was sent in (ends %d ns)", at, winEnd))
	}
	s.send(x.pi, x.pk, at)
}

// mergeParts gathers the parts' counters and samples into s.
func (s *Sim) mergeParts() {
	s.hops, s.events, s.flowsDone, s.flowsFailed = 0, 0, 0, 0
	s.lastDone, s.firstStart, s.now = 0, -1, 0
	s.lossSignals, s.lossSignalNs = 0, 0
	for _, p := range s.sh.parts {
		s.lossSignals += p.lossSignals
		s.lossSignalNs += p.lossSignalNs
		s.hops += p.hops
		s.events += p.events
		s.flowsDone += p.flowsDone
		s.flowsFailed += p.flowsFailed
		s.lastDone = max(s.lastDone, p.lastDone)
		s.now = max(s.now, p.now)
		if p.firstStart >= 0 && (s.firstStart < 0 || p.firstStart < s.firstStart) {
			s.firstStart = p.firstStart
		}
	}
	s.smp.times = s.sh.parts[0].smp.times
}

// nextAt returns the time of the earliest event (ok false: none).
func (q *eventQueue) nextAt() (int64, bool) {
	at, ok := int64(0), false
	if q.n > 0 {
		at, ok = q.headEv().at(), true
	}
	if len(q.far.h) > 0 && (!ok || q.far.h[0].at() < at) {
		at, ok = q.far.h[0].at(), true
	}
	return at, ok
}

// rxKey is the key of host src's message msg in the receiver's flow table.
func rxKey(src int32, msg uint32) uint64 { return uint64(uint32(src))<<32 | uint64(msg) }
