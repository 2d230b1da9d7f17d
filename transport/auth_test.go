package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

var testKey = seal.Key{0x13, 0x13, 0x13}

func authConfig(mode seal.Mode) Config {
	cfg := DefaultConfig()
	cfg.Auth.Mode = mode
	cfg.Auth.Key = testKey
	return cfg
}

// captured is a datagram seen on the wire.
type captured struct {
	from, to *Endpoint
	src      netip.AddrPort
	data     []byte
}

// body returns the packet without its seal, decoded: what an eavesdropper reads.
func (c captured) decode(t *testing.T) wire.Packet {
	t.Helper()
	b := c.data
	if wire.Flags(b[1])&wire.FlagSealed != 0 {
		b = b[:len(b)-seal.Overhead]
	}
	var p wire.Packet
	if err := p.Decode(b); err != nil {
		// Encrypt mode: a DATA payload is ciphertext but the header decodes.
		t.Fatalf("captured packet does not decode: %v", err)
	}
	return p
}

// authHarness is two endpoints with a live connection, a record of every datagram and
// of every message event, and an attacker that injects datagrams.
type authHarness struct {
	t         *testing.T
	p         *pair
	authOn    bool
	conn      ConnID // a's side of the live connection
	caps      []captured
	sent      map[uint32]bool   // MessageSent on a
	failed    int               // MessageFailed on a
	closed    int               // ConnClosed on either side of the live connection
	delivered map[uint32][]byte // MessageReceived on b (the live connection)
	accepted  int               // ConnAccepted on b
	liveB     ConnID            // b's side of the live connection
	early     []uint32          // MessageSent before b delivered the message
}

func newAuthHarness(t *testing.T, cfg Config) *authHarness {
	h := &authHarness{t: t, p: newPair(t, cfg, 5000), authOn: cfg.Auth.Enabled(),
		sent: map[uint32]bool{}, delivered: map[uint32][]byte{}}
	h.p.drop = func(from *Endpoint, b []byte) bool {
		to, src := h.p.other(from)
		h.caps = append(h.caps, captured{from: from, to: to, src: src, data: append([]byte(nil), b...)})
		return false
	}
	return h
}

// events drains both endpoints: b first, so that a delivery is recorded before the
// MessageSent its ACK causes.
func (h *authHarness) events() {
	for ev := range pending(h.p.b) {
		switch ev.Kind {
		case MessageReceived:
			if ev.Conn == h.liveB || h.liveB == 0 {
				h.delivered[ev.MsgID] = ev.Data
			}
		case ConnAccepted:
			h.accepted++
			if h.liveB == 0 {
				h.liveB = ev.Conn
			}
		case ConnClosed:
			if ev.Conn == h.liveB {
				h.closed++
			}
		}
	}
	for ev := range pending(h.p.a) {
		switch ev.Kind {
		case MessageSent:
			if ev.Conn == h.conn {
				h.sent[ev.MsgID] = true
				if _, ok := h.delivered[ev.MsgID]; !ok {
					h.early = append(h.early, ev.MsgID)
				}
			}
		case MessageFailed:
			if ev.Conn == h.conn {
				h.failed++
			}
		case ConnClosed:
			if ev.Conn == h.conn {
				h.closed++
			}
		}
	}
}

func (h *authHarness) run(limit int64, done func() bool) {
	h.t.Helper()
	h.p.runUntil(h.t, h.p.now+limit, func() bool { h.events(); return done() || h.closed > 0 })
}

// evilBytes are the attacker's: random, so that no honest message contains a run of them.
func evilBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(666, 666))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func message(n int, seed byte) []byte {
	m := make([]byte, n)
	for i := range m {
		m[i] = seed + byte(i*13)
	}
	return m
}

// capture opens the live connection and records real packets of every type: DATA (first
// contact and later), ACK, NACK (for a trimmed packet), PROBE on it; CLOSE and CLOSE_ACK
// of a second connection closed cleanly, and RESET of a third one aborted.
func (h *authHarness) capture() {
	t, p := h.t, h.p
	var err error
	if h.conn, err = p.a.Dial(p.now, p.bAddr); err != nil {
		t.Fatal(err)
	}
	m1 := message(40_000, 1)
	id1, _ := p.a.Send(p.now, h.conn, m1)
	// Trim the third data packet on its way (header only, flagged) so that b NACKs it.
	ndata := 0
	capture := p.drop
	p.drop = func(from *Endpoint, b []byte) bool {
		if from == p.a && wire.Type(b[0]&0x0f) == wire.TypeData {
			if ndata++; ndata == 3 {
				// Not captured: b never sees it whole, so it would not be a replay.
				tr := append([]byte(nil), b[:wire.DataHdrLen]...)
				tr[1] |= byte(wire.FlagTrimmed)
				p.inflight = append(p.inflight, flight{p.now + p.delay, p.b, p.aAddr, tr})
				return true
			}
		}
		return capture(from, b)
	}
	h.run(1e9, func() bool { return h.sent[id1] })
	p.drop = capture
	if !bytes.Equal(h.delivered[id1], m1) {
		t.Fatal("first message not delivered intact")
	}
	// A real PROBE: ask a's connection for one as flow control would.
	c := p.a.conns[uint64(h.conn)]
	c.probeAt = p.now
	p.a.markReady(c)
	h.run(1e8, func() bool { return h.count(wire.TypeProbe) > 0 })
	c.probeAt = 0
	p.a.touch(c, p.now)
	// CLOSE and CLOSE_ACK of a second connection.
	y, _ := p.a.Dial(p.now, p.bAddr)
	p.a.Send(p.now, y, []byte("y"))
	p.a.Close(p.now, y)
	h.run(1e9, func() bool { return h.count(wire.TypeCloseAck) > 0 })
	// RESET of a third connection aborted after the peer answered.
	z, _ := p.a.Dial(p.now, p.bAddr)
	p.a.Send(p.now, z, []byte("z"))
	h.run(1e9, func() bool { return p.a.conns[uint64(z)] != nil && p.a.conns[uint64(z)].peerID != 0 })
	p.a.Abort(p.now, z)
	h.run(1e9, func() bool { return h.count(wire.TypeReset) > 0 })
	for typ := wire.TypeData; typ <= wire.TypeReset; typ++ {
		if h.count(typ) == 0 {
			t.Fatalf("captured no %v", typ)
		}
	}
}

func (h *authHarness) count(typ wire.Type) int {
	n := 0
	for _, c := range h.caps {
		if wire.Type(c.data[0]&0x0f) == typ {
			n++
		}
	}
	return n
}

// last returns the latest captured packet of typ that from sent on connection src (its ID).
func (h *authHarness) last(from *Endpoint, typ wire.Type, src uint64) captured {
	for i := len(h.caps) - 1; i >= 0; i-- {
		if c := h.caps[i]; c.from == from && wire.Type(c.data[0]&0x0f) == typ && c.decode(h.t).SrcConn == src {
			return c
		}
	}
	h.t.Fatalf("no captured %v", typ)
	return captured{}
}

// forgery is a packet an attacker built, to be delivered to one endpoint.
type forgery struct {
	name string
	to   *Endpoint
	from netip.AddrPort
	pkt  wire.Packet
}

// variants returns the datagrams an attacker can make of f: unsealed; with a made-up
// trailer; and with the trailer of a real packet from the same sender, its counter moved
// ahead (a real session ID and check, so only the tag can refuse it).
func (h *authHarness) variants(f forgery, like captured) [][]byte {
	buf := make([]byte, 70000)
	n, err := f.pkt.Encode(buf)
	if err != nil {
		h.t.Fatalf("%s: %v", f.name, err)
	}
	plain := append([]byte(nil), buf[:n]...)
	out := [][]byte{plain}
	if !h.authOn {
		return out
	}
	sealed := append([]byte(nil), plain...)
	sealed[1] |= byte(wire.FlagSealed)
	rng := rand.New(rand.NewPCG(uint64(len(f.name)), 1))
	made := make([]byte, seal.Overhead)
	for i := range made {
		made[i] = byte(rng.Uint32())
	}
	out = append(out, append(append([]byte(nil), sealed...), made...))
	real := append([]byte(nil), like.data[len(like.data)-seal.Overhead:]...)
	ctr := binary.BigEndian.Uint32(real[seal.Overhead-4:])
	binary.BigEndian.PutUint32(real[seal.Overhead-4:], ctr+1000)
	return append(out, append(append([]byte(nil), sealed...), real...))
}

func (h *authHarness) authDrops(e *Endpoint) uint64 {
	a := e.Stats().Auth
	return a.Failed + a.Replayed + a.Unsealed + a.Stale
}

// inject hands b to e as if from src and checks that authentication dropped and counted it.
func (h *authHarness) inject(name string, e *Endpoint, src netip.AddrPort, b []byte) {
	before := h.authDrops(e)
	e.HandlePacket(h.p.now, b, RxMeta{From: src})
	if h.authOn && h.authDrops(e) != before+1 {
		h.t.Errorf("%s: not dropped and counted (auth drops %d -> %d, stats %+v)", h.name(e), before, h.authDrops(e), e.Stats().Auth)
		h.t.Logf("  injected: %s", name)
	}
}

func (h *authHarness) name(e *Endpoint) string {
	if e == h.p.a {
		return "a"
	}
	return "b"
}

// forgeries builds packets of every type naming the live connection from what an
// eavesdropper has seen, while message id is in flight.
func (h *authHarness) forgeries(id uint32) []forgery {
	t, p := h.t, h.p
	data := h.last(p.a, wire.TypeData, uint64(h.conn)).decode(t)
	ack := h.last(p.b, wire.TypeAck, uint64(h.liveB)).decode(t)
	if data.Data.MsgID != id {
		t.Fatalf("latest captured DATA is of message %d, want %d", data.Data.MsgID, id)
	}
	aID, bID := data.SrcConn, data.DstConn
	if aID != uint64(h.conn) || bID != uint64(h.liveB) {
		t.Fatal("captured connection IDs do not name the live connection")
	}
	evil := evilBytes(4096)
	hdr := func(typ wire.Type, dst, src uint64) wire.Header {
		return wire.Header{Type: typ, DstConn: dst, SrcConn: src, ReplyPort: 23600}
	}
	d := data.Data
	var forged []forgery
	// DATA: the attacker's bytes at the start of the message in flight (PSNs just ahead of
	// the latest seen, which b has not received), and a whole forged next message.
	for k := uint32(1); k <= 4; k++ {
		f := forgery{name: fmt.Sprintf("DATA replacing bytes of message %d (PSN +%d)", id, k), to: p.b, from: p.aAddr}
		f.pkt.Header = hdr(wire.TypeData, bID, aID)
		f.pkt.Data = wire.Data{PSN: d.PSN + k, AckFloor: d.AckFloor, MsgID: id, MsgLen: d.MsgLen,
			Offset: 4096 * (k - 1), PayloadLen: 4096, StreamStart: d.StreamStart, TxTime: p.now}
		f.pkt.Payload = evil
		forged = append(forged, f)
	}
	f := forgery{name: "DATA of a forged next message", to: p.b, from: p.aAddr}
	f.pkt.Header = hdr(wire.TypeData, bID, aID)
	f.pkt.Flags = wire.FlagLast | wire.FlagAckReq
	f.pkt.Data = wire.Data{PSN: d.PSN + 100, AckFloor: d.AckFloor, MsgID: id + 1, MsgLen: 4096, PayloadLen: 4096,
		StreamStart: d.StreamStart + uint64(d.MsgLen) + MsgOverhead, TxTime: p.now}
	f.pkt.Payload = evil
	forged = append(forged, f)
	f = forgery{name: "first-contact DATA opening a connection", to: p.b, from: p.aAddr}
	f.pkt.Header = hdr(wire.TypeData, 0, 0xbad)
	f.pkt.Flags = wire.FlagLast
	f.pkt.Data = wire.Data{PSN: 1, AckFloor: 1, MsgLen: 4096, PayloadLen: 4096}
	f.pkt.Payload = evil
	forged = append(forged, f)
	// ACK completing everything a has sent, with a huge window.
	f = forgery{name: "ACK of everything in flight", to: p.a, from: p.bAddr}
	f.pkt.Header = hdr(wire.TypeAck, aID, bID)
	ca := p.a.conns[uint64(h.conn)]
	f.pkt.Ack = ack.Ack
	f.pkt.Ack.CumPSN = ca.sndNxt // what an eavesdropper infers from the latest DATA
	f.pkt.Ack.SackBase = ca.sndNxt
	f.pkt.Ack.AckedPSN = ca.sndNxt - 1
	f.pkt.Ack.Delivered = d.StreamStart + uint64(d.MsgLen) + MsgOverhead
	f.pkt.Ack.Window = 1 << 30
	f.pkt.Ack.EchoTxTime = p.now - 1000
	forged = append(forged, f)
	f = forgery{name: "NACK of a packet in flight", to: p.a, from: p.bAddr}
	f.pkt.Header = hdr(wire.TypeNack, aID, bID)
	f.pkt.Nack = wire.Nack{PSN: d.PSN, CumPSN: ack.Ack.CumPSN, EchoTxTime: p.now}
	forged = append(forged, f)
	for _, to := range []*Endpoint{p.a, p.b} {
		dst, src, from := bID, aID, p.aAddr
		if to == p.a {
			dst, src, from = aID, bID, p.bAddr
		}
		for _, typ := range []wire.Type{wire.TypeProbe, wire.TypeClose, wire.TypeCloseAck, wire.TypeReset} {
			f := forgery{name: fmt.Sprintf("%v to %s", typ, h.name(to)), to: to, from: from}
			f.pkt.Header = hdr(typ, dst, src)
			f.pkt.Probe = p.now
			forged = append(forged, f)
		}
	}
	return forged
}

// attack injects forgeries of every type and replays every captured packet that has
// arrived while message id is in flight. It returns the number of datagrams injected and
// how many of them were replays from the packets' real sources.
func (h *authHarness) attack(id uint32) (injected, replays int) {
	p := h.p
	for _, f := range h.forgeries(id) {
		likeFrom := p.a
		if f.to == p.a {
			likeFrom = p.b
		}
		like := h.caps[len(h.caps)-1]
		for i := len(h.caps) - 1; i >= 0; i-- {
			if h.caps[i].from == likeFrom {
				like = h.caps[i]
				break
			}
		}
		for i, b := range h.variants(f, like) {
			h.inject(fmt.Sprintf("%s (variant %d)", f.name, i), f.to, f.from, b)
			injected++
		}
	}
	// Replays of every captured packet: from its real source (the counter was seen) and
	// from another address.
	evilAddr := netip.MustParseAddrPort("10.6.6.6:23600")
	for i, c := range h.caps {
		if h.inFlight(c.data) {
			continue // not arrived yet: it would be the first copy, not a replay
		}
		h.inject(fmt.Sprintf("replay %d (%v)", i, wire.Type(c.data[0]&0x0f)), c.to, c.src, c.data)
		h.inject(fmt.Sprintf("replay %d from elsewhere", i), c.to, evilAddr, c.data)
		injected += 2
		replays++
	}
	return injected, replays
}

func (h *authHarness) inFlight(b []byte) bool {
	for _, f := range h.p.inflight {
		if bytes.Equal(f.data, b) {
			return true
		}
	}
	return false
}

func TestAuthDropsForgedAndReplayedPackets(t *testing.T) {
	for _, mode := range []seal.Mode{seal.Auth, seal.Encrypt} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newAuthHarness(t, authConfig(mode))
			h.capture()
			p := h.p
			nCaps := len(h.caps)
			m2 := message(1<<20, 2)
			id2, _ := p.a.Send(p.now, h.conn, m2)
			// Let part of it through, then attack while the rest is in flight.
			h.run(1e9, func() bool { return h.count(wire.TypeData) > 100 })
			if h.sent[id2] || h.delivered[id2] != nil {
				t.Fatal("the message finished before the attack")
			}
			injected, replays := h.attack(id2)
			h.run(2e9, func() bool { return h.sent[id2] })
			// The connection survives and carries another message.
			m3 := message(100_000, 3)
			id3, _ := p.a.Send(p.now, h.conn, m3)
			h.run(2e9, func() bool { return h.sent[id3] })
			if !bytes.Equal(h.delivered[id2], m2) || !bytes.Equal(h.delivered[id3], m3) {
				t.Fatal("a delivered message differs from what was sent")
			}
			for id, m := range h.delivered {
				if bytes.Contains(m, evilBytes(64)) {
					t.Fatalf("message %d carries the attacker's bytes", id)
				}
			}
			if len(h.early) != 0 || h.failed != 0 || h.closed != 0 || h.accepted != 3 {
				t.Fatalf("sent before delivered %v, failed %d, closed %d, accepted %d (want 3: live, close, abort)",
					h.early, h.failed, h.closed, h.accepted)
			}
			if len(h.delivered) != 3 {
				t.Fatalf("%d messages delivered on the live connection, want 3", len(h.delivered))
			}
			for id := range h.sent {
				if _, ok := h.delivered[id]; !ok {
					t.Fatalf("message %d reported sent, never delivered", id)
				}
			}
			a, b := p.a.Stats().Auth, p.b.Stats().Auth
			drops := h.authDrops(p.a) + h.authDrops(p.b)
			if drops != uint64(injected) {
				t.Fatalf("%d datagrams injected, %d dropped by authentication", injected, drops)
			}
			if a.Replayed+b.Replayed != uint64(replays) || replays < nCaps || a.Unsealed+b.Unsealed == 0 || a.Failed+b.Failed == 0 {
				t.Fatalf("counters: a %+v b %+v", a, b)
			}
			if st := p.a.Stats(); st.ProtoViolations+p.b.Stats().ProtoViolations != 0 || st.Malformed != 0 {
				t.Fatalf("forgeries reached the engine: violations %d, malformed %d", st.ProtoViolations, st.Malformed)
			}
			t.Logf("injected %d (captured %d); a %+v; b %+v", injected, nCaps, a, b)
		})
	}
}

// TestAuthOffAttacksSucceed is the control: without keys the same attacker completes a
// message the receiver never delivered, and resets the connection (review findings
// 2-3). If this starts failing, the engine defends itself without keys: update the
// threat model in docs/security.md.
func TestAuthOffAttacksSucceed(t *testing.T) {
	h := newAuthHarness(t, DefaultConfig())
	h.capture()
	p := h.p
	// A 16-packet message, all of it sent and held on the way.
	var held [][]byte
	capture := p.drop
	p.drop = func(from *Endpoint, b []byte) bool {
		capture(from, b)
		if from == p.a && wire.Type(b[0]&0x0f) == wire.TypeData {
			held = append(held, append([]byte(nil), b...))
			return true
		}
		return false
	}
	id2, _ := p.a.Send(p.now, h.conn, message(16*4096, 2))
	for len(held) < 16 && p.step() {
	}
	if len(held) < 16 || h.delivered[id2] != nil {
		t.Fatalf("%d packets held", len(held))
	}
	inject := func(typ wire.Type, to *Endpoint) {
		for _, f := range h.forgeries(id2) {
			if f.pkt.Type == typ && f.to == to {
				h.inject(f.name, f.to, f.from, h.variants(f, captured{})[0])
			}
		}
		h.events()
	}
	inject(wire.TypeAck, p.a)
	if !h.sent[id2] || h.delivered[id2] != nil {
		t.Fatal("without authentication a forged ACK did not complete the message")
	}
	inject(wire.TypeReset, p.b)
	if h.closed == 0 {
		t.Fatal("without authentication a forged RESET did not close the connection")
	}
}

// TestAuthTrimmedHint: a trimmed DATA header (its seal cut off) only makes the receiver
// NACK a PSN it lacks on a proven connection; forged ones never move receive state, open
// connections or learn a peer ID.
func TestAuthTrimmedHint(t *testing.T) {
	h := newAuthHarness(t, authConfig(seal.Auth))
	h.capture()
	p := h.p
	data := h.last(p.a, wire.TypeData, uint64(h.conn)).decode(t)
	cb := p.b.conns[uint64(h.liveB)]
	cum := cb.tracker.Cum()
	// trim returns the 64-byte header of a trimmed sealed DATA of the live connection, as
	// an attacker who has seen its packets would forge it.
	trim := func(mut func(*wire.Packet)) []byte {
		q := data
		q.Flags = wire.FlagSealed | wire.FlagTrimmed
		q.Payload = make([]byte, q.Data.PayloadLen)
		mut(&q)
		buf := make([]byte, 70000)
		if _, err := q.Encode(buf); err != nil {
			t.Fatal(err)
		}
		return buf[:wire.DataHdrLen]
	}
	st := func() AuthStats { return p.b.Stats().Auth }
	nacks := func() int { return cb.nacks.len() }
	// A PSN b lacks, with a far AckFloor: one NACK queued, nothing else moves.
	before, n0 := st(), nacks()
	p.b.HandlePacket(p.now, trim(func(q *wire.Packet) { q.Data.PSN = cum + 10; q.Data.AckFloor = cum + 3000 }), RxMeta{From: p.aAddr})
	if st().TrimHints != before.TrimHints+1 || nacks() != n0+1 || cb.tracker.Cum() != cum {
		t.Fatalf("hint for a missing PSN: stats %+v, nacks %d -> %d, cum %d -> %d", st(), n0, nacks(), cum, cb.tracker.Cum())
	}
	ignored := []struct {
		name string
		mut  func(*wire.Packet)
		from netip.AddrPort
	}{
		{"a PSN already received", func(q *wire.Packet) { q.Data.PSN = cum - 1 }, p.aAddr},
		{"a PSN beyond the window", func(q *wire.Packet) { q.Data.PSN = cum + 1<<20 }, p.aAddr},
		{"another source address", func(q *wire.Packet) { q.Data.PSN = cum + 11 }, netip.MustParseAddrPort("10.6.6.6:23600")},
		{"a wrong peer ID", func(q *wire.Packet) { q.Data.PSN = cum + 11; q.SrcConn++ }, p.aAddr},
		{"an unknown connection", func(q *wire.Packet) { q.Data.PSN = cum + 11; q.DstConn++ }, p.aAddr},
		{"first contact", func(q *wire.Packet) { q.Data.PSN = cum + 11; q.DstConn = 0; q.SrcConn = 0x5eed }, p.aAddr},
	}
	for _, c := range ignored {
		before, n0 := st(), nacks()
		conns := p.b.NumConns()
		p.b.HandlePacket(p.now, trim(c.mut), RxMeta{From: c.from})
		if st().TrimIgnored != before.TrimIgnored+1 || nacks() != n0 || p.b.NumConns() != conns || cb.tracker.Cum() != cum {
			t.Errorf("%s: not ignored (stats %+v, nacks %d -> %d, conns %d -> %d)", c.name, st(), n0, nacks(), conns, p.b.NumConns())
		}
	}
	// A dialled connection that never heard from its peer learns nothing from a hint.
	x, _ := p.a.Dial(p.now, p.bAddr)
	cx := p.a.conns[uint64(x)]
	p.a.HandlePacket(p.now, trim(func(q *wire.Packet) { q.DstConn = uint64(x); q.SrcConn = 77 }), RxMeta{From: p.bAddr})
	if cx.peerID != 0 || cx.rxInit {
		t.Fatal("a trimmed hint taught a connection its peer")
	}
}

// TestAuthRekeyLongRun sends messages both ways for a minute of virtual time with a
// one-second rekey interval: sessions rotate about once a second, old ones are
// forgotten, nothing authentic is refused and everything is delivered.
func TestAuthRekeyLongRun(t *testing.T) {
	cfg := authConfig(seal.Encrypt)
	cfg.Auth.RekeyInterval = 1e9
	cfg.Auth.MaxSkew = 1e9
	h := newAuthHarness(t, cfg)
	p := h.p
	p.drop = nil
	var err error
	if h.conn, err = p.a.Dial(p.now, p.bAddr); err != nil {
		t.Fatal(err)
	}
	var back ConnID // b's side, to send the other way
	got := map[string]int{}
	const rounds = 150
	for i := range rounds {
		p.now = max(p.now, int64(i)*400_000_000) // a message each way every 0.4 s
		m := message(10_000+i, byte(i))
		if _, err := p.a.Send(p.now, h.conn, m); err != nil {
			t.Fatal(err)
		}
		if back != 0 {
			if _, err := p.b.Send(p.now, back, m[:100]); err != nil {
				t.Fatal(err)
			}
		}
		want := 1
		if back != 0 {
			want = 2
		}
		n := 0
		p.runUntil(t, p.now+1e9, func() bool {
			for _, e := range []*Endpoint{p.a, p.b} {
				for ev := range pending(e) {
					switch ev.Kind {
					case ConnAccepted:
						back = ev.Conn
					case MessageReceived:
						if !bytes.Equal(ev.Data, m[:len(ev.Data)]) {
							t.Fatalf("round %d: message differs", i)
						}
						got[h.name(e)]++
						n++
					case MessageFailed, ConnClosed:
						t.Fatalf("round %d: %v %v", i, ev.Kind, ev.Err)
					}
				}
			}
			return n == want
		})
	}
	a, b := p.a.Stats().Auth, p.b.Stats().Auth
	for _, st := range []AuthStats{a, b} {
		if st.Failed+st.Replayed+st.Unsealed+st.Stale+st.Refused != 0 {
			t.Fatalf("authentic packets refused: a %+v b %+v", a, b)
		}
		// At most MaxAge (3 s) of one-second sessions from the one peer, plus the current.
		if st.Sessions > 5 || st.Rekeys < 40 {
			t.Fatalf("sessions held %d, started %d: a %+v b %+v", st.Sessions, st.Rekeys, a, b)
		}
	}
	if got["b"] != rounds || got["a"] != rounds-1 {
		t.Fatalf("delivered %v", got)
	}
	t.Logf("a %+v; b %+v", a, b)
}

// TestAuthPeerRestart: a restarted receiver refuses packets of sessions begun before it
// started (replays of a first-contact DATA cannot open a connection and deliver again);
// a new connection to it works at once (Dial starts a new session), and so does a
// restarted sender's (the peer follows its newer session).
func TestAuthPeerRestart(t *testing.T) {
	cfg := authConfig(seal.Auth)
	h := newAuthHarness(t, cfg)
	p := h.p
	id, _ := p.a.Dial(p.now, p.bAddr)
	m := message(20_000, 1)
	p.a.Send(p.now, id, m)
	got := 0
	drain := func(e *Endpoint) (recv, sent, failed int) {
		for {
			ev, ok := e.PollEvent()
			if !ok {
				return
			}
			switch ev.Kind {
			case MessageReceived:
				recv++
			case MessageSent:
				sent++
			case MessageFailed:
				failed++
			}
		}
	}
	p.runUntil(t, 1e9, func() bool { r, _, _ := drain(p.b); got += r; return got == 1 })
	firstContact := h.caps[0].data
	if wire.Type(firstContact[0]&0x0f) != wire.TypeData || binary.BigEndian.Uint64(firstContact[8:]) != 0 {
		t.Fatal("the first captured packet is not a first-contact DATA")
	}
	for p.step() { // let everything settle
	}
	restart := func(e **Endpoint, seed uint64) {
		ne, err := NewEndpoint(cfg, rand.New(rand.NewPCG(seed, seed)))
		if err != nil {
			t.Fatal(err)
		}
		*e = ne
	}
	// b restarts 10 s later.
	p.now += 10e9
	restart(&p.b, 99) // its sealer starts with its first packet, now
	p.b.HandlePacket(p.now, firstContact, RxMeta{From: p.aAddr})
	if st := p.b.Stats(); st.Auth.Stale != 1 || p.b.NumConns() != 0 || st.DataRecv != 0 {
		t.Fatalf("replayed first contact after the restart: conns %d, %+v", p.b.NumConns(), st.Auth)
	}
	id2, err := p.a.Dial(p.now, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	p.a.Send(p.now, id2, m)
	recv, sent := 0, 0
	p.runUntil(t, p.now+1e9, func() bool {
		r, _, _ := drain(p.b)
		_, s, _ := drain(p.a)
		recv, sent = recv+r, sent+s
		return recv == 1 && sent == 1
	})
	// a restarts 10 s later: b's sending session to it predates a's start.
	p.now += 10e9
	restart(&p.a, 98)
	id3, _ := p.a.Dial(p.now, p.bAddr)
	p.a.Send(p.now, id3, m)
	recv, sent = 0, 0
	p.runUntil(t, p.now+1e9, func() bool {
		r, _, _ := drain(p.b)
		_, s, _ := drain(p.a)
		recv, sent = recv+r, sent+s
		return recv == 1 && sent == 1
	})
	if st := p.a.Stats().Auth; st.Stale+st.Failed != 0 {
		t.Fatalf("the restarted sender refused its peer's packets: %+v", st)
	}
}
