// Package sim is a discrete-event fabric simulator whose hosts run the project's own
// protocol code: every host is a transport.Endpoint (with its cc, reps, ackpath and
// pacing), configured exactly as the daemon is, and the switches are test/switchport
// output ports, the same model the emulated testbed switch uses.
//
// # Model
//
// A datagram a host's engine emits is serialised by the host's NIC at the link rate (the
// engine is polled for the next one only when the NIC is free), crosses the link
// (propagation delay), traverses the switch (switch latency), and joins the output port
// the switch routes it to: down toward the destination when the switch covers it, else
// up by ECMP, a hash of (source address, destination address, UDP, source port = EV,
// destination port) under a per-switch salt. Ports queue, mark, trim and serialise as
// switchport describes; a packet is delivered to the destination engine when its last
// bit arrives. A packet-hop is one packet crossing one link.
//
// Time is virtual, int64 nanoseconds; the event queue orders by (time, scheduling
// order), all randomness comes from seeded generators, and nothing iterates a map on
// the way to a result, so a scenario and seed give the same output bit for bit. A
// fabric with two halves runs as two parts in lock-step windows (shard.go), on one
// goroutine or two (Scenario.Sim.Shards) with the same result.
//
// Packets carry only their headers (a data packet's payload bytes are never looked at by
// the fabric, so they are not stored: the receiving engine is handed zeros), packets and
// events are pooled, and message buffers are shared, so memory grows with the number
// of hosts and packets in flight, not with the bytes moved.
package sim

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"time"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// hdrCap is the number of datagram bytes a packet stores: a whole control packet
// (the largest is an ACK) or a data packet's header.
const hdrCap = wire.MaxAckLen

// hdrCapNoINT is hdrCap without an ACK's INT echo: the slots of a fabric without INT
// packets stay as small as before the extension.
const hdrCapNoINT = wire.MaxAckLen - wire.INTHdrLen - wire.INTHopLen*wire.MaxINTHops

// Port of every host's engine and the UDP destination port hashed by ECMP. These are
// inputs of the model's hash, never a socket: they stay at the values the published results
// (docs/sim.md) were produced with, so those reproduce bit for bit. The daemons listen on
// smarttd.DefaultPort (23600) and send from the ports after it.
const (
	listenPort = 4791
	evBase     = 49152 // source port = evBase + EV (mod 2^16)
)

// pkt is what the fabric knows of a packet in flight. It travels by value through pipes
// and port queues (16 bytes: at 1,024 hosts these entries are read long after they were
// written, from memory rather than cache, so their size is what forwarding costs); the
// datagram bytes live in a slot (Sim.slot(id)) and are only touched by the sending and
// receiving hosts (and when a port trims the packet). What needs no field is derived: a
// data packet is one whose slot is a data header (id&ctlSlot == 0), the bytes stored are
// the data header or the whole control packet, and a trimmed packet (FlagTrimmed in its
// header) carries the trim DSCP.
type pkt struct {
	id  int32  // slot of the datagram bytes (Sim.slot)
	sf  uint32 // source host (low 24 bits; addresses are 10.x.y.z) | ECN << 24 | ect << 26
	dst int32  // host
	n   uint16 // datagram length (<= 65,507)
	ev  uint16
}

const (
	sfHost = 1<<24 - 1
	sfECN  = 24
	sfECT  = 1 << 26
	sfRet  = 1 << 27 // a trimmed header returned to its sender
	sfPrio = 1 << 28 // a trimmed header queued as control at every port (returned, or QueueConfig.TrimmedPriority)
)

func (p *pkt) src() int32 { return int32(p.sf & sfHost) }
func (p *pkt) ecn() uint8 { return uint8(p.sf>>sfECN) & 3 }
func (p *pkt) ect() bool  { return p.sf&sfECT != 0 }
func (p *pkt) data() bool { return p.id&ctlSlot == 0 }
func (p *pkt) setCE()     { p.sf |= uint32(transport.CE) << sfECN }

// queuedAsData says whether ports queue p as data (trimmable): data packets other than
// trimmed headers that travel at control priority (returned ones, and all of them with
// QueueConfig.TrimmedPriority).
func (p *pkt) queuedAsData() bool { return p.id&ctlSlot == 0 && p.sf&sfPrio == 0 }

// pipe is one direction of a link: packets in flight on it, in departure order. All
// take the same time to cross, so they arrive in that order, and the pipe needs only one
// event (for its head) however many packets it holds. This keeps the event queue as
// small as the number of busy links.
type pipe struct {
	ring []pipeEntry
	head int32
	size int32
	to   int32 // node at the far end
	lat  int32 // from the last bit out to the packet's arrival at the far end's queue, ns
	// A pipe is a cache line: neighbouring pipes (the links of a core switch) are often
	// written by different halves of a sharded run.
	_ [64 - 40]byte
}

type pipeEntry struct {
	at int64
	p  pkt
}

// send puts packet id on pipe pi, arriving at time at; it schedules the pipe's event if
// the pipe was empty.
func (s *Sim) send(pi int32, pk pkt, at int64) {
	p := &s.pipes[pi]
	if int(p.size) == len(p.ring) {
		n := max(2*len(p.ring), 16)
		nr := make([]pipeEntry, n)
		for i := 0; i < int(p.size); i++ {
			nr[i] = p.ring[(int(p.head)+i)&(len(p.ring)-1)]
		}
		p.ring, p.head = nr, 0
	}
	p.ring[(int(p.head)+int(p.size))&(len(p.ring)-1)] = pipeEntry{at, pk}
	p.size++
	if p.size == 1 {
		s.schedule(at, evPipe, pi, 0)
	}
}

// pipeArrive delivers the head packet of pipe pi and schedules the next one.
func (s *Sim) pipeArrive(pi int32) {
	p := &s.pipes[pi]
	e := p.ring[p.head]
	p.head = (p.head + 1) & int32(len(p.ring)-1)
	p.size--
	if p.size > 0 {
		s.schedule(p.ring[p.head].at, evPipe, pi, 0)
	}
	decPipe := int32(len(s.tp.ports) + len(s.hosts))
	if pi < decPipe {
		s.hops++
	}
	if int(p.to) < len(s.hosts) {
		if s.decLat > 0 && !e.p.data() && pi < decPipe {
			// Feedback waits for the NIC's decision logic (a FIFO of constant delay).
			s.send(decPipe+p.to, e.p, s.now+s.decLat)
			return
		}
		s.deliver(e.p, p.to)
	} else {
		s.switchArrive(e.p, p.to)
	}
}

// port is one switch output port with the link behind it. The queue comes first and the
// port is a whole number of cache lines, so the queue's hot fields start a line; the
// flags every packet checks live in Sim.pflag (a few KiB that stay in cache).
type port struct {
	portFields
	_ [(64 - unsafe.Sizeof(portFields{})%64) % 64]byte
}

// portFields are port's fields, before the padding.
type portFields struct {
	q           switchport.Port[pkt]
	owner, peer int32 // nodes
	baseRate    int64
	flaky       switchport.BurstLoss
	linkDrops   uint64 // lost because the link was down
	flakyDrops  uint64 // lost in a loss burst
	sampleIdx   int32  // index into Sim.samples, -1: not sampled
	lastCtrlOcc int
	intx        switchport.INT // INT byte counter (only with INT packets)
}

// Port flags (Sim.pflag).
const (
	pfDown  = 1 << iota // link down: arriving packets are lost
	pfWake              // an evWake is pending
	pfFlaky             // in a flaky episode
	pfCross             // the link leads into the other part of a sharded run
)

type host struct {
	ep       *transport.Endpoint
	addr     netip.AddrPort
	ip       uint32
	tor      int32
	nicBusy  bool
	nicFree  int64 // when the NIC finishes the packet it serialises
	nicRem   int64
	nicDown  bool
	timerSet bool
	timerAt  int64
	timerGen int32
	conns    map[int32]*sconn // by destination host
	rxFlows  map[uint64]int32 // flows this host receives, by rxKey(source, message ID)
	epHeap   *[2]uintptr      // prefetch hints (engineHints): the engine's timer heap header
	epConns  uintptr          // and its connection table's header
}

// sconn is a connection a host opened, with the flows (messages) sent on it.
type sconn struct {
	id      transport.ConnID
	base    uint32  // message ID of flows[0]
	flows   []int32 // by message ID - base
	pending int     // flows not yet done on both sides
}

// Sim is one simulation run. Build it with New, run it with Run.
type Sim struct {
	sc  *Scenario
	tp  *topo
	now int64
	q   eventQueue
	// pflag holds each port's flags (pfDown...).
	pflag []uint8
	// Datagram bytes of packets in flight, in two pools: data headers and whole
	// control packets.
	dataHdrs slotPool
	ctlHdrs  slotPool
	hosts    []host
	flows    []flow
	deps     []int32 // dependents of flows, by flow.depLo..depHi
	wl       *workload
	msgBuf   []byte
	tx       []byte // PollTransmit scratch
	rx       []byte // delivery scratch for data: header, then zeros
	rxCtl    []byte // delivery scratch for control packets
	pipes    []pipe // one per port (same index), then one per host uplink, then one per host's decision delay
	decLat   int64  // emulated decision latency for control packets reaching a host
	routing  uint8  // routeECMP, routeSpray, routeAdaptive
	ovh      int
	ctlWire  int  // Scenario.ControlWireBytes
	evict    bool // ports may evict queued packets (QueueConfig.Evict)
	rts      bool // ports return trimmed headers to their senders (QueueConfig.ReturnToSender)
	trimPrio bool // trimmed headers travel at control priority (QueueConfig.TrimmedPriority)
	dhl      int  // stored bytes of a data packet: its header and INT block
	ctlCap   int  // stored bytes of a control packet (hdrCap, or hdrCapNoINT)
	ctlStr   int  // spacing of the control pool: ctlCap in whole cache lines (a packet touches as few as it needs)
	intOn    bool // data packets carry INT blocks: ports stamp them
	faults   []fault
	smp      sampler

	// Loss signals reaching senders (NACKs and returned headers): how many, and the sum of
	// their delays from the lost transmission (Result.LossSignals).
	lossSignals, lossSignalNs int64

	hops, events uint64
	flowsDone    int
	flowsFailed  int
	lastDone     int64
	firstStart   int64
	progress     io.Writer
	wallStart    time.Time
	lastProgress time.Time
	frz          [2][]freezer // by part
	rtt          [2]rttHist   // by part: output.rtt

	// Sharded runs (shard.go): the parts share the fabric's slices, each touching the
	// elements of its own nodes only.
	nodePart []int8  // by node (nil: one part)
	sh       *shards // nil: one part
	part     int8    // this part's index
	xout     []xpkt  // packets for the other part, sent this window
	xann     []xann  // flows the other part will receive, started this window
	xrel     []int32 // flows failed this window whose dependents the other part releases
	direct   *Sim    // one worker, part 1: part 0, which takes its packets at once (cross)
	winEnd   int64   // the last time of the window this part runs
	down     []bool  // by port: the link is down (every part keeps all of them)
}

// freezer is a balancer with a freezing mode (REPS) that counts its episodes.
type freezer interface{ FreezeEpisodes() uint64 }

// rxPool hands every receiving engine of a part slices of one shared buffer: the
// simulator never reads message contents, so memory stays independent of bytes in flight.
type rxPool struct{ buf *[]byte }

func (p rxPool) Get(n int) []byte {
	if n > len(*p.buf) {
		*p.buf = make([]byte, n)
	}
	return (*p.buf)[:n]
}

func (p rxPool) Put([]byte) {}

// New builds the fabric, the hosts and the workload of sc.
func New(sc *Scenario) (*Sim, error) {
	tp, err := sc.Topology.build(sc.Seed)
	if err != nil {
		return nil, err
	}
	s := &Sim{sc: sc, tp: tp, ovh: sc.WireOverhead, ctlWire: sc.ControlWireBytes, firstStart: -1, routing: routingMode(sc.Topology.Routing)}
	if sc.WireOverhead < 0 || sc.WireOverhead > 1024 {
		return nil, fmt.Errorf("wire_overhead = %d: must be in 0..1024 bytes", sc.WireOverhead)
	}
	if sc.ControlWireBytes < 0 || sc.ControlWireBytes > MaxControlWireBytes {
		return nil, fmt.Errorf("control_wire_bytes = %d: must be 0 (datagram length) or in 1..%d bytes", sc.ControlWireBytes, MaxControlWireBytes)
	}
	if sc.Deadline < 0 {
		return nil, fmt.Errorf("deadline = %v: must be >= 0", sc.Deadline)
	}
	if sc.RoutingConvergence < 0 {
		return nil, fmt.Errorf("routing_convergence = %v: must be >= 0", sc.RoutingConvergence)
	}
	s.nodePart = splitTopology(tp)
	rxBufs := [2]*[]byte{new([]byte), new([]byte)}
	tcfg := sc.Transport
	if tcfg.LinkRate == 0 {
		tcfg.LinkRate = sc.Topology.LinkRate
	}
	if tcfg.BaseRTT == 0 {
		tcfg.BaseRTT = config.Duration(max(100, s.baseRTT(tp.maxLinks, tcfg.MTU)))
	}
	if sc.PerFlowBaseRTT {
		// Entry h is the base RTT of a path crossing h switches (h+1 links).
		tcfg.SMaRTT.BaseRTTPerHop = make([]config.Duration, tp.maxLinks)
		for h := range tcfg.SMaRTT.BaseRTTPerHop {
			tcfg.SMaRTT.BaseRTTPerHop[h] = config.Duration(max(100, s.baseRTT(h+1, tcfg.MTU)))
		}
	}
	tcfg.ListenPort = listenPort
	if tcfg.Trimming != (*sc.Topology.Queue.trim()) {
		// The engine must read losses the way the fabric produces them.
		tcfg.Trimming = *sc.Topology.Queue.trim()
	}
	// Returned headers are read only when the fabric is said to return them.
	tcfg.ReturnToSender = sc.Topology.Queue.ReturnToSender && tcfg.Trimming
	if reg, ok := transport.LookupCC(tcfg.CC); ok && reg.Needs.ECN && sc.Topology.Queue.NoECN {
		// The controller's registration declares what the fabric must provide.
		return nil, fmt.Errorf("topology.queue.no_ecn = true: transport.cc = %q needs ECN marking", tcfg.CC)
	}
	if reg, ok := transport.LookupCC(tcfg.CC); ok && reg.Needs.INT {
		if sc.Topology.Queue.NoINT {
			return nil, fmt.Errorf("topology.queue.no_int = true: transport.cc = %q needs switches that stamp in-band telemetry", tcfg.CC)
		}
		tcfg.INT = true // the fabric's ports stamp INT (switchport.INT)
	}
	if tcfg.INT && sc.Topology.Queue.NoINT {
		return nil, fmt.Errorf("transport.int = true with topology.queue.no_int = true: the switches stamp no telemetry")
	}
	s.intOn, s.dhl, s.ctlCap = tcfg.INT, wire.DataHdrLen, hdrCapNoINT
	if tcfg.INT {
		s.ctlCap = hdrCap
		hops := tcfg.INTHops
		if hops == 0 {
			hops = wire.MaxINTHops
		}
		s.dhl += wire.INTLen(hops)
	}
	if err := s.sizeQueues(); err != nil {
		return nil, err
	}
	s.hosts = make([]host, tp.hosts)
	other, err := sc.HostLB.set(tp.hosts)
	if err != nil {
		return nil, err
	}
	var shared func(*rand.Rand) reps.Balancer
	var sharedCC func() cc.Controller
	for i := range s.hosts {
		h := &s.hosts[i]
		cfg, hk := tcfg, transport.Hooks{}
		if other[i] {
			cfg.LB = sc.HostLB.LB
		}
		if sc.NewTransport != nil {
			sc.NewTransport(i, &cfg, &hk)
		}
		if cfg.INT != tcfg.INT || cfg.INTHops != tcfg.INTHops {
			return nil, fmt.Errorf("host %d: transport.int must be the same on every host", i)
		}
		if cfg.Auth.Enabled() {
			// Data packets cross the fabric as headers only (payload bytes are not
			// simulated), so no seal could be checked; BenchmarkEngineAuth measures its cost.
			return nil, fmt.Errorf("transport.auth.mode = %v: not supported by the simulator, which carries packet headers only", cfg.Auth.Mode)
		}
		if shared == nil || sc.NewTransport != nil || other != nil {
			// Resolve the balancer by name once (through a throwaway endpoint) so that
			// the balancers can be wrapped: REPS reports its freezing episodes.
			probe, err := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(0, 0)), hk)
			if err != nil {
				return nil, fmt.Errorf("transport: %w", err)
			}
			shared, sharedCC = probe.Hooks().NewBalancer, probe.Hooks().NewCC
		}
		mk := shared
		part := s.partOf(int32(i))
		if sc.Output.RTT {
			mkcc, hist := sharedCC, &s.rtt[part]
			hk.NewCC = func() cc.Controller { return tapRTT(mkcc(), hist) }
		}
		hk.Buffers = rxPool{rxBufs[part]}
		if sc.Sim.Shards <= 1 {
			hk.Buffers = rxPool{rxBufs[0]} // the parts take turns on one goroutine
		}
		hk.NewBalancer = func(rng *rand.Rand) reps.Balancer {
			b := mk(rng)
			if f, ok := b.(freezer); ok {
				s.frz[part] = append(s.frz[part], f) // each part appends to its own list
			}
			return b
		}
		h.ep, err = transport.NewEndpoint(cfg, rand.New(rand.NewPCG(sc.Seed, uint64(i)+1)), hk)
		if err != nil {
			return nil, fmt.Errorf("transport: %w", err)
		}
		h.epHeap, h.epConns = engineHints(h.ep)
		h.ip = hostIP(i)
		h.addr = hostAddr(int32(i))
		h.tor = tp.hostUp[i]
		h.conns = make(map[int32]*sconn)
		h.rxFlows = make(map[uint64]int32)
	}
	s.tx = make([]byte, tcfg.MTU+s.dhl+wire.MaxAckLen)
	s.rx = make([]byte, tcfg.MTU+s.dhl+wire.MaxAckLen)
	s.ctlStr = (s.ctlCap + 63) &^ 63
	s.rxCtl = make([]byte, s.ctlCap)
	s.pipes = make([]pipe, len(tp.ports)+2*tp.hosts)
	for i := range tp.ports {
		s.pipes[i].to = tp.ports[i].peer
		s.pipes[i].lat = int32(tp.prop)
		if int(tp.ports[i].peer) >= tp.hosts {
			s.pipes[i].lat += int32(tp.swLat)
		}
	}
	for h := range tp.hosts {
		s.pipes[len(tp.ports)+h].to = tp.hostUp[h]
		s.pipes[len(tp.ports)+tp.hosts+h].to = int32(h)
	}
	s.decLat = int64(sc.DecisionLatency)
	if sc.DecisionLatency < 0 {
		return nil, fmt.Errorf("decision_latency = %v: must be >= 0", sc.DecisionLatency)
	}
	if sc.HardwareProfile != "" {
		prof, err := hwprofile.Lookup(sc.HardwareProfile)
		if err != nil {
			return nil, fmt.Errorf("hardware_profile: %w", err)
		}
		if s.decLat == 0 {
			s.decLat = prof.DecisionNs
		}
	}
	s.wl, err = s.buildWorkload(&sc.Workload, tcfg.MTU)
	if err != nil {
		return nil, err
	}
	if err := s.buildFaults(); err != nil {
		return nil, err
	}
	if err := s.smp.init(s, &sc.Output); err != nil {
		return nil, err
	}
	s.down = make([]bool, len(tp.ports))
	if err := s.initShards(); err != nil {
		return nil, err
	}
	return s, nil
}

func hostIP(i int) uint32 { return 10<<24 | uint32(i+1) }

// hostAddr is host i's address (host.addr).
func hostAddr(i int32) netip.AddrPort {
	ip := hostIP(int(i))
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), listenPort)
}

func hostOf(a netip.Addr) int32 {
	b := a.As4()
	return int32(uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) - 1
}

// sizeQueues sets every port's queue from the topology's queue configuration.
func (s *Sim) sizeQueues() error {
	tc := &s.sc.Topology
	qc := &tc.Queue
	buf := qc.Bytes
	if buf == 0 {
		bdp := float64(s.tp.rate) / 8 * float64(s.baseRTT(s.tp.maxLinks, s.sc.Transport.MTU)) / 1e9
		buf = int(qc.BDPs * bdp)
	}
	ctl := qc.ControlBytes
	if ctl == 0 {
		ctl = buf
	}
	kmin, kmax := switchport.RED(buf, qc.Kmin, qc.Kmax)
	if qc.NoECN {
		kmin, kmax = 0, 0
	}
	pc := switchport.Config{Rate: s.tp.rate, DataBytes: buf, ControlBytes: ctl, KminBytes: kmin, KmaxBytes: kmax,
		Trim: *qc.trim(), TrimBytes: qc.TrimBytes, Evict: qc.Evict, EvictNewest: qc.EvictNewest,
		ReturnToSender: qc.ReturnToSender}
	if qc.ReturnToSender && !*qc.trim() {
		return fmt.Errorf("topology.queue.return_to_sender needs trim: true")
	}
	s.evict = qc.Evict > 0
	s.rts = qc.ReturnToSender
	s.trimPrio = qc.TrimmedPriority
	s.pflag = make([]uint8, len(s.tp.ports))
	for i := range s.tp.ports {
		p := &s.tp.ports[i]
		if err := p.q.Init(pc, s.sc.Seed^uint64(i)*0x9e3779b97f4a7c15); err != nil {
			return fmt.Errorf("topology.queue: %w", err)
		}
		p.baseRate = s.tp.rate
		p.sampleIdx = -1
	}
	return nil
}

func (q *QueueConfig) trim() *bool {
	if q.Trim == nil {
		t := true
		q.Trim = &t
	}
	return q.Trim
}

// ser returns the serialisation time of a datagram of n bytes at rate.
func (s *Sim) ser(n int, rate int64) int64 {
	return int64(n+s.ovh) * 8_000_000_000 / rate
}

// MaxControlWireBytes bounds Scenario.ControlWireBytes.
const MaxControlWireBytes = 4096

// wireLen is the size packet p counts on the wire: its datagram plus the wire overhead,
// or control_wire_bytes for a control packet when set.
func (s *Sim) wireLen(p *pkt) int {
	if s.ctlWire > 0 && !p.data() {
		return s.ctlWire
	}
	return int(p.n) + s.ovh
}

// ackSer is the serialisation time of an ACK (the smallest one the engine sends).
func (s *Sim) ackSer() int64 {
	if s.ctlWire > 0 {
		return int64(s.ctlWire) * 8_000_000_000 / s.tp.rate
	}
	return s.ser(wire.AckFixedLen+8*s.sc.Transport.Ack.SackWords, s.tp.rate)
}

// baseRTT is the time from the moment a full data packet starts leaving the sender's NIC
// until its ACK has arrived, on an empty path of the given number of links: store and
// forward serialisation on every link each way, propagation and switch traversal.
func (s *Sim) baseRTT(links, mtu int) int64 {
	sw := int64(links - 1)
	return int64(links)*(s.ser(mtu+wire.DataHdrLen, s.tp.rate)+s.ackSer()+2*s.tp.prop) + 2*sw*s.tp.swLat
}

// Now returns the simulated time, ns.
func (s *Sim) Now() int64 { return s.now }

// schedule pushes an event.
func (s *Sim) schedule(at int64, kind evKind, id, arg int32) {
	s.q.push(at, mkVal(kind, id, arg))
}

// ctlSlot marks a slot id of the control-packet pool (the others hold data headers).
const ctlSlot = 1 << 30

// allocPkt returns a free slot for a data header or, with ctl, a whole control packet.
func (s *Sim) allocPkt(ctl bool) int32 {
	if ctl {
		return s.ctlHdrs.alloc(s.ctlStr) | ctlSlot
	}
	return s.dataHdrs.alloc(s.dhl)
}

func (s *Sim) freePkt(id int32) {
	if id&ctlSlot != 0 {
		s.ctlHdrs.free = append(s.ctlHdrs.free, id&^ctlSlot)
	} else {
		s.dataHdrs.free = append(s.dataHdrs.free, id)
	}
}

// slot returns the stored bytes of packet slot id.
func (s *Sim) slot(id int32) []byte {
	if id&ctlSlot != 0 {
		return s.ctlHdrs.get(id&^ctlSlot, s.ctlStr)[:s.ctlCap]
	}
	return s.dataHdrs.get(id, s.dhl)
}

// slotPool holds records of a fixed size in chunks, so that growing it never copies
// (at 1,024 hosts the pools reach tens of MiB).
type slotPool struct {
	chunks [][]byte
	n      int32   // records handed out
	free   []int32 // LIFO: the record reused is the one just freed
}

const slotChunkBits = 10

// alloc returns a free record of size bytes (the same size at every call).
func (p *slotPool) alloc(size int) int32 {
	if k := len(p.free); k > 0 {
		id := p.free[k-1]
		p.free = p.free[:k-1]
		return id
	}
	if int(p.n>>slotChunkBits) == len(p.chunks) {
		p.chunks = append(p.chunks, make([]byte, size<<slotChunkBits))
	}
	p.n++
	return p.n - 1
}

// get returns record id, of size bytes.
func (p *slotPool) get(id int32, size int) []byte {
	o := int(id&(1<<slotChunkBits-1)) * size
	return p.chunks[id>>slotChunkBits][o : o+size : o+size]
}

// Run processes events until the workload is complete, nothing is left to do, or the
// deadline passes; it returns the results.
func (s *Sim) Run() *Result {
	deadline := int64(s.sc.Deadline)
	if deadline == 0 {
		deadline = 10_000_000_000
	}
	s.wallStart = time.Now()
	s.lastProgress = s.wallStart
	if s.sh != nil {
		s.runShards(deadline)
		return s.result(time.Since(s.wallStart))
	}
	s.start()
	for s.q.len() > 0 && s.flowsDone+s.flowsFailed < len(s.flows) {
		e, ok := s.q.popUntil(deadline)
		if !ok {
			break
		}
		s.step(e)
		if s.progress != nil && s.events&0xfffff == 0 {
			s.printProgress()
		}
	}
	return s.result(time.Since(s.wallStart))
}

// SetProgress makes Run print a progress line to w every few seconds.
func (s *Sim) SetProgress(w io.Writer) { s.progress = w }

func (s *Sim) printProgress() {
	t := time.Now()
	if t.Sub(s.lastProgress) < 2*time.Second {
		return
	}
	s.lastProgress = t
	wall := t.Sub(s.wallStart).Seconds()
	fmt.Fprintf(s.progress, "sim %s: t=%.1fus flows %d/%d done, %d failed, %.2fM hops, %.2fM hops/s\n",
		s.sc.Name, float64(s.now)/1e3, s.flowsDone, len(s.flows), s.flowsFailed,
		float64(s.hops)/1e6, float64(s.hops)/wall/1e6)
}

func (s *Sim) step(e event) {
	s.now = e.at()
	s.events++
	s.q.lookahead()
	s.prefetchFor(s.q.pfBack(0), 0)
	s.prefetchFor(s.q.pfBack(3), 1)
	s.prefetchFor(s.q.pfBack(6), 2)
	switch e.kind() {
	case evPipe:
		s.pipeArrive(e.id())
	case evWake:
		p := &s.tp.ports[e.id()]
		s.pflag[e.id()] &^= pfWake
		p.q.Advance(s.now)
		s.drainPort(e.id())
	case evNIC:
		s.nicDone(e.id())
	case evTimer:
		s.onTimer(e.id(), e.arg())
	case evStart:
		s.startFlow(e.id())
	case evFault:
		s.onFault(e.id(), e.arg())
	case evRoute:
		s.recomputeRoutes()
	case evSample:
		s.smp.tick(s)
	}
}

// prefetchFor starts loading what event e, a few events ahead, will read: stage 0 the
// records it reads first (a pipe, a port), stage 1 what they point to (the packet at the
// pipe's head, the queue entry served next), stage 2 where that packet goes (the output
// port, the delivered header). Handling an event takes longer than a cache miss, so
// a few events ahead is enough.
func (s *Sim) prefetchFor(e event, stage int) {
	id := e.id()
	switch e.kind() {
	case evPipe:
		p := &s.pipes[id]
		switch stage {
		case 0:
			prefetch(uintptr(unsafe.Pointer(p)))
		case 1:
			if p.size > 0 {
				prefetch(uintptr(unsafe.Pointer(&p.ring[p.head])))
			}
		case 2:
			if p.size == 0 {
				return
			}
			pk := &p.ring[p.head].p
			if int(p.to) < len(s.hosts) {
				a := uintptr(unsafe.Pointer(&s.slot(pk.id)[0]))
				if pk.data() {
					prefetch(a)
				} else {
					prefetchN(a, 3) // up to 192 bytes of an ACK
				}
				h := &s.hosts[p.to]
				prefetchN(uintptr(unsafe.Pointer(h)), 2)
				prefetch(h.epConns)
				return
			}
			if out := s.route(pk, p.to); out >= 0 {
				s.prefetchPort(out)
			}
		}
	case evNIC, evTimer:
		// nicDone and onTimer ask the engine for its next deadline first.
		switch stage {
		case 0:
			prefetchN(uintptr(unsafe.Pointer(&s.hosts[id])), 2)
		case 1:
			prefetchN(uintptr(unsafe.Pointer(s.hosts[id].epHeap)), 2)
		case 2:
			if a := timerTop(s.hosts[id].epHeap); a != 0 {
				prefetch(a)
			}
		}
	case evWake:
		switch stage {
		case 0:
			s.prefetchPort(id)
		case 1:
			if a := s.tp.ports[id].q.NextEntry(); a != 0 {
				prefetch(a)
			}
			if p := &s.pipes[id]; len(p.ring) > 0 && s.pflag[id]&pfCross == 0 {
				prefetch(uintptr(unsafe.Pointer(&p.ring[int(p.head+p.size)&(len(p.ring)-1)])))
			}
		}
	}
}

// prefetchPort loads the lines of port pid's queue that a packet touches, and its pipe.
func (s *Sim) prefetchPort(pid int32) {
	prefetchN(uintptr(unsafe.Pointer(&s.tp.ports[pid])), 4)
	if s.pflag[pid]&pfCross == 0 { // else the other part's
		prefetch(uintptr(unsafe.Pointer(&s.pipes[pid])))
	}
}

// service polls host i's engine while its NIC is free and re-arms its timer.
func (s *Sim) service(i int32) {
	h := &s.hosts[i]
	for !h.nicBusy {
		tx, ok := h.ep.PollTransmit(s.now, s.tx)
		if !ok {
			break
		}
		var pk pkt
		p := &pk
		data := !tx.Control && tx.Type == wire.TypeData
		id := s.allocPkt(!data)
		p.id = id
		p.n = uint16(tx.N)
		ecn := tx.ECN & 3
		p.sf = uint32(i) | uint32(ecn)<<sfECN
		if ecn == transport.ECT0 || ecn == transport.ECT1 {
			p.sf |= sfECT
		}
		p.dst = hostOf(tx.To.Addr())
		p.ev = tx.EV
		st := tx.N
		if data {
			st = s.dhl
		}
		if st > s.ctlCap {
			panic(fmt.Sprintf("sim: %d-byte control datagram exceeds %d", st, s.ctlCap))
		}
		copy(s.slot(id)[:st], s.tx[:st])
		if p.dst < 0 || int(p.dst) >= len(s.hosts) {
			s.freePkt(id) // not a host of this fabric
			continue
		}
		bitNs := int64(s.wireLen(p))*8_000_000_000 + h.nicRem
		d := bitNs / s.tp.rate
		h.nicRem = bitNs % s.tp.rate
		h.nicBusy = true
		h.nicFree = s.now + d
		s.schedule(h.nicFree, evNIC, i, 0)
		if h.nicDown {
			s.freePkt(id)
			break
		}
		s.send(int32(len(s.tp.ports))+i, pk, s.now+d+s.tp.prop+s.tp.swLat)
	}
	s.arm(i)
}

// nicDone runs host i's expired timers, if any, and polls it for the next datagram.
func (s *Sim) nicDone(i int32) {
	h := &s.hosts[i]
	h.nicBusy = false
	if t, ok := h.ep.NextTimeout(); ok && t <= s.now {
		h.ep.HandleTimeout(s.now)
		s.service(i)
		s.engineEvents(i)
		return
	}
	s.service(i)
}

// arm makes sure a timer event fires no later than host i's engine asks.
func (s *Sim) arm(i int32) {
	h := &s.hosts[i]
	t, ok := h.ep.NextTimeout()
	if !ok {
		return
	}
	if t < s.now {
		t = s.now
	}
	if h.nicBusy && t <= h.nicFree {
		// What is due may be a transmission, which cannot happen before the NIC is
		// free; the NIC's completion runs the timer (nicDone), so no event is needed.
		return
	}
	if h.timerSet && h.timerAt <= t {
		return // the pending event fires early and re-arms
	}
	h.timerGen = (h.timerGen + 1) & idMask
	h.timerSet = true
	h.timerAt = t
	s.schedule(t, evTimer, i, h.timerGen)
}

func (s *Sim) onTimer(i, gen int32) {
	h := &s.hosts[i]
	if !h.timerSet || gen != h.timerGen {
		return
	}
	h.timerSet = false
	t, ok := h.ep.NextTimeout()
	if !ok {
		return
	}
	if t > s.now {
		s.arm(i)
		return
	}
	h.ep.HandleTimeout(s.now)
	s.service(i)
	s.engineEvents(i)
}

// switchArrive routes packet id at switch node and offers it to the output port.
func (s *Sim) switchArrive(pk pkt, node int32) {
	p := &pk
	id := p.id
	out := s.route(p, node)
	if out < 0 {
		s.tp.ports[s.tp.sws[node-int32(len(s.hosts))].up[0]].linkDrops++ // no route at all
		s.freePkt(id)
		return
	}
	pt := &s.tp.ports[out]
	if s.pflag[out]&pfDown != 0 {
		pt.linkDrops++
		s.freePkt(id)
		return
	}
	switch pt.q.Arrive(s.now, pk, s.wireLen(p), p.queuedAsData(), p.ect()) {
	case switchport.Dropped:
		s.freePkt(id)
	case switchport.Returned:
		s.returnToSender(pk, node)
	}
	if s.rts {
		for {
			v, ok := pt.q.PopReturned()
			if !ok {
				break
			}
			s.returnToSender(v, node)
		}
	}
	if s.evict {
		for {
			v, ok := pt.q.PopEvicted()
			if !ok {
				break
			}
			s.freePkt(v.id)
		}
	}
	s.drainPort(out)
}

// returnToSender turns data packet pk, which a port of switch node would have trimmed,
// into its trimmed header addressed back to its sender (source and destination swapped,
// FlagTrimmed|FlagReturned, not ECN-capable) and sends it from node toward the sender at
// control priority. It is lost only if a control queue on the way is full.
func (s *Sim) returnToSender(pk pkt, node int32) {
	p := &pk
	src := p.src()
	p.sf = uint32(p.dst) | sfRet | sfPrio
	p.dst = src
	p.n = uint16(s.dhl)
	s.slot(p.id)[1] |= byte(wire.FlagTrimmed | wire.FlagReturned)
	out := s.route(p, node)
	if out < 0 {
		s.tp.ports[s.tp.sws[node-int32(len(s.hosts))].up[0]].linkDrops++
		s.freePkt(p.id)
		return
	}
	pt := &s.tp.ports[out]
	if s.pflag[out]&pfDown != 0 {
		pt.linkDrops++
		s.freePkt(p.id)
		return
	}
	if pt.q.Arrive(s.now, pk, s.wireLen(p), false, false) == switchport.Dropped {
		s.freePkt(p.id)
	}
	s.drainPort(out)
}

// route returns the output port packet p takes at switch node (-1: no route): down
// toward its destination when the switch covers it, else up by ECMP.
func (s *Sim) route(p *pkt, node int32) int32 {
	sw := &s.tp.sws[node-int32(len(s.hosts))]
	if p.dst >= sw.lo && p.dst < sw.hi {
		return sw.down[(p.dst-sw.lo)/sw.span]
	}
	hsh := switchport.Hash4(sw.salt, hostIP(int(p.src())), hostIP(int(p.dst)), 17, evBase+p.ev, listenPort)
	mask := ^uint64(0)
	if sw.allowed != nil {
		mask = sw.allowed[p.dst/int32(s.tp.perToR)]
		if s.routing == routeECMP {
			return sw.pickAllowed(hsh, p.dst/int32(s.tp.perToR))
		}
	}
	switch s.routing {
	case routeSpray, routeRoundRobin:
		return sw.spray(mask, s.routing == routeRoundRobin)
	case routeAdaptive:
		return s.leastLoaded(sw, mask, hsh)
	case routeAdaptiveRandom:
		sw.rr++
		return s.leastLoaded(sw, mask, switchport.HashWords(sw.salt, uint64(sw.rr)))
	}
	return sw.up[switchport.Pick(hsh, len(sw.up))]
}

// spray returns a usable up port at random (uniform, a fresh draw per packet from the
// switch's own sequence) or, round robin, the next usable one in turn (-1: none).
func (sw *swtch) spray(mask uint64, roundRobin bool) int32 {
	n := uint32(len(sw.up))
	for range 2 * n {
		var i uint32
		if roundRobin {
			i = sw.rr % n
		} else {
			i = uint32(switchport.Pick(switchport.HashWords(sw.salt, uint64(sw.rr)), int(n)))
		}
		sw.rr++
		if mask&(1<<i) != 0 {
			return sw.up[i]
		}
	}
	return sw.spray(mask, true) // a random draw kept missing the usable ports: scan
}

// leastLoaded returns the usable up port with the fewest bytes queued, scanning from the
// one the hash picks so that ties spread like ECMP (-1: none). A port's occupancy is as
// of its last event (a switch sees its queues as they were last served), which is what
// a switch's own load estimate lags by too.
func (s *Sim) leastLoaded(sw *swtch, mask uint64, h uint64) int32 {
	n := len(sw.up)
	first := switchport.Pick(h, n)
	best, bestQ := int32(-1), int(^uint(0)>>1)
	for k := range n {
		i := (first + k) % n
		if mask&(1<<i) == 0 {
			continue
		}
		q := &s.tp.ports[sw.up[i]].q
		if b := q.DataBytes() + q.ControlBytes(); b < bestQ {
			best, bestQ = sw.up[i], b
		}
	}
	return best
}

func (sw *swtch) pickAllowed(h uint64, group int32) int32 {
	m := sw.allowed[group]
	n := popcount(m)
	if n == 0 {
		return -1
	}
	k := switchport.Pick(h, n)
	for i := range sw.up {
		if m&(1<<i) != 0 {
			if k == 0 {
				return sw.up[i]
			}
			k--
		}
	}
	return -1
}

// drainPort forwards the packets port pid has started serialising and schedules its next wake.
func (s *Sim) drainPort(pid int32) {
	pt := &s.tp.ports[pid]
	pf := &s.pflag[pid]
	for {
		d, ok := pt.q.Pop()
		if !ok {
			break
		}
		p := &d.Item
		if d.Marked {
			p.setCE()
		}
		if d.Trimmed {
			// The header and its INT block survive (wire.TrimmedLen).
			p.n = uint16(s.dhl)
			s.slot(p.id)[1] |= byte(wire.FlagTrimmed) // deliver gives it the trim DSCP
			if s.trimPrio {
				p.sf |= sfPrio
			}
		}
		if s.intOn {
			if p.data() {
				wire.StampINT(s.slot(p.id), pt.intx.Record(d.Start, d.Size, d.QLen, pt.q.Rate()))
			} else {
				pt.intx.Count(d.Size)
			}
		}
		if *pf&(pfDown|pfFlaky|pfCross) != 0 {
			if *pf&pfDown != 0 {
				pt.linkDrops++
				s.freePkt(p.id)
				continue
			}
			if *pf&pfFlaky != 0 && pt.flaky.Lost(d.Start) {
				pt.flakyDrops++
				s.freePkt(p.id)
				continue
			}
			if *pf&pfCross != 0 {
				s.cross(pid, d.End, *p)
				continue
			}
		}
		s.send(pid, *p, d.End+int64(s.pipes[pid].lat))
	}
	if *pf&pfWake == 0 {
		if t, ok := pt.q.NextStart(); ok {
			*pf |= pfWake
			s.schedule(t, evWake, pid, 0)
		}
	}
}

// deliver hands packet id to host i's engine.
func (s *Sim) deliver(pk pkt, i int32) {
	p := &pk
	id := p.id
	h := &s.hosts[i]
	if h.nicDown {
		s.freePkt(id)
		return
	}
	n := int(p.n)
	buf := s.rxCtl // control packets are stored whole
	st := n
	if p.data() {
		buf = s.rx // only the header is ever written here: the payload stays zeros
		st = s.dhl
	}
	copy(buf, s.slot(id)[:st])
	if p.sf&sfRet != 0 || !p.data() && wire.Type(buf[0]&0x0f) == wire.TypeNack {
		s.lossSignal(buf[:n], p.data())
	}
	src := hostAddr(p.src()) // not the source's host record: it may be the other part's
	ecn, dscp := p.ecn(), uint8(0)
	if p.data() && buf[1]&byte(wire.FlagTrimmed) != 0 {
		dscp = s.sc.Transport.TrimDSCP
	}
	s.freePkt(id)
	h.ep.HandlePacket(s.now, buf[:n], transport.RxMeta{From: src, RxTime: s.now, ECN: ecn, DSCP: dscp})
	s.service(i)
	s.engineEvents(i)
}

// lossSignal records the delay of a NACK or returned header reaching a sender: from the
// lost transmission (the TxTime it echoes) to now.
func (s *Sim) lossSignal(b []byte, returned bool) {
	var tx int64
	switch {
	case returned && len(b) >= wire.DataHdrLen:
		tx = int64(binary.BigEndian.Uint64(b[56:]))
	case !returned && len(b) >= wire.NackLen:
		tx = int64(binary.BigEndian.Uint64(b[40:]))
	default:
		return
	}
	if tx > 0 && tx <= s.now {
		s.lossSignals++
		s.lossSignalNs += s.now - tx
	}
}

// engineEvents drains host i's engine events: message completions drive the workload.
func (s *Sim) engineEvents(i int32) {
	h := &s.hosts[i]
	for {
		ev, ok := h.ep.PollEvent()
		if !ok {
			return
		}
		switch ev.Kind {
		case transport.MessageReceived:
			// The receiver's own table (the sender's connection may be in the other part).
			k := rxKey(hostOf(ev.Peer.Addr()), ev.MsgID)
			if f, ok := h.rxFlows[k]; ok {
				delete(h.rxFlows, k)
				s.flowRx(f)
			}
		case transport.MessageSent:
			if f := s.flowOf(i, hostOf(ev.Peer.Addr()), ev.MsgID); f >= 0 {
				s.flowTx(f)
			}
		case transport.MessageFailed:
			if f := s.flowOf(i, hostOf(ev.Peer.Addr()), ev.MsgID); f >= 0 {
				s.flowFail(f)
			}
		}
	}
}

func (s *Sim) flowOf(src, dst int32, msg uint32) int32 {
	if src < 0 || int(src) >= len(s.hosts) {
		return -1
	}
	c := s.hosts[src].conns[dst]
	if c == nil {
		return -1
	}
	k := int(msg - c.base)
	if k < 0 || k >= len(c.flows) {
		return -1
	}
	return c.flows[k]
}

func popcount(m uint64) int {
	n := 0
	for m != 0 {
		m &= m - 1
		n++
	}
	return n
}

// Whole tells the engine to take each message's buffer whole on its first packet: this
// pool's memory does not grow with what it hands out (transport.WholeBufferPool).
func (p rxPool) Whole() bool { return true }
