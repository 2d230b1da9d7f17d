package transport

import (
	"bytes"
	"hash/crc32"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Forged parity (recovery "ec"), injected at b by an attacker who knows the connection's
// IDs and addresses (an on-path attacker without keys): it may forge packets, but parity
// must never let it hold memory, complete or acknowledge data it does not cover.

// forgeRig is a warmed-up pair (b has seen a prove its address) and a forger at b.
type forgeRig struct {
	t          *testing.T
	p          *pair
	id         ConnID
	aID, bID   uint64
	port       uint16
	last       wire.Data // a's latest data header
	next       uint32    // the next message ID a would use
	stream     uint64    // its stream offset
	got        map[uint32][]byte
	sent       map[uint32]bool
	drop       func(b []byte) bool // optional: drop a datagram of a's
	buf        []byte
	forgedPSNs uint32 // PSNs the forger used beyond a's
}

func newForgeRig(t *testing.T, cfg Config) *forgeRig {
	r := &forgeRig{t: t, p: newPair(t, cfg, 5000), got: map[uint32][]byte{}, sent: map[uint32]bool{},
		buf: make([]byte, 70000)}
	p := r.p
	p.drop = func(from *Endpoint, b []byte) bool {
		var q wire.Packet
		if q.Decode(b) != nil {
			return false
		}
		if from == p.a && q.Type == wire.TypeData {
			r.aID, r.port = q.SrcConn, q.ReplyPort
			if q.Flags&wire.FlagEC == 0 {
				r.last = q.Data
			}
		}
		if from == p.b && q.Type == wire.TypeAck {
			r.bID = q.SrcConn
		}
		return from == p.a && r.drop != nil && r.drop(b)
	}
	var err error
	if r.id, err = p.a.Dial(0, p.bAddr); err != nil {
		t.Fatal(err)
	}
	warm := patterned(100, 5)
	r.send(warm)
	r.until(func() bool { return r.sent[r.last.MsgID] && r.got[r.last.MsgID] != nil })
	r.next, r.stream = r.last.MsgID+1, r.last.StreamStart+streamLen(len(warm))
	return r
}

// send queues msg at a.
func (r *forgeRig) send(msg []byte) {
	if _, err := r.p.a.Send(r.p.now, r.id, msg); err != nil {
		r.t.Fatal(err)
	}
}

// poll collects both endpoints' events.
func (r *forgeRig) poll() {
	for ev := range pending(r.p.b) {
		if ev.Kind == MessageReceived {
			r.got[ev.MsgID] = append([]byte(nil), ev.Data...)
		}
	}
	for ev := range pending(r.p.a) {
		if ev.Kind == MessageSent {
			r.sent[ev.MsgID] = true
		}
	}
}

// until runs the pair until done (or 10 s of engine time).
func (r *forgeRig) until(done func() bool) {
	r.t.Helper()
	r.p.runUntil(r.t, r.p.now+1e10, func() bool { r.poll(); return done() })
}

// inject hands b a DATA packet from a's address with the connection's IDs.
func (r *forgeRig) inject(flags wire.Flags, d wire.Data, payload []byte) {
	q := wire.Packet{}
	q.Type, q.Flags, q.SrcConn, q.DstConn, q.ReplyPort = wire.TypeData, flags, r.aID, r.bID, r.port
	q.Data, q.Payload = d, payload
	n, err := q.Encode(r.buf)
	if err != nil {
		r.t.Fatal(err)
	}
	r.p.b.HandlePacket(r.p.now, r.buf[:n], RxMeta{From: r.p.aAddr})
}

// TestECForgedParityHeapFlat: 1,800 forged blocks, each of its own message, block shape
// (K 1..255, M 1..16) or erasure pattern, every message completed by its data, leave the
// receiver's live heap where it was: no encoder per shape, no inversion cache.
func TestECForgedParityHeapFlat(t *testing.T) {
	cfg := ecConfig(16, 4)
	r := newForgeRig(t, cfg)
	psn, floor := r.last.PSN+1, r.last.PSN+1
	before := liveHeap()
	const blocks = 1800
	for i := 0; i < blocks; i++ {
		k, m := 1+(i*37)%255, 1+(i*7)%16
		if i%2 == 0 {
			k, m = 16, 4 // the configured shape, a different erasure pattern each time
		}
		data := patterned(k, i)
		d := wire.Data{AckFloor: floor, MsgID: r.next, MsgLen: uint32(k), PayloadLen: 1, StreamStart: r.stream, TxTime: r.p.now}
		miss := (i * 5) % k
		for j := 0; j < k; j++ {
			if j != miss {
				d.PSN, d.Offset = psn+uint32(j), uint32(j)
				r.inject(0, d, data[j:j+1])
			}
		}
		pd := d
		pd.PSN, pd.Offset, pd.EC = psn, 0, wire.EC{K: uint8(k), M: uint8(m), Index: uint8(i % m)}
		if k == 16 {
			pd.AckFloor = crc32.Checksum(data, castagnoli)
		}
		r.inject(wire.FlagEC, pd, []byte{byte(i)}) // parity: the forger's bytes
		d.PSN, d.Offset = psn+uint32(miss), uint32(miss)
		r.inject(0, d, data[miss:miss+1]) // the missing packet (a resend) completes it
		psn += uint32(k)
		floor = psn
		r.next++
		r.stream += streamLen(k)
		r.poll()
	}
	after := liveHeap()
	s := r.p.b.Stats()
	t.Logf("live heap %d -> %d bytes (%+d) after %d forged blocks; parity recv %d, rebuilt %d, delivered %d",
		before, after, int64(after)-int64(before), blocks, s.ParityRecv, s.ECRebuilt, s.MsgsDelivered)
	if s.MsgsDelivered != blocks+1 {
		t.Fatalf("%d messages delivered, want %d", s.MsgsDelivered, blocks+1)
	}
	if after > before+4<<20 {
		t.Fatalf("live heap grew %d bytes after %d forged parity blocks (bound 4 MiB)", after-before, blocks)
	}
}

// TestECCrossMessageParityCannotComplete: parity naming a PSN of another message (K=1:
// the parity is the data) must not acknowledge that PSN. One packet of an 8,000-byte
// message is lost; forged single-shard parity of the next message (not yet open, or
// open with one packet in) names the lost PSN. The 8,000-byte message must be delivered
// intact before, or whenever, its sender reports it sent (unordered: reported at its
// last acknowledgement).
func TestECCrossMessageParityCannotComplete(t *testing.T) {
	for _, open := range []bool{false, true} {
		cfg := ecConfig(4, 2)
		cfg.MTU, cfg.Unordered = 4096, true
		r := newForgeRig(t, cfg)
		victim := patterned(8000, 11)
		lostPSN := r.last.PSN + 2 // its second packet
		dropping := true
		r.drop = func(b []byte) bool {
			var q wire.Packet
			if q.Decode(b) != nil || q.Type != wire.TypeData {
				return false
			}
			// The lost packet's first transmission, and every parity (so nothing honest
			// rebuilds it).
			return q.Flags&wire.FlagEC != 0 || (dropping && q.Data.PSN == lostPSN)
		}
		vid, vstream := r.next, r.stream
		n := 4196 // the next message: 2 packets, 4096 + 100 bytes
		fake := patterned(n, 12)
		r.send(victim)
		if open {
			// The next message is sent too, its second packet lost: open, one packet in.
			r.send(fake)
			r.drop = func(b []byte) bool {
				var q wire.Packet
				if q.Decode(b) != nil || q.Type != wire.TypeData {
					return false
				}
				return q.Flags&wire.FlagEC != 0 || (dropping && (q.Data.PSN == lostPSN || q.Data.PSN == lostPSN+2))
			}
			r.until(func() bool { return r.last.PSN == lostPSN+2 })
		} else {
			r.until(func() bool { return r.last.PSN == lostPSN })
		}
		dropping = false
		d := wire.Data{AckFloor: r.last.AckFloor, MsgID: vid + 1, MsgLen: uint32(n), StreamStart: vstream + streamLen(len(victim)), TxTime: r.p.now}
		pd := d
		pd.PSN, pd.Offset, pd.PayloadLen, pd.AckFloor = lostPSN, 4096, 100, crc32.Checksum(fake[4096:], castagnoli)
		pd.EC = wire.EC{K: 1, M: 2, Index: 0}
		r.inject(wire.FlagEC, pd, fake[4096:])
		r.until(func() bool { return r.sent[vid] })
		stop := r.p.now + 2e9
		r.until(func() bool { return r.got[vid] != nil || r.p.now > stop })
		if !bytes.Equal(r.got[vid], victim) {
			t.Fatalf("open=%v: message reported sent but not delivered intact (%d bytes delivered)", open, len(r.got[vid]))
		}
	}
}

// TestECForgedParityCannotCorrupt: one data packet of a block and all of its parity are
// lost; a blind forger (it knows the IDs and PSNs, not the lost bytes) injects parity for
// the block. The message must be delivered intact (from the resend), never rebuilt from
// the forged parity.
func TestECForgedParityCannotCorrupt(t *testing.T) {
	cfg := ecConfig(4, 2)
	cfg.MTU = 1500
	r := newForgeRig(t, cfg)
	msg := patterned(4*1500, 21)
	first := r.last.PSN + 1
	once := true
	r.drop = func(b []byte) bool {
		var q wire.Packet
		if q.Decode(b) != nil || q.Type != wire.TypeData {
			return false
		}
		if q.Flags&wire.FlagEC != 0 {
			return true
		}
		if q.Data.PSN == first+2 && once {
			once = false
			return true
		}
		return false
	}
	id, stream := r.next, r.stream
	r.send(msg)
	r.until(func() bool { return r.last.PSN == first+3 })
	d := wire.Data{PSN: first, AckFloor: r.last.AckFloor, MsgID: id, MsgLen: uint32(len(msg)), PayloadLen: 1500,
		StreamStart: stream, TxTime: r.p.now, EC: wire.EC{K: 4, M: 2, Index: 0}}
	r.inject(wire.FlagEC, d, bytes.Repeat([]byte{0xa5}, 1500))
	r.until(func() bool { return r.got[id] != nil })
	if !bytes.Equal(r.got[id], msg) {
		t.Fatal("message delivered corrupted: rebuilt from forged parity")
	}
}
