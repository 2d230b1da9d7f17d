//go:build linux

package api

import (
	"net/netip"
	"testing"
	"time"
)

// Placement limits, at and beyond each: a session's placements hold at most half its
// ring; a message for no session, with a bad envelope, smaller than the session's
// smallest ring message, or while a received message waits for ring room is not placed;
// Unplace gives the slot back; a delivered placement is announced (the client may
// release it) and its RecvAt carries the endpoints from the first packet.
func TestPlaceLimits(t *testing.T) {
	const ring = 1 << 20
	x := ringTestSession(t, ring)
	s := x.srv
	ep := x.endpoint
	peer := netip.MustParseAddrPort("10.0.0.2:23600")
	head := func(dst uint32) []byte {
		b := make([]byte, envelopeLen+4)
		putEnvelope(b, dst, 7)
		return b
	}
	place := func(n int, h []byte) ([]byte, uint64) {
		t.Helper()
		buf, tok := s.Place(peer, n, h)
		if tok != 0 && len(buf) != n {
			t.Fatalf("Place(%d) gave %d bytes", n, len(buf))
		}
		return buf, tok
	}
	_, t1 := place(ring/4, head(ep))
	_, t2 := place(ring/4, head(ep))
	if t1 == 0 || t2 == 0 {
		t.Fatal("placements within half the ring refused")
	}
	if _, tok := place(64, head(ep)); tok != 0 { // half the ring is placed already
		t.Fatal("a placement beyond half the ring was taken")
	}
	s.Unplace(t1)
	_, t3 := place(ring/4, head(ep))
	if t3 == 0 {
		t.Fatal("the slot given back with Unplace was not reusable")
	}
	s.Unplace(t2)
	s.Unplace(t3)
	for name, h := range map[string][]byte{"no session": head(ep + 1), "bad envelope": []byte("not an envelope")} {
		if _, tok := place(1000, h); tok != 0 {
			t.Errorf("%s: placed", name)
		}
	}
	x.mu.Lock()
	x.ringMin = 2000
	x.mu.Unlock()
	if _, tok := place(envelopeLen+1999, head(ep)); tok != 0 {
		t.Error("a body below the session's smallest ring message was placed")
	}
	if _, tok := place(envelopeLen+2000, head(ep)); tok == 0 {
		t.Error("a body of the session's smallest ring message was refused")
	} else {
		s.Unplace(s.placeSeq)
	}
	x.mu.Lock()
	x.ringPend = 1
	x.mu.Unlock()
	if _, tok := place(1000, head(ep)); tok != 0 {
		t.Error("placed while a received message waits for ring room (slots would leave tag order)")
	}
	x.mu.Lock()
	x.ringPend, x.ringMin = 0, 0
	x.mu.Unlock()

	// Delivered: announced, so the client's release of its tag is valid.
	buf, tok := place(3000, head(ep))
	copy(buf[envelopeLen:], "placed body")
	s.deliverPlaced(peer, tok)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.placing != 0 || x.placedBytes != 0 || len(s.places) != 0 {
		t.Fatalf("after delivery: placing %d, %d bytes, %d in the server's table", x.placing, x.placedBytes, len(s.places))
	}
	if _, err := x.ring.release(x.recvSeq); err != nil {
		t.Fatalf("releasing the delivered placement: %v", err)
	}
}

// A session that closes while the engine receives into its ring keeps the mapping until
// the last placement ends (the engine writes into it without a lock), counts a delivery
// that comes too late as undeliverable, and then unmaps it.
func TestPlaceOutlivesSession(t *testing.T) {
	x := ringTestSession(t, 1<<20)
	s := x.srv
	b := make([]byte, envelopeLen)
	putEnvelope(b, x.endpoint, 7)
	peer := netip.MustParseAddrPort("10.0.0.2:23600")
	buf1, t1 := s.Place(peer, 100<<10, b)
	buf2, t2 := s.Place(peer, 100<<10, b)
	if t1 == 0 || t2 == 0 {
		t.Fatal("not placed")
	}
	x.mu.Lock()
	x.closeRingLocked() // what the session's writer does when it ends
	orphan := x.ringOrphan != nil
	x.mu.Unlock()
	if !orphan {
		t.Fatal("the ring was unmapped with placements outstanding")
	}
	buf1[len(buf1)-1], buf2[0] = 1, 2 // the engine writes on: the mapping must be there
	before := s.undeliverable.Load()
	s.deliverPlaced(peer, t1)
	if s.undeliverable.Load() != before+1 {
		t.Fatal("a placement delivered after its session closed was not counted undeliverable")
	}
	x.mu.Lock()
	orphan = x.ringOrphan != nil
	x.mu.Unlock()
	if !orphan {
		t.Fatal("unmapped while a placement was still outstanding")
	}
	s.Unplace(t2)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ringOrphan != nil || x.placing != 0 {
		t.Fatalf("after the last placement: orphan kept %v, placing %d", x.ringOrphan != nil, x.placing)
	}
}

// A message that waits for ring room behind a placed message goes on waiting while the
// placed one is still arriving (room comes when it is given back or read), but when the
// placed one is complete and its RecvAt waits in the queue behind the waiting message,
// the waiting one goes over the socket instead: waiting then would never end.
func TestPlacedRecvAtNeverWaitsBehindItself(t *testing.T) {
	for _, complete := range []bool{false, true} {
		const ring = 1 << 20
		x := ringTestSession(t, ring)
		s := x.srv
		hd := make([]byte, envelopeLen)
		putEnvelope(hd, x.endpoint, 7)
		peer := netip.MustParseAddrPort("10.0.0.2:23600")
		_, tok := s.Place(peer, 400<<10, hd) // the ring's oldest slot
		if tok == 0 {
			t.Fatal("not placed")
		}
		body := msgBody{pieces: [][]byte{make([]byte, envelopeLen+700<<10)}, skip: envelopeLen, n: 700 << 10}
		if got := x.enqueueRecv(limitFrom, body); got != recvQueued {
			t.Fatalf("outcome %d", got)
		}
		if complete {
			s.deliverPlaced(peer, tok) // its RecvAt queues behind the 700 KiB message
		}
		x.mu.Lock()
		f := x.nextLocked()
		done := make(chan error, 1)
		go func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			done <- x.toRingLocked(&f, func() error { return nil })
		}()
		x.mu.Unlock()
		select {
		case err := <-done:
			if !complete || err != errRingPlaced {
				t.Fatalf("complete %v: toRingLocked returned %v at once", complete, err)
			}
			continue
		case <-time.After(200 * time.Millisecond):
			if complete {
				t.Fatal("the message waits for room that only the placed message behind it can free")
			}
		}
		s.Unplace(tok) // the placed message failed: its room comes back
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("after Unplace: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("still waiting after the placement was given back")
		}
	}
}
