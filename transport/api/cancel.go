package api

import (
	"time"

	"github.com/smartt-transport/smartt/transport/daemon"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// Version 2 of the protocol: Accepted frames (the daemon holds a message's bytes) and
// Cancel. A session of version 2 keeps the messages it has accepted and not yet
// completed by tag (session.tags), so that a Cancel can find them.

// tracked is an outstanding message of a version-2 session: m is its buffer (nil for a
// message sent from a client's memfd), dst the local session it waits for (nil: sent
// through the engine).
type tracked struct {
	m   *sendMsg
	dst *session
	h   daemon.MsgHandle // a copied message's in the engine, for Unsend
}

// track records an outstanding message (version 2 only).
func (x *session) track(tag uint32, m *sendMsg, dst *session) {
	if x.version < 2 {
		return
	}
	x.mu.Lock()
	if x.tags == nil {
		x.tags = make(map[uint32]tracked)
	}
	x.tags[tag] = tracked{m: m, dst: dst}
	x.mu.Unlock()
}

// setHandle records the engine's handle of the outstanding message tag if it is m's and
// still outstanding.
func (x *session) setHandle(tag uint32, m *sendMsg, h daemon.MsgHandle) {
	if x.version < 2 {
		return
	}
	x.mu.Lock()
	if t, ok := x.tags[tag]; ok && t.m == m {
		t.h = h
		x.tags[tag] = t
	}
	x.mu.Unlock()
}

// untrackLocked forgets the outstanding message tag if it is m's. x.mu is held.
func (x *session) untrackLocked(tag uint32, m *sendMsg) {
	if t, ok := x.tags[tag]; ok && t.m == m {
		delete(x.tags, tag)
	}
}

// accept holds the Accepted frame of message tag (version 2 only) in front of every
// later frame of the session: the reader writes it when the burst of frames it is
// reading ends (at once for a lone message), or, with lazy Sent frames, it goes out with
// the next frame or within lazySentDelay, like a held Sent frame. withOutcome: the
// caller queues the message's Sent or Failed frame next, which takes it along.
func (x *session) accept(tag uint32, withOutcome bool) {
	if x.version < 2 {
		return
	}
	x.mu.Lock()
	if !x.dead {
		x.held = AppendHeader(x.held, Header{Type: apitypes.FrameAccepted, Tag: tag})
		switch {
		case withOutcome:
		case x.lazySent && x.recvSeq > 0:
			x.armHeldLocked()
		default:
			x.accHeld = true // the reader's alone: accept(now false) is only called by it
		}
	}
	x.mu.Unlock()
}

// armHeldLocked makes sure held frames go out within lazySentDelay. x.mu is held.
func (x *session) armHeldLocked() {
	if x.heldArmed {
		return
	}
	x.heldArmed = true
	if x.heldTimer == nil {
		x.heldTimer = time.AfterFunc(lazySentDelay, x.flushHeldTimer)
	} else {
		x.heldTimer.Reset(lazySentDelay)
	}
}

// cancel answers a Cancel frame: a local message still waiting for its receiver's queue,
// or a copied message the engine has not sent a byte of (daemon.Node.Unsend), is cancelled (CancelResult 0, then its Failed frame
// "cancelled"); any other outstanding message is in flight (1); anything else is
// unknown (2). The result is queued in the same critical section that looks the
// tag up, and a completion forgets its tag in the one that queues its Sent or Failed
// frame: after 1 the outcome follows, after 2 it came before.
func (x *session) cancel(tag uint32) {
	x.mu.Lock()
	t, ok := x.tags[tag]
	x.mu.Unlock()
	if ok && t.dst == nil && t.m != nil && x.srv.node.Unsend(t.h) {
		// The engine gave the message back: its completion will never come.
		x.enqueue(outFrame{typ: apitypes.FrameCancelResult, tag: tag, payload: []byte{apitypes.CancelCancelled}})
		size := int64(len(t.m.buf) - envelopeLen)
		m := t.m
		m.put()
		x.release(size)
		x.srv.msgsCancelled.Add(1)
		x.completed(tag, m, daemon.SendResult{Err: errCancelled})
		return
	}
	if ok && t.dst != nil {
		if l, ok := t.dst.unpark(x, tag); ok {
			x.enqueue(outFrame{typ: apitypes.FrameCancelResult, tag: tag, payload: []byte{apitypes.CancelCancelled}})
			l.m.put()
			x.srv.msgsCancelled.Add(1)
			x.localDone(l, errCancelled)
			return
		}
	}
	x.mu.Lock()
	st := byte(apitypes.CancelUnknown)
	if _, ok := x.tags[tag]; ok {
		st = apitypes.CancelInFlight
	}
	stalled := x.enqueueLocked(outFrame{typ: apitypes.FrameCancelResult, tag: tag, payload: []byte{st}})
	x.mu.Unlock()
	if stalled {
		go x.kill()
	}
}
