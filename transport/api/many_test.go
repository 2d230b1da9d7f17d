//go:build linux

package api_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/daemon"
)

// heapAndStacks is the process's live heap and goroutine stacks after a collection.
func heapAndStacks() (heap, stacks uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse
}

// 256 sessions of one user on one daemon (the default api.max_clients_per_user: the 257th
// is refused), each sending one small message to each of the 8 endpoints after its own
// (local delivery) and receiving 8: every message arrives once, every sender gets its
// Accepted and Sent frames, none is evicted. Logs the daemon's cost per session (its
// goroutines and live heap, measured with raw client connections that cost nothing of
// either).
func Test256SessionsAllToAll(t *testing.T) {
	if testing.Short() {
		t.Skip("256 sessions")
	}
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	const n, fan = 256, 8
	g0 := runtime.NumGoroutine()
	h0, st0 := heapAndStacks()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i], _, _ = upgradeRaw(t, a.Config.API.Socket, "smartt-msg/2")
		bindRaw(t, conns[i], uint32(i+1))
	}
	g1 := runtime.NumGoroutine()
	h1, st1 := heapAndStacks()
	t.Logf("daemon cost per bound session: %.2f goroutines, %.1f KiB of live heap, %.1f KiB of stacks (%d sessions)",
		float64(g1-g0)/n, float64(h1-h0)/n/1024, float64(st1-st0)/n/1024, n)
	if _, resp, body := upgradeRaw(t, a.Config.API.Socket, "smartt-msg/2"); resp.StatusCode != 503 {
		t.Fatalf("session %d of one user: %d %s, want 503 at api.max_clients_per_user", n+1, resp.StatusCode, body)
	}
	errs := make(chan error, n)
	for i, c := range conns {
		go func() { errs <- exchange(c, i, n, fan) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := a.API.Stats()
	if st.SessionsEvicted != 0 || st.MsgsLocal != n*fan || st.MsgsDelivered != n*fan || st.Sessions != n {
		t.Fatalf("stats %+v", st)
	}
}

// exchange sends one message from session i to each of the fan endpoints after it and
// reads until it has every Accepted and Sent frame and fan messages, each from one of
// the fan sessions before it, once.
func exchange(c net.Conn, i, n, fan int) error {
	for k := 1; k <= fan; k++ {
		var b [8]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		sendRaw(c, uint32(k+1), addrA, uint32((i+k)%n+1), b[:])
	}
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var accepted, sent int
	from := map[uint32]bool{}
	hb := make([]byte, api.HeaderLen)
	for accepted < fan || sent < fan || len(from) < fan {
		if _, err := readFull(c, hb); err != nil {
			return fmt.Errorf("session %d: %v", i, err)
		}
		h, err := api.ParseHeader(hb)
		if err != nil {
			return err
		}
		p := make([]byte, h.Len)
		if _, err := readFull(c, p); err != nil {
			return err
		}
		switch h.Type {
		case apitypes.FrameAccepted:
			accepted++
		case api.FrameSent:
			sent++
		case api.FrameRecv:
		case api.FrameData:
			src := binary.BigEndian.Uint32(p)
			if want := (i + n - int(src)) % n; want < 1 || want > fan || from[src] {
				return fmt.Errorf("session %d: unexpected message from %d", i, src)
			}
			from[src] = true
		default:
			return fmt.Errorf("session %d: frame 0x%02x %q", i, h.Type, p)
		}
	}
	return nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
