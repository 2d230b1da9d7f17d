package api_test

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// SetSendBuffer grants the size asked for past net.core.wmem_max when the process may
// (root: SO_SNDBUFFORCE), never more than the cap otherwise, and leaves what has no
// socket alone.
func TestSetSendBuffer(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "a")
	defer unix.Close(fds[1])
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := api.SetSendBuffer(c, 4096) // the kernel's floor is above 4 KiB: it reports its own
	if before <= 0 {
		t.Fatalf("SetSendBuffer on a Unix socket reported %d", before)
	}
	capBytes := readInt(t, "/proc/sys/net/core/wmem_max")
	want := 2*capBytes + 1<<20 // beyond the cap (the kernel reports twice the grant)
	got := api.SetSendBuffer(c, want/2)
	if os.Geteuid() == 0 {
		if got < want {
			t.Fatalf("as root asked for %d bytes past wmem_max %d, kernel reports %d", want/2, capBytes, got)
		}
	} else if got > 2*capBytes {
		t.Fatalf("without CAP_NET_ADMIN got %d, above twice wmem_max %d", got, capBytes)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if n := api.SetSendBuffer(a, 1<<20); n != 0 {
		t.Fatalf("net.Pipe has no socket, reported %d", n)
	}
}

// The daemon's default api.socket_buffer is the documented one, inside its limits, and
// 0 (the kernel's default) is accepted.
func TestSocketBufferConfig(t *testing.T) {
	cfg := smarttd.DefaultConfig()
	if cfg.API.SocketBuffer != api.DefaultSocketBuffer {
		t.Fatalf("default api.socket_buffer %d, want %d", cfg.API.SocketBuffer, api.DefaultSocketBuffer)
	}
	for _, n := range []int64{0, 4 << 10, 64 << 20} {
		c := cfg.API
		c.SocketBuffer = n
		if err := c.Validate(); err != nil {
			t.Fatalf("api.socket_buffer = %d refused: %v", n, err)
		}
	}
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ch := range b {
		if ch >= '0' && ch <= '9' {
			n = n*10 + int(ch-'0')
		}
	}
	return n
}
