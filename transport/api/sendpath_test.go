//go:build linux

package api_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// The send path: SendAsync writes frames straight from the caller's slice and
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
			s.SetSendFDThreshold(0) // streamed: TestSendAsyncMemfdThreshold has the memfds
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

// SendAsync passes a message of at least the session's SendFD threshold as a sealed memfd
// (the daemon's memfd counter counts exactly those) and streams smaller ones; either way
// the bytes arrive exactly once and intact, also when the caller overwrites its slice as
// soon as SendAsync returns. Threshold 0 streams everything; a memfd message the daemon
// refuses for its size fails as a streamed one would; every memfd is closed afterwards.
func TestSendAsyncMemfdThreshold(t *testing.T) {
	const th = 64 << 10
	a, b := daemonPair(t, func(c *smarttd.Config) { c.API.MaxMessage = 4 << 20 }, nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(b.Config.API.Socket), 2)
	before := openFDs(t)
	for _, v := range []struct {
		threshold int64
		sizes     []int
		memfds    uint64
	}{
		{th, []int{th - 1, th, th + 1, 3<<20 + 5, 100}, 3},
		{client.DefaultSendFDThreshold, []int{client.DefaultSendFDThreshold - 1, client.DefaultSendFDThreshold, 4 << 20}, 2},
		{0, []int{th, 3 << 20}, 0}, // off: streamed
		{-5, []int{th}, 0},         // negative: off
	} {
		s.SetSendFDThreshold(v.threshold)
		fd0 := a.API.Stats().MsgsFD
		buf := make([]byte, 4<<20)
		var pend []*client.Pending
		for i, n := range v.sizes {
			copy(buf, patterned(i, n))
			p, err := s.SendAsync(addrB, 2, buf[:n])
			if err != nil {
				t.Fatalf("threshold %d, %d bytes: %v", v.threshold, n, err)
			}
			clear(buf[:n])
			pend = append(pend, p)
		}
		for i, p := range pend {
			if _, err := p.Wait(ctx(t)); err != nil {
				t.Fatalf("threshold %d, message %d: %v", v.threshold, i, err)
			}
		}
		for i, n := range v.sizes {
			m, err := r.Recv(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Data, patterned(i, n)) {
				t.Fatalf("threshold %d, message %d: got %d bytes, want %d (or the bytes differ)", v.threshold, i, len(m.Data), n)
			}
			m.Release()
		}
		if got := a.API.Stats().MsgsFD - fd0; got != v.memfds {
			t.Fatalf("threshold %d: %d messages went as memfds, want %d", v.threshold, got, v.memfds)
		}
	}
	// Beyond api.max_message: refused for its size (not as a bad memfd), not resent.
	s.SetSendFDThreshold(th)
	if _, err := s.Send(ctx(t), addrB, 2, make([]byte, 4<<20+1)); err == nil {
		t.Fatal("a message beyond api.max_message was accepted")
	} else {
		wantCode(t, err, api.CodeTooLarge, "api.max_message")
	}
	if _, err := s.Send(ctx(t), addrB, 2, patterned(9, th)); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Recv(ctx(t)); err != nil || !bytes.Equal(m.Data, patterned(9, th)) {
		t.Fatalf("after the refusal: %v", err)
	}
	// The session keeps its send memfds for the next messages, and closes them with itself.
	s.Close()
	waitFor(t, func() bool { return openFDs(t) <= before })
}

// The Go client reuses its send memfds: a stream of messages of one size, several
// outstanding, goes through a few memfds rewritten once each message's outcome arrived,
// and every message arrives intact and once.
func TestSendAsyncMemfdReuse(t *testing.T) {
	a, b := daemonPair(t, nil, nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(b.Config.API.Socket), 2)
	s.SetSendFDThreshold(1 << 20)
	const n, size, window = 24, 1<<20 + 100, 4
	got := make(chan error, 1)
	go func() {
		for i := range n {
			m, err := r.Recv(ctx(t))
			if err == nil && !bytes.Equal(m.Data, patterned(i, size)) {
				err = fmt.Errorf("message %d differs", i)
			}
			if err != nil {
				got <- err
				return
			}
			m.Release()
		}
		got <- nil
	}()
	var pend []*client.Pending
	buf := make([]byte, size)
	for i := range n {
		if len(pend) == window {
			if _, err := pend[0].Wait(ctx(t)); err != nil {
				t.Fatal(err)
			}
			pend = pend[1:]
		}
		copy(buf, patterned(i, size))
		p, err := s.SendAsync(addrB, 2, buf)
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
		if k := sendMemfds(t); k > window+2 {
			t.Fatalf("%d send memfds for %d messages outstanding: the memfds are not reused", k, window)
		}
	}
	for _, p := range pend {
		if _, err := p.Wait(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if st := a.API.Stats(); st.MsgsFD != n {
		t.Fatalf("%d messages went as memfds, want %d", st.MsgsFD, n)
	}
}

// sendMemfds counts the Go client's send memfds open in this process (by inode: the
// daemon's descriptors of the same memfds are the same files).
func sendMemfds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint64]bool{}
	for _, e := range ents {
		p := "/proc/self/fd/" + e.Name()
		if l, err := os.Readlink(p); err == nil && strings.HasPrefix(l, "/memfd:smartt-send") {
			var st unix.Stat_t
			if unix.Stat(p, &st) == nil {
				inodes[st.Ino] = true
			}
		}
	}
	return len(inodes)
}

// memfdOf is a memfd of size bytes holding data after the headroom, with seals.
func memfdOf(t *testing.T, size int64, data []byte, seals int) int {
	fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(fd, data, api.FDHeadroom); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		t.Fatal(err)
	}
	return fd
}

// The daemon takes a memfd sealed against shrinking and growing, with or without a seal
// against writes, of at least the headroom and the announced size (a larger one: the
// message is its start), and refuses one that may shrink or grow, or is too small
// (code 9); the session goes on.
func TestSendFDSealsAndSizes(t *testing.T) {
	a, b := daemonPair(t, nil, nil)
	conn := rawSession(t, a.Config.API.Socket, 1)
	r := openBound(t, client.New(b.Config.API.Socket), 2)
	uc := conn.(*net.UnixConn)
	const sg = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	msg := patterned(3, 5000)
	br := bufio.NewReader(conn)
	for i, v := range []struct {
		size  int64
		seals int
		ok    bool
	}{
		{api.FDHeadroom + 5000, sg | unix.F_SEAL_WRITE, true},
		{api.FDHeadroom + 5000, sg, true},
		{1 << 20, sg, true},
		{api.FDHeadroom + 4999, sg, false},
		{api.FDHeadroom + 5000, unix.F_SEAL_GROW, false},
		{api.FDHeadroom + 5000, unix.F_SEAL_SHRINK, false},
		{api.FDHeadroom + 5000, 0, false},
	} {
		fd := memfdOf(t, v.size, msg[:min(len(msg), int(v.size-api.FDHeadroom))], v.seals)
		tag := uint32(10 + i)
		sh := api.SendHeader{To: addrB, Endpoint: 2, Size: uint64(len(msg))}.Append(nil)
		frame := append(api.AppendHeader(nil, api.Header{Type: api.FrameSendFD, Tag: tag, Len: uint32(len(sh))}), sh...)
		if _, _, err := uc.WriteMsgUnix(frame, unix.UnixRights(fd), nil); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var hb [api.HeaderLen]byte
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			t.Fatal(err)
		}
		h, _ := api.ParseHeader(hb[:])
		p := make([]byte, h.Len)
		io.ReadFull(br, p)
		if h.Tag != tag {
			t.Fatalf("case %d: reply for tag %d, want %d", i, h.Tag, tag)
		}
		if !v.ok {
			if h.Type != api.FrameError {
				t.Fatalf("case %d (size %d, seals 0x%x): accepted, want refused", i, v.size, v.seals)
			}
			if code, _, _ := api.ParseError(p); code != api.CodeFD {
				t.Fatalf("case %d: code %d, want %d", i, code, api.CodeFD)
			}
			continue
		}
		if h.Type != api.FrameSent {
			t.Fatalf("case %d (size %d, seals 0x%x): reply type 0x%x %q, want Sent", i, v.size, v.seals, h.Type, p)
		}
		m, err := r.Recv(ctx(t))
		if err != nil || !bytes.Equal(m.Data, msg) {
			t.Fatalf("case %d: received %d bytes, %v", i, len(m.Data), err)
		}
	}
}
