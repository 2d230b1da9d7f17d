package bedrun

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// SoakReport is what a soak measured and checked.
type SoakReport struct {
	Name     string        `json:"name"`
	Seed     uint64        `json:"seed"`
	Topology string        `json:"topology"`
	Hosts    int           `json:"hosts"`
	Workload time.Duration `json:"workload_ns"` // submitting messages
	Drained  time.Duration `json:"drained_ns"`  // then until every outcome and delivery was in
	MaxLag   time.Duration `json:"max_lag_ns"`  // largest delay of a submission behind its planned time
	Tally    SoakTally     `json:"tally"`
	Restart  *SoakRestart  `json:"restart,omitempty"`
	Memory   SoakMemory    `json:"memory"`
	Daemons  []SoakDaemon  `json:"daemons"`
	Fabric   SoakFabric    `json:"fabric"`
	Faults   []string      `json:"faults"` // the fault log, as applied
	// Corrupted describes the first corrupted deliveries; RecvErrors counts the errors the
	// applications' sessions reported instead of a message (e.g. the daemon dropped one).
	Corrupted  []string       `json:"corrupted,omitempty"`
	RecvErrors map[string]int `json:"recv_errors,omitempty"`
	Violations []string       `json:"violations"`
	Notes      []string       `json:"notes,omitempty"` // worth a look, not violations
}

// SoakTally is the exactly-once accounting of every message the workload drew.
type SoakTally struct {
	Planned   int   `json:"planned"`   // drawn by the workload before its end
	Skipped   int   `json:"skipped"`   // not submitted: the host's own daemon was down
	Late      int   `json:"late"`      // not submitted: no free slot before the workload's end
	Submitted int   `json:"submitted"` // handed to a daemon (or refused by it)
	Bytes     int64 `json:"bytes"`     // of the submitted
	Sent      int   `json:"sent"`      // reported sent (every byte acknowledged)
	Failed    int   `json:"failed"`    // reported failed
	NoOutcome int   `json:"no_outcome"`
	Delivered int   `json:"delivered"` // delivered at least once, intact
	// Violations unless 0.
	DeliveredTwice   int `json:"delivered_twice"`
	Corrupted        int `json:"corrupted"` // deliveries that are no submitted message intact
	SentNotDelivered int `json:"sent_not_delivered"`
	// Allowed: reported sent, to the killed host, acknowledged by its old daemon shortly
	// before the kill and never read by the application the crash cut off.
	LostInCrash int `json:"lost_in_crash"`
	// Allowed: reported failed but delivered (the outcome was lost, not the message).
	FailedDelivered int                   `json:"failed_delivered"`
	FailReasons     map[string]int        `json:"fail_reasons"`
	ByKind          map[string]int        `json:"by_kind"`
	ByClass         [3]int                `json:"by_class"`   // submitted: <= 4 KiB, <= 256 KiB, larger
	Completion      [3]CompletionPercents `json:"completion"` // per class, submitted to reported sent
}

// CompletionPercents are completion times of a size class's messages reported sent.
type CompletionPercents struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// classOf is a message size's class: small, medium, large.
func classOf(size int32) int {
	switch {
	case size <= 4<<10:
		return 0
	case size <= 256<<10:
		return 1
	}
	return 2
}

var classNames = [3]string{"small (<= 4 KiB)", "medium (<= 256 KiB)", "large (> 256 KiB)"}

// SoakRestart is what the daemon restart showed.
type SoakRestart struct {
	Host      int           `json:"host"`
	KillAt    time.Duration `json:"kill_at_ns"`
	RestartAt time.Duration `json:"restart_at_ns"`
	// Messages without an outcome at the kill, to the host and from it.
	InFlightTo   int `json:"in_flight_to"`
	InFlightFrom int `json:"in_flight_from"`
	// Of the messages to the host submitted before the kill and without an outcome then:
	ToSent         int `json:"to_sent"`
	ToFailed       int `json:"to_failed"`
	ToDeliveredOld int `json:"to_delivered_old"`
	ToLost         int `json:"to_lost"`
	// After the restart: messages delivered to the new daemon and from it, and per peer
	// how long after the restart the first one arrived each way (-1: none).
	NewDelivered     int             `json:"new_delivered"`
	NewSentDelivered int             `json:"new_sent_delivered"`
	FirstIn          []time.Duration `json:"first_in_ns"`
	FirstOut         []time.Duration `json:"first_out_ns"`
	SubmittedIn      []int           `json:"submitted_in"` // per peer: submitted after the restart to it, from it
	SubmittedOut     []int           `json:"submitted_out"`
}

// SoakMemory is the memory before the workload, its peaks during it, and after the drain.
type SoakMemory struct {
	Start         MemSample `json:"start"`
	Peak          MemSample `json:"peak"`
	End           MemSample `json:"end"`
	Samples       int       `json:"samples"`
	MaxGrowth     uint64    `json:"max_growth"`
	MaxGoroutines int       `json:"max_goroutines"`
}

// SoakDaemon is one host's daemon (its lives summed).
type SoakDaemon struct {
	Host            string `json:"host"`
	Lives           int    `json:"lives"`
	MsgsSent        uint64 `json:"msgs_sent"`
	MsgsFailed      uint64 `json:"msgs_failed"`
	MsgsDelivered   uint64 `json:"msgs_delivered"`
	RetxSack        uint64 `json:"retx_sack"`
	RetxNack        uint64 `json:"retx_nack"`
	RetxTimeout     uint64 `json:"retx_timeout"`
	ConnsAborted    uint64 `json:"conns_aborted"`
	UnknownConn     uint64 `json:"unknown_conn"`
	RecvBufferedMax uint64 `json:"recv_buffered_max"`
	Undeliverable   uint64 `json:"undeliverable"`
	RecvOverflow    uint64 `json:"recv_overflow"`
	// After the drain: live connections, and those beyond one per peer and direction
	// (a peer's previous life's, never ended).
	Conns      int `json:"conns"`
	StaleConns int `json:"stale_conns"`
}

// SoakFabric sums the switches' counters.
type SoakFabric struct {
	FlakyLost   uint64 `json:"flaky_lost"`   // frames lost on flaky links
	LinkRefused uint64 `json:"link_refused"` // frames the switches sent into down links
	Trims       uint64 `json:"trims"`
	Marks       uint64 `json:"marks"`
	Drops       uint64 `json:"drops"`
}

// tally counts the records.
func (s *soaker) tally() SoakTally {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := SoakTally{FailReasons: map[string]int{}, ByKind: map[string]int{}, Late: s.late}
	var lat [3][]time.Duration
	for _, ms := range s.msgs {
		for i := range ms {
			r := &ms[i]
			t.Planned++
			if r.outcome == outSkipped {
				t.Skipped++
				continue
			}
			t.Submitted++
			t.Bytes += int64(r.size)
			t.ByKind[kindNames[r.kind]]++
			c := classOf(r.size)
			t.ByClass[c]++
			if r.deliveries > 0 {
				t.Delivered++
			}
			if r.deliveries > 1 {
				t.DeliveredTwice++
			}
			switch r.outcome {
			case outNone:
				t.NoOutcome++
			case outSent:
				t.Sent++
				lat[c] = append(lat[c], time.Duration(r.outcomeAt-r.submitted))
				if r.deliveries == 0 {
					if s.lostInCrash(r) {
						t.LostInCrash++
					} else {
						t.SentNotDelivered++
					}
				}
			case outFailed:
				t.Failed++
				t.FailReasons[s.reasons[r.reason]]++
				if r.deliveries > 0 {
					t.FailedDelivered++
				}
			}
		}
	}
	t.Corrupted = s.nCorrupt
	for c, l := range lat {
		slices.Sort(l)
		if n := len(l); n > 0 {
			t.Completion[c] = CompletionPercents{N: n, P50: l[n/2], P99: l[min(n-1, n*99/100)], Max: l[n-1]}
		}
	}
	return t
}

// report assembles the report after the drain (the daemons still running).
func (s *soaker) report(work, drained time.Duration) *SoakReport {
	m := s.r.Mapped
	rep := &SoakReport{Name: s.sc.Name, Seed: s.sc.Seed, Topology: describe(m), Hosts: len(s.hosts),
		Workload: work, Drained: drained, Tally: s.tally()}
	s.mu.Lock()
	rep.MaxLag = time.Duration(s.maxLag)
	rep.Corrupted = slices.Clone(s.corrupt)
	if len(s.recvErrs) > 0 {
		rep.RecvErrors = map[string]int{}
		for k, v := range s.recvErrs {
			rep.RecvErrors[k] = v
		}
	}
	if s.killHost >= 0 {
		rep.Restart = s.restartFigures()
	}
	s.mu.Unlock()
	mt := &s.mem
	mt.mu.Lock()
	rep.Memory = SoakMemory{Start: mt.start, Peak: mt.peak, End: mt.end, Samples: mt.n,
		MaxGrowth: uint64(s.c.Memory.MaxGrowthPerHost) * uint64(len(s.hosts)), MaxGoroutines: s.c.Memory.MaxGoroutines}
	mt.mu.Unlock()
	for i, h := range s.hosts {
		d := SoakDaemon{Host: fmt.Sprintf("h%d", i)}
		h.mu.Lock()
		lives := slices.Clone(h.old)
		inst := h.inst
		h.mu.Unlock()
		if inst != nil {
			lives = append(lives, inst.d.Node.Stats())
			as := inst.d.API.Stats()
			d.Undeliverable, d.RecvOverflow = as.Undeliverable, as.RecvOverflow
			seen := map[string]bool{}
			for _, ci := range inst.d.Node.Conns(nil) {
				d.Conns++
				k := fmt.Sprint(ci.Peer, ci.Initiator)
				if seen[k] {
					d.StaleConns++
				}
				seen[k] = true
			}
		}
		d.Lives = len(lives)
		for _, st := range lives {
			d.MsgsSent += st.MsgsSent
			d.MsgsFailed += st.MsgsFailed
			d.MsgsDelivered += st.MsgsDelivered
			d.RetxSack += st.RetxSack
			d.RetxNack += st.RetxNack
			d.RetxTimeout += st.RetxTimeout
			d.ConnsAborted += st.ConnsAborted
			d.UnknownConn += st.UnknownConn
			d.RecvBufferedMax = max(d.RecvBufferedMax, st.RecvBufferedMax)
		}
		rep.Daemons = append(rep.Daemons, d)
	}
	rep.Violations = rep.check()
	stale := 0
	for _, d := range rep.Daemons {
		stale += d.StaleConns
	}
	if stale > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d connections beyond one per peer and direction after the drain (a previous life's, never ended)", stale))
	}
	return rep
}

// restartFigures describes the restart. s.mu must be held.
func (s *soaker) restartFigures() *SoakRestart {
	k := s.killHost
	rs := &SoakRestart{Host: k, KillAt: time.Duration(s.killAt), RestartAt: time.Duration(s.restAt),
		InFlightTo: s.inFlight[0], InFlightFrom: s.inFlight[1]}
	n := len(s.msgs)
	rs.FirstIn, rs.FirstOut = make([]time.Duration, n), make([]time.Duration, n)
	rs.SubmittedIn, rs.SubmittedOut = make([]int, n), make([]int, n)
	for i := range n {
		rs.FirstIn[i], rs.FirstOut[i] = -1, -1
	}
	for src, ms := range s.msgs {
		for i := range ms {
			r := &ms[i]
			if r.outcome == outSkipped {
				continue
			}
			if int(r.dst) == k && r.submitted < s.killAt && (r.outcome == outNone || r.outcomeAt >= s.killAt) {
				switch {
				case r.outcome == outSent && r.deliveries > 0:
					rs.ToSent++
					rs.ToDeliveredOld++
				case r.outcome == outSent:
					rs.ToSent++
					rs.ToLost++
				case r.outcome == outFailed:
					rs.ToFailed++
				}
			}
			if s.restAt > 0 && r.submitted >= s.restAt {
				if int(r.dst) == k {
					rs.SubmittedIn[src]++
				}
				if src == k {
					rs.SubmittedOut[r.dst]++
				}
			}
			if s.restAt == 0 || r.deliveries == 0 || r.deliveredAt < s.restAt {
				continue
			}
			after := time.Duration(r.deliveredAt - s.restAt)
			first := func(f *time.Duration) {
				if *f < 0 || after < *f {
					*f = after
				}
			}
			if int(r.dst) == k && r.life > 0 {
				rs.NewDelivered++
				first(&rs.FirstIn[src])
			}
			if src == k && r.submitted >= s.restAt {
				rs.NewSentDelivered++
				first(&rs.FirstOut[r.dst])
			}
		}
	}
	return rs
}

// check lists the violations: lost or duplicated or corrupted messages, messages without
// an outcome, memory not back after the drain, a restarted daemon its peers do not reach.
func (rep *SoakReport) check() []string {
	v := []string{}
	t := &rep.Tally
	if t.Submitted == 0 || t.Delivered == 0 {
		v = append(v, "the workload submitted or delivered nothing")
	}
	if t.NoOutcome > 0 {
		v = append(v, fmt.Sprintf("%d messages without an outcome after the drain", t.NoOutcome))
	}
	if t.DeliveredTwice > 0 {
		v = append(v, fmt.Sprintf("%d messages delivered more than once", t.DeliveredTwice))
	}
	if t.Corrupted > 0 {
		v = append(v, fmt.Sprintf("%d corrupted deliveries", t.Corrupted))
	}
	if t.SentNotDelivered > 0 {
		v = append(v, fmt.Sprintf("%d messages reported sent and never delivered", t.SentNotDelivered))
	}
	m := &rep.Memory
	if m.End.HeapAlloc > m.Start.HeapAlloc+m.MaxGrowth {
		v = append(v, fmt.Sprintf("Go heap after the drain %s, before the workload %s: grew by more than %s", mib(m.End.HeapAlloc), mib(m.Start.HeapAlloc), mib(m.MaxGrowth)))
	}
	if m.End.Goroutines > m.Start.Goroutines+m.MaxGoroutines {
		v = append(v, fmt.Sprintf("%d goroutines after the drain, %d before the workload: more than %d more", m.End.Goroutines, m.Start.Goroutines, m.MaxGoroutines))
	}
	for i := range m.End.RecvBuffered {
		if b := m.End.RecvBuffered[i]; b > 0 {
			v = append(v, fmt.Sprintf("h%d's daemon still holds %d bytes of message buffers for peers after the drain", i, b))
		}
		if p := m.End.Pending[i]; p > 0 {
			v = append(v, fmt.Sprintf("h%d's daemon still has %d messages without an outcome after the drain", i, p))
		}
	}
	if rs := rep.Restart; rs != nil {
		if rs.RestartAt == 0 {
			v = append(v, fmt.Sprintf("h%d's daemon was not restarted", rs.Host))
		}
		// Every peer that sent to the restarted host after its restart reached it, and it
		// reached every peer it sent to.
		for p := range rs.SubmittedIn {
			if rs.SubmittedIn[p] > 0 && rs.FirstIn[p] < 0 {
				v = append(v, fmt.Sprintf("none of h%d's %d messages to h%d after its restart arrived", p, rs.SubmittedIn[p], rs.Host))
			}
			if rs.SubmittedOut[p] > 0 && rs.FirstOut[p] < 0 {
				v = append(v, fmt.Sprintf("none of the restarted h%d's %d messages to h%d arrived", rs.Host, rs.SubmittedOut[p], p))
			}
		}
	}
	return v
}

// Write prints the report: the tally, the restart, memory, daemons, fabric and the verdict.
func (rep *SoakReport) Write(w io.Writer) {
	t := &rep.Tally
	fmt.Fprintf(w, "soak %s (seed %d): %s; workload %v, drained in %v (submissions at most %v behind plan)\n",
		rep.Name, rep.Seed, rep.Topology, rep.Workload.Round(time.Millisecond), rep.Drained.Round(time.Millisecond), rep.MaxLag.Round(time.Millisecond))
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, n int, note string) { fmt.Fprintf(tw, "%s\t%d\t%s\n", name, n, note) }
	must0 := func(n int) string {
		if n == 0 {
			return "must be 0: ok"
		}
		return "must be 0: VIOLATION"
	}
	fmt.Fprintln(tw, "messages\tcount\t")
	row("planned", t.Planned, "")
	row("  skipped (own daemon down)", t.Skipped, "")
	row("  late (no slot before the end)", t.Late, "not in planned")
	kinds := make([]string, 0, len(t.ByKind))
	for _, k := range kindNames {
		kinds = append(kinds, fmt.Sprintf("%d %s", t.ByKind[k], k))
	}
	row("submitted", t.Submitted, fmt.Sprintf("%.2f GiB; %d small, %d medium, %d large; %s", float64(t.Bytes)/(1<<30),
		t.ByClass[0], t.ByClass[1], t.ByClass[2], strings.Join(kinds, ", ")))
	row("  reported sent", t.Sent, "")
	row("  reported failed", t.Failed, reasons(t.FailReasons))
	row("  no outcome", t.NoOutcome, must0(t.NoOutcome))
	row("delivered", t.Delivered, "intact, to the right host")
	row("  delivered twice", t.DeliveredTwice, must0(t.DeliveredTwice))
	row("  delivered corrupted", t.Corrupted, must0(t.Corrupted))
	row("  reported sent, never delivered", t.SentNotDelivered, must0(t.SentNotDelivered))
	row("  reported sent, lost with the killed daemon", t.LostInCrash, "allowed: acknowledged by it, not yet read by its application")
	row("  reported failed, delivered anyway", t.FailedDelivered, "allowed: the outcome was lost, not the message")
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "completion (submitted to reported sent)\tmessages\tp50\tp99\tmax")
	for c, p := range t.Completion {
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\n", classNames[c], p.N, p.P50.Round(time.Millisecond), p.P99.Round(time.Millisecond), p.Max.Round(time.Millisecond))
	}
	tw.Flush()
	if rs := rep.Restart; rs != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "restart: h%d's daemon killed at %.1f s with %d messages to it and %d from it without an outcome, restarted at %.1f s\n",
			rs.Host, rs.KillAt.Seconds(), rs.InFlightTo, rs.InFlightFrom, rs.RestartAt.Seconds())
		fmt.Fprintf(w, "  messages to it in flight at the kill: %d reported sent (%d delivered to the old daemon, %d lost with it), %d reported failed\n",
			rs.ToSent, rs.ToDeliveredOld, rs.ToLost, rs.ToFailed)
		fmt.Fprintf(w, "  after the restart: %d messages delivered to the new daemon, %d of its own delivered; first arrival per peer: in %s, out %s\n",
			rs.NewDelivered, rs.NewSentDelivered, firsts(rs.FirstIn, rs.Host), firsts(rs.FirstOut, rs.Host))
	}
	fmt.Fprintln(w)
	m := &rep.Memory
	fmt.Fprintf(tw, "memory (%d samples)\tbefore the workload\tpeak\tafter the drain\trule\n", m.Samples)
	fmt.Fprintf(tw, "Go heap (live after forced GC at start and end)\t%s\t%s\t%s\tend <= start + %s\n", mib(m.Start.HeapAlloc), mib(m.Peak.HeapAlloc), mib(m.End.HeapAlloc), mib(m.MaxGrowth))
	fmt.Fprintf(tw, "Go heap reserved\t%s\t%s\t%s\t\n", mib(m.Start.HeapSys), mib(m.Peak.HeapSys), mib(m.End.HeapSys))
	fmt.Fprintf(tw, "process RSS\t%s\t%s\t%s\t\n", mib(m.Start.RSS), mib(m.Peak.RSS), mib(m.End.RSS))
	fmt.Fprintf(tw, "goroutines\t%d\t%d\t%d\tend <= start + %d\n", m.Start.Goroutines, m.Peak.Goroutines, m.End.Goroutines, m.MaxGoroutines)
	fmt.Fprintf(tw, "held for peers (RecvBuffered, all daemons)\t%s\t%s\t%s\tend = 0 per daemon\n", mib(sum(m.Start.RecvBuffered)), mib(sum(m.Peak.RecvBuffered)), mib(sum(m.End.RecvBuffered)))
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "daemon\tlives\tsent\tfailed\tdelivered\tretx sack/nack/timeout\tconns aborted\tunknown-conn pkts\tRecvBuffered max\tend: held, pending, conns (stale)\tundeliverable")
	for i, d := range rep.Daemons {
		var held uint64
		var pend int
		if i < len(m.End.RecvBuffered) {
			held, pend = m.End.RecvBuffered[i], m.End.Pending[i]
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d/%d/%d\t%d\t%d\t%s\t%d, %d, %d (%d)\t%d\n", d.Host, d.Lives, d.MsgsSent, d.MsgsFailed, d.MsgsDelivered,
			d.RetxSack, d.RetxNack, d.RetxTimeout, d.ConnsAborted, d.UnknownConn, mib(d.RecvBufferedMax), held, pend, d.Conns, d.StaleConns, d.Undeliverable+d.RecvOverflow)
	}
	tw.Flush()
	f := rep.Fabric
	fmt.Fprintf(w, "\nfabric: %d frames lost on flaky links, %d refused by down links, %d trims, %d marks, %d drops\n", f.FlakyLost, f.LinkRefused, f.Trims, f.Marks, f.Drops)
	for _, c := range rep.Corrupted {
		fmt.Fprintln(w, "corrupted:", c)
	}
	for k, n := range rep.RecvErrors {
		fmt.Fprintf(w, "receive error %s: %d\n", k, n)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	fmt.Fprintln(w)
	if len(rep.Violations) == 0 {
		fmt.Fprintln(w, "verdict: every message delivered once or reported failed, memory flat: PASS")
		return
	}
	fmt.Fprintf(w, "verdict: %d violation(s): FAIL\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintln(w, "  -", v)
	}
}

func reasons(m map[string]int) string {
	type kv struct {
		k string
		n int
	}
	var l []kv
	for k, n := range m {
		l = append(l, kv{k, n})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || (l[i].n == l[j].n && l[i].k < l[j].k) })
	var b []string
	for _, e := range l {
		b = append(b, fmt.Sprintf("%d %s", e.n, e.k))
	}
	return strings.Join(b, "; ")
}

// firsts formats per-peer first-arrival times: min–max over the peers that had one, and
// how many of the peers.
func firsts(f []time.Duration, self int) string {
	var lo, hi time.Duration = -1, -1
	n, peers := 0, 0
	for i, d := range f {
		if i == self {
			continue
		}
		peers++
		if d < 0 {
			continue
		}
		n++
		if lo < 0 || d < lo {
			lo = d
		}
		hi = max(hi, d)
	}
	if n == 0 {
		return fmt.Sprintf("none of %d peers", peers)
	}
	return fmt.Sprintf("%d/%d peers after %v–%v", n, peers, lo.Round(time.Millisecond), hi.Round(time.Millisecond))
}

func sum(b []uint64) uint64 {
	var s uint64
	for _, x := range b {
		s += x
	}
	return s
}
