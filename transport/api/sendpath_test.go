package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// patterned is n bytes that differ from message to message (seed) and along the message.
func patterned(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>12)
	}
	return b
}

// The send path (issue 15): SendAsync writes frames straight from the caller's slice and
// the daemon reads Data payloads straight into the message's buffer. Payloads around the
// Data frame boundary arrive intact, with the old paths too (SetCopySends, api.direct_reads
// false), and the caller may overwrite its slice as soon as SendAsync returns.
func TestSendAsyncFrameBoundaries(t *testing.T) {
	const mp = api.MaxPayload
	sizes := []int{1, mp - 1, mp, mp + 1, 2*mp + 3, 5<<20 + 17, 12, 64 << 10, 3}
	for _, v := range []struct {
		copySends, directReads bool
	}{{false, true}, {true, true}, {false, false}, {true, false}} {
		t.Run(fmt.Sprintf("copy=%v,direct_reads=%v", v.copySends, v.directReads), func(t *testing.T) {
			mn := daemon.NewMemNet()
			dir := shortDir(t)
			mod := func(c *smarttd.Config) { c.API.DirectReads = v.directReads }
			a, b := startDaemon(t, mn, addrA, dir, mod), startDaemon(t, mn, addrB, dir, mod)
			s := openBound(t, client.New(a.Config.API.Socket), 1)
			s.SetCopySends(v.copySends)
			r := openBound(t, client.New(b.Config.API.Socket), 2)
			var pend []*client.Pending
			buf := make([]byte, 6<<20) // one slice for every message, overwritten after each SendAsync
			for i, n := range sizes {
				copy(buf, patterned(i, n))
				p, err := s.SendAsync(addrB, 2, buf[:n])
				if err != nil {
					t.Fatalf("message %d (%d bytes): %v", i, n, err)
				}
				clear(buf[:n]) // the caller reuses its slice: the message must not change
				pend = append(pend, p)
			}
			for i, p := range pend {
				if _, err := p.Wait(ctx(t)); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
			for i, n := range sizes {
				m, err := r.Recv(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.Data, patterned(i, n)) {
					t.Fatalf("message %d: got %d bytes, want %d (or the bytes differ)", i, len(m.Data), n)
				}
				m.Release()
			}
			if _, err := s.SendAsync(addrB, 2, nil); err == nil {
				t.Fatal("an empty message was accepted")
			}
			// SendFrom streams through the session's one chunk: a message after a larger
			// one, and one through a reader that returns a few bytes at a time.
			for i, n := range []int{mp + 5, 100} {
				want := patterned(100+i, n)
				p, err := s.SendFrom(addrB, 2, &trickle{b: want}, int64(n), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.Wait(ctx(t)); err != nil {
					t.Fatal(err)
				}
				m, err := r.Recv(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.Data, want) {
					t.Fatalf("SendFrom of %d bytes: got %d bytes (or they differ)", n, len(m.Data))
				}
			}
		})
	}
}

// trickle returns at most 1000 bytes per Read.
type trickle struct{ b []byte }

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, errors.New("trickle: read past the end")
	}
	n := copy(p[:min(len(p), 1000)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// SendBatch: limits, a message that fails alone (empty: the client; over api.max_message:
// the daemon), the rest delivered in order, with payloads of every size.
func TestSendBatch(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	const maxMsg = 2<<20 + 100
	mod := func(c *smarttd.Config) { c.API.MaxMessage = maxMsg }
	a, b := startDaemon(t, mn, addrA, dir, mod), startDaemon(t, mn, addrB, dir, mod)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(b.Config.API.Socket), 2)

	if got, err := s.SendBatch(nil, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %d pendings, %v", len(got), err)
	}
	over := make([]client.BatchMsg, client.MaxBatch+1)
	for i := range over {
		over[i] = client.BatchMsg{To: addrB, Endpoint: 2, Data: []byte("x")}
	}
	if got, err := s.SendBatch(nil, over); err == nil || len(got) != 0 {
		t.Fatalf("batch of MaxBatch+1: %d pendings, %v", len(got), err)
	}

	sizes := []int{64, 1, api.MaxPayload + 1, 0, 4096, maxMsg + 1, 2, api.MaxPayload}
	var msgs []client.BatchMsg
	for i, n := range sizes {
		msgs = append(msgs, client.BatchMsg{To: addrB, Endpoint: 2, Data: patterned(i, n)})
	}
	pend, err := s.SendBatch(nil, msgs)
	if err != nil || len(pend) != len(msgs) {
		t.Fatalf("SendBatch: %d pendings, %v", len(pend), err)
	}
	for i, p := range pend {
		_, err := p.Wait(ctx(t))
		switch sizes[i] {
		case 0:
			wantCode(t, err, api.CodeTooLarge, "empty")
		case maxMsg + 1:
			wantCode(t, err, api.CodeTooLarge, "max_message")
		default:
			if err != nil {
				t.Fatalf("message %d (%d bytes): %v", i, sizes[i], err)
			}
		}
	}
	for i, n := range sizes {
		if n == 0 || n > maxMsg {
			continue
		}
		m, err := r.Recv(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Data, patterned(i, n)) {
			t.Fatalf("message %d: got %d bytes, want %d (or they differ)", i, len(m.Data), n)
		}
	}

	// A full batch of small messages; the session goes on afterwards.
	full := make([]client.BatchMsg, client.MaxBatch)
	for i := range full {
		full[i] = client.BatchMsg{To: addrB, Endpoint: 2, Data: patterned(1000+i, 64)}
	}
	pend, err = s.SendBatch(pend[:0], full)
	if err != nil || len(pend) != client.MaxBatch {
		t.Fatalf("full batch: %d pendings, %v", len(pend), err)
	}
	for i := range full {
		m, err := r.Recv(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Data, full[i].Data) {
			t.Fatalf("batched message %d differs", i)
		}
	}
	for _, p := range pend {
		if _, err := p.Wait(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Send(ctx(t), addrB, 2, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Recv(ctx(t)); err != nil || string(m.Data) != "after" {
		t.Fatalf("after the batches: %v", err)
	}
	if st := a.API.Stats(); st.ProtocolErrors != 0 {
		t.Fatalf("protocol errors: %d", st.ProtocolErrors)
	}
}
