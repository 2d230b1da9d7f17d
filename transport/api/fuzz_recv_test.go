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
		var writing *outFrame
		var announced []uint32
		var toks []uint64
		arg := func(i int) int {
			if i < len(ops) {
				return int(ops[i])
			}
			return 0
		}
		for i := 0; i < len(ops) && i < 512; i++ {
			switch op := ops[i] % 8; op {
			case 0, 4: // a message of 1..96 KiB arrives
				n := 1 + (arg(i+1)<<8|arg(i+2))%int(s.cfg.MaxMessage)
				i += 2
				head := make([]byte, envelopeLen)
				putEnvelope(head, x.endpoint, 7)
				if !s.Ready(limitFrom.From, n+envelopeLen, head) {
					continue // refused at its first packet: nothing held
				}
				x.enqueueRecv(limitFrom, fuzzBody(n))
			case 1: // the writer finishes what it wrote and takes the next frame
				x.mu.Lock()
				if writing != nil {
					x.doneLocked(*writing)
					writing = nil
				}
				if len(x.queue) > 0 {
					fr := x.nextLocked()
					if fr.typ == FrameRecvAt && fr.placed && x.ring != nil {
						x.ring.announce(fr.tag)
						announced = append(announced, fr.tag)
					} else if fr.typ == FrameRecvAt && !fr.placed {
						x.ringPend--
						if off, ok := x.ring.alloc(fr.tag, fr.body.n); ok {
							fr.ringOff = off
							x.ring.announce(fr.tag)
							announced = append(announced, fr.tag)
						}
					}
					writing = &fr
				}
				x.mu.Unlock()
			case 2: // the client releases its oldest ring message
				if len(announced) > 0 {
					p := binary.BigEndian.AppendUint32(nil, announced[0])
					announced = announced[1:]
					if err := x.handleRelease(p); err != nil {
						t.Fatal(err)
					}
				}
			case 3, 5: // the client sets up a ring of 16..64 KiB
				x.mu.Lock()
				if x.ring == nil {
					x.ring = newRecvRing(make([]byte, (1+arg(i+1)%4)*16<<10))
					x.ringMin = int64(arg(i+2)) << 8
				}
				x.mu.Unlock()
				i += 2
			case 6: // a placement starts
				n := 1 + (arg(i+1)<<8|arg(i+2))%(64<<10)
				i += 2
				head := make([]byte, envelopeLen)
				putEnvelope(head, x.endpoint, 7)
				if buf, tok := s.Place(limitFrom.From, n+envelopeLen, head); tok != 0 {
					if len(buf) != n+envelopeLen {
						t.Fatalf("placement of %d bytes got %d", n+envelopeLen, len(buf))
					}
					toks = append(toks, tok)
				}
			case 7: // a placement ends: complete, failed, or displaced at the ring's head
				if len(toks) == 0 {
					continue
				}
				k := arg(i+1) % len(toks)
				tok := toks[k]
				toks = append(toks[:k], toks[k+1:]...)
				switch arg(i+2) % 3 {
				case 0:
					s.deliverPlaced(limitFrom.From, tok)
				case 1:
					s.Unplace(tok)
				case 2:
					if p, ok := s.takePlacement(tok); ok {
						x.mu.Lock()
						x.displacedLocked(p)
						x.mu.Unlock()
					}
				}
				i += 2
			}
			checkRecvHeld(t, s, x, writing)
		}
	})
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
