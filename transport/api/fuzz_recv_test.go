package api

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/smartt-transport/smartt/transport"
)

// fuzzRecvCfg is the configuration FuzzRecvQueue drives: limits small enough that a short
// input reaches them.
func fuzzRecvCfg(bp bool) Config {
	cfg := DefaultConfig()
	cfg.MaxMessage, cfg.MaxOutstanding, cfg.MaxOutstandingTotal = 96<<10, 96<<10, 96<<10
	cfg.MaxRecvQueue, cfg.MaxRecvQueueTotal = 64<<10, 96<<10
	cfg.RecvBackpressure = bp
	return cfg
}

// fuzzRecvServers are FuzzRecvQueue's servers, one per back-pressure setting, shared by
// all inputs (each input has a session of its own, which must give everything back).
var (
	fuzzRecvOnce    [2]sync.Once
	fuzzRecvServers [2]*Server
)

func fuzzRecvServer(t *testing.T, bp bool) *Server {
	i := 0
	if bp {
		i = 1
	}
	fuzzRecvOnce[i].Do(func() { fuzzRecvServers[i] = limitServer(&testing.T{}, fuzzRecvCfg(bp)) })
	return fuzzRecvServers[i]
}

// fuzzBody is a received message of n body bytes as the engine delivers it in the
// daemon's configuration: 16 KiB receive chunks, the envelope ahead of the body.
func fuzzBody(n int) msgBody {
	var pieces [][]byte
	for left := n + envelopeLen; left > 0; left -= transport.RecvChunk {
		pieces = append(pieces, make([]byte, min(left, transport.RecvChunk), transport.RecvChunk))
	}
	return msgBody{pieces: pieces, skip: envelopeLen, n: int64(n)}
}

// FuzzRecvQueue drives a session's receive queue and ring with arbitrary interleavings of
// deliveries (through the back-pressure gate when it is on), writes, releases, placements
// and their ends, and displacements, and checks after every step what the queue holds
// against what it is charged: the buffers in the queue (counted from the frames
// themselves, not from the counters) never exceed the charge, the charge never exceeds
// them by more than recvOverhead and a chunk table per message, the session stays within
// max_recv_queue (plus one message when the gate admitted it last), and the ring's
// placements within half the ring.
func FuzzRecvQueue(f *testing.F) {
	f.Add(true, []byte{0, 1, 0, 2, 0, 3, 1, 1, 2})
	f.Add(false, []byte{0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 1, 1, 1})
	f.Add(true, []byte{5, 3, 0x40, 0, 0x80, 1, 6, 1, 2, 7})
	f.Add(true, []byte{5, 3, 0x40, 0, 0x10, 1, 1, 4, 1, 2, 2})
	f.Fuzz(func(t *testing.T, bp bool, ops []byte) {
		s := fuzzRecvServer(t, bp)
		x := limitSession(t, s)
		defer func() { // the session ends: every charge and slot is given back
			for _, tok := range toksOf(s, x) {
				s.Unplace(tok)
			}
			x.kill()
			if n := s.recvTotal.Load(); n != 0 || x.placing != 0 {
				t.Fatalf("after the session ended: %d bytes charged, %d placements", n, x.placing)
			}
		}()
		st := &fuzzRecvState{s: s, x: x, ops: ops}
		for i := 0; i < len(ops) && i < 512; i++ {
			i = st.step(t, i)
			checkRecvHeld(t, s, x, st.writing)
		}
	})
}

// fuzzRecvState is what FuzzRecvQueue's client and writer hold between steps.
type fuzzRecvState struct {
	s         *Server
	x         *session
	ops       []byte
	writing   *outFrame // the frame the writer took
	announced []uint32  // ring messages the client may release, oldest first
	toks      []uint64  // placements in progress
}

// arg is the fuzz input's byte i (0 past its end).
func (st *fuzzRecvState) arg(i int) int {
	if i < len(st.ops) {
		return int(st.ops[i])
	}
	return 0
}

// step applies the operation at ops[i] and returns the index of its last argument.
func (st *fuzzRecvState) step(t *testing.T, i int) int {
	s, x := st.s, st.x
	head := make([]byte, envelopeLen)
	putEnvelope(head, x.endpoint, 7)
	switch st.ops[i] % 8 {
	case 0, 4: // a message of 1..96 KiB arrives, unless the gate refuses its first packet
		n := 1 + (st.arg(i+1)<<8|st.arg(i+2))%int(s.cfg.MaxMessage)
		if s.Ready(limitFrom.From, n+envelopeLen, head) {
			x.enqueueRecv(limitFrom, fuzzBody(n))
		}
		return i + 2
	case 1:
		st.write()
	case 2: // the client releases its oldest ring message
		if len(st.announced) > 0 {
			p := binary.BigEndian.AppendUint32(nil, st.announced[0])
			st.announced = st.announced[1:]
			if err := x.handleRelease(p); err != nil {
				t.Fatal(err)
			}
		}
	case 3, 5: // the client sets up a ring of 16..64 KiB
		x.mu.Lock()
		if x.ring == nil {
			x.ring = newRecvRing(make([]byte, (1+st.arg(i+1)%4)*16<<10))
			x.ringMin = int64(st.arg(i+2)) << 8
		}
		x.mu.Unlock()
		return i + 2
	case 6: // a placement starts
		n := 1 + (st.arg(i+1)<<8|st.arg(i+2))%(64<<10)
		if buf, tok := s.Place(limitFrom.From, n+envelopeLen, head); tok != 0 {
			if len(buf) != n+envelopeLen {
				t.Fatalf("placement of %d bytes got %d", n+envelopeLen, len(buf))
			}
			st.toks = append(st.toks, tok)
		}
		return i + 2
	case 7:
		st.endPlacement(st.arg(i+1), st.arg(i+2))
		return i + 2
	}
	return i
}

// write has the writer finish the frame it wrote and take the next one.
func (st *fuzzRecvState) write() {
	x := st.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if st.writing != nil {
		x.doneLocked(*st.writing)
		st.writing = nil
	}
	if len(x.queue) == 0 {
		return
	}
	fr := x.nextLocked()
	switch {
	case fr.typ == FrameRecvAt && fr.placed && x.ring != nil:
		x.ring.announce(fr.tag)
		st.announced = append(st.announced, fr.tag)
	case fr.typ == FrameRecvAt && !fr.placed:
		x.ringPend--
		if off, ok := x.ring.alloc(fr.tag, fr.body.n); ok {
			fr.ringOff = off
			x.ring.announce(fr.tag)
			st.announced = append(st.announced, fr.tag)
		} // else over the socket
	}
	st.writing = &fr
}

// endPlacement ends placement k (mod their number): complete, failed, or displaced.
func (st *fuzzRecvState) endPlacement(k, how int) {
	if len(st.toks) == 0 {
		return
	}
	k %= len(st.toks)
	tok := st.toks[k]
	st.toks = append(st.toks[:k], st.toks[k+1:]...)
	switch how % 3 {
	case 0:
		st.s.deliverPlaced(limitFrom.From, tok)
	case 1:
		st.s.Unplace(tok)
	case 2:
		if p, ok := st.s.takePlacement(tok); ok {
			st.x.mu.Lock()
			st.x.displacedLocked(p)
			st.x.mu.Unlock()
		}
	}
}

// checkRecvHeld checks the session's charges against the buffers its frames hold.
func checkRecvHeld(t *testing.T, s *Server, x *session, writing *outFrame) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	var held, charged, msgs int64
	frames := x.queue
	if writing != nil {
		frames = append(frames[:len(frames):len(frames)], *writing)
	}
	for _, f := range frames {
		if f.held == 0 {
			continue
		}
		msgs++
		charged += f.held
		for _, p := range f.body.pieces {
			held += int64(cap(p))
		}
	}
	if charged != x.recvQueued+x.recvWriting || charged != s.recvTotal.Load() {
		t.Fatalf("frames charge %d, session counts %d+%d, daemon %d", charged, x.recvQueued, x.recvWriting, s.recvTotal.Load())
	}
	if held > charged || charged > held+msgs*(recvOverhead+24*8) {
		t.Fatalf("%d messages hold %d bytes of buffers, charged %d", msgs, held, charged)
	}
	maxMsg := heldSize(fuzzBody(int(s.cfg.MaxMessage)))
	if limit := s.cfg.MaxRecvQueue + maxMsg; x.behindLocked() > limit {
		t.Fatalf("%d bytes charged behind the oldest message, bound %d", x.behindLocked(), limit)
	}
	if r := x.ring; r != nil && (r.used() > r.size || x.placedBytes > r.size/2 || x.placedBytes < 0) {
		t.Fatalf("ring of %d: %d used, %d placed", r.size, r.used(), x.placedBytes)
	}
}

// toksOf lists the placements of session x.
func toksOf(s *Server, x *session) []uint64 {
	s.placeMu.Lock()
	defer s.placeMu.Unlock()
	var toks []uint64
	for tok, p := range s.places {
		if p.x == x {
			toks = append(toks, tok)
		}
	}
	return toks
}
