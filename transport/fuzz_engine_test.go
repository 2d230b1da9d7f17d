package transport

// FuzzEngine is a stateful fuzz target for the engine, in the spirit of quinn's
// fuzz/fuzz_targets/streams.rs: the input is decoded into a sequence of operations on two
// honest endpoints A and B joined by a fuzz-controlled network, plus an attacker, and the
// engine's invariants are checked after every operation. docs/fuzzing.md describes it and
// lists the commands.
//
// Input: byte 0 is the mode (fuzzMode), bytes 1-2 seed the endpoints' random sources, and
// the rest is a sequence of operations, each an opcode byte (its low 5 bits index fzOps,
// so every byte string is a valid input) and its arguments. An exhausted input reads as
// zeros, and at most fuzzMaxOps operations run. Then the attacker stops and the network
// turns reliable: the settle phase checks that every honest message gets an outcome
// (liveness) and the reclaim phase that silence releases what the engine holds.
//
// Invariants (each has a name; FUZZENGINE_SKIP=name,name or -fuzzengine.skip=... turns
// checks off, to look past a known bug while fuzzing; never in the committed default):
//
//	panic    no panic (nor fault: a buffer touched after the engine gave it away)
//	wire     every datagram the engine emits decodes and matches its Transmit
//	mem      what the engine holds for messages, counted from its structures (ledgerHeld:
//	         buffers at capacity, records, tables), and Stats().RecvBuffered stay within
//	         fed payload + fuzzPerMsgSlack*messages + ... and within RecvBudget plus one
//	         message's charge (invariant 2)
//	window   no connection holds more than its claims allow (RecvWindow + MaxMessage, ~2x)
//	gauge    the ledger: what is charged equals what ledgerHeld counts, to the byte;
//	         ConnHeld is ConnCharge per connection; TimeWait and TimeWaitHeld match the
//	         TIME_WAIT tables, within their caps; the Hooks.Buffers pool agrees
//	pool     the engine only Puts buffers it got and still holds
//	chunks   a message delivered in chunks (DeliverChunks) is in RecvChunk pieces
//	heap     live Go heap growth over an input stays within fuzzHeapSlack + twice what
//	         the endpoints charge (sampled)
//	conns    NumConns() <= MaxConns on both endpoints (invariant 3)
//	timer    after HandleTimeout(now) and PollTransmit, NextTimeout() is after now
//	outcome  each honest message gets at most one MessageSent/MessageFailed, only for a
//	         message sent, and none is left without one when its connection closes
//	once     the honest receiver delivers each honest message at most once, byte-exact, in
//	         send order unless Unordered, and nothing the sender did not send (invariant 4)
//	resurrect  ... in particular not again by a new connection the receiver opened for
//	         the same peer connection (a late first-contact packet after TIME_WAIT)
//	sent     a MessageSent implies the receiver delivered the message (invariant 4): at
//	         once with Unordered; in order mode by the time the receiving connection closes
//	         or the input ends (an ACK may cover a message held behind an earlier one)
//	live     after the attacker stops, every honest message gets an outcome within
//	         fuzzSettleMax of a reliable network (invariant 5)
//	reclaim  after 2*IdleTimeout+TimeWait of silence no receive buffer is held
//	idle     ... and no connection is left (Config.IdleTimeout: "forgets idle connections
//	         with nothing outstanding"); fuzzReclaimConns turns it off
//
// "once", "resurrect" and "sent" are checked only when the attacker is blind or packets are
// authenticated: an attacker that knows the connection IDs can forge ACKs and DATA, and
// without authentication the engine cannot tell them from the peer's.

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Invariant 2, the memory bound. An endpoint may hold at most
//
//	fed payload + fuzzPerMsgSlack*messages + fuzzPerPktSlack*data packets + fuzzPerConnSlack*connections
//
// bytes of receive buffers, where fed payload is the DATA payload bytes actually handed to
// it (by the peer or the attacker), messages counts the distinct (reply address, SrcConn,
// DstConn, MsgID) of those DATA packets (counted afresh after any ConnClosed, since a
// message may then be reopened), data packets counts them all and connections counts the
// connections it ever opened or accepted; and at most maxRecvBudget whatever it was sent.
// So a peer pays for what we buffer: a packet may not make us allocate for bytes that
// never arrived beyond one buffer granule per message. The values plan for the fix of
// transport/receiver.go (message buffers in chunks of 256 KiB allocated as data arrives);
// fuzzPerPktSlack = 0 means a message with sparse packets may not hold a granule per
// packet (which would let 1-byte packets claim 256 KiB each). Note that honest reordering
// is sparse too: if the fix allocates the chunk of any packet that arrives, a message
// whose packets arrive out of order holds two partly filled chunks for a few KiB of data,
// and this bound (with these values) says so; either allocate chunks only at or near the
// message's contiguous frontier, or raise fuzzPerPktSlack to the chunk size (then only
// maxRecvBudget limits 1-byte-per-chunk amplification).
var (
	fuzzPerMsgSlack  uint64 = 256 << 10
	fuzzPerPktSlack  uint64 = RecvChunk // a packet may open a chunk anywhere within reach
	fuzzPerConnSlack uint64 = 0
	maxRecvBudget    uint64 = 64 << 20 // RecvBudget + MaxMessage (fuzzConfig)
	// fuzzHeapSlack bounds the growth of the live Go heap over one input beyond what the
	// harness itself holds; it is sampled (a GC each) every fuzzHeapEvery inputs.
	fuzzHeapSlack uint64 = 16 << 20
	fuzzHeapEvery        = 64
	// fuzzReclaimConns enables "idle": connections are forgotten after silence.
	fuzzReclaimConns = true
)

// Bounds by construction: an input runs in milliseconds.
const (
	fuzzMaxOps         = 2000
	fuzzMaxHonestMsg   = 384 << 10 // bytes per honest message
	fuzzMaxHonestBytes = 4 << 20   // honest bytes per input
	fuzzMaxHonestMsgs  = 128
	fuzzMaxQueue       = 512  // honest packets in flight
	fuzzMaxPoll        = 256  // datagrams taken from an endpoint per operation
	fuzzMaxFlood       = 64   // first contacts per flood
	fuzzMaxGarbage     = 256  // bytes per garbage datagram
	fuzzSlots          = 4    // honest connections addressable at once
	fuzzSniffed        = 32   // honest packets the informed attacker remembers
	fuzzMaxVirtual     = 30e9 // ns of virtual time for the operations
	fuzzSettleMax      = 10e9 // ns of reliable network for every message to get an outcome
	fuzzMaxSettleSteps = 20000
	// fuzzMaxPacketLife is the network's maximum packet lifetime (MSL): a queued packet
	// older than this is dropped instead of delivered. It is below TimeWait, which is
	// what TIME_WAIT assumes of a network (an attacker's replay is not bound by it).
	fuzzMaxPacketLife = 50e6

	fuzzMaxConns   = 8
	fuzzTrimDSCP   = 10
	fuzzListenPort = 23600
	fuzzEVPortBase = 40000 // honest data leaves from fuzzEVPortBase + EV
)

var fuzzSkipFlag = flag.String("fuzzengine.skip", "", "FuzzEngine: comma-separated invariants not to check (also FUZZENGINE_SKIP)")

var fuzzSkipSet map[string]bool

// fuzzSkips returns the invariants not to check (parsed once: the flag is fixed by then).
func fuzzSkips() map[string]bool {
	if fuzzSkipSet != nil {
		return fuzzSkipSet
	}
	m := map[string]bool{}
	defer func() { fuzzSkipSet = m }()
	for _, s := range []string{*fuzzSkipFlag, os.Getenv("FUZZENGINE_SKIP")} {
		for _, n := range strings.Split(s, ",") {
			if n = strings.TrimSpace(n); n != "" {
				m[n] = true
			}
		}
	}
	return m
}

// fuzzMode is byte 0 of an input.
type fuzzMode struct {
	informed  bool // bit 0: the attacker knows connection IDs and addresses (else blind)
	auth      bool // bit 1: packet authentication (see fuzzConfig)
	unordered bool // bit 2: Config.Unordered
	smallMTU  bool // bit 3: MTU 1024 (else 4096)
	zeroClock bool // bit 4: the clock starts at 0 (else 1 s)
	coalesce  bool // bit 5: ACK every 4 packets, with clean-EV lists
	recovery  int  // bits 6-7: recovery mode sack, ec, gobackn, subflows
	// Byte 1 (which seeds the random sources too): bit 7 runs the daemon's configuration
	// (DeliverChunks, MTU 4108, hops from TTL; the Placer is on in every mode); bit 4 says
	// the fabric returns trimmed headers (Config.ReturnToSender); under ec, bits 0-3 are
	// m-1 and byte 2 picks k in 1..256-m (setFuzzShape).
	daemon  bool
	returns bool
	ecK     int
	ecM     int
}

// setFuzzShape reads the daemon bit and the EC block shape from the seed bytes.
func (m *fuzzMode) setFuzzShape(s1, s2 byte) {
	m.daemon = s1&0x80 != 0
	m.returns = s1&0x10 != 0
	m.ecM = 1 + int(s1&15)
	m.ecK = 1 + int(s2)%(256-m.ecM)
}

var fuzzRecovery = [4]string{RecoverySACK, RecoveryEC, RecoveryGoBackN, RecoverySubflows}

func parseFuzzMode(b byte) fuzzMode {
	return fuzzMode{informed: b&1 != 0, auth: b&2 != 0, unordered: b&4 != 0, smallMTU: b&8 != 0,
		zeroClock: b&16 != 0, coalesce: b&32 != 0, recovery: int(b >> 6)}
}

func (m fuzzMode) String() string {
	s := "attacker=blind"
	if m.informed {
		s = "attacker=informed"
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{m.auth, "auth"}, {m.unordered, "unordered"}, {m.smallMTU, "mtu1024"}, {m.zeroClock, "clock0"}, {m.coalesce, "coalesce"}} {
		if f.on {
			s += " " + f.name
		}
	}
	if m.recovery != 0 {
		s += " recovery=" + fuzzRecovery[m.recovery]
	}
	if m.recovery == 1 {
		s += fmt.Sprintf(" k=%d m=%d", m.ecK, m.ecM)
	}
	if m.daemon {
		s += " daemon"
	}
	if m.returns {
		s += " returns"
	}
	return s
}

// fuzzConfig is both endpoints' configuration: small caps and short timers so that the
// fuzzer reaches them, MaxMessage left at its default.
func fuzzConfig(m fuzzMode) (cfg Config, authOn bool) {
	cfg = DefaultConfig()
	cfg.MaxConns = fuzzMaxConns
	cfg.RecvWindow = 1 << 20
	cfg.PSNWindow = 512
	if m.smallMTU {
		cfg.MTU = 1024
	}
	cfg.InitialRTO = 200_000
	cfg.MinRTO = 50_000
	cfg.MaxRTO = 20_000_000
	cfg.IdleTimeout = 200_000_000
	cfg.UnprovenTimeout = 50_000_000
	cfg.TimeWait = 100_000_000
	cfg.CloseRetries = 4
	cfg.TrimDSCP = fuzzTrimDSCP
	cfg.ListenPort = fuzzListenPort
	cfg.Unordered = m.unordered
	cfg.Recovery.Mode = fuzzRecovery[m.recovery]
	cfg.Recovery.K, cfg.Recovery.M = 4, 2
	if m.recovery == 1 {
		cfg.Recovery.K, cfg.Recovery.M = m.ecK, m.ecM
	}
	cfg.ReturnToSender = m.returns
	if m.daemon {
		// transport/smarttd's engine: a 4 KiB message (plus the daemon's 12-byte
		// envelope) in one packet; messages delivered in the chunks they arrived in
		// (Hooks.DeliverChunks, set where the endpoints are made).
		cfg.HopsFromTTL = true
		if !m.smallMTU {
			cfg.MTU = 4108
		}
	}
	if m.coalesce {
		cfg.Ack.Every = 4
		cfg.Ack.CleanEVs = true
	}
	// The engine's bound is RecvBudget + MaxMessage (one message may finish beyond the
	// budget): both at half of maxRecvBudget, with claims of up to 32 MiB per message.
	cfg.MaxMessage = int(maxRecvBudget / 2)
	cfg.RecvBudget = int64(maxRecvBudget / 2)
	if m.auth {
		// One key for A and B; the attacker never holds it. Forged packets built with
		// wire.Packet.Encode fail authentication, replays (opReplay) carry valid seals,
		// and "once", "resurrect" and "sent" are checked against the informed attacker.
		cfg.Auth.Mode = seal.Auth
		cfg.Auth.Key = seal.Key{0x5e, 0xa1}
		return cfg, true
	}
	return cfg, false
}

// fzWire returns the part of an endpoint's datagram that wire.Packet.Decode parses (the
// harness decodes what it routes and feeds, for its accounting and traces).
func fzWire(b []byte) []byte {
	if len(b) >= wire.CommonLen+seal.Overhead && wire.Flags(b[1])&wire.FlagSealed != 0 {
		return b[:len(b)-seal.Overhead]
	}
	return b
}

// Operations. Arguments are listed in fzHarness.step.
const (
	opSend = iota
	opDial
	opClose
	opAbort
	opDeliver
	opDrop
	opDup
	opTrim
	opCE
	opDeliverAll
	opStepSmall
	opStepBig
	opNextTimer
	opBlindData
	opBlindFlood
	opBlindPacket
	opGarbage
	opForge
	opReplay
	opRun
	opReturn
	fzOpCount
)

// fzOps maps the low 5 bits of an opcode byte to an operation: every operation once,
// the frequent ones again (and room for more without renumbering the rest).
var fzOps = [32]uint8{
	opSend, opDial, opClose, opAbort, opDeliver, opDrop, opDup, opTrim,
	opCE, opDeliverAll, opStepSmall, opStepBig, opNextTimer, opBlindData, opBlindFlood, opBlindPacket,
	opGarbage, opForge, opReplay, opRun, opSend, opDeliver, opReturn, opDrop,
	opRun, opStepSmall, opDeliverAll, opForge, opSend, opBlindData, opDeliver, opNextTimer,
}

// fuzzReader hands out the input's bytes; past the end it reads zeros.
type fuzzReader struct {
	b []byte
	i int
}

func (r *fuzzReader) done() bool { return r.i >= len(r.b) }

func (r *fuzzReader) u8() uint8 {
	if r.i >= len(r.b) {
		return 0
	}
	v := r.b[r.i]
	r.i++
	return v
}

func (r *fuzzReader) u16() uint16 { return uint16(r.u8())<<8 | uint16(r.u8()) }
func (r *fuzzReader) u32() uint32 { return uint32(r.u16())<<16 | uint32(r.u16()) }
func (r *fuzzReader) u64() uint64 { return uint64(r.u32())<<32 | uint64(r.u32()) }

// val32 reads a 32-bit field relative to base (a value the attacker saw, or 0): a
// selector byte s, then by s>>6: 0: base+(s&63)-32; 1: base+int16; 2: a raw uint32;
// 3: base+2^31+(s&63)-32 (half the serial-number space away).
func (r *fuzzReader) val32(base uint32) uint32 {
	s := r.u8()
	switch s >> 6 {
	case 0:
		return base + uint32(int32(s&63)-32)
	case 1:
		return base + uint32(int32(int16(r.u16())))
	case 2:
		return r.u32()
	}
	return base + 1<<31 + uint32(int32(s&63)-32)
}

// val64 is val32 for 64-bit fields; selector 3 adds a uint32 to base.
func (r *fuzzReader) val64(base uint64) uint64 {
	s := r.u8()
	switch s >> 6 {
	case 0:
		return base + uint64(int64(s&63)-32)
	case 1:
		return base + uint64(int64(int16(r.u16())))
	case 2:
		return r.u64()
	}
	return base + uint64(r.u32())
}

var fzSpecialLens = [8]uint32{0, 1 << 30, 1<<30 + 1, 1 << 31, 1<<32 - 1, 256 << 10, 256<<10 + 1, 64 << 20}

// len32 reads a message length: by s>>6: 0: 1+(s&63); 1: a uint16; 2: a raw uint32;
// 3: fzSpecialLens[s&7] (index 0: base, the length the attacker saw, or 1).
func (r *fuzzReader) len32(base uint32) uint32 {
	s := r.u8()
	switch s >> 6 {
	case 0:
		return 1 + uint32(s&63)
	case 1:
		return uint32(r.u16())
	case 2:
		return r.u32()
	}
	if v := fzSpecialLens[s&7]; v != 0 {
		return v
	}
	return max(base, 1)
}

// fzEP is one endpoint's connection.
type fzEP struct {
	ep   int
	conn ConnID
}

// fzKey names an honest message: the sender's endpoint and connection and the message ID.
type fzKey struct {
	ep   int
	conn ConnID
	id   uint32
}

type fzMsg struct {
	key        fzKey
	idx        int // content index
	size       int
	outcome    EventKind // 0 until MessageSent or MessageFailed
	deliveries int
	firstRecv  fzEP // the connection that delivered it first
}

// fzConn is an honest connection: dialled by one endpoint, accepted by the other (maybe
// more than once, if the acceptor lost it and a first-contact packet recreated it).
type fzConn struct {
	dialer int
	dialID ConnID
	bound  ConnID   // the acceptor ID the dialer's connection learned (mirrors the engine)
	accIDs []ConnID // the acceptor's incarnations, in the order seen
}

type fzPkt struct {
	data      []byte
	from      netip.AddrPort
	to        int
	ecn, dscp uint8
	at        int64
}

type fzSniff struct {
	from   netip.AddrPort
	fromEP int
	to     int
	raw    []byte
	p      wire.Packet
}

type fzChargeKey struct {
	from     netip.AddrPort
	src, dst uint64
	msg      uint32
}

type fzPending struct {
	ev      Event
	release func()
}

type fzEvent struct {
	ep int
	ev Event
}

// fzViolation ends a run: the invariant, what happened, and (when traced) the operations.
type fzViolation struct {
	check, msg, phase string
	op                int
	at                time.Duration
	mode              fuzzMode
	trace             []string
}

func (v *fzViolation) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invariant %q violated at op #%d (t=%v, %s): %s\nmode: %v\n", v.check, v.op, v.at, v.phase, v.msg, v.mode)
	tr := v.trace
	if len(tr) > 300 {
		fmt.Fprintf(&b, "trace: last 300 of %d lines:\n", len(tr))
		tr = tr[len(tr)-300:]
	} else {
		fmt.Fprintf(&b, "trace:\n")
	}
	for _, l := range tr {
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "(to look past this invariant while fuzzing: FUZZENGINE_SKIP=%s)", v.check)
	return b.String()
}

type fzHarness struct {
	mode      fuzzMode
	cfg       Config
	authOn    bool
	checkOnce bool
	skip      map[string]bool
	r         fuzzReader
	ep        [2]*Endpoint
	addr      [2]netip.AddrPort
	pool      [2]*fuzzPool
	now       int64
	start     int64
	end       int64
	phase     string
	ops       int
	reliable  bool

	queue      []fzPkt
	queueBytes int
	sniff      [fuzzSniffed]fzSniff
	nsniff     int

	slots     [fuzzSlots]*fzConn
	honest    map[fzEP]*fzConn
	peerOf    map[fzEP]fzEP
	msgs      map[fzKey]*fzMsg
	bySender  map[fzEP][]*fzMsg
	pending   map[fzEP][]fzPending
	nextExp   map[fzEP]uint32
	honestIDs map[uint64]bool
	nmsgs     int
	open      int // honest messages without an outcome
	sentBytes int

	fed, dataPkts, charges [2]uint64
	charged                [2]map[fzChargeKey]struct{}

	buf     []byte
	ci      []ConnInfo
	dec     wire.Packet
	evs     []fzEvent
	tracing bool
	trace   []string
}

func newFzHarness(data []byte, tracing bool) *fzHarness {
	var mb, s1, s2 byte
	if len(data) > 0 {
		mb = data[0]
	}
	if len(data) > 1 {
		s1 = data[1]
	}
	if len(data) > 2 {
		s2 = data[2]
	}
	rest := data[min(len(data), 3):]
	mode := parseFuzzMode(mb)
	mode.setFuzzShape(s1, s2)
	h := &fzHarness{
		mode: mode, skip: fuzzSkips(), r: fuzzReader{b: rest}, tracing: tracing,
		addr:   [2]netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:23600"), netip.MustParseAddrPort("10.0.0.2:23600")},
		honest: map[fzEP]*fzConn{}, peerOf: map[fzEP]fzEP{}, msgs: map[fzKey]*fzMsg{},
		bySender: map[fzEP][]*fzMsg{}, pending: map[fzEP][]fzPending{}, nextExp: map[fzEP]uint32{},
		honestIDs: map[uint64]bool{}, buf: make([]byte, 70000), phase: "operations",
	}
	h.cfg, h.authOn = fuzzConfig(h.mode)
	h.checkOnce = !h.mode.informed || h.authOn
	seed := uint64(s1)<<8 | uint64(s2)
	for i := range h.ep {
		h.pool[i] = newFuzzPool()
		hk := Hooks{Buffers: h.pool[i], Placer: h.pool[i], DeliverChunks: h.mode.daemon}
		ep, err := NewEndpoint(h.cfg, rand.New(rand.NewPCG(seed, uint64(i)+7)), hk)
		if err != nil {
			panic(err)
		}
		h.ep[i] = ep
		h.charged[i] = map[fzChargeKey]struct{}{}
	}
	if !h.mode.zeroClock {
		h.now = 1e9
	}
	h.start = h.now
	h.end = h.now + fuzzMaxVirtual
	return h
}

var fuzzIters int

// FuzzEngine: see the top of this file and docs/fuzzing.md.
func FuzzEngine(f *testing.F) {
	for _, s := range fuzzEngineSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sample := fuzzIters%fuzzHeapEvery == 0
		fuzzIters++
		v := fuzzRun(data, false, sample)
		if v == nil {
			return
		}
		if v.check == "env" {
			t.Skip(v.msg) // the machine, not the engine
		}
		// Runs are deterministic: run again with the operations traced.
		tv := fuzzRun(data, true, sample)
		if tv != nil && tv.check != "env" {
			t.Fatal(tv.report())
		}
		if v.check == "heap" || tv != nil {
			t.Skipf("%s: did not reproduce (%s)", v.check, v.msg) // the heap sample is process-wide
		}
		t.Fatalf("%s\n(the traced re-run did not fail: nondeterminism?)", v.report())
	})
}

// fuzzRun runs one input and returns the first violation, or nil.
func fuzzRun(data []byte, tracing, sampleHeap bool) *fzViolation {
	v, _ := fuzzRunTrace(data, tracing, sampleHeap)
	return v
}

func fuzzRunTrace(data []byte, tracing, sampleHeap bool) (v *fzViolation, trace []string) {
	h := newFzHarness(data, tracing)
	defer func() { trace = h.trace }()
	defer h.teardown()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		fv, ok := r.(*fzViolation)
		if e, env := r.(fzEnvError); env {
			fv, ok = &fzViolation{check: "env", msg: string(e)}, true
		}
		if !ok {
			fv = &fzViolation{check: "panic", msg: fmt.Sprintf("%v\n%s", r, debug.Stack())}
		}
		fv.phase, fv.op, fv.at, fv.mode, fv.trace = h.phase, h.ops, time.Duration(h.now-h.start), h.mode, h.trace
		v = fv
	}()
	var heap0 uint64
	if sampleHeap && !h.skip["heap"] {
		heap0 = fuzzLiveHeap()
	}
	for h.ops = 0; h.ops < fuzzMaxOps && !h.r.done(); h.ops++ {
		h.step()
		h.afterOp()
	}
	if sampleHeap && !h.skip["heap"] {
		h.checkHeap(heap0)
	}
	h.settle()
	h.reclaim()
	return nil, nil
}

// TestFuzzEngineTrace prints the traced run of one input: FUZZENGINE_TRACE=FILE (a file
// of testdata/fuzz/FuzzEngine, or raw bytes) or FUZZENGINE_TRACE=seed#N.
func TestFuzzEngineTrace(t *testing.T) {
	name := os.Getenv("FUZZENGINE_TRACE")
	if name == "" {
		t.Skip("set FUZZENGINE_TRACE to an input file or seed#N")
	}
	var data []byte
	if n, ok := strings.CutPrefix(name, "seed#"); ok {
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= len(fuzzEngineSeeds()) {
			t.Fatalf("no seed %q", name)
		}
		data = fuzzEngineSeeds()[i]
	} else {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		data = b
		if rest, ok := strings.CutPrefix(string(b), "go test fuzz v1\n"); ok {
			q := strings.TrimSpace(rest)
			q = strings.TrimSuffix(strings.TrimPrefix(q, "[]byte("), ")")
			s, err := strconv.Unquote(q)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			data = []byte(s)
		}
	}
	v, trace := fuzzRunTrace(data, true, false)
	if v != nil {
		t.Log(v.report())
		return
	}
	d := append(data, 0, 0, 0)
	mode := parseFuzzMode(d[0])
	mode.setFuzzShape(d[1], d[2])
	t.Logf("mode %v, no violation; trace:\n  %s", mode, strings.Join(trace, "\n  "))
}

// fzEnvError is a failure of the machine the harness runs on (an mmap refused), not of
// the engine: the input is skipped.
type fzEnvError string

func (h *fzHarness) fail(check, format string, args ...any) {
	if h.skip[check] {
		return
	}
	panic(&fzViolation{check: check, msg: fmt.Sprintf(format, args...)})
}

func (h *fzHarness) tracef(format string, args ...any) {
	h.trace = append(h.trace, fmt.Sprintf("#%d t=%v ", h.ops, time.Duration(h.now-h.start))+fmt.Sprintf(format, args...))
}

func (h *fzHarness) teardown() {
	for _, ps := range h.pending {
		for _, p := range ps {
			p.release()
		}
	}
	for _, p := range h.pool {
		if p != nil {
			p.releaseAll()
		}
	}
}

var epName = [2]string{"A", "B"}

// ---- operations ----

func (h *fzHarness) step() {
	r := &h.r
	op := fzOps[r.u8()&31]
	switch op {
	case opRun: // [n]: n+1 times: deliver everything in flight, 2 us pass
		n := 1 + int(r.u8()%32)
		if h.tracing {
			h.tracef("run %d rounds", n)
		}
		for range n {
			for m := len(h.queue); m > 0 && len(h.queue) > 0; m-- {
				h.deliver(0)
			}
			h.advance(2000, true)
			h.afterOp()
		}
	case opSend: // [side|slot<<1][class][u16]
		a, cls, v := r.u8(), r.u8(), r.u16()
		h.send(int(a&1), int(a>>1)%fuzzSlots, fzSize(cls, v))
	case opDial: // [side|slot<<1]
		a := r.u8()
		h.dial(int(a&1), int(a>>1)%fuzzSlots)
	case opClose, opAbort: // [side|slot<<1]
		a := r.u8()
		h.closeOrAbort(int(a&1), int(a>>1)%fuzzSlots, op == opAbort)
	case opDeliver, opDrop, opDup, opCE: // [k]
		k := r.u8()
		if len(h.queue) == 0 {
			return
		}
		i := int(k) % len(h.queue)
		switch op {
		case opDeliver:
			h.deliver(i)
			h.advance(500, false)
		case opDrop:
			if h.tracing {
				h.tracef("drop %s", h.describeQueued(i))
			}
			h.unqueue(i)
		case opDup:
			if len(h.queue) < fuzzMaxQueue {
				p := h.queue[i]
				p.data = append([]byte(nil), p.data...)
				h.queue = append(h.queue, p)
				h.queueBytes += len(p.data)
				if h.tracing {
					h.tracef("dup %s", h.describeQueued(i))
				}
			}
		case opCE:
			h.queue[i].ecn = CE
			if h.tracing {
				h.tracef("ce-mark %s", h.describeQueued(i))
			}
		}
	case opTrim: // [k][how]
		k, how := r.u8(), r.u8()
		if len(h.queue) > 0 {
			h.trim(int(k)%len(h.queue), how)
		}
	case opDeliverAll:
		n := len(h.queue)
		if h.tracing {
			h.tracef("deliver-all (%d queued)", n)
		}
		for i := 0; i < n && len(h.queue) > 0; i++ {
			h.deliver(0)
		}
		h.advance(1000, false)
	case opStepSmall: // [u16 ns]
		d := int64(r.u16())
		if h.tracing {
			h.tracef("step %v", time.Duration(d))
		}
		h.advance(d, true)
	case opStepBig: // [e][mant]: (mant+1) << min(e&31, 24) ns; bit 7 of e: jump over timers
		e, mant := r.u8(), r.u8()
		d := (int64(mant) + 1) << min(e&31, 24)
		if h.tracing {
			h.tracef("step %v (%s)", time.Duration(d), map[bool]string{true: "running timers as they fall due", false: "one jump"}[e&0x80 == 0])
		}
		h.advance(d, e&0x80 == 0)
	case opNextTimer:
		if dl, ok := h.nextDeadline(); ok && dl <= h.end {
			if h.tracing {
				h.tracef("next-timer %v", time.Duration(dl-h.start))
			}
			h.now = max(h.now, dl)
			h.runTimers()
		}
	case opBlindData:
		h.blindData()
	case opBlindFlood:
		h.blindFlood()
	case opBlindPacket:
		h.blindPacket()
	case opGarbage: // [meta][n][n bytes]
		meta, n := r.u8(), int(r.u8())%(fuzzMaxGarbage+1)
		b := make([]byte, n)
		for i := range b {
			b[i] = r.u8()
		}
		to := int(meta & 1)
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 66, 0, meta >> 1}), 666)
		if h.tracing {
			h.tracef("garbage -> %s from %v: %s", epName[to], from, fzDescribe(b))
		}
		h.feed(to, b, RxMeta{From: from})
	case opForge:
		h.forge()
	case opReturn: // [k][how]
		k, how := r.u8(), r.u8()
		if len(h.queue) > 0 {
			h.returnHeader(int(k)%len(h.queue), how)
		}
	case opReplay: // [k]
		k := r.u8()
		if !h.mode.informed || h.nsniff == 0 {
			return
		}
		s := h.sniffed(k)
		if h.tracing {
			h.tracef("replay -> %s from %v: %s", epName[s.to], s.from, fzDescribe(s.raw))
		}
		h.feed(s.to, append([]byte(nil), s.raw...), RxMeta{From: s.from, ECN: ECT0})
	}
}

// fzSize maps a class and a value to a message size: 1..256, ..8 KiB, ..64 KiB, ..384 KiB.
func fzSize(cls uint8, v uint16) int {
	switch cls % 4 {
	case 0:
		return 1 + int(v%256)
	case 1:
		return 1 + int(v%8192)
	case 2:
		return 1 + int(v)
	}
	return min(fuzzMaxHonestMsg, 65536+5*int(v))
}

// localID is the connection side uses for honest connection hc (the acceptor's latest
// incarnation), or 0.
func (h *fzHarness) localID(hc *fzConn, side int) ConnID {
	if side == hc.dialer {
		return hc.dialID
	}
	if n := len(hc.accIDs); n > 0 {
		return hc.accIDs[n-1]
	}
	return 0
}

func (h *fzHarness) dial(side, slot int) {
	id, err := h.ep[side].Dial(h.now, h.addr[1-side])
	if h.tracing {
		h.tracef("dial %s -> %s into slot %d: conn %x, err %v", epName[side], epName[1-side], slot, uint64(id), err)
	}
	if err != nil {
		return
	}
	hc := &fzConn{dialer: side, dialID: id}
	h.honest[fzEP{side, id}] = hc
	h.honestIDs[uint64(id)] = true
	h.slots[slot] = hc
}

func (h *fzHarness) send(side, slot, size int) {
	hc := h.slots[slot]
	if hc == nil || h.nmsgs >= fuzzMaxHonestMsgs || h.sentBytes+size > fuzzMaxHonestBytes {
		return
	}
	conn := h.localID(hc, side)
	if conn == 0 {
		return
	}
	idx := h.nmsgs
	id, err := h.ep[side].Send(h.now, conn, fzContent(idx, size))
	if h.tracing {
		h.tracef("send %s -> %s on conn %x: message #%d of %d bytes: id %d, err %v", epName[side], epName[1-side], uint64(conn), idx, size, id, err)
	}
	if err != nil {
		return
	}
	k := fzKey{side, conn, id}
	if h.msgs[k] != nil {
		h.fail("outcome", "%s's Send returned message ID %d twice on conn %x", epName[side], id, uint64(conn))
	}
	m := &fzMsg{key: k, idx: idx, size: size}
	h.msgs[k] = m
	h.bySender[fzEP{side, conn}] = append(h.bySender[fzEP{side, conn}], m)
	h.nmsgs++
	h.open++
	h.sentBytes += size
}

func (h *fzHarness) closeOrAbort(side, slot int, abort bool) {
	hc := h.slots[slot]
	if hc == nil {
		return
	}
	conn := h.localID(hc, side)
	if conn == 0 {
		return
	}
	var err error
	if abort {
		err = h.ep[side].Abort(h.now, conn)
	} else {
		err = h.ep[side].Close(h.now, conn)
	}
	if h.tracing {
		h.tracef("%s %s's conn %x: %v", map[bool]string{true: "abort", false: "close"}[abort], epName[side], uint64(conn), err)
	}
}

// ---- the network ----

func (h *fzHarness) unqueue(i int) fzPkt {
	p := h.queue[i]
	copy(h.queue[i:], h.queue[i+1:])
	h.queue[len(h.queue)-1] = fzPkt{}
	h.queue = h.queue[:len(h.queue)-1]
	h.queueBytes -= len(p.data)
	return p
}

func (h *fzHarness) describeQueued(i int) string {
	p := &h.queue[i]
	return fmt.Sprintf("[%d/%d] -> %s: %s", i, len(h.queue), epName[p.to], fzDescribe(p.data))
}

// deliver hands queued packet i to its endpoint, unless it outlived fuzzMaxPacketLife.
func (h *fzHarness) deliver(i int) {
	if h.tracing {
		h.tracef("deliver %s", h.describeQueued(i))
	}
	p := h.unqueue(i)
	if h.now-p.at > fuzzMaxPacketLife {
		if h.tracing {
			h.tracef("  (expired: older than the maximum packet lifetime)")
		}
		return
	}
	h.feed(p.to, p.data, RxMeta{From: p.from, ECN: p.ecn, DSCP: p.dscp})
}

// trim cuts queued DATA packet i to its header: how%3 = 0: with FlagTrimmed (what the
// issue's switches do), 1: a partial payload without the flag, 2: with the trim DSCP.
func (h *fzHarness) trim(i int, how uint8) {
	p := &h.queue[i]
	if len(p.data) <= wire.DataHdrLen || p.data[0]&0x0f != byte(wire.TypeData) {
		return
	}
	n := len(p.data)
	switch how % 3 {
	case 0:
		p.data = p.data[:wire.DataHdrLen]
		p.data[1] |= byte(wire.FlagTrimmed)
	case 1:
		p.data = p.data[:wire.DataHdrLen+int(how>>2)%(n-wire.DataHdrLen)]
	case 2:
		p.data = p.data[:wire.DataHdrLen]
		p.dscp = fuzzTrimDSCP
	}
	h.queueBytes -= n - len(p.data)
	if h.tracing {
		h.tracef("trim (%d) %s", how%3, h.describeQueued(i))
	}
}

// feed hands a datagram to endpoint to, keeping the accounts the invariants need.
func (h *fzHarness) feed(to int, b []byte, m RxMeta) {
	p := &h.dec
	if p.Decode(fzWire(b)) == nil {
		if p.Type == wire.TypeData {
			h.fed[to] += uint64(len(p.Payload))
			h.dataPkts[to]++
			reply := m.From
			if p.ReplyPort != 0 {
				reply = netip.AddrPortFrom(m.From.Addr(), p.ReplyPort)
			}
			k := fzChargeKey{reply, p.SrcConn, p.DstConn, p.Data.MsgID}
			if _, ok := h.charged[to][k]; !ok {
				h.charged[to][k] = struct{}{}
				h.charges[to]++
			}
		}
		// Mirror the dialer learning its peer's connection ID from the first packet
		// naming its own, from the peer's host.
		if p.DstConn != 0 {
			if hc := h.honest[fzEP{to, ConnID(p.DstConn)}]; hc != nil && hc.dialer == to && hc.bound == 0 &&
				m.From.Addr() == h.addr[1-to].Addr() {
				h.bind(hc, ConnID(p.SrcConn))
			}
		}
	}
	h.ep[to].HandlePacket(h.now, b, m)
}

func (h *fzHarness) bind(hc *fzConn, peer ConnID) {
	hc.bound = peer
	self := fzEP{hc.dialer, hc.dialID}
	h.peerOf[self] = fzEP{1 - hc.dialer, peer}
	h.resolve(self)
}

// pollAll takes up to limit datagrams from each endpoint and routes them.
func (h *fzHarness) pollAll(limit int) {
	for i, e := range h.ep {
		for n := 0; n < limit; n++ {
			t, ok := e.PollTransmit(h.now, h.buf)
			if !ok {
				break
			}
			h.route(i, t, h.buf[:t.N])
		}
	}
}

// route sends a datagram endpoint from emitted to its destination: the honest endpoint
// at that address (through the queue) or the attacker (who drops it).
func (h *fzHarness) route(from int, t Transmit, b []byte) {
	p := &h.dec
	if err := p.Decode(fzWire(b)); err != nil {
		h.fail("wire", "%s emitted a datagram that does not decode (%v): %x", epName[from], err, b[:min(len(b), 80)])
		return
	}
	if p.Type != t.Type {
		h.fail("wire", "%s emitted a %v described as %v", epName[from], p.Type, t.Type)
	}
	to := -1
	for j, a := range h.addr {
		if t.To == a {
			to = j
		}
	}
	if p.DstConn != 0 && to >= 0 && to != from {
		// The dialer's own packets name the peer it learned.
		if hc := h.honest[fzEP{from, ConnID(p.SrcConn)}]; hc != nil && hc.dialer == from && hc.bound != ConnID(p.DstConn) {
			h.bind(hc, ConnID(p.DstConn))
		}
		// The acceptor's packets to the dialer reveal its connection (incarnation).
		if hc := h.honest[fzEP{to, ConnID(p.DstConn)}]; hc != nil && hc.dialer == to &&
			p.Type != wire.TypeReset && p.Type != wire.TypeCloseAck {
			me := fzEP{from, ConnID(p.SrcConn)}
			if h.honest[me] == nil {
				hc.accIDs = append(hc.accIDs, me.conn)
				h.honest[me] = hc
				h.honestIDs[p.SrcConn] = true
				h.peerOf[me] = fzEP{to, hc.dialID}
				h.resolve(me)
			}
		}
	}
	if to < 0 {
		return // to the attacker, or nobody
	}
	if h.mode.informed && to != from {
		s := &h.sniff[h.nsniff%fuzzSniffed]
		h.nsniff++
		s.raw = append(s.raw[:0], b...)
		s.from = netip.AddrPortFrom(h.addr[from].Addr(), fuzzEVPortBase+t.EV%20000)
		s.fromEP, s.to = from, to
		s.p = *p
		s.p.Payload = nil
	}
	if !h.reliable && len(h.queue) >= fuzzMaxQueue {
		return // tail drop
	}
	h.queue = append(h.queue, fzPkt{data: append([]byte(nil), b...), to: to, ecn: t.ECN, at: h.now,
		from: netip.AddrPortFrom(h.addr[from].Addr(), fuzzEVPortBase+t.EV%20000)})
	h.queueBytes += len(b)
}

// returnHeader sends the header of queued DATA packet i back to its sender, as a
// return-to-sender switch does (FlagTrimmed|FlagReturned, addresses swapped). how%4: 0:
// the switch returns it instead of forwarding it; 1: an on-path injector returns a copy
// and the original goes on; 2: the copy comes from another address; 3: the copy's TxTime
// is off by one (a forger's guess).
func (h *fzHarness) returnHeader(i int, how uint8) {
	p := &h.queue[i]
	if len(p.data) < wire.DataHdrLen || p.data[0]&0x0f != byte(wire.TypeData) {
		return
	}
	b := append([]byte(nil), p.data[:wire.TrimmedLen(p.data)]...)
	b[1] |= byte(wire.FlagTrimmed | wire.FlagReturned)
	to, from := 1-p.to, h.addr[p.to]
	switch how % 4 {
	case 0:
		h.unqueue(i)
	case 2:
		from = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 66, 0, how}), from.Port())
	case 3:
		b[wire.DataHdrLen-1]++ // the low byte of TxTime (the header's last 8 bytes)
	}
	if h.tracing {
		h.tracef("return (%d) -> %s from %v: %s", how%4, epName[to], from, fzDescribe(b))
	}
	h.ep[to].HandlePacket(h.now, b, RxMeta{From: from})
}

// ---- time ----

func (h *fzHarness) nextDeadline() (int64, bool) {
	var d int64
	ok := false
	for _, e := range h.ep {
		if t, armed := e.NextTimeout(); armed && (!ok || t < d) {
			d, ok = t, true
		}
	}
	return d, ok
}

func (h *fzHarness) runTimers() {
	for _, e := range h.ep {
		if t, ok := e.NextTimeout(); ok && t <= h.now {
			e.HandleTimeout(h.now)
		}
	}
}

// advance moves the clock d ns on (not past the end of the operations' time), running
// the timers as they fall due (collecting what they send) or once at the end.
func (h *fzHarness) advance(d int64, through bool) {
	target := min(h.now+d, h.end)
	if target <= h.now {
		h.runTimers()
		return
	}
	for k := 0; through && k < 64; k++ {
		dl, ok := h.nextDeadline()
		if !ok || dl > target {
			break
		}
		h.now = max(h.now, dl)
		h.runTimers()
		h.pollAll(fuzzMaxPoll)
	}
	h.now = target
	h.runTimers()
}

// ---- the attacker ----

// blindID turns a fuzz-chosen value into a connection ID the blind attacker may use:
// never one of the honest connections' (it cannot know them).
func (h *fzHarness) blindID(v uint64) uint64 {
	for v == 0 || h.honestIDs[v] {
		v = v*0x9E3779B97F4A7C15 + 1
	}
	return v
}

// attackerAddr: sel%4 = 0: the attacker's own address; 1, 2: spoofing A's or B's IP;
// 3: spoofing the honest peer's exact address (of target to).
func (h *fzHarness) attackerAddr(sel uint8, ip, port uint16, to int) netip.AddrPort {
	switch sel % 4 {
	case 0:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 66, byte(ip >> 8), byte(ip)}), port|1)
	case 1, 2:
		return netip.AddrPortFrom(h.addr[sel%4-1].Addr(), port|1)
	}
	return h.addr[1-to]
}

// fzBases are the values an informed attacker saw (zero for the blind one).
type fzBases struct {
	psn, floor, msg, msgLen uint32
	stream                  uint64
}

// fill reads the type-specific fields of p (header fields are set) from the input.
// It returns how many bytes of a DATA payload to cut off the encoding (0: none).
func (h *fzHarness) fill(p *wire.Packet, b fzBases) (cut int) {
	r := &h.r
	now := uint64(h.now)
	switch p.Type {
	case wire.TypeData:
		// [floor][psn][msg][len][off][plen u16][flags][stream][tx][cut][fill]
		d := &p.Data
		d.AckFloor = r.val32(b.floor)
		d.PSN = r.val32(b.psn)
		d.MsgID = r.val32(b.msg)
		d.MsgLen = max(r.len32(b.msgLen), 1)
		d.Offset = r.val32(0)
		plen := uint32(r.u16()) % uint32(h.cfg.MTU+1)
		plen = min(max(plen, 1), d.MsgLen)
		if uint64(d.Offset)+uint64(plen) > uint64(d.MsgLen) {
			d.Offset = d.MsgLen - plen
		}
		d.PayloadLen = uint16(plen)
		p.Flags = wire.Flags(r.u8() & 0x3f)
		if p.Flags&wire.FlagEC != 0 {
			// [k][m-1|index<<4]: parity of any block shape, valid on the wire.
			k, mi := r.u8(), r.u8()
			m := 1 + mi&15
			d.EC = wire.EC{K: max(k, 1), M: m, Index: (mi >> 4) % m}
		}
		d.StreamStart = r.val64(b.stream)
		d.TxTime = int64(r.val64(now))
		c, fill := r.u8(), r.u8()
		pl := make([]byte, plen)
		for i := range pl {
			pl[i] = fill
		}
		p.Payload = pl
		if c&0x80 != 0 {
			cut = 1 + int(c&0x7f)%int(plen) // leave fewer payload bytes than PayloadLen
		}
	case wire.TypeAck:
		// [cum][sackbase][acked][echoEV u16][words][per word: sel (+u64)][echotx][hold u32]
		// [ce u16][pkts u16][delivered][window sel (+u32)][flags][nclean][nclean x u16]
		a := &p.Ack
		a.CumPSN = r.val32(b.psn)
		a.SackBase = r.val32(b.psn)
		a.AckedPSN = r.val32(b.psn)
		a.EchoEV = r.u16()
		a.SackWords = 1 + r.u8()%wire.MaxSackWords
		for w := 0; w < int(a.SackWords); w++ {
			switch s := r.u8(); s >> 6 {
			case 0:
				a.Sack[w] = 0
			case 1:
				a.Sack[w] = ^uint64(0)
			case 2:
				a.Sack[w] = r.u64()
			default:
				a.Sack[w] = 1<<(s&63) - 1
			}
		}
		a.EchoTxTime = int64(r.val64(now))
		a.HoldTime = r.u32()
		a.CECount = r.u16()
		a.PktCount = r.u16()
		a.Delivered = r.val64(b.stream)
		switch s := r.u8(); s >> 6 {
		case 0:
			a.Window = 0
		case 1:
			a.Window = uint32(h.cfg.RecvWindow)
		case 2:
			a.Window = r.u32()
		default:
			a.Window = ^uint32(0)
		}
		p.Flags = wire.Flags(r.u8()) & wire.FlagCE
		a.NumClean = r.u8() % (wire.MaxCleanEVs + 1)
		for i := 0; i < int(a.NumClean); i++ {
			a.CleanEVs[i] = r.u16()
		}
		if a.NumClean > 0 {
			p.Flags |= wire.FlagCleanEV
		}
	case wire.TypeNack:
		// [psn][cum][echoEV u16][hold u32][echotx][flags]
		n := &p.Nack
		n.PSN = r.val32(b.psn)
		n.CumPSN = r.val32(b.psn)
		n.EchoEV = r.u16()
		n.HoldTime = r.u32()
		n.EchoTxTime = int64(r.val64(now))
		p.Flags = wire.Flags(r.u8()) & wire.FlagCE
	case wire.TypeProbe:
		p.Probe = int64(r.val64(now)) // [tx]
	case wire.TypeClose:
		p.Reason = r.u32() // [reason u32]
	}
	return cut
}

// inject encodes p and hands it to endpoint to as if from from.
func (h *fzHarness) inject(what string, to int, from netip.AddrPort, p *wire.Packet, cut int, meta uint8) {
	n, err := p.Encode(h.buf)
	if err != nil {
		if h.tracing {
			h.tracef("%s: not encodable (%v)", what, err)
		}
		return
	}
	b := append([]byte(nil), h.buf[:n-cut]...)
	m := RxMeta{From: from, ECN: meta & 3}
	if meta&4 != 0 {
		m.DSCP = fuzzTrimDSCP
	}
	if h.tracing {
		h.tracef("%s -> %s from %v (ecn %d dscp %d): %s", what, epName[to], from, m.ECN, m.DSCP, fzDescribe(b))
	}
	h.feed(to, b, m)
}

// blindData: a first-contact DATA (DstConn 0) from a fuzz-chosen source and connection.
// [meta: target|ecn<<1|dscp<<3][addr sel][ip u16][port u16][reply port u16][src u64] + DATA fields
func (h *fzHarness) blindData() {
	r := &h.r
	meta, sel, ip, port, reply, src := r.u8(), r.u8(), r.u16(), r.u16(), r.u16(), r.u64()
	to := int(meta & 1)
	p := wire.Packet{Header: wire.Header{Type: wire.TypeData, EV: ip, ReplyPort: reply, SrcConn: h.blindID(src)}}
	cut := h.fill(&p, fzBases{})
	h.inject("blind-data", to, h.attackerAddr(sel, ip, port, to), &p, cut, meta>>1)
}

// blindFlood: n first contacts, each from another connection ID and source, each
// claiming a message of the same length; with bit 4 of meta, n messages (successive
// IDs and PSNs) on one connection instead.
// [meta][n][ip u16][src u64][len][stream][msg][floor]
func (h *fzHarness) blindFlood() {
	r := &h.r
	meta, n, ip, src := r.u8(), 1+int(r.u8())%fuzzMaxFlood, r.u16(), r.u64()
	msgLen := max(r.len32(1), 1)
	stream, msg, floor := r.val64(0), r.val32(0), r.val32(0)
	to := int(meta & 1)
	if h.tracing {
		h.tracef("blind-flood -> %s: %d first contacts claiming %d-byte messages (one connection: %v)", epName[to], n, msgLen, meta&0x10 != 0)
	}
	tr := h.tracing
	h.tracing = false
	one := meta&0x10 != 0
	for i := 0; i < n; i++ {
		p := wire.Packet{Header: wire.Header{Type: wire.TypeData, EV: uint16(i), SrcConn: h.blindID(src + uint64(i)*0x9E3779B97F4A7C15)}}
		p.Data = wire.Data{PSN: floor, AckFloor: floor, MsgID: msg, MsgLen: msgLen, PayloadLen: 1, StreamStart: stream, TxTime: h.now}
		p.Payload = []byte{byte(i)}
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 67, byte(ip), byte(i)}), 23600)
		if one {
			p.SrcConn = h.blindID(src)
			p.Data.PSN += uint32(i)
			p.Data.MsgID += uint32(i)
			from = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 67, byte(ip), 0}), 23600)
		}
		h.inject("", to, from, &p, 0, meta>>1)
	}
	h.tracing = tr
}

// blindPacket: any type, random connection IDs (never the honest ones).
// [meta][addr sel][ip u16][port u16][reply port u16][type][dst u64][src u64] + fields
func (h *fzHarness) blindPacket() {
	r := &h.r
	meta, sel, ip, port, reply := r.u8(), r.u8(), r.u16(), r.u16(), r.u16()
	typ := wire.Type(1 + r.u8()%7)
	dst, src := r.u64(), r.u64()
	if dst != 0 {
		dst = h.blindID(dst)
	}
	to := int(meta & 1)
	p := wire.Packet{Header: wire.Header{Type: typ, EV: ip, ReplyPort: reply, DstConn: dst, SrcConn: h.blindID(src)}}
	cut := h.fill(&p, fzBases{})
	h.inject("blind-packet", to, h.attackerAddr(sel, ip, port, to), &p, cut, meta>>1)
}

// sniffed returns the k-th most recent honest packet the attacker saw; with bit 7 of k
// set, the (k&127)-th most recent DATA packet if it saw any.
func (h *fzHarness) sniffed(k uint8) *fzSniff {
	n := min(h.nsniff, fuzzSniffed)
	if k&0x80 != 0 {
		var data []int
		for j := 0; j < n; j++ {
			if i := (h.nsniff - 1 - j) % fuzzSniffed; h.sniff[i].p.Type == wire.TypeData {
				data = append(data, i)
			}
		}
		if len(data) > 0 {
			return &h.sniff[data[int(k&0x7f)%len(data)]]
		}
	}
	return &h.sniff[(h.nsniff-1-int(k)%n)%fuzzSniffed]
}

// forge: the informed attacker copies the connection IDs and addresses of a captured
// honest packet, in its direction (spoofing its sender) or the reverse (spoofing its
// receiver), and guesses the rest relative to what it saw.
// [k][reverse|type<<1][ev u16][meta] + fields
func (h *fzHarness) forge() {
	r := &h.r
	k := r.u8()
	if !h.mode.informed || h.nsniff == 0 {
		return
	}
	s := h.sniffed(k)
	dt, ev, meta := r.u8(), r.u16(), r.u8()
	typ := wire.Type(1 + (dt>>1)%7)
	sp := &s.p
	to, from, src, dst := s.to, s.from, sp.SrcConn, sp.DstConn
	if dst == 0 {
		// A first contact: the receiver's ID is in the packets it sent back, if any.
		for j := 0; j < min(h.nsniff, fuzzSniffed); j++ {
			if o := &h.sniff[j]; o.fromEP == s.to && o.p.DstConn == src {
				dst = o.p.SrcConn
			}
		}
	}
	if dt&1 != 0 {
		to = s.fromEP
		from = netip.AddrPortFrom(h.addr[s.to].Addr(), fuzzEVPortBase+ev%20000)
		src, dst = dst, src
	}
	var b fzBases
	switch sp.Type {
	case wire.TypeData:
		b = fzBases{psn: sp.Data.PSN, floor: sp.Data.AckFloor, msg: sp.Data.MsgID, msgLen: sp.Data.MsgLen, stream: sp.Data.StreamStart}
	case wire.TypeAck:
		b = fzBases{psn: sp.Ack.CumPSN, floor: sp.Ack.CumPSN, stream: sp.Ack.Delivered}
	case wire.TypeNack:
		b = fzBases{psn: sp.Nack.PSN, floor: sp.Nack.CumPSN}
	}
	p := wire.Packet{Header: wire.Header{Type: typ, EV: ev, ReplyPort: fuzzListenPort, DstConn: dst, SrcConn: src}}
	cut := h.fill(&p, b)
	h.inject("forge", to, from, &p, cut, meta)
}

// ---- events and invariants ----

func (h *fzHarness) afterOp() {
	h.pollAll(fuzzMaxPoll)
	h.checkTimers()
	h.drain()
	h.checkMem()
	h.checkConns()
}

// checkTimers: once HandleTimeout has run at now and PollTransmit has taken everything,
// the next deadline lies in the future; a deadline that stays due would make a driver
// (the daemon's timer loop) spin. A few rounds are allowed to settle.
func (h *fzHarness) checkTimers() {
	for i, e := range h.ep {
		dl, ok := e.NextTimeout()
		for k := 0; ok && dl <= h.now && k < 4; k++ {
			e.HandleTimeout(h.now)
			n := 0
			for ; n < 4096; n++ {
				t, more := e.PollTransmit(h.now, h.buf)
				if !more {
					break
				}
				h.route(i, t, h.buf[:t.N])
			}
			if n == 4096 {
				return // still sending: not a spin
			}
			dl, ok = e.NextTimeout()
		}
		if ok && dl <= h.now {
			h.fail("timer", "%s: NextTimeout stays at %v (now %v) after HandleTimeout and PollTransmit: a driver would spin; connections: %s",
				epName[i], time.Duration(dl-h.start), time.Duration(h.now-h.start), fzConnList(e))
		}
	}
}

// drain processes both endpoints' events: deliveries first, then outcomes, then closes
// (an ACK that completes a message at the sender always follows its delivery).
func (h *fzHarness) drain() {
	h.evs = h.evs[:0]
	for i, e := range h.ep {
		for ev := range pending(e) {
			h.evs = append(h.evs, fzEvent{i, ev})
		}
	}
	for _, x := range h.evs {
		switch x.ev.Kind {
		case MessageReceived:
			h.onReceived(x.ep, x.ev)
		case ConnAccepted:
			h.honestIDs[uint64(x.ev.Conn)] = true
			if h.tracing {
				h.tracef("  event: %s accepted conn %x from %v", epName[x.ep], uint64(x.ev.Conn), x.ev.Peer)
			}
		}
	}
	for _, x := range h.evs {
		if x.ev.Kind == MessageSent || x.ev.Kind == MessageFailed {
			h.onOutcome(x.ep, x.ev)
		}
	}
	for _, x := range h.evs {
		if x.ev.Kind == ConnClosed {
			h.onClosed(x.ep, x.ev)
		}
	}
}

func (h *fzHarness) onReceived(ep int, ev Event) {
	rc := fzEP{ep, ev.Conn}
	release := h.pool[ep].take(ev.Data)
	if ev.Placed != 0 {
		release = h.pool[ep].delivered(ev.Placed, ev.Data)
	}
	if ev.Chunks != nil {
		ev.Data, release = h.joinChunks(ep, ev)
	}
	if h.tracing {
		h.tracef("  event: %s received message %d (%d bytes) on conn %x from %v", epName[ep], ev.MsgID, len(ev.Data), uint64(ev.Conn), ev.Peer)
	}
	if !h.checkOnce || ev.Peer.Addr() != h.addr[1-ep].Addr() {
		release()
		return
	}
	sk, ok := h.peerOf[rc]
	if !ok {
		// Not (yet) known as an honest connection: its packets will tell.
		h.pending[rc] = append(h.pending[rc], fzPending{ev, release})
		return
	}
	h.checkDelivery(rc, sk, ev)
	release()
}

// joinChunks checks a message delivered in chunks (DeliverChunks): every chunk but the
// last RecvChunk bytes long, each a buffer of a receive class; it returns the message's
// bytes and the function that gives the chunks back.
func (h *fzHarness) joinChunks(ep int, ev Event) ([]byte, func()) {
	var data []byte
	for i, ch := range ev.Chunks {
		if _, ok := chunkClass(ch); !ok || len(ch) == 0 || (i < len(ev.Chunks)-1 && len(ch) != RecvChunk) || len(ch) > RecvChunk {
			h.fail("chunks", "%s delivered message %d in %d chunks, chunk %d of %d bytes (capacity %d)", epName[ep], ev.MsgID, len(ev.Chunks), i, len(ch), cap(ch))
		}
		data = append(data, ch...)
	}
	if ev.Data != nil || ev.Placed != 0 {
		h.fail("chunks", "%s delivered message %d in chunks and as Data/Placed", epName[ep], ev.MsgID)
	}
	return data, func() { PutChunks(ev.Chunks) }
}

// resolve checks the deliveries held for rc now that its peer is known.
func (h *fzHarness) resolve(rc fzEP) {
	ps := h.pending[rc]
	if len(ps) == 0 {
		return
	}
	delete(h.pending, rc)
	sk := h.peerOf[rc]
	for _, p := range ps {
		h.checkDelivery(rc, sk, p.ev)
		p.release()
	}
}

func (h *fzHarness) checkDelivery(rc, sk fzEP, ev Event) {
	m := h.msgs[fzKey{sk.ep, sk.conn, ev.MsgID}]
	recv := fmt.Sprintf("%s (conn %x, peer of %s's conn %x)", epName[rc.ep], uint64(rc.conn), epName[sk.ep], uint64(sk.conn))
	if m == nil {
		h.fail("once", "%s delivered message %d (%d bytes), which %s never sent", recv, ev.MsgID, len(ev.Data), epName[sk.ep])
		return
	}
	m.deliveries++
	if m.deliveries == 1 {
		m.firstRecv = rc
	} else if m.firstRecv != rc {
		h.fail("resurrect", "%s delivered message %d (#%d, %d bytes) again, on a new connection: %s's conn %x delivered it first",
			recv, ev.MsgID, m.idx, m.size, epName[m.firstRecv.ep], uint64(m.firstRecv.conn))
	} else {
		h.fail("once", "%s delivered message %d (#%d, %d bytes) %d times", recv, ev.MsgID, m.idx, m.size, m.deliveries)
	}
	if len(ev.Data) != m.size {
		h.fail("once", "%s delivered message %d with %d bytes, sent %d", recv, ev.MsgID, len(ev.Data), m.size)
	} else if off := fzContentDiff(m.idx, ev.Data); off >= 0 {
		h.fail("once", "%s delivered message %d (%d bytes) corrupted from byte %d", recv, ev.MsgID, m.size, off)
	}
	if !h.cfg.Unordered {
		if exp := h.nextExp[rc]; ev.MsgID != exp {
			h.fail("once", "%s delivered message %d, expected %d next (in-order delivery)", recv, ev.MsgID, exp)
		}
		h.nextExp[rc] = ev.MsgID + 1
	}
}

func (h *fzHarness) onOutcome(ep int, ev Event) {
	if h.tracing {
		h.tracef("  event: %s: message %d on conn %x %v %v", epName[ep], ev.MsgID, uint64(ev.Conn), ev.Kind, ev.Err)
	}
	m := h.msgs[fzKey{ep, ev.Conn, ev.MsgID}]
	if m == nil {
		h.fail("outcome", "%s reported %v for message %d on conn %x, which it was never given", epName[ep], ev.Kind, ev.MsgID, uint64(ev.Conn))
		return
	}
	if m.outcome != 0 {
		h.fail("outcome", "%s reported %v for message %d on conn %x after %v", epName[ep], ev.Kind, ev.MsgID, uint64(ev.Conn), m.outcome)
		return
	}
	m.outcome = ev.Kind
	h.open--
	if ev.Kind == MessageSent && h.checkOnce && h.cfg.Unordered && m.deliveries == 0 {
		h.fail("sent", "%s reported message %d (#%d, %d bytes) on conn %x sent, but %s has not delivered it",
			epName[ep], ev.MsgID, m.idx, m.size, uint64(ev.Conn), epName[1-ep])
	}
}

func (h *fzHarness) onClosed(ep int, ev Event) {
	c := fzEP{ep, ev.Conn}
	if h.tracing {
		h.tracef("  event: %s closed conn %x (%v)", epName[ep], uint64(ev.Conn), ev.Err)
	}
	for _, m := range h.bySender[c] {
		if m.outcome == 0 {
			h.fail("outcome", "%s closed conn %x (%v) leaving message %d without an outcome", epName[ep], uint64(ev.Conn), ev.Err, m.key.id)
		}
	}
	clear(h.charged[ep]) // a message may now be reopened: charge it again
	if h.checkOnce && !h.cfg.Unordered {
		if sk, ok := h.peerOf[c]; ok {
			h.checkSentDelivered(sk, fmt.Sprintf("the receiving conn %x at %s closed (%v)", uint64(ev.Conn), epName[ep], ev.Err))
		}
	}
}

// checkSentDelivered: every message sender sk reported sent was delivered.
func (h *fzHarness) checkSentDelivered(sk fzEP, why string) {
	for _, m := range h.bySender[sk] {
		if m.outcome == MessageSent && m.deliveries == 0 {
			h.fail("sent", "%s reported message %d (#%d, %d bytes) on conn %x sent, but %s never delivered it: %s",
				epName[sk.ep], m.key.id, m.idx, m.size, uint64(sk.conn), epName[1-sk.ep], why)
		}
	}
}

func (h *fzHarness) checkMem() {
	for i, e := range h.ep {
		st := e.Stats()
		bound := h.fed[i] + fuzzPerMsgSlack*h.charges[i] + fuzzPerPktSlack*h.dataPkts[i] +
			fuzzPerConnSlack*(st.ConnsOpened+st.ConnsAccepted)
		// What is held, counted from the engine's structures and the pool, not from its
		// charges: every chunk at its capacity, records, tables, spans, placements.
		held, _, err := ledgerHeld(e)
		if err != nil {
			h.fail("gauge", "%s: %v", epName[i], err)
		}
		budget := uint64(h.cfg.RecvBudget) + h.cfg.maxMsgCharge(h.cfg.MaxMessage)
		if v := max(st.RecvBuffered, held); v > bound || v > budget {
			h.fail("mem", "%s holds %d bytes for messages (charged %d) after being fed %d payload bytes in %d DATA packets of %d messages: bound %d, budget %d",
				epName[i], held, st.RecvBuffered, h.fed[i], h.dataPkts[i], h.charges[i], min(bound, budget), budget)
		}
		// docs/engine.md, flow control: a connection's open messages claim at most
		// RecvWindow besides the next one in delivery order (at most MaxMessage), and
		// what they hold is at most their claims times what a 1-byte message holds (its
		// record and a 64-byte buffer) over what it claims (1+MsgOverhead bytes).
		h.ci = e.Conns(h.ci[:0])
		for _, c := range h.ci {
			if lim := uint64(h.cfg.RecvWindow+h.cfg.MaxMessage)*(msgRecBytes+64)/(MsgOverhead+1) + 64<<10; c.RecvBuffers > lim {
				h.fail("window", "%s's conn %x (peer %v) holds %d bytes for messages, more than its claims allow (%d)",
					epName[i], uint64(c.ID), c.Peer, c.RecvBuffers, lim)
			}
		}
		// The ledger: charged equals held, and the pool's own count of whole buffers
		// handed out agrees with the buffers the messages hold.
		if err := ledgerCheck(e); err != nil {
			h.fail("gauge", "%s: %v", epName[i], err)
		}
		if whole := fzWholeHeld(e); h.pool[i].held != whole {
			h.fail("gauge", "%s: %d bytes are held from Hooks.Buffers, the open messages hold %d of them", epName[i], h.pool[i].held, whole)
		}
		if len(h.pool[i].errs) > 0 {
			h.fail("pool", "%s: %s", epName[i], h.pool[i].errs[0])
		}
	}
}

// fzWholeHeld is the bytes of whole buffers (from Hooks.Buffers) e's open messages hold.
func fzWholeHeld(e *Endpoint) uint64 {
	var n uint64
	for _, c := range e.list {
		for r := range c.rx.all {
			n += uint64(len(r.buf))
		}
	}
	return n
}

func (h *fzHarness) checkConns() {
	for i, e := range h.ep {
		if n := e.NumConns(); n > h.cfg.MaxConns {
			h.fail("conns", "%s has %d connections, MaxConns %d", epName[i], n, h.cfg.MaxConns)
		}
	}
}

func fuzzLiveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// checkHeap: the live heap grew over the input by at most twice what the endpoints
// charged for their peers (chunks come from the heap) plus what the harness holds.
func (h *fzHarness) checkHeap(heap0 uint64) {
	live := fuzzLiveHeap()
	allow := fuzzHeapSlack + uint64(h.sentBytes+h.queueBytes) + h.pool[0].small + h.pool[1].small + fuzzSniffed*70000
	for _, e := range h.ep {
		st := e.Stats()
		allow += 2 * (st.RecvBuffered + st.ConnHeld + st.TimeWaitHeld)
	}
	if heap0 != 0 && live > heap0+allow {
		h.fail("heap", "live heap grew by %d bytes over the input (allowed %d)", live-heap0, allow)
	}
}

// flush runs the network reliably once: what the endpoints have to send is queued and
// every queued packet delivered, in order. It returns how many were delivered.
func (h *fzHarness) flush() int {
	h.pollAll(4096)
	n := 0
	for len(h.queue) > 0 {
		h.deliver(0)
		n++
	}
	h.drain()
	h.checkMem()
	h.checkConns()
	return n
}

// settle: the attacker has stopped and the network delivers everything (1 us per hop);
// every honest message must get an outcome (invariant 5).
func (h *fzHarness) settle() {
	h.phase, h.reliable = "settle", true
	deadline := h.now + fuzzSettleMax
	if h.tracing {
		h.tracef("-- settle: the attacker stops, the network delivers everything")
	}
	for step := 0; ; step++ {
		n := h.flush()
		if h.open == 0 {
			return
		}
		if step >= fuzzMaxSettleSteps {
			h.fail("live", "%d settle steps and %d messages still have no outcome: %s", step, h.open, h.openList())
			return
		}
		next, ok := h.nextDeadline()
		if n > 0 || len(h.queue) > 0 {
			if !ok || h.now+1000 < next {
				next, ok = h.now+1000, true
			}
		}
		if !ok {
			h.fail("live", "no timer armed, nothing in flight, and %d messages have no outcome: %s", h.open, h.openList())
			return
		}
		if next > deadline {
			h.fail("live", "%d messages still have no outcome after %v of reliable network: %s", h.open, time.Duration(fuzzSettleMax), h.openList())
			return
		}
		h.now = max(h.now, next)
		h.runTimers()
	}
}

func (h *fzHarness) openList() string {
	var b strings.Builder
	k := 0
	for _, m := range h.msgs {
		if m.outcome == 0 && k < 8 {
			ci, live := h.ep[m.key.ep].ConnInfo(m.key.conn)
			fmt.Fprintf(&b, "[%s conn %x msg %d, %d bytes; conn live %v %+v] ", epName[m.key.ep], uint64(m.key.conn), m.key.id, m.size, live, ci)
			k++
		}
	}
	return b.String()
}

// reclaim: after silence (no application activity, a reliable network) the endpoints
// hold no receive buffers and, per Config.IdleTimeout, no connections.
func (h *fzHarness) reclaim() {
	h.phase = "reclaim"
	cfg := &h.cfg
	silence := 2*int64(cfg.IdleTimeout) + int64(cfg.TimeWait) + int64(cfg.CloseRetries+1)*int64(cfg.MaxRTO)
	end := h.now + silence
	if h.tracing {
		h.tracef("-- reclaim: silence until %v", time.Duration(end-h.start))
	}
	for step := 0; step < fuzzMaxSettleSteps && h.now < end; step++ {
		n := h.flush()
		next, ok := h.nextDeadline()
		if n > 0 || len(h.queue) > 0 {
			if !ok || h.now+1000 < next {
				next, ok = h.now+1000, true
			}
		}
		if !ok || next > end {
			next = end
		}
		h.now = max(h.now, next)
		h.runTimers()
	}
	h.flush()
	if h.checkOnce && !h.cfg.Unordered {
		for sk := range h.bySender {
			h.checkSentDelivered(sk, "the input ended")
		}
	}
	for i, e := range h.ep {
		st := e.Stats()
		if st.RecvBuffered != 0 || h.pool[i].held != 0 || h.pool[i].placedHeld != 0 {
			h.fail("reclaim", "%s still holds %d bytes of receive buffers (pool: %d, placed: %d) after %v of silence; connections: %s",
				epName[i], st.RecvBuffered, h.pool[i].held, h.pool[i].placedHeld, time.Duration(silence), fzConnList(e))
		}
		if fuzzReclaimConns && e.NumConns() != 0 {
			h.fail("idle", "%s still has %d connections after %v of silence (IdleTimeout %v): %s",
				epName[i], e.NumConns(), time.Duration(silence), time.Duration(cfg.IdleTimeout), fzConnList(e))
		}
	}
}

func fzConnList(e *Endpoint) string {
	var b strings.Builder
	for i, c := range e.Conns(nil) {
		if i == 8 {
			b.WriteString("...")
			break
		}
		fmt.Fprintf(&b, "[conn %x peer %v initiator %v buffers %d queued %d closing %v] ", uint64(c.ID), c.Peer, c.Initiator, c.RecvBuffers, c.QueuedMsgs, c.Closing)
	}
	return b.String()
}

// ---- message contents ----

func fzWord(idx, w int) uint64 {
	x := uint64(idx)<<40 ^ uint64(w) + 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// fzContent is honest message idx: deterministic, different for every index.
func fzContent(idx, size int) []byte {
	b := make([]byte, size+7)
	for j := 0; j < size; j += 8 {
		binary.LittleEndian.PutUint64(b[j:], fzWord(idx, j>>3))
	}
	return b[:size:size]
}

// fzContentDiff returns the first offset where b differs from message idx, or -1.
func fzContentDiff(idx int, b []byte) int {
	var w [8]byte
	for j := 0; j < len(b); j += 8 {
		binary.LittleEndian.PutUint64(w[:], fzWord(idx, j>>3))
		for k := 0; k < 8 && j+k < len(b); k++ {
			if b[j+k] != w[k] {
				return j + k
			}
		}
	}
	return -1
}

// fzDescribe renders a datagram for traces.
func fzDescribe(b []byte) string {
	var p wire.Packet
	if err := p.Decode(fzWire(b)); err != nil {
		return fmt.Sprintf("%d bytes, malformed (%v)", len(b), err)
	}
	s := fmt.Sprintf("%v dst=%x src=%x", p.Type, p.DstConn, p.SrcConn)
	switch p.Type {
	case wire.TypeData:
		d := &p.Data
		s += fmt.Sprintf(" psn=%d floor=%d msg=%d len=%d off=%d plen=%d present=%d stream=%d flags=%#x",
			d.PSN, d.AckFloor, d.MsgID, d.MsgLen, d.Offset, d.PayloadLen, len(p.Payload), d.StreamStart, uint8(p.Flags))
	case wire.TypeAck:
		a := &p.Ack
		s += fmt.Sprintf(" cum=%d sackbase=%d sack=%x acked=%d delivered=%d window=%d echotx=%d hold=%d ce=%d pkts=%d",
			a.CumPSN, a.SackBase, a.Sack[:a.SackWords], a.AckedPSN, a.Delivered, a.Window, a.EchoTxTime, a.HoldTime, a.CECount, a.PktCount)
	case wire.TypeNack:
		s += fmt.Sprintf(" psn=%d cum=%d", p.Nack.PSN, p.Nack.CumPSN)
	case wire.TypeProbe:
		s += fmt.Sprintf(" tx=%d", p.Probe)
	case wire.TypeClose:
		s += fmt.Sprintf(" reason=%d", p.Reason)
	}
	return s
}

// ---- the receive-buffer pool ----

// fuzzPool is the endpoints' Hooks.Buffers: it counts the bytes the engine holds,
// independently of the engine's own gauge, and checks what it gives back.
type fuzzPool struct {
	held  uint64 // bytes handed out and neither returned nor delivered
	small uint64 // of which from the Go heap
	bufs  map[*byte]fuzzBuf
	errs  []string

	// The pool is the endpoint's Placer too (Hooks.Placer): whole buffers for large
	// messages, unmapped the moment they are given back, so that an engine write after
	// Unplace (or after delivery) faults.
	placed     map[uint64]fuzzBuf
	placeSeq   uint64
	placedHeld uint64
}

// fuzzPlaceCap bounds what a pool places at once, as the daemon bounds a session's ring.
const fuzzPlaceCap = 64 << 20

// Place implements Placer.
func (p *fuzzPool) Place(_ netip.AddrPort, n int, _ []byte) ([]byte, uint64) {
	if n <= 0 || p.placedHeld+uint64(n) > fuzzPlaceCap {
		return nil, 0
	}
	b, mapped := fuzzMap(n)
	p.placeSeq++
	p.placed[p.placeSeq] = fuzzBuf{b, mapped}
	p.placedHeld += uint64(n)
	return b, p.placeSeq
}

// Unplace implements Placer.
func (p *fuzzPool) Unplace(tok uint64) {
	fb, ok := p.placed[tok]
	if !ok {
		p.errs = append(p.errs, fmt.Sprintf("Unplace of placement %d, which is not outstanding (never made, delivered or given back already)", tok))
		return
	}
	p.endPlace(tok, fb)
	if fb.mapped {
		fuzzUnmap(fb.b)
	}
}

func (p *fuzzPool) endPlace(tok uint64, fb fuzzBuf) {
	delete(p.placed, tok)
	p.placedHeld -= uint64(len(fb.b))
}

// delivered ends placement tok, delivered in data, and returns the function that frees
// the buffer once checked.
func (p *fuzzPool) delivered(tok uint64, data []byte) func() {
	fb, ok := p.placed[tok]
	if !ok || len(data) != len(fb.b) || &data[0] != &fb.b[0] {
		p.errs = append(p.errs, fmt.Sprintf("message delivered as placement %d (%d bytes), which is not outstanding or not that buffer", tok, len(data)))
		return func() {}
	}
	p.endPlace(tok, fb)
	if !fb.mapped {
		return func() {}
	}
	return func() { fuzzUnmap(fb.b) }
}

type fuzzBuf struct {
	b      []byte
	mapped bool
}

func newFuzzPool() *fuzzPool {
	return &fuzzPool{bufs: map[*byte]fuzzBuf{}, placed: map[uint64]fuzzBuf{}}
}

func (p *fuzzPool) Get(n int) []byte {
	if n <= 0 {
		return nil
	}
	b, mapped := fuzzMap(n)
	p.bufs[&b[0]] = fuzzBuf{b, mapped}
	p.held += uint64(n)
	if !mapped {
		p.small += uint64(n)
	}
	return b
}

func (p *fuzzPool) Put(b []byte) {
	if len(b) == 0 {
		return
	}
	fb, ok := p.bufs[&b[0]]
	if !ok {
		p.errs = append(p.errs, fmt.Sprintf("Put of a %d-byte buffer the pool does not hold (never handed out, returned twice, or delivered)", len(b)))
		return
	}
	p.drop(fb)
	if fb.mapped {
		fuzzUnmap(fb.b)
	}
}

func (p *fuzzPool) drop(fb fuzzBuf) {
	delete(p.bufs, &fb.b[0])
	p.held -= uint64(len(fb.b))
	if !fb.mapped {
		p.small -= uint64(len(fb.b))
	}
}

// take removes a delivered buffer from the pool's count (it is the application's now)
// and returns the function that frees it once checked.
func (p *fuzzPool) take(b []byte) func() {
	if len(b) == 0 {
		return func() {}
	}
	fb, ok := p.bufs[&b[0]]
	if !ok {
		return func() {} // not one of ours: the engine assembled it elsewhere
	}
	p.drop(fb)
	if !fb.mapped {
		return func() {}
	}
	return func() { fuzzUnmap(fb.b) }
}

func (p *fuzzPool) releaseAll() {
	for _, fb := range p.bufs {
		if fb.mapped {
			fuzzUnmap(fb.b)
		}
	}
	clear(p.bufs)
	for _, fb := range p.placed {
		if fb.mapped {
			fuzzUnmap(fb.b)
		}
	}
	clear(p.placed)
}

// ---- the seed corpus ----

// fzSeed builds an input operation by operation (the encodings step and fill decode).
type fzSeed struct{ b []byte }

func newFzSeed(mode byte) *fzSeed { return &fzSeed{b: []byte{mode, 0x5e, 0xed}} }

// newFzSeedShape is newFzSeed in the daemon's configuration (daemon) and, under ec, with
// blocks of k data and m parity packets (setFuzzShape).
func newFzSeedShape(mode byte, daemon bool, k, m int) *fzSeed {
	s1 := byte(m-1)&15 | 0x10 // the fabric returns trimmed headers
	if daemon {
		s1 |= 0x80
	}
	return &fzSeed{b: []byte{mode, s1, byte(k - 1)}}
}

func (s *fzSeed) op(o int, args ...[]byte) *fzSeed {
	slot := 0
	for fzOps[slot] != uint8(o) {
		slot++ // the first slot of the operation (opcodes past opRun sit in later slots)
	}
	s.b = append(s.b, byte(slot))
	for _, a := range args {
		s.b = append(s.b, a...)
	}
	return s
}

func b8(v ...byte) []byte { return v }
func b16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func b32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func b64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// Field encodings for val32/val64/len32: a raw value, a small delta from the base, an
// int16 delta from the base, a special length.
func fzRaw32(v uint32) []byte  { return append([]byte{0x80}, b32(v)...) }
func fzRaw64(v uint64) []byte  { return append([]byte{0x80}, b64(v)...) }
func fzDelta(d int) []byte     { return []byte{byte(d + 32)} }
func fzDelta16(d int16) []byte { return append([]byte{0x40}, b16(uint16(d))...) }
func fzSpecial(i int) []byte   { return []byte{0xc0 | byte(i)} }

func (s *fzSeed) dial(side, slot int) *fzSeed { return s.op(opDial, b8(byte(side|slot<<1))) }
func (s *fzSeed) send(side, slot int, cls uint8, v uint16) *fzSeed {
	return s.op(opSend, b8(byte(side|slot<<1), cls), b16(v))
}
func (s *fzSeed) close(side, slot int) *fzSeed { return s.op(opClose, b8(byte(side|slot<<1))) }
func (s *fzSeed) abort(side, slot int) *fzSeed { return s.op(opAbort, b8(byte(side|slot<<1))) }
func (s *fzSeed) net(o int, k byte) *fzSeed    { return s.op(o, b8(k)) }
func (s *fzSeed) step(ns uint16) *fzSeed       { return s.op(opStepSmall, b16(ns)) }

// stepBig: (mant+1) << shift ns, running the timers as they fall due.
func (s *fzSeed) stepBig(shift, mant uint8) *fzSeed { return s.op(opStepBig, b8(shift, mant)) }

// run delivers everything in flight n times, 2 us apart.
func (s *fzSeed) run(n int) *fzSeed {
	for ; n > 0; n -= 32 {
		s.op(opRun, b8(byte(min(n, 32)-1)))
	}
	return s
}

// fzData are the DATA fields of fill, as raw values.
type fzData struct {
	floor, psn, msg, msgLen, off uint32
	plen                         uint16
	flags                        uint8
	stream                       uint64
	cut, fill                    uint8
	ec                           []byte // with FlagEC: [k][m-1|index<<4]
}

func (d fzData) args() []byte {
	var b []byte
	for _, p := range [][]byte{fzRaw32(d.floor), fzRaw32(d.psn), fzRaw32(d.msg), fzRaw32(d.msgLen), fzRaw32(d.off),
		b16(d.plen), b8(d.flags), d.ec, fzRaw64(d.stream), fzDelta(0), b8(d.cut, d.fill)} {
		b = append(b, p...)
	}
	return b
}

// blindData: a first contact to `to` from the attacker's own address (ip), connection src.
func (s *fzSeed) blindData(to int, ip uint16, src uint64, d fzData) *fzSeed {
	return s.op(opBlindData, b8(byte(to), 0), b16(ip), b16(1234), b16(0), b64(src), d.args())
}

func fuzzEngineSeeds() [][]byte {
	const (
		blind     = 0
		informed  = 1
		auth      = 2
		unordered = 4
		mtu1024   = 8
		clock0    = 16
		coalesce  = 32
		ec        = 64 // recovery modes: bits 6-7
		gobackn   = 128
		subflows  = 192
		A, B      = 0, 1
	)
	var seeds []*fzSeed
	add := func(s *fzSeed) { seeds = append(seeds, s) }

	// Honest traffic: messages of every size class A -> B, then a clean close.
	add(newFzSeed(blind).dial(A, 0).send(A, 0, 0, 7).send(A, 0, 1, 5000).send(A, 0, 3, 60000).
		run(150).close(A, 0).run(30))
	// Both directions, unordered, coalesced ACKs, over a network that drops, duplicates,
	// reorders, trims (each way) and CE-marks.
	s := newFzSeed(unordered|coalesce).dial(A, 0).dial(B, 1).send(A, 0, 2, 40000).send(B, 1, 1, 3000)
	s.net(opDeliver, 3).net(opDrop, 1).net(opDup, 2).op(opTrim, b8(0, 0)).op(opTrim, b8(4, 1)).op(opTrim, b8(5, 2))
	s.net(opCE, 0).net(opDeliver, 0).net(opDeliver, 7).step(500).op(opNextTimer).stepBig(12, 200)
	add(s.run(100).send(A, 0, 0, 1).run(20))
	// The same lossy network under each loss-recovery mode.
	for _, rec := range []byte{ec, gobackn, subflows} {
		s := newFzSeedShape(rec|coalesce, false, 4, 2).dial(A, 0).dial(B, 1).send(A, 0, 2, 40000).send(B, 1, 1, 3000)
		s.net(opDeliver, 3).net(opDrop, 1).net(opDup, 2).op(opTrim, b8(0, 0)).op(opTrim, b8(4, 1)).op(opTrim, b8(5, 2))
		s.net(opCE, 0).net(opDeliver, 0).net(opDeliver, 7).step(500).op(opNextTimer).stepBig(12, 200)
		add(s.run(100).send(A, 0, 0, 1).run(20))
	}
	// One connection used both ways (B answers on the connection it accepted), then
	// aborted by the acceptor; the clock starts at 0 and the MTU is 1 KiB.
	// A large message answered on a proven connection: its first packet may not make the
	// receiver hold the whole message (the memory bound), however the buffer is chosen.
	add(newFzSeed(clock0|coalesce).dial(B, 0).send(B, 0, 0, 48).run(17).step(30000).
		send(A, 0, 3, 65328).net(opDeliver, 0).run(40))
	add(newFzSeed(clock0|mtu1024).dial(A, 2).send(A, 2, 1, 6000).run(20).send(B, 2, 1, 2000).run(3).
		abort(B, 2).run(20).send(A, 2, 0, 9).run(10))
	// Ordered delivery: the first message's packets are lost until its retransmission
	// times out; a big jump of time; then the network recovers.
	add(newFzSeed(blind).dial(A, 0).send(A, 0, 0, 1).send(A, 0, 0, 2).send(A, 0, 1, 4000).
		net(opDrop, 0).run(2).stepBig(20, 0).run(40).stepBig(0x80|24, 100).run(10))

	// The blind attacker: a first contact claiming a 1 GiB message (one byte of it).
	add(newFzSeed(blind).blindData(B, 1, 0xbad1, fzData{msgLen: 1 << 30, plen: 1, fill: 'x'}).
		dial(A, 0).send(A, 0, 1, 1000).run(20))
	// ... many messages on one connection, each claiming StreamStart == delivered.
	s = newFzSeed(blind)
	for i := range 8 {
		s.blindData(B, 2, 0xbad2, fzData{psn: uint32(i), msg: uint32(i), msgLen: 1 << 20, plen: 100, fill: byte(i)})
	}
	add(s.dial(A, 0).send(A, 0, 2, 30000).run(30))
	// ... a flood of first contacts beyond MaxConns, then A tries to connect.
	add(newFzSeed(blind).op(opBlindFlood, b8(B, 40), b16(7), b64(0xf100d), fzRaw32(300), fzDelta(-32+32), fzDelta(0), fzDelta(0)).
		dial(A, 0).send(A, 0, 0, 50).run(20))
	// ... a silent sender with half a message, then a long silence.
	add(newFzSeed(blind).blindData(B, 3, 0x5117, fzData{msgLen: 8192, plen: 4096, flags: 0, fill: 'h'}).
		stepBig(24, 255).dial(A, 0).send(A, 0, 0, 3).run(10))
	// ... garbage and packets of every type with random connection IDs, trimmed too.
	s = newFzSeed(blind).dial(A, 0).send(A, 0, 1, 2000).run(3)
	s.op(opGarbage, b8(B, 5, 0x11, 0x02, 0, 0, 0)).op(opGarbage, b8(A, 30), make([]byte, 30))
	for typ := range byte(7) {
		s.op(opBlindPacket, b8(byte(typ&1), typ), b16(uint16(typ)), b16(80), b16(23600), b8(typ), b64(uint64(typ)*77+1), b64(0x99),
			// enough field bytes for any type
			fzRaw32(5), fzRaw32(6), fzRaw32(7), fzRaw32(100), fzRaw32(0), b16(50), b8(0), fzRaw64(0), fzDelta(0), b8(0x85, 1),
			make([]byte, 24))
	}
	s.blindData(A, 4, 0x7717, fzData{msgLen: 100, plen: 100, cut: 0x80 | 40})
	add(s.run(20))

	// The informed attacker (and the same with authentication, once it exists): a forged
	// ACK whose CumPSN is far ahead of what was received (reverse of a captured DATA),
	// announcing a closed window; NACKs, a forged DATA into the honest message stream,
	// PROBE, CLOSE, CLOSE_ACK and RESET; then a replay of a captured packet after TimeWait.
	for _, mode := range []byte{informed, informed | auth} {
		s = newFzSeed(mode).dial(A, 0).send(A, 0, 0, 5).run(2).send(A, 0, 2, 20000).send(A, 0, 0, 5)
		s.net(opDeliver, 0)
		// k=0x80: the most recent DATA (A->B); reverse|ACK<<1; ev; meta
		s.op(opForge, b8(0x80, 1|byte(wire.TypeAck-1)<<1), b16(3), b8(0),
			fzDelta16(1000), fzDelta(0), fzDelta(0), b16(0), b8(0, 0x40), fzDelta(0), b32(0), b16(0), b16(1), fzDelta(0), b8(0), b8(0), b8(0))
		s.op(opForge, b8(0x81, 1|byte(wire.TypeNack-1)<<1), b16(4), b8(0), fzDelta(1), fzDelta(0), b16(0), b32(0), fzDelta(0), b8(0))
		s.op(opForge, b8(0x80, 0|byte(wire.TypeData-1)<<1), b16(5), b8(0),
			fzDelta(0), fzDelta(3), fzDelta(1), fzSpecial(0), fzDelta(0), b16(1000), b8(0), fzDelta(0), fzDelta(0), b8(0, 'f'))
		for _, typ := range []wire.Type{wire.TypeProbe, wire.TypeClose, wire.TypeCloseAck, wire.TypeReset} {
			s.run(2).op(opForge, b8(0, 1|byte(typ-1)<<1), b16(6), b8(0), fzDelta(0), b32(0))
		}
		add(s.run(40).stepBig(22, 40).op(opReplay, b8(3)).run(10))
	}
	// The informed attacker replays a first-contact DATA after the receiver closed.
	add(newFzSeed(informed).dial(A, 1).send(A, 1, 0, 100).run(10).close(A, 1).run(20).stepBig(23, 50).
		op(opReplay, b8(30)).run(10))

	// The daemon's configuration (DeliverChunks), honest traffic of every size class over
	// a lossy network, both ways, under sack and under ec of several block shapes; a
	// return-to-sender switch and an injector returning copies of data headers.
	for _, shape := range [][3]int{{0, 0, 0}, {ec, 4, 2}, {ec, 1, 1}, {ec, 16, 4}, {ec, 200, 16}} {
		s := newFzSeedShape(byte(shape[0]), true, max(shape[1], 1), max(shape[2], 1)).dial(A, 0).dial(B, 1).
			send(A, 0, 0, 2).send(A, 0, 1, 5000).send(A, 0, 3, 60000).send(B, 1, 2, 30000)
		s.net(opDeliver, 3).net(opDrop, 1).op(opTrim, b8(0, 0)).op(opReturn, b8(2, 0)).op(opReturn, b8(1, 1)).
			op(opReturn, b8(0, 2)).op(opReturn, b8(3, 3)).net(opDeliver, 7).step(500).op(opNextTimer)
		add(s.run(150).close(A, 0).run(30))
	}
	// ... a blind flood of tiny messages whose first byte never arrives, 64 on one
	// connection and one on each of 64, then honest traffic.
	s = newFzSeedShape(blind, true, 1, 1)
	s.op(opBlindFlood, b8(B|0x10, 63), b16(9), b64(0xf100d), b8(2), fzDelta(0), fzDelta(0), fzDelta(0))
	s.op(opBlindFlood, b8(B, 63), b16(10), b64(0xf200d), b8(2), fzDelta(0), fzDelta(0), fzDelta(0))
	add(s.dial(A, 0).send(A, 0, 0, 9).run(20))
	// ... forged parity of another block shape from a blind attacker (k=7, m=3, index 2).
	s = newFzSeedShape(ec, true, 4, 2).dial(A, 0).send(A, 0, 1, 5000).run(2)
	s.blindData(B, 5, 0xec1, fzData{msgLen: 8000, plen: 1000, flags: uint8(wire.FlagEC), fill: 'p', ec: b8(7, 2|2<<4)})
	add(s.run(20))

	out := make([][]byte, len(seeds))
	for i, s := range seeds {
		out[i] = s.b
	}
	return out
}
