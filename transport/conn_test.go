package transport

import (
	"bytes"
	"errors"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// pending yields e's events until none is left, draining them.
func pending(e *Endpoint) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for {
			ev, ok := e.PollEvent()
			if !ok || !yield(ev) {
				return
			}
		}
	}
}

// events drains e's events into a slice.
func events(e *Endpoint) []Event { return slices.Collect(pending(e)) }

func TestCleanCloseBothSidesRelease(t *testing.T) {
	p := newPair(t, DefaultConfig(), 3000)
	id, _ := p.a.Dial(0, p.bAddr)
	msg := bytes.Repeat([]byte{7}, 100000)
	if _, err := p.a.Send(0, id, msg); err != nil {
		t.Fatal(err)
	}
	if err := p.a.Close(0, id); err != nil {
		t.Fatal(err)
	}
	if _, err := p.a.Send(0, id, msg); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	var aEv, bEv []Event
	p.runUntil(t, 1e9, func() bool {
		aEv = append(aEv, events(p.a)...)
		bEv = append(bEv, events(p.b)...)
		return p.a.NumConns() == 0 && p.b.NumConns() == 0
	})
	aEv = append(aEv, events(p.a)...)
	bEv = append(bEv, events(p.b)...)
	want := func(evs []Event, k EventKind) Event {
		for _, ev := range evs {
			if ev.Kind == k {
				return ev
			}
		}
		t.Fatalf("no %v event in %+v", k, evs)
		return Event{}
	}
	want(aEv, MessageSent)
	if ev := want(aEv, ConnClosed); ev.Err != nil {
		t.Fatalf("closer: %v", ev.Err)
	}
	if ev := want(bEv, MessageReceived); !bytes.Equal(ev.Data, msg) {
		t.Fatal("message corrupted")
	}
	if ev := want(bEv, ConnClosed); ev.Err != nil {
		t.Fatalf("peer: %v", ev.Err)
	}
	// Late packets of the closed connection do not resurrect it.
	_, ok := p.a.NextTimeout()
	for ok {
		p.step()
		_, ok = p.a.NextTimeout()
		if p.now > 1e10 {
			t.Fatal("time-wait never expires")
		}
	}
}

func TestCloseSurvivesLossOfClosePackets(t *testing.T) {
	p := newPair(t, DefaultConfig(), 3000)
	dropped := 0
	p.drop = func(from *Endpoint, b []byte) bool {
		if (wire.Type(b[0]&15) == wire.TypeClose || wire.Type(b[0]&15) == wire.TypeCloseAck) && dropped < 3 {
			dropped++
			return true
		}
		return false
	}
	id, _ := p.a.Dial(0, p.bAddr)
	p.a.Send(0, id, []byte("hello"))
	p.a.Close(0, id)
	p.runUntil(t, 1e10, func() bool {
		events(p.a)
		events(p.b)
		return p.a.NumConns() == 0 && p.b.NumConns() == 0
	})
	if dropped != 3 {
		t.Fatalf("dropped %d close packets", dropped)
	}
}

func TestDeadPeerFailsMessagesWithNotice(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRetransmits = 3
	p := newPair(t, cfg, 3000)
	p.drop = func(from *Endpoint, b []byte) bool { return from == p.a } // a's packets vanish
	id, _ := p.a.Dial(0, p.bAddr)
	ids := map[uint32]bool{}
	for i := 0; i < 3; i++ {
		m, err := p.a.Send(0, id, make([]byte, 10000))
		if err != nil {
			t.Fatal(err)
		}
		ids[m] = true
	}
	var evs []Event
	p.runUntil(t, 1e11, func() bool {
		evs = append(evs, events(p.a)...)
		return p.a.NumConns() == 0
	})
	evs = append(evs, events(p.a)...)
	for _, ev := range evs {
		if ev.Kind == MessageFailed {
			if !errors.Is(ev.Err, ErrRetransmits) {
				t.Fatalf("failure reason %v", ev.Err)
			}
			delete(ids, ev.MsgID)
		}
	}
	if len(ids) != 0 {
		t.Fatalf("messages %v failed silently", ids)
	}
}

// trimOffset makes p's wire mark, with the trimmed DSCP, the first `times` copies of the
// data packet at offset off of a's messages, and reports how many it marked.
func trimOffset(p *pair, cfg Config, off uint32, times int) *int {
	n := new(int)
	p.dscp = func(from *Endpoint, b []byte) uint8 {
		var pk wire.Packet
		if from != p.a || pk.Decode(b) != nil || pk.Type != wire.TypeData || pk.Data.Offset != off || *n >= times {
			return 0
		}
		*n++
		return cfg.TrimDSCP
	}
	return n
}

// trimPair returns a pair that trims with DSCP 33, its config changed by mod, whose data
// packet at stream offset off is trimmed up to times times (n counts them), and a's
// connection to b.
func trimPair(t *testing.T, mod func(*Config), off uint32, times int) (p *pair, n *int, id ConnID) {
	cfg := DefaultConfig()
	cfg.TrimDSCP = 33
	mod(&cfg)
	p = newPair(t, cfg, 3000)
	n = trimOffset(p, cfg, off, times)
	id, _ = p.a.Dial(0, p.bAddr)
	return p, n, id
}

// TestTrimsDoNotCountAsSilentLosses: a packet trimmed (and NACKed) many more times than
// max_retransmits is still delivered, because each NACK proves the peer alive; only
// losses nobody answered count towards max_retransmits (the userspace switch's
// deterministic marking once trimmed one packet 16 times in a row and failed 30 messages
// of a live connection).
func TestTrimsDoNotCountAsSilentLosses(t *testing.T) {
	p, n, id := trimPair(t, func(c *Config) { c.MaxRetransmits = 3 }, 8192, 40)
	msg := bytes.Repeat([]byte("trim"), 10000)
	if _, err := p.a.Send(0, id, msg); err != nil {
		t.Fatal(err)
	}
	got := deliverOne(t, p, 1e10)
	if *n != 40 || !bytes.Equal(got, msg) {
		t.Fatalf("trimmed %d times, delivered %d bytes intact=%v", *n, len(got), bytes.Equal(got, msg))
	}
	if s := p.a.Stats(); s.RetxNack != 40 || s.RetxTimeout != 0 {
		t.Fatalf("retransmissions: %d after NACKs (want 40), %d after timeouts", s.RetxNack, s.RetxTimeout)
	}
}

// TestMaxTrimsFailsWithNotice: a packet trimmed max_trims+1 times fails its message with
// ErrTrims, the sender is told, and nothing is delivered.
func TestMaxTrimsFailsWithNotice(t *testing.T) {
	const maxTrims = 5
	p, n, id := trimPair(t, func(c *Config) { c.MaxTrims = maxTrims }, 0, 1000)
	m, _ := p.a.Send(0, id, make([]byte, 20000))
	var failed error
	p.runUntil(t, 1e10, func() bool {
		for _, ev := range events(p.a) {
			if ev.Kind == MessageFailed && ev.MsgID == m {
				failed = ev.Err
			}
		}
		for _, ev := range events(p.b) {
			if ev.Kind == MessageReceived {
				t.Fatal("a message with a hole was delivered")
			}
		}
		return failed != nil
	})
	if !errors.Is(failed, ErrTrims) || *n != maxTrims+1 {
		t.Fatalf("failed with %v after %d trims; want ErrTrims after %d", failed, *n, maxTrims+1)
	}
}

func TestResetFailsPeerAfterRestart(t *testing.T) {
	p := newPair(t, DefaultConfig(), 3000)
	id, _ := p.a.Dial(0, p.bAddr)
	p.a.Send(0, id, []byte("one"))
	p.runUntil(t, 1e9, func() bool { return len(events(p.a)) >= 1 }) // sent: a knows b's ID
	// b restarts: a fresh endpoint with no state.
	b2, _ := NewEndpoint(DefaultConfig(), nil2())
	p.b = b2
	m, _ := p.a.Send(p.now, id, []byte("two"))
	var evs []Event
	p.runUntil(t, p.now+1e9, func() bool {
		evs = append(evs, events(p.a)...)
		return p.a.NumConns() == 0
	})
	evs = append(evs, events(p.a)...)
	failed := false
	for _, ev := range evs {
		if ev.Kind == MessageFailed && ev.MsgID == m && errors.Is(ev.Err, ErrPeerReset) {
			failed = true
		}
	}
	if !failed {
		t.Fatalf("message to a restarted peer not failed with ErrPeerReset: %+v", evs)
	}
}

func TestSendValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessage = 1000
	p := newPair(t, cfg, 1000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, nil); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := p.a.Send(0, id, make([]byte, 1001)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := p.a.Send(0, id+1, []byte("x")); !errors.Is(err, ErrUnknownConn) {
		t.Fatalf("unknown: %v", err)
	}
	bad := DefaultConfig()
	bad.MTU = 10
	bad.PSNWindow = 1000
	if _, err := NewEndpoint(bad, nil2()); err == nil {
		t.Fatal("bad config accepted")
	}
	unknown := DefaultConfig()
	unknown.CC, unknown.LB = "nope", "ecmp"
	if _, err := NewEndpoint(unknown, nil2()); err == nil || !strings.Contains(err.Error(), `cc = "nope"`) {
		t.Fatalf("unknown cc: %v", err)
	}
	unknown.CC, unknown.LB = "fixed", "nope"
	if _, err := NewEndpoint(unknown, nil2()); err == nil || !strings.Contains(err.Error(), `lb = "nope"`) {
		t.Fatalf("unknown lb: %v", err)
	}
}
