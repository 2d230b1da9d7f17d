// Package testnet is an in-memory, virtual-time, deterministic network that drives
// sans-IO transport endpoints (anything implementing Host, such as *transport.Endpoint).
//
// # Model
//
// All hosts hang off one output-queued switch. A datagram from host A to host B goes
//
//	A's NIC -> link impairments -> switch egress port toward B -> Latency + Delay -> B
//
// with these stages:
//
//   - NIC: with HostConfig.NICRate > 0 the NIC serialises A's transmissions: the network
//     polls one datagram, the datagram leaves the NIC wire-size*8/NICRate ns later and
//     only then is the next one polled. With NICRate 0 the network polls until the host
//     has nothing more to send, and every datagram leaves at once.
//   - Impairments (Config, the same for every pair of hosts), in this order: a
//     destination with no attached host (counted Undeliverable, dropped); Loss (a packet
//     is lost with probability Loss, optionally only packets LossFilter accepts); Dup (a
//     second copy follows the original); reordering (each copy decided independently,
//     see below).
//   - Egress port (HostConfig.Port, one per destination host). With Rate 0 it is a wire
//     of infinite speed: no queue, no marking. Otherwise it is a test/switchport.Port, the
//     queue model the simulator (test/sim) uses: a strict-priority control queue
//     (ControlBytes) and a FIFO data queue (BufferBytes), served one packet at a time at
//     Rate, control first, with RED ECN marking (KminBytes..KmaxBytes, ECT(0)/ECT(1)
//     packets become CE) and, with Trim, trimming; see that package for the model. A
//     packet is data (data queue, trimmable, markable) if it is a DATA packet (Transmit.Type
//     DATA, or first byte version 1/type DATA) not sent with Transmit.Control; anything
//     else is control. A trimmed packet is cut to wire.DataHdrLen bytes (and its INT
//     block, if it has one and Config.INT is on), gets wire.FlagTrimmed in byte 1 and DSCP
//     Config.TrimDSCP, and joins the control queue. Each port's RED decisions come from
//     its own generator, seeded from New's seed and the port's place.
//   - Then the port's Latency (switch traversal) and the one-way propagation Delay.
//
// # Parallel paths
//
// With HostConfig.Paths, traffic toward the host first crosses one of N parallel paths
// (the uplinks of a two-tier fabric) and only then the host's egress port:
//
//	impairments -> path i (its own queue: PortConfig as above) -> path Latency -> egress port -> B
//
// i is a hash of the sender's and the receiver's addresses and the datagram's EV
// (Transmit.EV, the UDP source port of the real protocol), as ECMP hashes the 5-tuple;
// PathOf tells which. Each path has its own rate, buffer, RED marking and trimming, and
// may fail (PathConfig.FailAt: from then on every packet reaching the path, queued on it
// or on its wire is dropped, until RecoverAt) or slow down (DegradeAt: the rate becomes
// DegradedRate). A trimmed header is forwarded as control traffic at later hops.
// PathStats counts the packets each path received.
//
// Sizes used for serialisation and buffer accounting are the datagram length plus
// Config.Overhead (lower-layer headers, 0 by default). Times are nanoseconds, rates bits
// per second. The host receives RxMeta{From: the sender's attached address, RxTime: the
// arrival time, ECN: as sent or CE if marked, DSCP: 0, or Config.TrimDSCP if trimmed}.
//
// # Reordering
//
// Two exact, alternative models are offered:
//
//   - Time (ReorderDepth == 0): with probability ReorderProb a packet is delayed by an
//     extra time drawn uniformly from [0, ReorderDelay] before it reaches the egress port,
//     so packets sent during that time overtake it. For a flow paced at r packets per
//     second (one every 1e9/r ns, e.g. by its NICRate), ReorderDelay = N*1e9/r gives
//     reordering up to N packets deep: a packet is overtaken by at most N later packets
//     (fewer than N when ties are exact). The depth scales with the rate, and a burst sent
//     at one instant can overtake a delayed packet whole, so use depth mode when the bound
//     must hold whatever the traffic.
//   - Depth (ReorderDepth = N > 0): with probability ReorderProb a packet is held back
//     and released right after k further packets of the same flow (same source and
//     destination host) passed the impairment stage, k drawn uniformly from [1, N]; it
//     is released after ReorderTimeout (default 1 ms) if fewer pass. A held packet is
//     therefore overtaken by at most k <= N packets, exactly k if no other packet of the
//     flow was held at the same time, whatever the sending rate or burstiness. "Reordering up to 100 packets
//     deep" is ReorderDepth: 100 with, say, ReorderProb: 0.01. ReorderDelay is ignored.
//
// Reordering happens before the egress port; the port's data queue is FIFO, so it keeps
// the order it sees (only the control queue overtakes queued data).
//
// # Driving hosts
//
// After every interaction with a host (a packet delivered, a timer fired, a datagram's
// NIC serialisation finished, Wake) the network polls the host's transmits, respecting its
// NIC, and then re-reads NextTimeout. A host's timer is one heap event; when the host
// asks for an earlier time a new event is pushed and the old one is cancelled lazily
// (per-host generation counter); when it asks for a later time the pending event fires
// early and re-arms itself. HandleTimeout is only called once NextTimeout <= now.
//
// Events are kept in a binary heap keyed by (time, sequence number), and all randomness
// comes from one math/rand/v2 PCG generator seeded by New's seed (the ports' RED
// generators are seeded from the same seed), so the same seed, the
// same configuration and the same host behaviour give the same event order, arrivals and
// counters. Packet buffers (size-classed free lists) and events (a slab of slots named by
// small pointer-free heap entries) are recycled: forwarding allocates nothing in steady
// state. Queue occupancy can be sampled every PortConfig.SampleInterval ns into a
// preallocated slice (Samples); the samples are filled in when the queue changes, so
// sampling adds no events.
//
// RunUntil always stops at its deadline, so a test cannot hang on a livelock, and leaves
// the clock at the deadline unless done held (do not pass math.MaxInt64 without a done
// that will hold).
//
// # Usage
//
//	net := testnet.New(testnet.Config{Delay: 2_000}, 1)
//	net.Attach(addrA, epA, testnet.HostConfig{NICRate: 100e9})
//	net.Attach(addrB, epB, testnet.HostConfig{Port: testnet.PortConfig{
//		Rate: 100e9, BufferBytes: 1 << 20, ControlBytes: 64 << 10,
//		KminBytes: 100 << 10, KmaxBytes: 400 << 10, Trim: true,
//	}})
//	// ... call into a host directly (e.g. queue a message on epA), then
//	net.Wake(addrA) // let the network poll it at Now()
//	ok := net.RunUntil(net.Now()+10_000_000, func() bool { return delivered })
//
// Stats, PortStats and Samples expose the counters. A host that keeps returning true from
// PollTransmit without a NICRate would make the network poll it forever; give it one.
package testnet

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"

	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Host is what the network drives: *transport.Endpoint satisfies it.
type Host interface {
	HandlePacket(now int64, b []byte, m transport.RxMeta)          // b is only valid during the call
	HandleTimeout(now int64)                                       // the time NextTimeout named has come
	PollTransmit(now int64, buf []byte) (transport.Transmit, bool) // writes one datagram into buf
	NextTimeout() (int64, bool)                                    // earliest time the host wants HandleTimeout; false = none
}

// DefaultReorderTimeout is the longest a packet is held in depth reordering when Config.ReorderTimeout is 0.
const DefaultReorderTimeout = 1_000_000

// DefaultSampleCap is the number of queue samples preallocated when PortConfig.SampleCap is 0.
const DefaultSampleCap = 1 << 16

// Config holds the link impairments and network-wide settings.
type Config struct {
	// Delay is the one-way propagation delay from any host to any other, ns.
	Delay int64
	// Loss is the probability that a packet is lost.
	Loss float64
	// LossFilter, if set, restricts Loss to the packets for which it returns true.
	LossFilter func(b []byte) bool
	// Dup is the probability that a packet is duplicated (both copies are delivered).
	Dup float64
	// ReorderProb is the probability that a packet is delayed (time mode) or held (depth mode).
	ReorderProb float64
	// ReorderDelay is the maximum extra delay of a reordered packet in time mode, ns.
	ReorderDelay int64
	// ReorderDepth > 0 selects depth mode: a held packet is overtaken by at most this many packets.
	ReorderDepth int
	// ReorderTimeout releases a packet held in depth mode after this long, ns (0: DefaultReorderTimeout).
	ReorderTimeout int64
	// TrimDSCP is the DSCP a port puts on packets it trims.
	TrimDSCP uint8
	// Overhead is added to every datagram's length for serialisation and buffer accounting, bytes.
	Overhead int
	// MaxDatagram is the size of the buffer handed to PollTransmit (0: wire.DataHdrLen+wire.MaxPayload).
	MaxDatagram int
	// INT makes every port with a rate stamp an in-band telemetry record (wire.StampINT:
	// service start, bytes serialised before, data queue behind, rate) into the DATA
	// packets that carry an INT block, as test/switchport's INT does; trimming then keeps
	// the block (wire.TrimmedLen).
	INT bool
}

// HostConfig configures one attached host and the switch port toward it.
type HostConfig struct {
	// NICRate serialises the host's transmissions at this rate, bits/s (0: infinite).
	NICRate int64
	// Port is the switch egress port toward this host.
	Port PortConfig
	// Paths, if any, are parallel paths in front of Port, chosen per packet by a hash of
	// the source and destination addresses and the EV.
	Paths []PathConfig
}

// PathConfig configures one of the parallel paths toward a host.
type PathConfig struct {
	// Port is the path's queue and line (Rate 0: infinitely fast, no queue); its
	// Latency is the path's traversal time.
	Port PortConfig
	// FailAt > 0: from this time the path drops every packet that reaches it, is queued
	// on it or is on its wire, ns.
	FailAt int64
	// RecoverAt > FailAt ends the failure (0: it lasts).
	RecoverAt int64
	// DegradeAt > 0: from this time the path runs at DegradedRate (> 0), bits/s.
	DegradeAt    int64
	DegradedRate int64
}

// PathStats are the counters of one parallel path.
type PathStats struct {
	PortStats        // the path queue's counters
	Packets   uint64 // packets the hash sent down the path (failed or not)
	Bytes     uint64 // their bytes
	FailDrops uint64 // packets dropped because the path had failed
}

// PortConfig configures a switch egress port.
type PortConfig struct {
	// Rate is the port's line rate, bits/s (0: infinite, no queue).
	Rate int64
	// BufferBytes is the data-queue capacity (0: unlimited).
	BufferBytes int
	// ControlBytes is the capacity of the strict-priority control queue (0: unlimited).
	ControlBytes int
	// KminBytes: a packet leaving at most this many bytes behind in the data queue is never ECN-marked.
	KminBytes int
	// KmaxBytes: one leaving at least this many is always marked if ECT; linear between (0: no marking).
	KmaxBytes int
	// Trim cuts data packets that do not fit the data queue to wire.DataHdrLen bytes.
	Trim bool
	// Latency is the switch traversal time added after serialisation, ns.
	Latency int64
	// SampleInterval records the queue occupancy every this many ns (0: no sampling).
	SampleInterval int64
	// SampleCap is the number of samples preallocated; sampling stops when full (0: DefaultSampleCap).
	SampleCap int
}

// Stats are the network's cumulative counters.
type Stats struct {
	Sent          uint64 // datagrams polled from hosts
	Delivered     uint64 // datagrams handed to hosts
	Lost          uint64 // lost to the Loss impairment
	Duplicated    uint64 // extra copies made by the Dup impairment
	Reordered     uint64 // packets given an extra delay (time mode) or held back (depth mode)
	Dropped       uint64 // dropped at switch ports (queue full)
	Trimmed       uint64 // trimmed at switch ports
	Marked        uint64 // CE-marked at switch ports
	Undeliverable uint64 // sent to an address with no attached host
	FailDropped   uint64 // dropped by failed paths
	Events        uint64 // events processed
}

// PortStats are the counters of one switch egress port.
type PortStats struct {
	Enqueued        uint64 // packets accepted (trimmed headers included)
	Dequeued        uint64 // packets that started serialisation
	Drops           uint64 // packets dropped because their queue was full
	Trims           uint64 // data packets trimmed and queued as headers
	Marks           uint64 // packets CE-marked
	DataBytes       int    // current data-queue occupancy
	ControlBytes    int    // current control-queue occupancy
	MaxDataBytes    int    // high-water mark of DataBytes
	MaxControlBytes int    // high-water mark of ControlBytes
}

// QueueSample is a port's queue occupancy at one instant.
type QueueSample struct {
	Time    int64 // ns
	Data    int   // data-queue bytes
	Control int   // control-queue bytes
}

// Network is the simulated network. It is not safe for concurrent use.
type Network struct {
	cfg       Config
	seed      uint64
	rng       *rand.Rand
	now       int64
	seq       uint64
	heap      []heapEntry
	slab      []event
	freeSlots []int32
	hosts     []*host
	byAddr    map[netip.AddrPort]int32
	free      [numClasses]*packet
	scratch   []byte
	stats     Stats
}

type host struct {
	addr     netip.AddrPort
	h        Host
	cfg      HostConfig
	idx      int32
	nicBusy  bool
	nicRem   int64 // serialisation remainder, bit-ns mod NICRate
	timerSet bool  // a valid timer event is pending
	timerAt  int64
	timerGen uint64
	firedAt  int64 // when HandleTimeout was last called
	port     port
	paths    []path
	hash     uint64  // of the address, for path selection
	flows    []*flow // depth reordering state by destination index
	lastTo   netip.AddrPort
	lastDst  int32 // host index of lastTo; -1: none (not cached, may be attached later)
}

// port is a switch port: a switchport.Port (the simulator's queue model) when it has a
// rate, else a wire of infinite speed.
type port struct {
	cfg        PortConfig
	q          switchport.Port[*packet] // unused while cfg.Rate is 0
	intx       switchport.INT
	trimBytes  int    // the size q trims to now (it varies with a packet's INT block)
	passed     uint64 // packets that crossed an infinitely fast port
	seed       uint64 // of q's RED marking
	samples    []QueueSample
	sampleNext int64
}

type path struct {
	port
	pc                        PathConfig
	packets, bytes, failDrops uint64
}

// failed reports whether the path is down at now.
func (p *path) failed(now int64) bool {
	return p.pc.FailAt > 0 && now >= p.pc.FailAt && (p.pc.RecoverAt <= p.pc.FailAt || now < p.pc.RecoverAt)
}

type flow struct {
	passed uint64
	held   []*packet
}

type packet struct {
	buf     []byte
	n       int
	src     int32
	dst     int32 // -1: no such host
	ecn     uint8
	dscp    uint8
	class   uint8
	control bool
	data    bool // a DATA packet: trimmable
	ev      uint16
	held    bool
	gen     uint64
	target  uint64 // depth reordering: release once flow.passed reaches it
	flow    *flow
	next    *packet
}

type evKind uint8

const (
	evTimer    evKind = iota + 1 // host idx, gen
	evNIC                        // host idx: NIC finished serialising pkt
	evArrive                     // pkt reaches its egress port after a reorder delay
	evHold                       // depth reordering timeout of pkt (gen)
	evPortDone                   // pkt's last bit left port (idx, path)
	evDeliver                    // pkt arrives at its destination
	evPathOut                    // pkt leaves path (idx, path) for the egress port
)

type event struct {
	at   int64
	pkt  *packet
	gen  uint64
	idx  int32
	path int32 // evPortDone: -1 the egress port of host idx, else its path
	kind evKind
}

// New returns an empty network with the given impairments, its randomness seeded by seed.
func New(cfg Config, seed uint64) *Network {
	cfg = checkConfig(cfg)
	return &Network{
		cfg:     cfg,
		seed:    seed,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		byAddr:  make(map[netip.AddrPort]int32),
		scratch: make([]byte, cfg.MaxDatagram),
		heap:    make([]heapEntry, 0, 1024),
		slab:    make([]event, 0, 1024),
	}
}

// SetConfig replaces the impairments from now on (for example to start or end a loss
// episode); packets already past the impairment stage are not affected. MaxDatagram
// cannot change.
func (n *Network) SetConfig(cfg Config) {
	cfg = checkConfig(cfg)
	if cfg.MaxDatagram != n.cfg.MaxDatagram {
		panic("testnet: SetConfig cannot change MaxDatagram")
	}
	n.cfg = cfg
}

// Config returns the current impairments, defaults filled in.
func (n *Network) Config() Config { return n.cfg }

func checkConfig(cfg Config) Config {
	for _, p := range []float64{cfg.Loss, cfg.Dup, cfg.ReorderProb} {
		if !(p >= 0 && p <= 1) {
			panic(fmt.Sprintf("testnet: probability %v outside [0, 1]", p))
		}
	}
	if cfg.Delay < 0 || cfg.ReorderDelay < 0 || cfg.ReorderDepth < 0 || cfg.ReorderTimeout < 0 || cfg.Overhead < 0 || cfg.MaxDatagram < 0 {
		panic("testnet: negative Config field")
	}
	if cfg.MaxDatagram == 0 {
		cfg.MaxDatagram = wire.DataHdrLen + wire.MaxPayload
	}
	if c, _ := sizeClass(cfg.MaxDatagram); c >= numClasses {
		panic("testnet: MaxDatagram too large")
	}
	if cfg.ReorderTimeout == 0 {
		cfg.ReorderTimeout = DefaultReorderTimeout
	}
	return cfg
}

// Attach connects host h at address addr; hc configures its NIC and the port toward it.
func (n *Network) Attach(addr netip.AddrPort, h Host, hc HostConfig) {
	if _, dup := n.byAddr[addr]; dup {
		panic("testnet: address attached twice: " + addr.String())
	}
	pc := hc.Port
	if hc.NICRate < 0 || pc.Rate < 0 || pc.BufferBytes < 0 || pc.ControlBytes < 0 || pc.Latency < 0 || pc.SampleInterval < 0 || pc.SampleCap < 0 {
		panic("testnet: negative HostConfig field")
	}
	hs := &host{addr: addr, h: h, cfg: hc, idx: int32(len(n.hosts)), lastDst: -1, hash: addrHash(addr), firedAt: -1}
	n.initPort(&hs.port, pc, hs.idx, -1)
	for i, c := range hc.Paths {
		q := c.Port
		if q.Rate < 0 || q.BufferBytes < 0 || q.ControlBytes < 0 || q.Latency < 0 || q.SampleInterval < 0 || q.SampleCap < 0 ||
			c.FailAt < 0 || c.RecoverAt < 0 || c.DegradeAt < 0 || (c.DegradeAt > 0 && c.DegradedRate <= 0) {
			panic(fmt.Sprintf("testnet: bad PathConfig %d: negative field, or DegradeAt without a positive DegradedRate", i))
		}
	}
	hs.paths = make([]path, len(hc.Paths))
	for i := range hs.paths {
		hs.paths[i].pc = hc.Paths[i]
		n.initPort(&hs.paths[i].port, hc.Paths[i].Port, hs.idx, int32(i))
	}
	n.hosts = append(n.hosts, hs)
	n.byAddr[addr] = hs.idx
}

// initPort sets up the port of host idx (path i, or -1 for its egress port); its RED
// seed comes from the network's seed and its place, not from the network's generator,
// so adding a port does not change the impairments' random draws.
func (n *Network) initPort(pt *port, pc PortConfig, idx, i int32) {
	pt.cfg = pc
	pt.seed = portSeed(n.seed, idx, i)
	if pc.Rate > 0 {
		if err := pt.q.Init(pt.swConfig(n.cfg.Overhead), pt.seed); err != nil {
			panic("testnet: " + err.Error())
		}
		pt.trimBytes = pt.q.Config().TrimBytes
	}
	if pc.SampleInterval > 0 {
		c := pc.SampleCap
		if c == 0 {
			c = DefaultSampleCap
		}
		pt.samples = make([]QueueSample, 0, c)
		pt.sampleNext = n.now
	}
}

// Now returns the current virtual time, ns.
func (n *Network) Now() int64 { return n.now }

// Wake polls the transmits of the host at addr and re-reads its timer at the current
// time; call it after calling into the host from the test (for example to send a message).
func (n *Network) Wake(addr netip.AddrPort) {
	i, ok := n.byAddr[addr]
	if !ok {
		panic("testnet: Wake of unknown address " + addr.String())
	}
	n.service(n.hosts[i])
}

// Step processes the next event and reports whether there was one.
func (n *Network) Step() bool {
	if len(n.heap) == 0 {
		return false
	}
	ev := n.pop()
	n.now = ev.at
	n.stats.Events++
	switch ev.kind {
	case evTimer:
		n.onTimer(n.hosts[ev.idx], ev.gen)
	case evNIC:
		h := n.hosts[ev.idx]
		h.nicBusy = false
		n.link(ev.pkt)
		n.service(h)
	case evArrive:
		n.toPort(ev.pkt)
	case evHold:
		n.onHoldTimeout(ev.pkt, ev.gen)
	case evPortDone:
		n.onPortDone(n.hosts[ev.idx], ev.path, ev.pkt)
	case evPathOut:
		n.onPathOut(n.hosts[ev.idx], ev.path, ev.pkt)
	case evDeliver:
		n.deliver(ev.pkt)
	}
	return true
}

// RunUntil processes events until done returns true (checked before the first and after
// every event; nil never holds), the next event lies beyond deadline, or no event is
// left. Unless done held, the clock is then advanced to deadline. It reports whether
// done held.
func (n *Network) RunUntil(deadline int64, done func() bool) bool {
	if done != nil && done() {
		return true
	}
	for len(n.heap) > 0 && n.heap[0].at <= deadline {
		n.Step()
		if done != nil && done() {
			return true
		}
	}
	if n.now < deadline {
		n.now = deadline
	}
	return false
}

// Pending reports whether any event is scheduled (stale timer events included).
func (n *Network) Pending() bool { return len(n.heap) > 0 }

// Stats returns the network's counters.
func (n *Network) Stats() Stats { return n.stats }

// PortStats returns the counters of the switch port toward addr.
func (n *Network) PortStats(addr netip.AddrPort) PortStats {
	return n.portOf(addr).stats()
}

// Samples returns the queue samples of the port toward addr taken before Now. The slice
// aliases the preallocated sample buffer and is valid until the network runs again.
func (n *Network) Samples(addr netip.AddrPort) []QueueSample {
	p := n.portOf(addr)
	p.sample(n.now)
	return p.samples
}

// NumPaths returns the number of parallel paths toward addr.
func (n *Network) NumPaths(addr netip.AddrPort) int { return len(n.hostOf(addr).paths) }

// PathStats returns the counters of path i toward addr.
func (n *Network) PathStats(addr netip.AddrPort, i int) PathStats {
	p := &n.hostOf(addr).paths[i]
	return PathStats{PortStats: p.stats(), Packets: p.packets, Bytes: p.bytes, FailDrops: p.failDrops}
}

// PathSamples returns the queue samples of path i toward addr taken before Now (see Samples).
func (n *Network) PathSamples(addr netip.AddrPort, i int) []QueueSample {
	p := &n.hostOf(addr).paths[i].port
	p.sample(n.now)
	return p.samples
}

// PathOf returns the path a datagram with EV ev from one address to another takes, or
// -1 when no paths lead to the destination.
func (n *Network) PathOf(from, to netip.AddrPort, ev uint16) int {
	dst := n.hostOf(to)
	if len(dst.paths) == 0 {
		return -1
	}
	return pathIndex(addrHash(from), dst.hash, ev, len(dst.paths))
}

func (n *Network) hostOf(addr netip.AddrPort) *host {
	i, ok := n.byAddr[addr]
	if !ok {
		panic("testnet: unknown address " + addr.String())
	}
	return n.hosts[i]
}

// addrHash is FNV-1a over the address and port.
func addrHash(a netip.AddrPort) uint64 {
	h := uint64(14695981039346656037)
	b := a.Addr().As16()
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	h = (h ^ uint64(a.Port()>>8)) * 1099511628211
	return (h ^ uint64(a.Port()&0xff)) * 1099511628211
}

// pathIndex mixes the source, destination and EV (splitmix64's finaliser) and maps the
// hash onto n paths.
func pathIndex(src, dst uint64, ev uint16, n int) int {
	x := pathIndexMix(src ^ bits.RotateLeft64(dst, 29) ^ (uint64(ev)+1)*0x9e3779b97f4a7c15)
	hi, _ := bits.Mul64(x, uint64(n))
	return int(hi)
}

// portSeed is the RED seed of the port of host idx (path i, or -1 for its egress port).
func portSeed(seed uint64, idx, i int32) uint64 {
	return pathIndexMix(seed ^ uint64(idx)<<32 ^ uint64(uint32(i)))
}

// pathIndexMix is splitmix64's finaliser.
func pathIndexMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (n *Network) portOf(addr netip.AddrPort) *port {
	i, ok := n.byAddr[addr]
	if !ok {
		panic("testnet: unknown address " + addr.String())
	}
	return &n.hosts[i].port
}

// service polls h's transmits while its NIC is free and re-arms its timer.
func (n *Network) service(h *host) {
	for !h.nicBusy {
		tx, ok := h.h.PollTransmit(n.now, n.scratch)
		if !ok {
			break
		}
		if tx.N < 0 || tx.N > len(n.scratch) {
			panic(fmt.Sprintf("testnet: PollTransmit returned N = %d, buffer is %d bytes", tx.N, len(n.scratch)))
		}
		n.stats.Sent++
		p := n.alloc(tx.N)
		copy(p.buf, n.scratch[:tx.N])
		p.src = h.idx
		if tx.To != h.lastTo || h.lastDst < 0 {
			h.lastTo, h.lastDst = tx.To, -1
			if i, ok := n.byAddr[tx.To]; ok {
				h.lastDst = i
			}
		}
		p.dst = h.lastDst
		p.ecn = tx.ECN & 3
		p.ev = tx.EV
		p.control = tx.Control
		p.data = !tx.Control && (tx.Type == wire.TypeData || (tx.N > 0 && p.buf[0] == wire.Version<<4|byte(wire.TypeData)))
		if h.cfg.NICRate > 0 {
			h.nicBusy = true
			n.push(event{at: n.now + serialise(p.n+n.cfg.Overhead, h.cfg.NICRate, &h.nicRem), kind: evNIC, idx: h.idx, pkt: p})
			break
		}
		n.link(p)
	}
	n.arm(h)
}

// arm re-reads h's NextTimeout and makes sure a timer event fires no later than it.
func (n *Network) arm(h *host) {
	t, ok := h.h.NextTimeout()
	if !ok {
		return // a pending event, if any, fires and finds nothing to do
	}
	if t < n.now {
		t = n.now
	}
	if t == n.now && h.nicBusy && h.firedAt == n.now {
		// The host was just given its timeout and still has something due that only
		// its busy NIC can send (a pending ACK): the NIC's completion re-arms it, so
		// do not fire again at this instant (that would loop without time advancing).
		return
	}
	if h.timerSet && h.timerAt <= t {
		return // the pending event fires early and re-arms
	}
	h.timerGen++
	h.timerSet = true
	h.timerAt = t
	n.push(event{at: t, kind: evTimer, idx: h.idx, gen: h.timerGen})
}

func (n *Network) onTimer(h *host, gen uint64) {
	if !h.timerSet || gen != h.timerGen {
		return // stale
	}
	h.timerSet = false
	t, ok := h.h.NextTimeout()
	if !ok {
		return
	}
	if t > n.now {
		n.arm(h)
		return
	}
	h.h.HandleTimeout(n.now)
	h.firedAt = n.now
	n.service(h)
}

// link applies the impairments to a packet that left its sender's NIC.
func (n *Network) link(p *packet) {
	if p.dst < 0 {
		n.stats.Undeliverable++
		n.release(p)
		return
	}
	if n.cfg.Loss > 0 && (n.cfg.LossFilter == nil || n.cfg.LossFilter(p.buf[:p.n])) && n.rng.Float64() < n.cfg.Loss {
		n.stats.Lost++
		n.release(p)
		return
	}
	var dup *packet
	if n.cfg.Dup > 0 && n.rng.Float64() < n.cfg.Dup {
		n.stats.Duplicated++
		dup = n.alloc(p.n)
		copy(dup.buf, p.buf[:p.n])
		dup.src, dup.dst, dup.ecn, dup.control, dup.data, dup.ev = p.src, p.dst, p.ecn, p.control, p.data, p.ev
	}
	n.reorder(p)
	if dup != nil {
		n.reorder(dup)
	}
}

func (n *Network) reorder(p *packet) {
	if n.cfg.ReorderDepth > 0 {
		f := n.flowOf(p)
		if n.cfg.ReorderProb > 0 && n.rng.Float64() < n.cfg.ReorderProb {
			n.stats.Reordered++
			p.held = true
			p.flow = f
			p.target = f.passed + 1 + uint64(n.rng.IntN(n.cfg.ReorderDepth))
			f.held = append(f.held, p)
			n.push(event{at: n.now + n.cfg.ReorderTimeout, kind: evHold, pkt: p, gen: p.gen})
			return
		}
		n.toPort(p)
		f.passed++
		n.releaseDue(f)
		return
	}
	if n.cfg.ReorderProb > 0 && n.cfg.ReorderDelay > 0 && n.rng.Float64() < n.cfg.ReorderProb {
		if extra := n.rng.Int64N(n.cfg.ReorderDelay + 1); extra > 0 {
			n.stats.Reordered++
			n.push(event{at: n.now + extra, kind: evArrive, pkt: p})
			return
		}
	}
	n.toPort(p)
}

func (n *Network) flowOf(p *packet) *flow {
	src := n.hosts[p.src]
	if int(p.dst) >= len(src.flows) {
		src.flows = append(src.flows, make([]*flow, len(n.hosts)-len(src.flows))...)
	}
	f := src.flows[p.dst]
	if f == nil {
		f = &flow{}
		src.flows[p.dst] = f
	}
	return f
}

// releaseDue forwards the held packets of f whose turn has come.
func (n *Network) releaseDue(f *flow) {
	for i := 0; i < len(f.held); {
		q := f.held[i]
		if q.target > f.passed {
			i++
			continue
		}
		f.unhold(i)
		n.toPort(q)
		f.passed++
		i = 0 // passing q may have made an earlier held packet due
	}
}

func (f *flow) unhold(i int) {
	q := f.held[i]
	copy(f.held[i:], f.held[i+1:])
	f.held[len(f.held)-1] = nil
	f.held = f.held[:len(f.held)-1]
	q.held = false
	q.flow = nil
}

func (n *Network) onHoldTimeout(p *packet, gen uint64) {
	if p.gen != gen || !p.held {
		return
	}
	f := p.flow
	for i, q := range f.held {
		if q == p {
			f.unhold(i)
			break
		}
	}
	n.toPort(p)
	f.passed++
	n.releaseDue(f)
}

// toPort hands a packet that passed the impairments to the path the hash picks, or to
// the egress port toward its destination if there are no paths.
func (n *Network) toPort(p *packet) {
	dst := n.hosts[p.dst]
	if len(dst.paths) == 0 {
		n.enqueue(dst, -1, p)
		return
	}
	i := pathIndex(n.hosts[p.src].hash, dst.hash, p.ev, len(dst.paths))
	pa := &dst.paths[i]
	pa.packets++
	pa.bytes += uint64(p.n)
	if pa.failed(n.now) {
		n.failDrop(pa, p)
		return
	}
	if pa.pc.DegradeAt > 0 && n.now >= pa.pc.DegradeAt && pa.cfg.Rate != pa.pc.DegradedRate {
		n.degrade(dst, int32(i), pa)
	}
	n.enqueue(dst, int32(i), p)
}

// degrade gives path (h, i) its DegradedRate; the packet in service keeps its end time.
func (n *Network) degrade(h *host, i int32, pa *path) {
	pt := &pa.port
	if pt.cfg.Rate == 0 {
		// An infinitely fast path becomes a real port: nothing is queued on it yet.
		pt.cfg.Rate = pa.pc.DegradedRate
		if err := pt.q.Init(pt.swConfig(n.cfg.Overhead), pt.seed); err != nil {
			panic("testnet: " + err.Error())
		}
		pt.trimBytes = pt.q.Config().TrimBytes
		return
	}
	pt.cfg.Rate = pa.pc.DegradedRate
	pt.sample(n.now)
	pt.q.SetRate(n.now, pt.cfg.Rate)
	n.drain(h, i, pt)
}

func (n *Network) failDrop(pa *path, p *packet) {
	pa.failDrops++
	n.stats.FailDropped++
	n.release(p)
}

// portAt returns host h's egress port (i < 0) or its path i.
func portAt(h *host, i int32) *port {
	if i < 0 {
		return &h.port
	}
	return &h.paths[i].port
}

// leave sends a packet that crossed port (h, i) on: to its destination or the egress port.
func (n *Network) leave(h *host, i int32, pt *port, p *packet) {
	if i < 0 {
		n.push(event{at: n.now + pt.cfg.Latency + n.cfg.Delay, kind: evDeliver, pkt: p})
		return
	}
	n.push(event{at: n.now + pt.cfg.Latency, kind: evPathOut, idx: h.idx, path: i, pkt: p})
}

func (n *Network) onPathOut(h *host, i int32, p *packet) {
	if pa := &h.paths[i]; pa.failed(n.now) {
		n.failDrop(pa, p)
		return
	}
	n.enqueue(h, -1, p)
}

// enqueue offers a packet to port (dst, i): the egress port toward dst if i < 0, else
// its path i. A packet is data (data queue, trimmable, markable) if it is a DATA packet
// not sent as control and not trimmed; anything else is control, as in the simulator.
func (n *Network) enqueue(dst *host, i int32, p *packet) {
	pt := portAt(dst, i)
	if pt.cfg.Rate == 0 {
		pt.passed++
		n.leave(dst, i, pt, p)
		return
	}
	data := p.data && !p.control
	if data && pt.cfg.Trim {
		// The port cuts to the header and its INT block (wire.TrimmedLen).
		if tb := max(wire.TrimmedLen(p.buf[:p.n])+n.cfg.Overhead, 1); tb != pt.trimBytes {
			pt.q.SetTrimBytes(tb)
			pt.trimBytes = tb
		}
	}
	pt.sample(n.now)
	switch pt.q.Arrive(n.now, p, p.n+n.cfg.Overhead, data, p.ecn == transport.ECT0 || p.ecn == transport.ECT1) {
	case switchport.Dropped:
		n.stats.Dropped++
		n.release(p)
	case switchport.Trimmed:
		p.n = wire.TrimmedLen(p.buf[:p.n])
		if p.n > 1 {
			p.buf[1] |= byte(wire.FlagTrimmed)
		}
		p.dscp = n.cfg.TrimDSCP
		p.control = true // a trimmed header has priority at later hops too
		n.stats.Trimmed++
	}
	n.drain(dst, i, pt)
}

// drain collects the packets port (h, i) has started serialising: it marks them, stamps
// INT and schedules the end of each one's serialisation.
func (n *Network) drain(h *host, i int32, pt *port) {
	for {
		d, ok := pt.q.Pop()
		if !ok {
			return
		}
		p := d.Item
		if d.Marked {
			p.ecn = transport.CE
			n.stats.Marked++
		}
		if n.cfg.INT {
			if p.data {
				wire.StampINT(p.buf[:p.n], pt.intx.Record(d.Start, d.Size, d.QLen, pt.q.Rate()))
			} else {
				pt.intx.Count(d.Size)
			}
		}
		n.push(event{at: d.End, kind: evPortDone, idx: h.idx, path: i, pkt: p})
	}
}

// onPortDone forwards p, whose last bit left port (h, i), and starts the port's next packet.
func (n *Network) onPortDone(h *host, i int32, p *packet) {
	pt := portAt(h, i)
	if i >= 0 && h.paths[i].failed(n.now) {
		n.failDrop(&h.paths[i], p)
	} else {
		n.leave(h, i, pt, p)
	}
	pt.sample(n.now)
	pt.q.Advance(n.now)
	n.drain(h, i, pt)
}

func (n *Network) deliver(p *packet) {
	h := n.hosts[p.dst]
	n.stats.Delivered++
	h.h.HandlePacket(n.now, p.buf[:p.n], transport.RxMeta{
		From:   n.hosts[p.src].addr,
		RxTime: n.now,
		ECN:    p.ecn,
		DSCP:   p.dscp,
	})
	n.release(p)
	n.service(h)
}

// serialise returns the ns needed to send size bytes at rate bits/s, carrying the
// sub-nanosecond remainder in *rem so that back-to-back packets add up exactly.
func serialise(size int, rate int64, rem *int64) int64 {
	bitNs := int64(size)*8*1_000_000_000 + *rem
	*rem = bitNs % rate
	return bitNs / rate
}

// sample records the occupancy for every sample time before now; call it before
// anything that changes the queues.
func (pt *port) sample(now int64) {
	if pt.cfg.SampleInterval <= 0 {
		return
	}
	for pt.sampleNext < now && len(pt.samples) < cap(pt.samples) {
		pt.samples = append(pt.samples, QueueSample{Time: pt.sampleNext, Data: pt.q.DataBytes(), Control: pt.q.ControlBytes()})
		pt.sampleNext += pt.cfg.SampleInterval
	}
}

// swConfig is the switchport configuration of a port with a rate.
func (pt *port) swConfig(overhead int) switchport.Config {
	c := pt.cfg
	return switchport.Config{Rate: c.Rate, DataBytes: c.BufferBytes, ControlBytes: c.ControlBytes,
		KminBytes: c.KminBytes, KmaxBytes: c.KmaxBytes, Trim: c.Trim, TrimBytes: wire.DataHdrLen + overhead}
}

// stats returns the port's counters.
func (pt *port) stats() PortStats {
	if pt.cfg.Rate == 0 {
		return PortStats{Enqueued: pt.passed, Dequeued: pt.passed}
	}
	s := pt.q.Stats()
	return PortStats{Enqueued: s.Enqueued + pt.passed, Dequeued: s.Dequeued + pt.passed, Drops: s.Drops, Trims: s.Trims,
		Marks: s.Marks, DataBytes: pt.q.DataBytes(), ControlBytes: pt.q.ControlBytes(),
		MaxDataBytes: s.MaxDataBytes, MaxControlBytes: s.MaxControlBytes}
}

// Packet buffers come in size classes 64, 96, 128, 192, 256, ... (powers of two and
// 1.5 times powers of two).
const numClasses = 24

func sizeClass(n int) (class, size int) {
	if n <= 64 {
		return 0, 64
	}
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k, k >= 7
	if n <= 3<<(k-2) {
		return 2*(k-6) - 1, 3 << (k - 2)
	}
	return 2 * (k - 6), 1 << k
}

func (n *Network) alloc(size int) *packet {
	c, sz := sizeClass(size)
	p := n.free[c]
	if p != nil {
		n.free[c] = p.next
		p.next = nil
	} else {
		p = &packet{buf: make([]byte, sz), class: uint8(c)}
	}
	p.n = size
	p.dscp = 0
	return p
}

func (n *Network) release(p *packet) {
	p.gen++
	p.held = false
	p.flow = nil
	p.next = n.free[p.class]
	n.free[p.class] = p
}

// The event queue: a binary min-heap of small pointer-free entries keyed by (at, seq),
// each naming a slot of the event slab; slots are recycled through a free list.

type heapEntry struct {
	at   int64
	seq  uint64
	slot int32
}

func (e *heapEntry) less(o *heapEntry) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

func (n *Network) push(ev event) {
	if ev.at < n.now {
		panic("testnet: virtual time overflow (RunUntil to math.MaxInt64 with nothing left to do?)")
	}
	var slot int32
	if k := len(n.freeSlots); k > 0 {
		slot = n.freeSlots[k-1]
		n.freeSlots = n.freeSlots[:k-1]
		n.slab[slot] = ev
	} else {
		slot = int32(len(n.slab))
		n.slab = append(n.slab, ev)
	}
	n.seq++
	h := append(n.heap, heapEntry{at: ev.at, seq: n.seq, slot: slot})
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].less(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	n.heap = h
}

func (n *Network) pop() event {
	h := n.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(&h[l]) {
			m = r
		}
		if !h[m].less(&h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	n.heap = h
	ev := n.slab[top.slot]
	n.slab[top.slot] = event{}
	n.freeSlots = append(n.freeSlots, top.slot)
	return ev
}
