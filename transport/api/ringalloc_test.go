//go:build linux

package api_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// rssKiB is this process's resident memory (the daemon runs in it), KiB.
func rssKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// Sparse ring memfds (sized, sealed, never written) cost the daemon nothing: it refuses
// them (Error 12) without touching their pages, so four of 64 MiB leave its resident
// memory within 16 MiB (the daemon populated them before: +256 MiB).
func TestSparseRingNotPopulated(t *testing.T) {
	mn := daemon.NewMemNet()
	const ring = 64 << 20
	b := startDaemon(t, mn, addrB, shortDir(t), func(c *smarttd.Config) { c.API.MaxRecvRing = ring })
	const sealed = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	before := rssKiB(t)
	for i := range 4 {
		conn := rawSession(t, b.Config.API.Socket, uint32(10+i))
		sendRecvRing(t, conn, 2, ring, ringMemfd(t, ring, sealed|sparse))
		h, p := readFrame(t, conn)
		code, text, _ := api.ParseError(p)
		if h.Type != api.FrameError || code != api.CodeRing || !strings.Contains(text, "not allocated") {
			t.Fatalf("sparse ring %d: frame 0x%02x %d %q, want Error 12 (not allocated)", i, h.Type, code, text)
		}
	}
	grew := rssKiB(t) - before
	t.Logf("4 sparse rings of %d MiB: daemon RSS %+d KiB", ring>>20, grew)
	if grew > 16<<10 {
		t.Fatalf("the daemon's resident memory grew by %d KiB for rings it refused", grew)
	}
	if n := b.API.Stats().RingRefused; n != 4 {
		t.Fatalf("ring_refused %d, want 4", n)
	}
}
