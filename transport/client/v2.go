package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// Protocol version 2 (docs/api.md): the daemon says when it holds a message's bytes
// (Accepted) and a message not yet started can be cancelled (Cancel, CancelResult).

// CancelStatus is the daemon's answer to Pending.Cancel.
type CancelStatus uint8

// Cancel outcomes.
const (
	// Cancelled: the message had not started (no byte of it was sent); Wait reports
	// ErrCancelled.
	Cancelled CancelStatus = apitypes.CancelCancelled
	// InFlight: too late; Wait reports the message's outcome as usual.
	InFlight CancelStatus = apitypes.CancelInFlight
	// Unknown: the daemon has no outstanding message with that tag (it completed).
	Unknown CancelStatus = apitypes.CancelUnknown
)

// String names the status.
func (c CancelStatus) String() string {
	switch c {
	case Cancelled:
		return "cancelled"
	case InFlight:
		return "in flight"
	case Unknown:
		return "unknown or completed"
	}
	return fmt.Sprintf("cancel status %d", uint8(c))
}

// ErrNoCancel is Cancel on a session whose daemon speaks only version 1 of the protocol.
var ErrNoCancel = errors.New("smarttd speaks smartt-msg/1: no Cancel (upgrade the daemon)")

// ErrCancelled is wrapped by the error Wait returns for a message that was cancelled.
var ErrCancelled = errors.New("cancelled")

// Version is the protocol version negotiated with the daemon (1 or 2).
func (s *Session) Version() int { return s.version }

// Accepted counts the Accepted frames the session received: messages whose bytes the
// daemon holds (version 2; always 0 with a version-1 daemon).
func (s *Session) Accepted() uint64 { return s.accepted.Load() }

// SetAcceptedFunc sets a function the session's reader calls with the tag of every
// message the daemon has accepted (Pending.Tag): the message's buffer may be reused.
// It must not block. SendAsync's callers may reuse their slice at once anyway (its bytes
// are in the socket or a session memfd when it returns); this is for progress
// accounting and for tests.
func (s *Session) SetAcceptedFunc(f func(tag uint32)) {
	s.mu.Lock()
	s.onAccepted = f
	s.mu.Unlock()
}

// Tag is the message's tag on the session (the one the daemon's frames carry).
func (p *Pending) Tag() uint32 { return p.tag }

// Cancel asks the daemon to cancel the message: Cancelled if it had not started (then
// Wait reports ErrCancelled), InFlight if it had (Wait reports its outcome), Unknown if
// it completed already. Only against a version-2 daemon (ErrNoCancel otherwise).
func (p *Pending) Cancel(ctx context.Context) (CancelStatus, error) {
	s := p.s
	if s.version < 2 {
		return 0, ErrNoCancel
	}
	if p.direct {
		return Unknown, nil // written to a direct pair: it completed when it was written
	}
	ch := make(chan reply, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return 0, err
	}
	if s.cancels == nil {
		s.cancels = make(map[uint32]chan reply)
	}
	s.cancels[p.tag] = ch
	s.mu.Unlock()
	s.wmu.Lock()
	var h [apitypes.HeaderLen]byte
	_, err := s.bw.Write(apitypes.AppendHeader(h[:0], apitypes.Header{Type: apitypes.FrameCancel, Tag: p.tag}))
	if err == nil {
		err = s.bw.Flush()
	}
	s.wmu.Unlock()
	if err == nil {
		var r reply
		if r, err = s.waitCancel(ctx, p.tag, ch); err == nil {
			if len(r.payload) != 1 {
				return 0, fmt.Errorf("daemon sent a CancelResult of %d bytes", len(r.payload))
			}
			return CancelStatus(r.payload[0]), nil
		}
	}
	s.mu.Lock()
	delete(s.cancels, p.tag)
	s.mu.Unlock()
	return 0, err
}

// waitCancel waits for the CancelResult on ch, reading the session when nobody else does.
func (s *Session) waitCancel(ctx context.Context, tag uint32, ch chan reply) (reply, error) {
	s.rx.waiting.Add(1)
	defer s.leave()
	for {
		select {
		case r := <-ch:
			return r, r.err
		case <-s.rx.tok:
			s.lead(ctx, goal{ch: ch})
		case <-s.done:
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			if err == nil {
				err = errors.New("session closed")
			}
			return reply{}, err
		case <-ctx.Done():
			return reply{}, ctx.Err()
		}
	}
}

// handleV2 handles the frames of version 2: Accepted and CancelResult.
func (s *Session) handleV2(h apitypes.Header, payload []byte) error {
	if s.version < 2 {
		return fmt.Errorf("unexpected frame type 0x%02x from a smartt-msg/1 daemon", h.Type)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch h.Type {
	case apitypes.FrameAccepted:
		s.accepted.Add(1)
		if s.onAccepted != nil {
			s.onAccepted(h.Tag)
		}
	case apitypes.FrameCancelResult:
		ch := s.cancels[h.Tag]
		delete(s.cancels, h.Tag)
		if ch != nil {
			ch <- reply{typ: h.Type, payload: append([]byte(nil), payload...)}
		}
	}
	return nil
}
