package api

import (
	"slices"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// Lazy Sent frames (the round trip). A client that sends the request header
// LazySentHeader when it opens its session (the daemon confirms it in its 101 response)
// lets the daemon hold the Sent frames of its messages, once a message was delivered to
// the session (a client that only sends gets every Sent frame at once, as before),
// instead of writing each at once:
// they go out with the next frame the daemon writes to that client anyway (in a request
// and reply exchange, the reply message: one write and one client wake-up instead of
// two), at the latest lazySentDelay after the first was held, and at once for a message
// the client waits for (a WantSent frame with the message's tag). A Sent frame nobody
// waits for then costs the client no wake-up of its own. Failed frames and every other
// frame are written as before.

// LazySentHeader is the HTTP header of the session Upgrade (request and response) that
// turns lazy Sent frames on.
const LazySentHeader = apitypes.LazySentHeader

// lazySentDelay bounds how long a Sent frame is held.
const lazySentDelay = time.Millisecond

// holdSentLocked holds the encoded Sent frame b unless the client waits for tag; false:
// write it now. x.mu is held.
func (x *session) holdSentLocked(tag uint32, b []byte) bool {
	if !x.lazySent || x.recvSeq == 0 {
		return false
	}
	if _, ok := x.wanted[tag]; ok {
		delete(x.wanted, tag)
		return false
	}
	x.held = append(x.held, b...)
	if !x.heldArmed {
		x.heldArmed = true
		if x.heldTimer == nil {
			x.heldTimer = time.AfterFunc(lazySentDelay, x.flushHeldTimer)
		} else {
			x.heldTimer.Reset(lazySentDelay)
		}
	}
	return true
}

// takeHeldLocked appends the held Sent frames to b (the start of a direct write) and
// forgets them. x.mu is held.
func (x *session) takeHeldLocked(b []byte) []byte {
	if len(x.held) == 0 {
		return b
	}
	b = append(b, x.held...)
	x.held = x.held[:0]
	return b
}

// flushHeldLocked writes the held Sent frames: directly when nothing is queued or being
// written, else queued for the writer. x.mu is held.
func (x *session) flushHeldLocked() {
	if len(x.held) == 0 || x.dead {
		x.held = x.held[:0]
		return
	}
	if !x.writing && len(x.queue) == 0 && x.srv.cfg.DirectWrites && x.rawLocked() {
		b := x.takeHeldLocked(x.direct[:0])
		x.direct = b
		x.writeRawLocked(b)
		return
	}
	x.queue = append(x.queue, outFrame{raw: slices.Clone(x.held)})
	x.held = x.held[:0]
	x.cond.Signal()
}

// flushHeldTimer writes Sent frames held for lazySentDelay.
func (x *session) flushHeldTimer() {
	x.mu.Lock()
	x.heldArmed = false
	x.flushHeldLocked()
	x.mu.Unlock()
}

// wantSent is the client's WantSent frame: it waits for message tag's outcome. Held Sent
// frames go out now; if tag has not completed yet, its Sent frame will not be held.
func (x *session) wantSent(tag uint32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.lazySent {
		return
	}
	if len(x.held) > 0 {
		x.flushHeldLocked() // tag's frame may be among them; a stale want is harmless
		return
	}
	if len(x.wanted) < maxWanted {
		if x.wanted == nil {
			x.wanted = make(map[uint32]struct{})
		}
		x.wanted[tag] = struct{}{}
	}
}

// maxWanted bounds the tags a client may say it waits for (one per outstanding message
// is what a client needs; the rest are ignored: their Sent frames wait at most
// lazySentDelay).
const maxWanted = 1 << 12
