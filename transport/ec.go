package transport

import (
	"math/bits"

	"github.com/klauspost/reedsolomon"
	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Erasure coding (recovery "ec", docs/engine.md "Loss recovery", docs/wire.md "Erasure
// coding"). The sender cuts each message into blocks of K data packets (the last block of
// a message may be shorter) and follows each block's last data packet with M parity
// packets (Reed-Solomon over GF(2^8), github.com/klauspost/reedsolomon), coded as the data
// packets leave (EncodeIdx: no block is buffered). A parity packet has no PSN of its own:
// it names its block (the PSN and offset of the block's first data packet, the shard
// size, K, M and its index) and is neither acknowledged nor resent. The receiver keeps the
// parity of blocks with data missing, and once any K of a block's K+M packets are in,
// rebuilds the missing data packets, fills exactly their byte ranges and marks their PSNs
// received, so the sender sees them acknowledged without resending them. Beyond the
// parity's reach the ordinary detectors resend what is missing.

// ecCodec is an endpoint's coding state: encoders by block shape and a buffer pool.
type ecCodec struct {
	k, m    int
	encs    map[uint16]reedsolomon.Encoder // by k<<8 | m-1 (m <= 16)
	free    [][]byte                       // spare shard buffers
	shards  [][]byte                       // reconstruction scratch (K+M entries)
	scratch [][]byte                       // buffers lent to shards during one reconstruction
	blocks  []*ecBlock                     // spare receive blocks
}

// maxECFree bounds the spare shard buffers an endpoint keeps.
const maxECFree = 256

// maxECBlocks bounds the blocks of one message holding parity at the receiver: an honest
// sender's blocks with data still missing lie within its PSN window.
const maxECBlocks = 256

func newECCodec(cfg *Config) *ecCodec {
	k, m := cfg.ECBlock()
	return &ecCodec{k: k, m: m, encs: make(map[uint16]reedsolomon.Encoder),
		shards: make([][]byte, 0, MaxECData+MaxECParity)}
}

// enc returns the encoder for blocks of k data and m parity shards.
func (x *ecCodec) enc(k, m int) reedsolomon.Encoder {
	key := uint16(k)<<8 | uint16(m-1)
	if r, ok := x.encs[key]; ok {
		return r
	}
	r, err := reedsolomon.New(k, m, reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		panic("transport: reedsolomon.New: " + err.Error()) // k, m are validated
	}
	x.encs[key] = r
	return r
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
	if err := cd.enc(x.k, cd.m).EncodeIdx(data, x.sent, x.parity); err != nil {
		panic("transport: EncodeIdx: " + err.Error())
	}
	x.sent++
	if x.sent == x.k {
		x.pending, x.next = true, 0
	}
}

// ecParity sends c's next parity packet. blocked reports that the window or pacer
// holds it (nothing else may go then).
func (e *Endpoint) ecParity(now int64, c *conn, buf []byte) (t Transmit, ok, blocked bool) {
	x := c.ecTx
	m := x.msg
	if m.id != x.id || m.allAcked || m.data == nil {
		x.pending = false // every data packet of the block arrived already
		return Transmit{}, false, false
	}
	size := x.shard
	if !e.windowOpen(now, c, size, false) {
		return Transmit{}, false, true
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
		PSN: x.first, AckFloor: c.sndUna, MsgID: x.id, MsgLen: uint32(x.n),
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
	return Transmit{N: n, To: c.peer, EV: ev, ECN: ECT0, Type: wire.TypeData}, true, false
}

// ecBlock is a block of an incoming message holding parity.
type ecBlock struct {
	off, shard uint32
	first      uint32 // PSN of its first data packet
	k, m       uint8
	have       uint16 // parity packets held (bit i: index i)
	seen       uint16 // parity packets that arrived, held or trimmed
	parity     [wire.MaxECParity][]byte
}

// shardRange returns the byte range of data shard i of b in a message of n bytes.
func (b *ecBlock) shardRange(i, n int) (lo, hi int) {
	lo = int(b.off) + i*int(b.shard)
	return lo, min(lo+int(b.shard), n)
}

// onParity handles a parity packet (DATA with FlagEC) for message r (nil: not yet open;
// done: already delivered). The caller has applied the checks every data packet gets.
// A parity packet is untrusted like any: its block must lie inside the message, its data
// packets' PSNs inside the receive window, and what it holds counts against the budget.
func (e *Endpoint) onParity(now int64, c *conn, p *wire.Packet, meta *RxMeta, r *rxMsg, done bool, claim uint64, ce bool) {
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
	if k+m > 256 || off+(k-1)*shard >= n || len(p.Payload) != shard {
		e.stats.ProtoViolations++ // an empty data shard, or not a Reed-Solomon shape
		return
	}
	if c.tracker.Check(d.PSN+uint32(k-1)) == ackpath.Beyond {
		e.stats.BeyondWindow++
		return
	}
	got := 0
	if r != nil {
		got = r.got
	}
	if uint64(off) >= uint64(got)+e.reach(shard) {
		e.stats.BeyondWindow++
		return
	}
	var b *ecBlock
	if r != nil {
		for _, x := range r.ec {
			if x.off == uint32(off) {
				b = x
				break
			}
		}
	}
	if b != nil {
		if int(b.shard) != shard || int(b.k) != k || int(b.m) != m || b.first != d.PSN {
			e.stats.ProtoViolations++
			return
		}
		if b.have&(1<<idx) != 0 {
			e.stats.ParityDropped++
			return
		}
	} else if r != nil && (len(r.ec) >= maxECBlocks || e.ecComplete(r, uint32(off), uint32(shard), k, n)) {
		e.stats.ParityDropped++ // nothing missing, or more blocks open than a sender can have
		return
	}
	fresh := r == nil
	if fresh {
		r = e.allocRx()
		spans, ecb := r.spans, r.ec
		*r = rxMsg{id: d.MsgID, n: n, streamStart: d.StreamStart, spans: spans, ec: ecb}
	}
	if !e.charge(c, r, uint64(shard)) {
		e.stats.RecvBudgetDrops++
		if fresh {
			e.freeRx(r)
		}
		return
	}
	if fresh {
		c.rx[d.MsgID] = r
		c.claimed += claim
	}
	if b == nil {
		b = e.ec.newBlock()
		*b = ecBlock{off: uint32(off), shard: uint32(shard), first: d.PSN, k: uint8(k), m: uint8(m)}
		r.ec = append(r.ec, b)
	}
	buf := e.ec.get(shard)
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
// nothing of it is missing. It returns the data packets rebuilt.
func (e *Endpoint) ecTry(c *conn, r *rxMsg, b *ecBlock) int {
	k, m := int(b.k), int(b.m)
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
	x := e.ec
	shard := int(b.shard)
	shards := x.shards[:k+m]
	for i := 0; i < k; i++ {
		lo, hi := b.shardRange(i, r.n)
		if _, kind := r.cover(lo, hi-lo); kind == coverDup {
			shards[i] = e.ecView(r, lo, hi, shard)
		} else {
			s := x.get(shard)
			x.scratch = append(x.scratch, s)
			shards[i] = s[:0]
		}
	}
	for j := 0; j < m; j++ {
		shards[k+j] = b.parity[j] // nil when not held
	}
	rebuilt := 0
	if err := x.enc(k, m).ReconstructData(shards); err == nil {
		for i := 0; i < k; i++ {
			lo, hi := b.shardRange(i, r.n)
			at, kind := r.cover(lo, hi-lo)
			if kind != coverNew {
				continue // held (it was present), or too many ranges: resent later
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
	}
	e.stats.ECRebuilt += uint64(rebuilt)
	for i, s := range x.scratch {
		x.put(s)
		x.scratch[i] = nil
	}
	x.scratch = x.scratch[:0]
	clear(shards)
	e.ecDropBlock(c, r, b)
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
			e.uncharge(c, r, uint64(len(b.parity[j])))
			e.ec.put(b.parity[j])
			b.parity[j] = nil
		}
	}
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
	r := c.rx[d.MsgID]
	if r == nil {
		e.ecTrimCheck(c, d, nil, 1)
		return
	}
	k, m, shard := int(d.EC.K), int(d.EC.M), int(d.PayloadLen)
	if k+m > 256 || r.n != int(d.MsgLen) || int(d.Offset)+(k-1)*shard >= r.n {
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
	case b != nil && (int(b.shard) != shard || int(b.k) != k || int(b.m) != m || b.first != d.PSN):
		return // contradicts the block: ignore
	case b == nil && len(r.ec) < maxECBlocks && !e.ecComplete(r, d.Offset, uint32(shard), k, r.n):
		b = e.ec.newBlock()
		*b = ecBlock{off: d.Offset, shard: uint32(shard), first: d.PSN, k: uint8(k), m: uint8(m)}
		r.ec = append(r.ec, b)
	}
	lost := 1
	if b != nil {
		b.seen |= 1 << d.EC.Index
		lost = 0 // counted from b
	}
	e.ecTrimCheck(c, d, b, lost)
}
