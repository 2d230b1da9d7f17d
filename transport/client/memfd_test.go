package client_test

import (
	"bufio"
	"bytes"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/client"
)

// fdConn reads a Unix socket's bytes and keeps the descriptors passed with them.
type fdConn struct {
	uc  *net.UnixConn
	mu  sync.Mutex
	fds []int
}

func (c *fdConn) Read(p []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.uc.ReadMsgUnix(p, oob)
	if oobn > 0 {
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if fds, err := unix.ParseUnixRights(&m); err == nil {
				c.mu.Lock()
				c.fds = append(c.fds, fds...)
				c.mu.Unlock()
			}
		}
	}
	return max(n, 0), err
}

func (c *fdConn) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.fds) == 0 {
		return -1
	}
	fd := c.fds[0]
	c.fds = c.fds[1:]
	return fd
}

// received is a message as a stand-in daemon got it.
type received struct {
	memfd bool
	data  []byte
}

// sendFDDaemon is a daemon stand-in for one session that says it takes SendFD (advertise)
// or not, and completes every message it reads (streamed, or a memfd it reads whole),
// but refuses memfds with code 9 when refuse is set; what it got goes to the channel.
func sendFDDaemon(t *testing.T, advertise, refuse bool) (*client.Client, <-chan received) {
	t.Helper()
	path, ln := unixListener(t)
	got := make(chan received, 64)
	go acceptOne(ln, func(conn net.Conn) {
		fc := &fdConn{uc: conn.(*net.UnixConn)}
		br := bufio.NewReader(fc)
		hdr := ""
		if advertise {
			hdr = apitypes.SendFDHeader + ": 1\r\n"
		}
		if !upgrade(conn, br, hdr) {
			return
		}
		sent := func(tag uint32) {
			out := apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameSent, Tag: tag, Len: apitypes.SentInfoLen})
			conn.Write(apitypes.SentInfo{Elapsed: time.Millisecond}.Append(out))
		}
		var cur []byte
		var want uint64
		for {
			h, p, err := readFrame(br)
			if err != nil {
				return
			}
			switch h.Type {
			case apitypes.FrameSend:
				sh, _ := apitypes.ParseSendHeader(p)
				cur, want = nil, sh.Size
			case apitypes.FrameData:
				cur = append(cur, p...)
				if uint64(len(cur)) == want {
					got <- received{data: cur}
					sent(h.Tag)
				}
			case apitypes.FrameSendFD:
				sh, _ := apitypes.ParseSendHeader(p)
				fd := fc.take()
				if refuse || fd < 0 {
					if fd >= 0 {
						unix.Close(fd)
					}
					e := apitypes.AppendError(nil, apitypes.CodeFD, "cannot map it")
					conn.Write(append(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameError, Tag: h.Tag, Len: uint32(len(e))}), e...))
					continue
				}
				seals, _ := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
				var st unix.Stat_t
				unix.Fstat(fd, &st)
				const need = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
				if seals&need != need || uint64(st.Size) < apitypes.FDHeadroom+sh.Size {
					t.Errorf("memfd: seals 0x%x, %d bytes for a message of %d", seals, st.Size, sh.Size)
				}
				b := make([]byte, sh.Size)
				unix.Pread(fd, b, apitypes.FDHeadroom)
				unix.Close(fd)
				got <- received{memfd: true, data: b}
				sent(h.Tag)
			}
		}
	})
	return client.New(path), got
}

func patternOf(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>12)
	}
	return b
}

// A session passes messages of at least its threshold as memfds only when the daemon
// said it takes them; a daemon that did not gets them streamed; a memfd the daemon
// refuses (code 9) is streamed from the memfd instead, and Wait reports the streamed
// message's outcome. The bytes arrive intact and once.
func TestSendFDFallback(t *testing.T) {
	const th = 256 << 10
	for _, v := range []struct {
		name               string
		advertise, refuse  bool
		wantMemfd, resends bool
	}{
		{"takes SendFD", true, false, true, false},
		{"does not say so", false, false, false, false},
		{"refuses the memfd", true, true, false, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			c, got := sendFDDaemon(t, v.advertise, v.refuse)
			ctx, s := openSession(t, c)
			s.SetSendFDThreshold(th)
			to := netip.MustParseAddrPort("10.0.0.2:23600")
			buf := make([]byte, 2<<20)
			for i, n := range []int{th - 1, th, 2<<20 - 3} {
				want := patternOf(i, n)
				copy(buf, want)
				p, err := s.SendAsync(to, 2, buf[:n])
				if err != nil {
					t.Fatal(err)
				}
				clear(buf) // the caller reuses its slice at once
				if _, err := p.Wait(ctx); err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				r := <-got
				if !bytes.Equal(r.data, want) {
					t.Fatalf("%d bytes: the daemon got %d bytes, or different ones", n, len(r.data))
				}
				if memfd := n >= th && v.wantMemfd; r.memfd != memfd {
					t.Fatalf("%d bytes: passed as a memfd %v, want %v", n, r.memfd, memfd)
				}
			}
			select {
			case r := <-got:
				t.Fatalf("a message arrived twice (%d bytes)", len(r.data))
			default:
			}
		})
	}
}
