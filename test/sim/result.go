package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is what a run produced. Times are ns.
type Result struct {
	Scenario string `json:"scenario"` // scenario name
	Topology string `json:"topology"` // the fabric, described
	Workload string `json:"workload"` // workload kind
	Seed     uint64 `json:"seed"`
	Hosts    int    `json:"hosts"`
	CC       string `json:"cc"` // congestion controller
	LB       string `json:"lb"` // load balancer

	Flows     int `json:"flows"`     // flows in the workload
	Completed int `json:"completed"` // flows whose sender saw every byte acknowledged
	Failed    int `json:"failed"`    // flows the engine failed

	SimTime    int64   `json:"sim_time_ns"`    // clock at the end
	Completion int64   `json:"completion_ns"`  // first start to last flow done
	Ideal      int64   `json:"ideal_ns"`       // lower bound on Completion
	Ratio      float64 `json:"completion_rel"` // Completion / Ideal

	FCT FCTSummary `json:"fct"`
	// RTT is the distribution of the senders' RTT samples (output.rtt; nil otherwise).
	RTT *RTTSummary `json:"rtt,omitempty"`

	Drops      uint64 `json:"drops"`       // switch queues full
	Trims      uint64 `json:"trims"`       // packets trimmed
	Marks      uint64 `json:"ecn_marks"`   // CE marks
	LinkDrops  uint64 `json:"link_drops"`  // lost on links that were down
	FlakyDrops uint64 `json:"flaky_drops"` // lost in flaky-link bursts
	MaxQueue   int    `json:"max_queue_bytes"`

	PacketsSent uint64 `json:"packets_sent"`
	DataSent    uint64 `json:"data_sent"`
	RetxSack    uint64 `json:"retx_sack"`
	RetxNack    uint64 `json:"retx_nack"`
	RetxTimeout uint64 `json:"retx_timeout"`
	NacksSent   uint64 `json:"nacks_sent"`
	CEEchoed    uint64 `json:"ce_echoed"`
	DupData     uint64 `json:"dup_data"`
	// FreezeEpisodes counts REPS freezing episodes (balancers that have them).
	FreezeEpisodes uint64 `json:"reps_freeze_episodes"`
	// Returned counts trimmed headers switches sent back to their senders
	// (topology.queue.return_to_sender); ReturnedRecv those senders acted on as NACKs,
	// ReturnedBad those they refused (transport.Stats).
	Returned     uint64 `json:"returned"`
	ReturnedRecv uint64 `json:"returned_recv"`
	ReturnedBad  uint64 `json:"returned_bad"`
	// LossSignals counts the NACKs and returned headers that reached a sender, and
	// LossSignalDelay is their mean delay from the lost transmission (the TxTime they
	// echo) to their arrival at the sender, ns: how soon a sender learns of a trim.
	// Diagnostics, left out of Hash (as are the Returned counters while all are 0) so
	// that runs from before they existed keep their hashes.
	LossSignals     int64   `json:"loss_signals"`
	LossSignalDelay float64 `json:"loss_signal_delay_ns"`

	Hops   uint64 `json:"packet_hops"`
	Events uint64 `json:"events"`

	// Wall-clock figures: excluded from Hash.
	WallSeconds float64 `json:"wall_s"`
	HopsPerSec  float64 `json:"hops_per_s"`

	PerFlow []FlowResult  `json:"-"`
	Samples []QueueSeries `json:"-"`
	// Windows are the congestion-window traces of output.sample_windows flows (Port
	// names the flow, Bytes holds the window).
	Windows []QueueSeries `json:"-"`
	// Util is each sampled port's send rate per output.sample_util window (Port names
	// the port, Bytes holds Mbit/s; Times are the windows' ends).
	Util []QueueSeries `json:"-"`
}

// FCTSummary summarises flow completion times and slowdowns (FCT / isolated FCT).
type FCTSummary struct {
	Mean         int64   `json:"mean_ns"`       // mean FCT
	P50          int64   `json:"p50_ns"`        // median FCT
	P99          int64   `json:"p99_ns"`        // 99th percentile FCT
	Max          int64   `json:"max_ns"`        // slowest flow
	IdealMax     int64   `json:"ideal_max_ns"`  // largest isolated FCT
	MeanSlowdown float64 `json:"mean_slowdown"` // mean of FCT / isolated FCT
	P99Slowdown  float64 `json:"p99_slowdown"`  // 99th percentile slowdown
	MaxSlowdown  float64 `json:"max_slowdown"`  // largest slowdown
}

// SummariseFCT summarises the flows that completed (FCT >= 0, not failed): mean and
// percentiles of the FCT, slowdowns against each flow's Ideal, the largest ideal.
func SummariseFCT(flows []FlowResult) FCTSummary {
	var r FCTSummary
	var fcts []int64
	var slow []float64
	sum := int64(0)
	for i := range flows {
		f := &flows[i]
		if f.FCT < 0 || f.Failed {
			continue
		}
		fcts = append(fcts, f.FCT)
		slow = append(slow, float64(f.FCT)/float64(f.Ideal))
		sum += f.FCT
		r.IdealMax = max(r.IdealMax, f.Ideal)
	}
	if len(fcts) == 0 {
		return r
	}
	slices.Sort(fcts)
	slices.Sort(slow)
	q := func(p float64) int { return min(len(fcts)-1, int(p*float64(len(fcts)))) }
	r.Mean = sum / int64(len(fcts))
	r.P50, r.P99, r.Max = fcts[q(0.5)], fcts[q(0.99)], fcts[len(fcts)-1]
	ms := 0.0
	for _, x := range slow {
		ms += x
	}
	r.MeanSlowdown = ms / float64(len(slow))
	r.P99Slowdown, r.MaxSlowdown = slow[q(0.99)], slow[len(slow)-1]
	return r
}

// FlowResult is one flow. FCT is start to the sender's last ACK; RxTime start to the
// receiver holding the whole message; -1 if it did not happen.
type FlowResult struct {
	Src, Dst int   // hosts
	Size     int64 // bytes
	Phase    int   // collective step (0 otherwise)
	Start    int64 // ns
	FCT      int64 // ns, start to last ACK
	RxTime   int64 // ns, start to the receiver holding the message
	Ideal    int64 // ns, isolated FCT
	Failed   bool  // the engine failed the message
}

// QueueSeries is the data-queue occupancy of one port over time.
type QueueSeries struct {
	Port  string  // "tor0->spine1"
	Times []int64 // sample times, ns
	Bytes []int32 // data-queue bytes at each time
}

func (s *Sim) result(wall time.Duration) *Result {
	r := &Result{Scenario: s.sc.Name, Topology: s.tp.description, Workload: s.sc.Workload.Kind, Seed: s.sc.Seed,
		Hosts: len(s.hosts), CC: s.sc.Transport.CC, LB: s.sc.Transport.LB,
		Flows: len(s.flows), Completed: s.flowsDone, Failed: s.flowsFailed, SimTime: s.now,
		Ideal: s.wl.ideal, Hops: s.hops, Events: s.events, WallSeconds: wall.Seconds()}
	if s.sc.LBName != "" {
		r.LB = s.sc.LBName
	}
	if wall > 0 {
		r.HopsPerSec = float64(s.hops) / wall.Seconds()
	}
	if s.flowsDone > 0 && s.firstStart >= 0 {
		r.Completion = s.lastDone - s.firstStart
	}
	if r.Ideal > 0 && s.flowsDone+s.flowsFailed == len(s.flows) {
		r.Ratio = float64(r.Completion) / float64(r.Ideal)
	}
	for i := range s.flows {
		f := &s.flows[i]
		fr := FlowResult{Src: int(f.src), Dst: int(f.dst), Size: f.size, Phase: int(f.phase), Start: f.start,
			FCT: -1, RxTime: -1, Ideal: f.idealTx, Failed: f.failed}
		if f.tx >= 0 {
			fr.FCT = f.tx - f.start
		}
		if f.rx >= 0 {
			fr.RxTime = f.rx - f.start
		}
		r.PerFlow = append(r.PerFlow, fr)
	}
	r.FCT = SummariseFCT(r.PerFlow)
	for i := range s.tp.ports {
		p := &s.tp.ports[i]
		st := p.q.Stats()
		r.Drops += st.Drops
		r.Trims += st.Trims
		r.Returned += st.Returned
		r.Marks += st.Marks
		r.MaxQueue = max(r.MaxQueue, st.MaxDataBytes)
		r.LinkDrops += p.linkDrops
		r.FlakyDrops += p.flakyDrops
	}
	for i := range s.hosts {
		st := s.hosts[i].ep.Stats()
		r.PacketsSent += st.PacketsSent
		r.DataSent += st.DataSent
		r.RetxSack += st.RetxSack
		r.RetxNack += st.RetxNack
		r.RetxTimeout += st.RetxTimeout
		r.NacksSent += st.NacksSent
		r.CEEchoed += st.CEEchoed
		r.DupData += st.DupData
		r.ReturnedRecv += st.ReturnedRecv
		r.ReturnedBad += st.ReturnedBad
	}
	for _, l := range s.frz {
		for _, f := range l {
			r.FreezeEpisodes += f.FreezeEpisodes()
		}
	}
	if s.sc.Output.RTT {
		var h rttHist
		h.merge(&s.rtt[0])
		h.merge(&s.rtt[1])
		r.RTT = h.summary()
	}
	if s.lossSignals > 0 {
		r.LossSignals = s.lossSignals
		r.LossSignalDelay = float64(s.lossSignalNs) / float64(s.lossSignals)
	}
	r.Samples = s.smp.series(s)
	r.Windows = s.smp.windowSeries(s)
	r.Util = s.smp.utilSeries(s)
	return r
}

// WriteJSON writes the summary as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteFlowsCSV writes one row per flow.
func (r *Result) WriteFlowsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"src", "dst", "size", "phase", "start_ns", "fct_ns", "rx_ns", "ideal_ns", "failed"})
	for _, f := range r.PerFlow {
		_ = cw.Write([]string{strconv.Itoa(f.Src), strconv.Itoa(f.Dst), strconv.FormatInt(f.Size, 10), strconv.Itoa(f.Phase),
			strconv.FormatInt(f.Start, 10), strconv.FormatInt(f.FCT, 10), strconv.FormatInt(f.RxTime, 10),
			strconv.FormatInt(f.Ideal, 10), strconv.FormatBool(f.Failed)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteSamplesCSV writes the queue samples: time, then one column per sampled port.
func (r *Result) WriteSamplesCSV(w io.Writer) error { return writeSeriesCSV(w, r.Samples) }

// WriteUtilCSV writes the port send rates: window end, then one column per port (Mbit/s).
func (r *Result) WriteUtilCSV(w io.Writer) error { return writeSeriesCSV(w, r.Util) }

// WriteWindowsCSV writes the window traces: time, then one column per traced flow (bytes).
func (r *Result) WriteWindowsCSV(w io.Writer) error { return writeSeriesCSV(w, r.Windows) }

func writeSeriesCSV(w io.Writer, series []QueueSeries) error {
	cw := csv.NewWriter(w)
	head := []string{"time_ns"}
	n := 0
	for _, q := range series {
		head = append(head, q.Port)
		n = max(n, len(q.Times))
	}
	_ = cw.Write(head)
	row := make([]string, len(head))
	for i := range n {
		row[0] = ""
		for j, q := range series {
			if i < len(q.Times) {
				row[0] = strconv.FormatInt(q.Times[i], 10)
				row[j+1] = strconv.Itoa(int(q.Bytes[i]))
			} else {
				row[j+1] = ""
			}
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// Hash is a digest of everything the run computed (summary, every flow, every sample),
// leaving out wall-clock figures: equal for equal scenario and seed.
func (r *Result) Hash() string {
	c := *r
	c.WallSeconds, c.HopsPerSec = 0, 0
	c.LossSignals, c.LossSignalDelay = 0, 0
	h := sha256.New()
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(&c)
	sum := b.Bytes()
	if c.Returned == 0 && c.ReturnedRecv == 0 && c.ReturnedBad == 0 {
		sum = bytes.Replace(sum, []byte(hashLegacyReturned), nil, 1)
	}
	sum = bytes.Replace(sum, []byte(hashLegacyLoss), nil, 1)
	h.Write(sum)
	_ = r.WriteFlowsCSV(h)
	_ = r.WriteSamplesCSV(h)
	if len(r.Windows) > 0 { // runs without traces keep their hashes
		_ = r.WriteWindowsCSV(h)
	}
	if len(r.Util) > 0 {
		_ = r.WriteUtilCSV(h)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The summary fields added with return-to-sender trimming, as Hash encodes them when they
// are zero: it leaves them out, so runs keep the hashes they had before the fields existed.
const (
	hashLegacyReturned = `,"returned":0,"returned_recv":0,"returned_bad":0`
	hashLegacyLoss     = `,"loss_signals":0,"loss_signal_delay_ns":0`
)

// Summary is a few human-readable lines.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, %d hosts, %s, cc=%s lb=%s, seed %d\n", r.Scenario, r.Workload, r.Hosts, r.Topology, r.CC, r.LB, r.Seed)
	fmt.Fprintf(&b, "flows %d/%d done (%d failed); completion %.2f us, ideal %.2f us, ratio %.3f\n",
		r.Completed, r.Flows, r.Failed, float64(r.Completion)/1e3, float64(r.Ideal)/1e3, r.Ratio)
	fmt.Fprintf(&b, "fct mean %.2f us, p50 %.2f, p99 %.2f, max %.2f us; slowdown mean %.3f p99 %.3f max %.3f\n",
		float64(r.FCT.Mean)/1e3, float64(r.FCT.P50)/1e3, float64(r.FCT.P99)/1e3, float64(r.FCT.Max)/1e3,
		r.FCT.MeanSlowdown, r.FCT.P99Slowdown, r.FCT.MaxSlowdown)
	fmt.Fprintf(&b, "fabric: drops %d, trims %d, ecn marks %d, link drops %d, flaky drops %d, max queue %d B\n",
		r.Drops, r.Trims, r.Marks, r.LinkDrops, r.FlakyDrops, r.MaxQueue)
	fmt.Fprintf(&b, "hosts: retx sack %d, nack %d, timeout %d; ce echoed %d; dup data %d; reps freezing episodes %d\n",
		r.RetxSack, r.RetxNack, r.RetxTimeout, r.CEEchoed, r.DupData, r.FreezeEpisodes)
	if r.RTT != nil {
		fmt.Fprintf(&b, "rtt: %d samples, p50 %.2f us, p90 %.2f, p99 %.2f, max %.2f us\n", r.RTT.Samples,
			float64(r.RTT.P50)/1e3, float64(r.RTT.P90)/1e3, float64(r.RTT.P99)/1e3, float64(r.RTT.Max)/1e3)
	}
	if r.LossSignals > 0 {
		fmt.Fprintf(&b, "loss signals: %d NACKs and returned headers reached senders, %.2f us after the lost transmission on average; %d returned to sender (%d acted on, %d refused)\n",
			r.LossSignals, r.LossSignalDelay/1e3, r.Returned, r.ReturnedRecv, r.ReturnedBad)
	}
	if r.Events == 0 { // a testbed run: no simulated events to count
		fmt.Fprintf(&b, "run: %.2f s wall\n", r.WallSeconds)
	} else {
		fmt.Fprintf(&b, "run: %.2fM packet-hops, %.2fM events, %.2f s wall, %.2fM hops/s\n",
			float64(r.Hops)/1e6, float64(r.Events)/1e6, r.WallSeconds, r.HopsPerSec/1e6)
	}
	return b.String()
}

// sampler records queue occupancy of selected ports at a fixed interval.
type sampler struct {
	interval int64
	ports    []int32
	max      int
	times    []int64
	bytes    [][]int32
	windows  [][]int32 // per traced flow (output.sample_windows)
	utilN    int       // output.sample_util in sample intervals (0: off)
	sent     [][]int64 // per port: bytes serialised at each utilN-th sample
}

func (m *sampler) init(s *Sim, oc *OutputConfig) error {
	if oc.SampleInterval < 0 || oc.MaxSamples < 0 {
		return fmt.Errorf("output: sample_interval and max_samples must be >= 0")
	}
	m.interval = int64(oc.SampleInterval)
	if m.interval == 0 {
		return nil
	}
	m.max = oc.MaxSamples
	if m.max == 0 {
		m.max = 100000
	}
	group, names, err := oc.PortSelection()
	if err != nil {
		return err
	}
	H := int32(len(s.hosts))
	if group != "" {
		for i := range s.tp.ports {
			p := &s.tp.ports[i]
			toHost := p.peer < H
			upward := !toHost && p.owner >= H && s.tp.sws[p.owner-H].tier == 0
			if group == "all" || (group == "hosts" && toHost) || (group == "up" && upward) {
				m.ports = append(m.ports, int32(i))
			}
		}
	}
	for _, n := range names {
		na, err := s.nodeByName(n[0])
		if err != nil {
			return fmt.Errorf("output.sample_ports: %w", err)
		}
		nb, err := s.nodeByName(n[1])
		if err != nil {
			return fmt.Errorf("output.sample_ports: %w", err)
		}
		pid, ok := s.tp.portByLink[[2]int32{na, nb}]
		if !ok {
			return fmt.Errorf("output.sample_ports: no switch port %s->%s", n[0], n[1])
		}
		m.ports = append(m.ports, pid)
	}
	m.bytes = make([][]int32, len(m.ports))
	if oc.SampleWindows < 0 || oc.SampleWindows > 1024 {
		return fmt.Errorf("output.sample_windows = %d: must be in 0..1024", oc.SampleWindows)
	}
	m.windows = make([][]int32, min(oc.SampleWindows, len(s.flows)))
	if u := int64(oc.SampleUtil); u != 0 {
		if u < 0 || u%m.interval != 0 {
			return fmt.Errorf("output.sample_util = %v: must be a positive multiple of sample_interval (%v)", oc.SampleUtil, oc.SampleInterval)
		}
		m.utilN = int(u / m.interval)
		m.sent = make([][]int64, len(m.ports))
	}
	return nil
}

func (m *sampler) start(s *Sim) {
	if m.interval > 0 && (len(m.ports) > 0 || len(m.windows) > 0) {
		s.schedule(0, evSample, 0, 0)
	}
}

// window is flow f's sender's congestion window now (0: no connection).
func (s *Sim) window(f int) int32 {
	fl := &s.flows[f]
	sc := s.hosts[fl.src].conns[fl.dst]
	if sc == nil {
		return 0
	}
	ci, ok := s.hosts[fl.src].ep.ConnInfo(sc.id)
	if !ok {
		return 0
	}
	return int32(min(ci.Window, 1<<31-1))
}

func (m *sampler) tick(s *Sim) {
	m.times = append(m.times, s.now)
	for i, pid := range m.ports {
		p := &s.tp.ports[pid]
		if !s.own(p.owner) {
			continue // sampled by the other part
		}
		p.q.Advance(s.now)
		s.drainPort(pid)
		m.bytes[i] = append(m.bytes[i], int32(p.q.DataBytes()))
		if m.utilN > 0 && (len(m.times)-1)%m.utilN == 0 {
			m.sent[i] = append(m.sent[i], int64(p.q.Stats().BytesOut))
		}
	}
	for f := range m.windows {
		if s.own(s.flows[f].src) {
			m.windows[f] = append(m.windows[f], s.window(f))
		}
	}
	if len(m.times) < m.max && !s.allDone() {
		s.schedule(s.now+m.interval, evSample, 0, 0)
	}
}

func (s *Sim) portName(pid int32) string {
	p := &s.tp.ports[pid]
	return s.nodeName(p.owner) + "->" + s.nodeName(p.peer)
}

func (s *Sim) nodeName(n int32) string {
	if int(n) < len(s.hosts) {
		return "h" + strconv.Itoa(int(n))
	}
	return s.tp.sws[int(n)-len(s.hosts)].name
}

// windowSeries returns the traced flows' windows.
func (m *sampler) windowSeries(s *Sim) []QueueSeries {
	var out []QueueSeries
	for f, w := range m.windows {
		fl := &s.flows[f]
		out = append(out, QueueSeries{Port: fmt.Sprintf("flow%d h%d->h%d", f, fl.src, fl.dst), Times: m.times, Bytes: w})
	}
	return out
}

// utilSeries returns each sampled port's send rate (Mbit/s) per sample_util window.
func (m *sampler) utilSeries(s *Sim) []QueueSeries {
	if m.utilN == 0 {
		return nil
	}
	var out []QueueSeries
	win := m.interval * int64(m.utilN)
	for i, pid := range m.ports {
		q := QueueSeries{Port: s.portName(pid)}
		for k := 1; k < len(m.sent[i]); k++ {
			q.Times = append(q.Times, m.times[k*m.utilN])
			q.Bytes = append(q.Bytes, int32((m.sent[i][k]-m.sent[i][k-1])*8*1000/win)) // bits/ns * 1000 = Mbit/s
		}
		out = append(out, q)
	}
	return out
}

func (m *sampler) series(s *Sim) []QueueSeries {
	var out []QueueSeries
	for i, pid := range m.ports {
		out = append(out, QueueSeries{Port: s.portName(pid), Times: m.times, Bytes: m.bytes[i]})
	}
	return out
}
