package netbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/test/uswitch"
)

// FabricOptions add measurement to RunFabricWith. Everything they add runs on the switch
// threads without allocating (buffers are sized up front).
type FabricOptions struct {
	Sample  *SampleOptions  // queue occupancy over time (nil: none)
	Capture *CaptureOptions // frames per link for pcap files (nil: none)
}

// SampleOptions say which ports' data queues to sample and how often.
type SampleOptions struct {
	Interval int64 // ns between samples
	Max      int   // samples kept per port (default 100000)
	// Ports selects ports by switch and peer node name (nil: every port).
	Ports func(sw, peer string) bool
}

// CaptureOptions say which links to capture.
type CaptureOptions struct {
	Links []string // link names (either order); nil: every link
	Snap  int      // bytes kept of each frame (default 128: headers and our 64-byte header)
	Max   int      // capture bytes per link, records included (default 4 MiB); later frames are counted, not kept
}

// swState is a switch's share of the fabric's operations; only its switch thread touches
// it while the switch runs.
type swState struct {
	flaky []switchport.BurstLoss // per port
	smp   sampler
	caps  []*capBuf // per port, nil if not captured
}

func newSwState(t *Testbed, n int, mps []ModelPort, o FabricOptions) *swState {
	st := &swState{flaky: make([]switchport.BurstLoss, len(mps)), caps: make([]*capBuf, len(mps))}
	st.smp.t0 = -1
	if so := o.Sample; so != nil && so.Interval > 0 {
		max := so.Max
		if max <= 0 {
			max = 100000
		}
		st.smp.interval, st.smp.max = so.Interval, max
		for i, mp := range mps {
			if so.Ports == nil || so.Ports(mp.Switch, mp.Peer) {
				st.smp.ports = append(st.smp.ports, i)
				st.smp.models = append(st.smp.models, mp)
				st.smp.bytes = append(st.smp.bytes, make([]int32, 0, max))
			}
		}
		st.smp.times = make([]int64, 0, max)
	}
	if co := o.Capture; co != nil {
		snap, max := co.Snap, co.Max
		if snap <= 0 {
			snap = 128
		}
		if max <= 0 {
			max = 4 << 20
		}
		for i, sp := range t.SwitchPorts(n) {
			l := t.Plan.Links[sp.Link]
			// One capture per link: at its lower end if that is a switch, else at its upper end.
			if (t.Plan.Nodes[l.A].Switch && l.A != n) || !wanted(t, co.Links, sp.Link) {
				continue
			}
			st.caps[i] = &capBuf{link: l.Name, snap: snap, buf: make([]byte, max)}
		}
	}
	return st
}

func wanted(t *Testbed, links []string, li int) bool {
	if links == nil {
		return true
	}
	for _, n := range links {
		if t.Plan.LinkIndex(n) == li {
			return true
		}
	}
	return false
}

// hook installs the state's hooks into a switch configuration.
func (st *swState) hook(cfg *uswitch.Config) {
	cfg.Lose = func(port int, f *uswitch.Frame) bool { return st.flaky[port].Lost(f.Depart) }
	if st.smp.interval > 0 && len(st.smp.ports) > 0 {
		cfg.Tick = st.smp.tick
	}
	for _, c := range st.caps {
		if c != nil {
			cfg.Capture = func(port int, f *uswitch.Frame, now int64, _ bool) {
				if c := st.caps[port]; c != nil {
					c.add(now, f)
				}
			}
			break
		}
	}
}

// do runs fn on switch s's thread and waits for it.
func (f *Fabric) do(s int, fn func(now int64)) error {
	done := make(chan struct{})
	f.Sws[s].Do(func(now int64) { fn(now); close(done) })
	select {
	case <-done:
		return nil
	case <-time.After(2 * time.Second):
		return fmt.Errorf("switch %s did not run an operation within 2 s (stopped?)", f.Names[s])
	}
}

// onLink calls fn for every switch port on link (one for a host link, two between
// switches), on that switch's thread.
func (f *Fabric) onLink(link string, fn func(st *swState, mp ModelPort, port int, now int64)) error {
	li := f.t.Plan.LinkIndex(link)
	if li < 0 {
		return fmt.Errorf("no link %q", link)
	}
	name := f.t.Plan.Links[li].Name
	for s := range f.Sws {
		for i, mp := range f.Ports[s] {
			if mp.Link != name {
				continue
			}
			if err := f.do(s, func(now int64) { fn(f.st[s], mp, i, now) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetRate sets the port model's rate of both directions of a switch-to-switch link (the
// switch's direction of a host link), bits/s; 0 restores the configured rate. The packet
// in service keeps its end time (switchport's SetRate).
func (f *Fabric) SetRate(link string, rate int64) error {
	if rate < 0 {
		return fmt.Errorf("rate %d bit/s: must be > 0 (0 restores)", rate)
	}
	if li := f.t.Plan.LinkIndex(link); li >= 0 && rate > 0 {
		for _, ports := range f.Ports {
			for _, mp := range ports {
				if mp.Link == f.t.Plan.Links[li].Name && rate > mp.Rate {
					return fmt.Errorf("rate %v above the link's %v: degrade can only lower it", config.Rate(rate), config.Rate(mp.Rate))
				}
			}
		}
	}
	return f.onLink(link, func(_ *swState, mp ModelPort, _ int, now int64) {
		r := rate
		if r <= 0 {
			r = mp.Rate
		}
		mp.Model.SetRate(now, r)
	})
}

// Flaky makes the switch ports of link lose every frame that leaves in a loss burst:
// bursts of exponentially distributed length (mean burst) separated by exponential gaps
// (mean gap), the simulator's flaky link (test/sim faults.go). gap or burst 0 heals it.
// Lost frames count as PortStats.Lost.
func (f *Fabric) Flaky(link string, gap, burst time.Duration, seed uint64) error {
	return f.onLink(link, func(st *swState, mp ModelPort, port int, now int64) {
		b := &st.flaky[port]
		if gap <= 0 || burst <= 0 {
			b.Stop()
			return
		}
		b.Start(now, int64(gap), int64(burst), Salt(seed, mp.Switch)^uint64(port)<<20^0xf1a4)
	})
}

// sampler records the data-queue bytes of some ports of one switch at t0 + k·interval.
type sampler struct {
	interval, t0 int64 // t0: time zero on the switch clock, -1 until StartSampling
	max          int
	ports        []int
	models       []ModelPort
	times        []int64 // k·interval, ns since t0
	bytes        [][]int32
	late         int64 // largest delay of a sample behind its time
}

// tick takes the samples that are due. A loop that wakes late repeats the value it sees
// for the slots it missed, so every port of every switch has the same sample times.
func (m *sampler) tick(now int64) int64 {
	if m.t0 < 0 {
		return -1
	}
	for len(m.times) < m.max {
		at := int64(len(m.times)) * m.interval
		if now < m.t0+at {
			return m.t0 + at
		}
		m.late = max(m.late, now-m.t0-at)
		m.times = append(m.times, at)
		for i, mp := range m.models {
			mp.Model.Advance(now)
			m.bytes[i] = append(m.bytes[i], int32(mp.Model.DataBytes()))
		}
	}
	return -1
}

// StartSampling sets time zero of the samples (the workload's start) and starts them.
func (f *Fabric) StartSampling(start time.Time) error {
	for s, sw := range f.Sws {
		t0 := max(0, start.Sub(sw.Epoch()).Nanoseconds())
		if err := f.do(s, func(int64) { f.st[s].smp.t0 = t0 }); err != nil {
			return err
		}
	}
	return nil
}

// QueueSamples is one port's sampled data-queue occupancy.
type QueueSamples struct {
	Switch, Peer string  // the port: from Switch toward Peer
	Times        []int64 // ns since StartSampling's start
	Bytes        []int32 // data-queue bytes
}

// Samples returns every sampled port's series, cut to the samples all switches took, and
// the largest delay of a sample behind its time. Call it after Stop.
func (f *Fabric) Samples() ([]QueueSamples, time.Duration) {
	n, late := -1, int64(0)
	for _, st := range f.st {
		if len(st.smp.ports) > 0 {
			if n < 0 || len(st.smp.times) < n {
				n = len(st.smp.times)
			}
			late = max(late, st.smp.late)
		}
	}
	if n <= 0 {
		return nil, 0 // nothing sampled (not configured, or never started)
	}
	var out []QueueSamples
	for _, st := range f.st {
		for i, mp := range st.smp.models {
			out = append(out, QueueSamples{Switch: mp.Switch, Peer: mp.Peer, Times: st.smp.times[:n], Bytes: st.smp.bytes[i][:n]})
		}
	}
	return out, time.Duration(late)
}

// capBuf holds one link's captured frames as records: time (8 bytes, switch clock),
// original length (4), kept length (2), then the kept bytes.
type capBuf struct {
	link            string
	snap            int
	buf             []byte
	n               int
	frames, skipped uint64
}

const capRec = 14

func (c *capBuf) add(now int64, f *uswitch.Frame) {
	d := f.Data()
	k := min(len(d), c.snap)
	if c.n+capRec+k > len(c.buf) {
		c.skipped++
		return
	}
	b := c.buf[c.n:]
	binary.LittleEndian.PutUint64(b, uint64(now))
	binary.LittleEndian.PutUint32(b[8:], uint32(len(d)))
	binary.LittleEndian.PutUint16(b[12:], uint16(k))
	copy(b[capRec:], d[:k])
	c.n += capRec + k
	c.frames++
}

// CaptureStats says what a link's pcap file holds.
type CaptureStats struct {
	Link, File      string
	Frames, Skipped uint64 // written; seen after the size bound was reached
}

// WritePcaps writes one pcap file per captured link, <dir>/<link>.pcap (Ethernet,
// nanosecond timestamps, both directions of the link as its switch end saw them: frames
// received before routing, frames sent after the port's queue). Call it after Stop.
func (f *Fabric) WritePcaps(dir string) ([]CaptureStats, error) {
	var out []CaptureStats
	for s, st := range f.st {
		for _, c := range st.caps {
			if c == nil {
				continue
			}
			cs := CaptureStats{Link: c.link, File: filepath.Join(dir, c.link+".pcap"), Frames: c.frames, Skipped: c.skipped}
			if err := c.write(cs.File, f.Sws[s].Epoch()); err != nil {
				return out, err
			}
			out = append(out, cs)
		}
	}
	return out, nil
}

func (c *capBuf) write(path string, epoch time.Time) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := pcapgo.NewWriterNanos(fh)
	err = w.WriteFileHeader(uint32(c.snap), layers.LinkTypeEthernet)
	for off := 0; err == nil && off < c.n; {
		b := c.buf[off:]
		k := int(binary.LittleEndian.Uint16(b[12:]))
		ci := gopacket.CaptureInfo{Timestamp: epoch.Add(time.Duration(binary.LittleEndian.Uint64(b))),
			CaptureLength: k, Length: int(binary.LittleEndian.Uint32(b[8:]))}
		err = w.WritePacket(ci, b[capRec:capRec+k])
		off += capRec + k
	}
	return errors.Join(err, fh.Close())
}

// LiveCounters is Counters read while the switches run: each switch's model counters on
// its own thread, so a run can take exact figures between its phases.
func (f *Fabric) LiveCounters() ([]PortCounters, error) {
	var out []PortCounters
	for s, sw := range f.Sws {
		err := f.do(s, func(int64) {
			for i, mp := range f.Ports[s] {
				out = append(out, PortCounters{Switch: mp.Switch, If: mp.If, Link: mp.Link, Peer: mp.Peer,
					PortStats: sw.Stats(i), Model: mp.Model.Stats(), DataIn: mp.DataIn.Load()})
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
