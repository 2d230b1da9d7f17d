package transport

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// returnHeader is what a return-to-sender switch makes of DATA packet b: its header (and
// INT block), FlagTrimmed|FlagReturned set.
func returnHeader(b []byte) []byte {
	h := append([]byte(nil), b[:wire.TrimmedLen(b)]...)
	h[1] |= byte(wire.FlagTrimmed | wire.FlagReturned)
	return h
}

// TestReturnToSender: a switch returns every 7th data packet's header to the sender
// (addresses swapped) instead of forwarding it. The sender resends each at once as after
// a NACK (no timeout), the receiver sends no NACK (it never saw a trimmed packet), and
// the message arrives intact. Returned headers that do not match a packet in flight of a
// live connection from its peer are counted and dropped: from another address, with
// another TxTime, naming an unknown connection, or once the packet has been resent.
func TestReturnToSender(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Trimming, cfg.ReturnToSender = true, true
	p := newPair(t, cfg, 3000)
	var kept [][]byte
	nData, returned := 0, 0
	p.drop = func(from *Endpoint, b []byte) bool {
		if from != p.a || wire.Type(b[0]&0x0f) != wire.TypeData {
			return false
		}
		nData++
		if nData%7 != 0 {
			return false
		}
		returned++
		h := returnHeader(b)
		kept = append(kept, h)
		p.inflight = append(p.inflight, flight{at: p.now + p.delay/2, to: p.a, from: p.bAddr, data: h})
		return true
	}
	id, _ := p.a.Dial(0, p.bAddr)
	msg := bytes.Repeat([]byte("rts!"), 50000)
	if _, err := p.a.Send(0, id, msg); err != nil {
		t.Fatal(err)
	}
	got := deliverOne(t, p, 1e10)
	if !bytes.Equal(got, msg) {
		t.Fatalf("delivered %d bytes, intact %v", len(got), bytes.Equal(got, msg))
	}
	sa, sb := p.a.Stats(), p.b.Stats()
	if returned == 0 || sa.ReturnedRecv != uint64(returned) || sa.RetxNack != uint64(returned) || sa.RetxTimeout != 0 || sa.ReturnedBad != 0 {
		t.Fatalf("%d returned: sender counted %d, resent %d after them, %d after timeouts, %d bad", returned,
			sa.ReturnedRecv, sa.RetxNack, sa.RetxTimeout, sa.ReturnedBad)
	}
	if sb.NacksSent != 0 || sb.Trimmed != 0 {
		t.Fatalf("receiver sent %d NACKs, saw %d trimmed packets; want none", sb.NacksSent, sb.Trimmed)
	}

	// Forgeries and replays, against a packet in flight of a live connection.
	p.drop = nil
	if _, err := p.a.Send(p.now, id, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	var fresh []byte
	for fresh == nil {
		tx, ok := p.a.PollTransmit(p.now, p.buf)
		if !ok {
			t.Fatal("no data packet to send")
		}
		if wire.Type(p.buf[0]&0x0f) == wire.TypeData {
			fresh = returnHeader(p.buf[:tx.N])
		}
	}
	bad := func(name string, b []byte, from netip.AddrPort) {
		t.Helper()
		before := p.a.Stats()
		p.a.HandlePacket(p.now, b, RxMeta{From: from})
		after := p.a.Stats()
		if after.ReturnedBad != before.ReturnedBad+1 || after.ReturnedRecv != before.ReturnedRecv {
			t.Fatalf("%s: bad %d -> %d, acted on %d -> %d; want it counted bad and ignored", name,
				before.ReturnedBad, after.ReturnedBad, before.ReturnedRecv, after.ReturnedRecv)
		}
	}
	bad("third party", fresh, netip.MustParseAddrPort("10.0.0.9:23600"))
	bad("peer's other port", fresh, netip.MustParseAddrPort("10.0.0.2:23601"))
	forged := append([]byte(nil), fresh...)
	binary.BigEndian.PutUint64(forged[56:], binary.BigEndian.Uint64(forged[56:])+1) // TxTime
	bad("wrong TxTime", forged, p.bAddr)
	forged = append([]byte(nil), fresh...)
	binary.BigEndian.PutUint64(forged[16:], binary.BigEndian.Uint64(forged[16:])^1) // SrcConn
	bad("unknown connection", forged, p.bAddr)
	forged = append([]byte(nil), fresh...)
	binary.BigEndian.PutUint32(forged[24:], binary.BigEndian.Uint32(forged[24:])+5000) // PSN never sent
	bad("PSN never sent", forged, p.bAddr)
	for _, k := range kept[:1] {
		bad("replay of a packet resent long ago", k, p.bAddr)
	}
	// The genuine one is acted on once; its replay is not.
	before := p.a.Stats().ReturnedRecv
	p.a.HandlePacket(p.now, fresh, RxMeta{From: p.bAddr})
	if p.a.Stats().ReturnedRecv != before+1 {
		t.Fatal("the genuine returned header was not acted on")
	}
	bad("replay", fresh, p.bAddr)
}
