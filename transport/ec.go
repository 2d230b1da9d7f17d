package transport

import (
	"fmt"
	"hash/crc32"
	"math/bits"
	"unsafe"

	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Erasure coding (recovery "ec", docs/engine.md "Loss recovery", docs/wire.md "Erasure
// coding"). The sender cuts each message into blocks of K data packets (the last block of
// a message may be shorter) and follows each block's last data packet with M parity
// packets (Reed-Solomon over GF(2^8): the ECCoder a program links, transport/ec), coded as the data
// packets leave (EncodeIdx: no block is buffered). A parity packet has no PSN of its own:
// it names its block (the PSN and offset of the block's first data packet, the shard
// size, K, M and its index) and is neither acknowledged nor resent. The receiver keeps the
// parity of blocks with data missing, and once any K of a block's K+M packets are in,
// rebuilds the missing data packets, fills exactly their byte ranges and marks their PSNs
// received, so the sender sees them acknowledged without resending them. Beyond the
// parity's reach the ordinary detectors resend what is missing.

// ecCodec is an endpoint's coding state: its one encoder and a buffer pool.
//
// The code is the endpoint's own (recovery.k, recovery.m): a block shorter than K (a
// message's last) is coded as a K-shard block whose missing shards are zero, so one
// encoder serves every block, and parity of any other shape is refused. The encoder keeps
// no inversion cache: each erasure pattern a peer can choose would otherwise cache a
// matrix forever; a reconstruction inverts its K x K matrix afresh (microseconds).
type ecCodec struct {
	k, m    int
	rs      ECCoder
	free    [][]byte // spare shard buffers
	shards  [][]byte // reconstruction scratch (K+M entries)
	scratch [][]byte // buffers lent to shards during one reconstruction
	blocks  []*ecBlock
}

// ecBlockBytes is the charge of a block record of a message at the receiver: the
// ecBlock (rounded up to the allocator's 16 bytes) and two slots of the message's block
// list, which grows by doubling. Its parity buffers are charged at their capacity.
const ecBlockBytes = (uint64(unsafe.Sizeof(ecBlock{}))+15)&^15 + 16

// maxECFree bounds the spare shard buffers an endpoint keeps.
const maxECFree = 256

// maxECBlocks bounds the blocks of one message holding parity at the receiver: an honest
// sender's blocks with data still missing lie within its PSN window.
const maxECBlocks = 256

// castagnoli is the CRC-32C table of the block checksum a parity packet carries.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ECCoder is a systematic Reed-Solomon code over GF(2^8) of k data and m parity shards,
// as erasure coding uses it (klauspost/reedsolomon's Encoder has these methods). It keeps
// no inversion cache and starts no goroutines: the engine is single-threaded and a peer
// chooses the erasure patterns.
type ECCoder interface {
	// EncodeIdx adds data shard idx to the parity shards (zeroed before a block's first).
	EncodeIdx(dataShard []byte, idx int, parity [][]byte) error
	// ReconstructData rebuilds the empty data shards (len 0, capacity for a shard) of the
	// k+m shards from any k of them (nil parity: missing).
	ReconstructData(shards [][]byte) error
}

// ecNew makes the code recovery "ec" uses; nil: the program does not link one.
var ecNew func(k, m int) (ECCoder, error)

// RegisterECCodec links the erasure code into this program (transport/ec does, imported
// for its side effect): recovery mode "ec" needs it, and a program without it refuses
// that mode (CheckLinked). The operator CLI's demo leaves it out to stay small.
func RegisterECCodec(newCoder func(k, m int) (ECCoder, error)) { ecNew = newCoder }

// CheckLinked reports what c asks for that this program does not link: recovery mode "ec"
// without RegisterECCodec. Validate does not check it (a config is valid for smarttd
// whichever program checks it); NewEndpoint and smarttd.Start do, before any socket opens.
func (c *Config) CheckLinked() error {
	if c.Recovery.mode() == RecoveryEC && ecNew == nil {
		return fmt.Errorf("recovery.mode = %q: this program does not link the erasure code (Reed-Solomon); "+
			"run it in smarttd (or smartt-lab for the simulator), or use recovery.mode: sack", RecoveryEC)
	}
	return nil
}

func newECCodec(cfg *Config) *ecCodec {
	k, m := cfg.ECBlock()
	rs, err := ecNew(k, m) // NewEndpoint checked it is linked (CheckLinked)
	if err != nil {
		panic("transport: erasure code: " + err.Error()) // k, m are validated
	}
	return &ecCodec{k: k, m: m, rs: rs, shards: make([][]byte, 0, k+m)}
}

// get returns a buffer of n bytes (contents undefined).
func (x *ecCodec) get(n int) []byte {
	if l := len(x.free); l > 0 && cap(x.free[l-1]) >= n {
		b := x.free[l-1]
		x.free = x.free[:l-1]
		return b[:n]
	}
	return make([]byte, n, max(n, 4096))
}

func (x *ecCodec) put(b []byte) {
	if b != nil && len(x.free) < maxECFree {
		x.free = append(x.free, b[:0])
	}
}

// ecSender is a connection's block being sent.
type ecSender struct {
	msg         *txMsg // the message (checked against id: txMsg structs are recycled)
	id          uint32
	n           int
	streamStart uint64
	off, shard  int    // the block's first byte and shard size
	k, sent     int    // data packets in the block, and sent so far
	first       uint32 // PSN of its first data packet
	next        int    // next parity packet to send
	pending     bool   // every data packet sent: parity next
	crc         uint32 // CRC-32C of the block's data bytes so far
	parity      [][]byte
	pad         []byte
}

// ecOnData codes a first transmission of data into its block's parity (the packet at
// offset off of m, size bytes, PSN psn).
func (e *Endpoint) ecOnData(c *conn, m *txMsg, psn uint32, off, size int) {
	x, cd := c.ecTx, e.ec
	mtu := e.cfg.MTU
	if off%(cd.k*mtu) == 0 {
		left := m.n - off
		*x = ecSender{msg: m, id: m.id, n: m.n, streamStart: m.streamStart, off: off,
			shard: min(mtu, left), k: min(cd.k, (left+mtu-1)/mtu), first: psn,
			parity: x.parity, pad: x.pad}
		if x.parity == nil {
			x.parity = make([][]byte, cd.m)
			for i := range x.parity {
				x.parity[i] = make([]byte, mtu)
			}
			x.pad = make([]byte, mtu)
		}
		for i := range x.parity {
			x.parity[i] = x.parity[i][:x.shard]
			clear(x.parity[i])
		}
	}
	if x.msg != m || x.id != m.id || x.sent >= x.k {
		return // not a block start seen by this sender (cannot happen)
	}
	data := m.data[off : off+size]
	if size < x.shard {
		p := x.pad[:x.shard]
		clear(p[copy(p, data):])
		data = p
	}
	if err := cd.rs.EncodeIdx(data, x.sent, x.parity); err != nil {
		panic("transport: EncodeIdx: " + err.Error())
	}
	x.crc = crc32.Update(x.crc, castagnoli, m.data[off:off+size])
	x.sent++
	if x.sent == x.k {
		x.pending, x.next = true, 0
	}
}

// ecParity sends c's next parity packet (into *t). blocked reports that the window or pacer
// holds it (nothing else may go then).
func (e *Endpoint) ecParity(now int64, c *conn, buf []byte, t *Transmit) (ok, blocked bool) {
	x := c.ecTx
	m := x.msg
	if m.id != x.id || m.allAcked || m.data == nil {
		x.pending = false // every data packet of the block arrived already
		return false, false
	}
	size := x.shard
	if !e.windowOpen(now, c, size, false) {
		return false, true
	}
	ev := c.nextEV(now, size, false)
	c.pacer.OnSend(now, size, c.paceRate(size))
	if c.credit != nil {
		c.credit.OnSend(size, false)
	}
	p := &e.pkt
	p.Type, p.Flags, p.EV, p.ReplyPort = wire.TypeData, wire.FlagEC, ev, e.cfg.ListenPort
	p.DstConn, p.SrcConn = c.peerID, c.id
	p.Data = wire.Data{
		PSN: x.first, AckFloor: x.crc, MsgID: x.id, MsgLen: uint32(x.n),
		Offset: uint32(x.off), PayloadLen: uint16(size), StreamStart: x.streamStart, TxTime: now,
		EC: wire.EC{K: uint8(x.k), M: uint8(e.ec.m), Index: uint8(x.next)},
	}
	p.Payload = x.parity[x.next][:size]
	if e.cfg.INT {
		p.Flags |= wire.FlagINT
		p.INT.N, p.INT.Cap, p.INT.Flags = 0, uint8(e.cfg.intHops()), 0
	}
	n, err := p.Encode(buf)
	if err != nil {
		panic("transport: PollTransmit buffer smaller than MTU + header: " + err.Error())
	}
	x.next++
	if x.next == e.ec.m {
		x.pending = false
	}
	e.stats.ParitySent++
	e.stats.ParityBytes += uint64(size)
	*t = Transmit{N: n, To: c.peer, EV: ev, ECN: ECT0, Type: wire.TypeData}
	return true, false
}

// ecBlock is a block of an incoming message holding parity.
type ecBlock struct {
	off, shard uint32
	first      uint32 // PSN of its first data packet
	crc        uint32 // CRC-32C of its data bytes, as its parity claims
	k, m       uint8
	have       uint16 // parity packets held (bit i: index i)
	seen       uint16 // parity packets that arrived, held or trimmed
	parity     [wire.MaxECParity][]byte
}

// ecAnchor ties a message's bytes to its PSNs: an honest sender numbers a message's
// packets consecutively, seg bytes each (its MTU), so one data packet's PSN and offset
// give every other's. Parity must agree with it: a parity block can only name PSNs of the
// message whose data already arrived.
type ecAnchor struct {
	set      bool
	psn, off uint32
	seg      uint32 // a full packet's payload length (0: only the message's last seen)
}

// note records data packet d of a message in a.
func (a *ecAnchor) note(d *wire.Data) {
	if !a.set {
		*a = ecAnchor{set: true, psn: d.PSN, off: d.Offset}
	}
	if a.seg == 0 && d.Offset+uint32(d.PayloadLen) < d.MsgLen {
		a.seg = uint32(d.PayloadLen)
	}
}

// agrees reports whether a block of k shards of shard bytes at offset off, first PSN
// first, in a message of n bytes, numbers its packets as the message's data did.
func (a *ecAnchor) agrees(first, off uint32, shard, k, n int) bool {
	if !a.set {
		return false
	}
	seg := uint32(shard)
	if k == 1 && int(off)+shard >= n {
		seg = a.seg // the message's last packet: a short shard says nothing of seg
	} else if a.seg != 0 && a.seg != seg {
		return false
	}
	if seg == 0 {
		return off == a.off && first == a.psn
	}
	d := int64(off) - int64(a.off)
	if d%int64(seg) != 0 {
		return false
	}
	return first == a.psn+uint32(d/int64(seg))
}

// shardRange returns the byte range of data shard i of b in a message of n bytes.
func (b *ecBlock) shardRange(i, n int) (lo, hi int) {
	lo = int(b.off) + i*int(b.shard)
	return lo, min(lo+int(b.shard), n)
}

// ecShape reports whether a parity packet's block is one this endpoint's code makes: M
// the configured m, K the configured k or, for a message's last block, fewer shards that
// reach its end, every data shard non-empty and within the message.
func (x *ecCodec) ecShape(d *wire.Data, payload int) bool {
	k, m, off, shard, n := int(d.EC.K), int(d.EC.M), int(d.Offset), int(d.PayloadLen), int(d.MsgLen)
	if m != x.m || k > x.k || int(d.EC.Index) >= m || payload != shard || shard == 0 {
		return false
	}
	if off+(k-1)*shard >= n {
		return false // an empty data shard
	}
	return k == x.k || off+k*shard >= n
}

// onParity handles a parity packet (DATA with FlagEC) for message r (nil: not yet open;
// done: already delivered). The caller has applied the checks every data packet gets.
// A parity packet is untrusted like any, and only what the endpoint's own code would send
// is kept: from a proven peer, of the configured shape, for a message whose data already
// arrived and whose PSNs it agrees with (ecAnchor), inside the message and the receive
// window, charged to the budget. What it rebuilds is checked against the block checksum
// it carries (ecTry); parity can never open, complete or acknowledge anything else.
func (e *Endpoint) onParity(now int64, c *conn, p *wire.Packet, meta *RxMeta, r *rxMsg, done bool, _ uint64, ce bool) {
	d := &p.Data
	e.stats.ParityRecv++
	// EQDS: the parity packet spent the sender's credit like data; its arrival asks for
	// that credit back, as a data packet's does.
	e.pullRequest(now, c, int(d.PayloadLen), meta.RxTime-d.TxTime, true)
	if e.ec == nil || done {
		e.stats.ParityDropped++
		return
	}
	k, m, idx := int(d.EC.K), int(d.EC.M), int(d.EC.Index)
	off, shard, n := int(d.Offset), int(d.PayloadLen), int(d.MsgLen)
	if !c.proven || r == nil || !e.ec.ecShape(d, len(p.Payload)) || !r.anchor.agrees(d.PSN, d.Offset, shard, k, n) {
		e.stats.ParityRefused++
		return
	}
	if c.tracker.Check(d.PSN+uint32(k-1)) == ackpath.Beyond || uint64(off) >= uint64(r.got)+e.reach(shard) {
		e.stats.BeyondWindow++
		return
	}
	var b *ecBlock
	for _, x := range r.ec {
		if x.off == uint32(off) {
			b = x
			break
		}
	}
	if b != nil {
		if int(b.shard) != shard || int(b.k) != k || int(b.m) != m || b.first != d.PSN || b.crc != d.AckFloor {
			e.stats.ProtoViolations++
			return
		}
		if b.have&(1<<idx) != 0 {
			e.stats.ParityDropped++
			return
		}
	} else if len(r.ec) >= maxECBlocks || e.ecComplete(r, uint32(off), uint32(shard), k, n) {
		e.stats.ParityDropped++ // nothing missing, or more blocks open than a sender can have
		return
	}
	buf := e.ec.get(shard)
	need := uint64(cap(buf)) // what the parity buffer holds, not its length
	if b == nil {
		need += ecBlockBytes
	}
	if !e.charge(c, r, need) {
		e.ec.put(buf)
		e.stats.RecvBudgetDrops++
		return
	}
	if b == nil {
		b = e.ec.newBlock()
		*b = ecBlock{off: uint32(off), shard: uint32(shard), first: d.PSN, crc: d.AckFloor, k: uint8(k), m: uint8(m)}
		r.ec = append(r.ec, b)
	}
	copy(buf, p.Payload)
	b.parity[idx] = buf
	b.have |= 1 << idx
	b.seen |= 1 << idx
	oldCum := c.tracker.Cum()
	rebuilt := e.ecTry(c, r, b)
	e.ecTrimCheck(c, d, b, 0)
	complete := r.got == r.n
	if complete {
		e.complete(c, r)
	}
	if rebuilt > 0 {
		// Acknowledge the rebuilt PSNs at once; the trigger is the parity packet (its
		// echoed timestamp is a valid RTT sample, and names no data transmission).
		c.trig = trigger{psn: d.PSN + uint32(k-1), ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: meta.RxTime}
		urgent := e.cfg.Ack.Urgent(d.PSN, oldCum, c.tracker.Cum(), ce, true, complete, e.rthr)
		c.coal.OnData(now, ce, p.EV, urgent)
		e.markReady(c)
	}
}

// ecComplete reports whether every data shard of a block is held.
func (e *Endpoint) ecComplete(r *rxMsg, off, shard uint32, k, n int) bool {
	b := ecBlock{off: off, shard: shard}
	for i := 0; i < k; i++ {
		lo, hi := b.shardRange(i, n)
		if _, kind := r.cover(lo, hi-lo); kind != coverDup {
			return false
		}
	}
	return true
}

// ecTry rebuilds b's missing data shards if enough of the block is in, and drops b once
// nothing of it is missing. It returns the data packets rebuilt. The rebuilt block must
// match the checksum its parity carries; if it does not (forged or corrupted parity), no
// byte of it is kept, and the ordinary detectors resend what is missing.
func (e *Endpoint) ecTry(c *conn, r *rxMsg, b *ecBlock) int {
	k := int(b.k)
	present := 0
	for i := 0; i < k; i++ {
		lo, hi := b.shardRange(i, r.n)
		switch _, kind := r.cover(lo, hi-lo); kind {
		case coverDup:
			present++
		case coverOverlap:
			return 0 // partly held: no honest sender's packets do that; leave it to resends
		}
	}
	if present == k {
		e.ecDropBlock(c, r, b)
		return 0
	}
	if present+bits.OnesCount16(b.have) < k {
		return 0
	}
	rebuilt := 0
	if shards := e.ecReconstruct(r, b); shards != nil {
		rebuilt = e.ecPlace(c, r, b, shards)
	}
	x := e.ec
	for i, s := range x.scratch {
		x.put(s)
		x.scratch[i] = nil
	}
	x.scratch = x.scratch[:0]
	clear(x.shards[:cap(x.shards)])
	e.ecDropBlock(c, r, b)
	return rebuilt
}

// ecReconstruct rebuilds b's data shards into the codec's scratch and returns them (the
// first b.k), or nil when they cannot be rebuilt or fail the block's checksum.
func (e *Endpoint) ecReconstruct(r *rxMsg, b *ecBlock) [][]byte {
	x := e.ec
	k, shard := int(b.k), int(b.shard)
	shards := x.shards[:x.k+x.m]
	for i := 0; i < x.k; i++ {
		lo, hi := b.shardRange(i, r.n)
		switch {
		case i >= k: // beyond a short block: zero, as the sender coded it
			s := x.get(shard)
			clear(s)
			x.scratch = append(x.scratch, s)
			shards[i] = s
		case coverKind(r, lo, hi) == coverDup:
			shards[i] = e.ecView(r, lo, hi, shard)
		default:
			s := x.get(shard)
			x.scratch = append(x.scratch, s)
			shards[i] = s[:0]
		}
	}
	for j := 0; j < x.m; j++ {
		shards[x.k+j] = b.parity[j] // nil when not held
	}
	if x.rs.ReconstructData(shards) != nil {
		return nil
	}
	sum := uint32(0)
	for i := 0; i < k; i++ {
		lo, hi := b.shardRange(i, r.n)
		sum = crc32.Update(sum, castagnoli, shards[i][:hi-lo])
	}
	if sum != b.crc {
		e.stats.ECBad++
		return nil
	}
	return shards[:k]
}

// coverKind is r.cover's verdict on bytes [lo, hi).
func coverKind(r *rxMsg, lo, hi int) int {
	_, kind := r.cover(lo, hi-lo)
	return kind
}

// ecPlace writes the rebuilt data shards of b that r lacks and marks their PSNs; a
// message's first packet only if the receive gate (Hooks.Gate) takes the message.
func (e *Endpoint) ecPlace(c *conn, r *rxMsg, b *ecBlock, shards [][]byte) int {
	rebuilt := 0
	for i := range shards {
		lo, hi := b.shardRange(i, r.n)
		at, kind := r.cover(lo, hi-lo)
		if kind != coverNew {
			continue // held (it was present), or too many ranges: resent later
		}
		if lo == 0 && e.hooks.Gate != nil && !e.hooks.Gate.Ready(c.peer, r.n, shards[i][:hi-lo]) {
			// A rebuilt first packet passes the gate as an arriving one would; refused, it
			// waits for the sender's resend (which an RNR NACK or a loss detector causes).
			continue
		}
		if !e.spanRoom(c, r, at, lo, hi-lo) || !e.reserve(c, r, lo, hi-lo) {
			e.stats.RecvBudgetDrops++
			continue
		}
		r.write(lo, shards[i][:hi-lo])
		r.addSpan(at, lo, hi-lo)
		c.bytesRecv += uint64(hi - lo)
		if c.tracker.Check(b.first+uint32(i)) == ackpath.New {
			c.tracker.Mark(b.first + uint32(i))
		}
		rebuilt++
	}
	e.stats.ECRebuilt += uint64(rebuilt)
	return rebuilt
}

// ecView returns data shard [lo, hi) of r as shard bytes: a view of the message buffer
// when it is whole and contiguous there, else a zero-padded copy.
func (e *Endpoint) ecView(r *rxMsg, lo, hi, shard int) []byte {
	if hi-lo == shard {
		if len(r.chunks) == 0 {
			return r.buf[lo:hi]
		}
		if i := lo / RecvChunk; (hi-1)/RecvChunk == i {
			o := lo % RecvChunk
			return r.chunks[i][o : o+shard]
		}
	}
	x := e.ec
	s := x.get(shard)
	x.scratch = append(x.scratch, s)
	at := 0
	for off := lo; off < hi; {
		i, o := off/RecvChunk, off%RecvChunk
		var src []byte
		if len(r.chunks) == 0 {
			src = r.buf[off:hi]
		} else {
			src = r.chunks[i][o:min(len(r.chunks[i]), o+hi-off)]
		}
		k := copy(s[at:], src)
		at += k
		off += k
	}
	clear(s[at:])
	return s
}

// ecDropBlock frees b's parity and its place in the receive budget.
func (e *Endpoint) ecDropBlock(c *conn, r *rxMsg, b *ecBlock) {
	for j := range b.parity {
		if b.parity[j] != nil {
			e.uncharge(c, r, uint64(cap(b.parity[j])))
			e.ec.put(b.parity[j])
			b.parity[j] = nil
		}
	}
	e.uncharge(c, r, ecBlockBytes)
	for i, x := range r.ec {
		if x == b {
			last := len(r.ec) - 1
			r.ec[i] = r.ec[last]
			r.ec[last] = nil
			r.ec = r.ec[:last]
			break
		}
	}
	e.ec.putBlock(b)
}

func (x *ecCodec) newBlock() *ecBlock {
	if l := len(x.blocks); l > 0 {
		b := x.blocks[l-1]
		x.blocks = x.blocks[:l-1]
		return b
	}
	return new(ecBlock)
}

func (x *ecCodec) putBlock(b *ecBlock) {
	if len(x.blocks) < maxECFree {
		*b = ecBlock{}
		x.blocks = append(x.blocks, b)
	}
}

// ecTryAt runs ecTry for the block holding parity that covers byte off of r, if any
// (after a data packet landed there).
func (e *Endpoint) ecTryAt(c *conn, r *rxMsg, off int) int {
	for _, b := range r.ec {
		if off >= int(b.off) && off < int(b.off)+int(b.k)*int(b.shard) {
			return e.ecTry(c, r, b)
		}
	}
	return 0
}

// ecRelease returns the parity buffers of r (delivered or dropped; the budget accounting
// goes with r's).
func (e *Endpoint) ecRelease(r *rxMsg) {
	for i, b := range r.ec {
		for j := range b.parity {
			if b.parity[j] != nil {
				e.ec.put(b.parity[j])
			}
		}
		e.ec.putBlock(b)
		r.ec[i] = nil
	}
	r.ec = r.ec[:0]
}

// uncharge returns n bytes held for r to the budget.
func (e *Endpoint) uncharge(c *conn, r *rxMsg, n uint64) {
	r.held -= n
	c.held -= n
	e.stats.RecvBuffered -= n
	if !c.proven {
		e.unprovenHeld -= n
	}
}

// ecDeferNack holds the NACK of a trimmed data packet until its block's parity shows
// whether the block can be rebuilt (ecTrimCheck; in c.ecTrims, goBack marks an entry
// already NACKed). The queue is bounded: when full, its oldest NACK leaves now (unless
// that packet arrived, was rebuilt or was NACKed meanwhile).
func (e *Endpoint) ecDeferNack(c *conn, nk nackEntry) {
	for c.ecTrims.len() > 0 && c.tracker.Has(c.ecTrims.peek().psn) {
		c.ecTrims.pop()
	}
	if c.ecTrims.len() >= maxNacks {
		if old := c.ecTrims.pop(); !old.goBack && !c.tracker.Has(old.psn) && c.nacks.len() < maxNacks {
			c.nacks.push(old)
			e.markReady(c)
		}
	}
	c.ecTrims.push(nk)
}

// ecTrimCheck runs when parity of the block of parity packet d arrived (b: the block's
// state, nil if none is kept), or arrived trimmed, or when a trimmed data packet of a
// block with parity arrived. Only losses the receiver knows of count, as trimmed headers
// overtake the data queued before them: the block's parity packets known lost (trimmed;
// lostParity when no block state records them) against its trimmed data packets still
// waiting (not NACKed, not arrived since). While the waiting ones are no more than the
// parity not known lost, the parity may rebuild them; beyond that every one of them is
// NACKed at once. (NACKing only the excess would leave the rest to be rebuilt after a
// round trip, long enough for the sender's SACK-gap rule to resend them anyway.)
func (e *Endpoint) ecTrimCheck(c *conn, d *wire.Data, b *ecBlock, lostParity int) {
	if c.tracker == nil {
		return
	}
	for c.ecTrims.len() > 0 && c.tracker.Has(c.ecTrims.peek().psn) {
		c.ecTrims.pop() // arrived or rebuilt since
	}
	k := uint32(d.EC.K)
	waiting := 0
	for i := 0; i < c.ecTrims.len(); i++ {
		nk := &c.ecTrims.buf[(c.ecTrims.head+i)&(len(c.ecTrims.buf)-1)]
		if nk.psn-d.PSN < k && !nk.goBack && !c.tracker.Has(nk.psn) {
			waiting++
		}
	}
	if b != nil && b.off == d.Offset && b.first == d.PSN {
		lostParity = bits.OnesCount16(b.seen &^ b.have)
	}
	if waiting <= int(d.EC.M)-lostParity {
		return
	}
	for i := 0; i < c.ecTrims.len(); i++ {
		nk := &c.ecTrims.buf[(c.ecTrims.head+i)&(len(c.ecTrims.buf)-1)]
		if nk.psn-d.PSN >= k || nk.goBack || c.tracker.Has(nk.psn) || c.nacks.len() >= maxNacks {
			continue
		}
		nk.goBack = true // here: NACKed (kept so that it is not NACKed again)
		send := *nk
		send.goBack = false
		c.nacks.push(send)
		e.markReady(c)
	}
}

// ecTrimmedIn runs ecTrimCheck for the block holding parity that covers byte off of r, if
// any: a trimmed data packet that arrives after parity of its block (on another path) is
// judged against the parity already in.
func (e *Endpoint) ecTrimmedIn(c *conn, r *rxMsg, off int) {
	for _, b := range r.ec {
		if off >= int(b.off) && off < int(b.off)+int(b.k)*int(b.shard) {
			d := wire.Data{PSN: b.first, Offset: b.off, PayloadLen: uint16(b.shard),
				EC: wire.EC{K: b.k, M: b.m}}
			e.ecTrimCheck(c, &d, b, 0)
			return
		}
	}
}

// ecTrimmedParity handles a trimmed parity packet: its block keeps a record of the parity
// that will never come (so trimmed data arriving later is judged against it), and the
// block's waiting NACKs are checked.
func (e *Endpoint) ecTrimmedParity(c *conn, d *wire.Data) {
	r := c.rx.get(d.MsgID)
	if r == nil {
		e.ecTrimCheck(c, d, nil, 1)
		return
	}
	k, m, shard := int(d.EC.K), int(d.EC.M), int(d.PayloadLen)
	if r.n != int(d.MsgLen) || !e.ec.ecShape(d, shard) || !r.anchor.agrees(d.PSN, d.Offset, shard, k, r.n) {
		return
	}
	var b *ecBlock
	for _, x := range r.ec {
		if x.off == d.Offset {
			b = x
			break
		}
	}
	switch {
	case b != nil && (int(b.shard) != shard || int(b.k) != k || int(b.m) != m || b.first != d.PSN || b.crc != d.AckFloor):
		return // contradicts the block: ignore
	case b == nil && len(r.ec) < maxECBlocks && !e.ecComplete(r, d.Offset, uint32(shard), k, r.n) && e.charge(c, r, ecBlockBytes):
		b = e.ec.newBlock()
		*b = ecBlock{off: d.Offset, shard: uint32(shard), first: d.PSN, crc: d.AckFloor, k: uint8(k), m: uint8(m)}
		r.ec = append(r.ec, b)
	}
	lost := 1
	if b != nil {
		b.seen |= 1 << d.EC.Index
		lost = 0 // counted from b
	}
	e.ecTrimCheck(c, d, b, lost)
}
