//go:build linux

package udp

import (
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/logsink"
	"golang.org/x/sys/unix"
)

// Open logs one line with what the probe found.
func TestProbeLogLine(t *testing.T) {
	var log logsink.Sink
	open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 2, TxTimestampEvery: 8,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	out := log.String()
	for _, want := range []string{`msg="udp: socket layer open"`, "ecn=true", "rx_timestamps=true", "tx_timestamps=true",
		"timestamp_source=kernel", "batch=true", `probe="ok (ECN `} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "socket layer open") != 1 {
		t.Errorf("want exactly one open line (the probe's own sockets log nothing):\n%s", out)
	}
}

// openWithoutNetAdmin opens cfg on a thread without CAP_NET_ADMIN (so the sysctls cap
// the socket buffers) and returns what it reported.
func openWithoutNetAdmin(t *testing.T, cfg Config) Caps {
	t.Helper()
	done := make(chan Caps, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread loses a capability and dies with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			t.Error(err)
			done <- Caps{}
			return
		}
		data[0].Effective &^= 1 << unix.CAP_NET_ADMIN
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			t.Error(err)
			done <- Caps{}
			return
		}
		c, err := Open(cfg)
		if err != nil {
			t.Error(err)
			done <- Caps{}
			return
		}
		c.Close()
		done <- c.Caps()
	}()
	return <-done
}

// Without CAP_NET_ADMIN the sysctl caps the buffer: Open still works, reports the size it
// got and warns naming the sysctl to raise.
func TestBufferWarningWithoutCapNetAdmin(t *testing.T) {
	var log logsink.Sink
	want := 64 << 20
	caps := openWithoutNetAdmin(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 2, RecvBuffer: want, SendBuffer: want,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if caps.RecvBuffer >= want || caps.RecvBuffer == 0 {
		t.Fatalf("RecvBuffer %d without CAP_NET_ADMIN; want capped below %d", caps.RecvBuffer, want)
	}
	out := log.String()
	for _, w := range []string{"sysctl -w net.core.rmem_max=67108864", "sysctl -w net.core.wmem_max=67108864", "field=udp.recv_buffer"} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "wmem_max"); n != 1 {
		t.Errorf("send-buffer warning logged %d times, want once for the whole EV pool", n)
	}
}

// A request between the sysctl cap and twice it is capped too, though getsockopt then
// reports more than was asked (Linux doubles what it sets): the warning compares what the
// kernel granted, and Caps reports that, not the doubled figure.
func TestBufferWarningHalfCap(t *testing.T) {
	rmax := readSysctlInt(t, "/proc/sys/net/core/rmem_max")
	want := rmax + rmax/2
	var log logsink.Sink
	caps := openWithoutNetAdmin(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: want,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if caps.RecvBuffer != rmax {
		t.Errorf("RecvBuffer %d with rmem_max %d and %d asked: want %d (what the kernel granted)", caps.RecvBuffer, rmax, want, rmax)
	}
	if out := log.String(); !strings.Contains(out, "field=udp.recv_buffer") || !strings.Contains(out, "got="+strconv.Itoa(rmax)) {
		t.Errorf("no warning that %d of %d was granted:\n%s", rmax, want, out)
	}
}

// With CAP_NET_ADMIN the buffer is what was asked, and Caps says so (not twice it).
func TestBufferGrantedWithCapNetAdmin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs CAP_NET_ADMIN (root) for SO_RCVBUFFORCE")
	}
	want := 8 << 20
	var log logsink.Sink
	c := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: want,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if got := c.Caps().RecvBuffer; got != want {
		t.Errorf("RecvBuffer %d, want %d", got, want)
	}
	if strings.Contains(log.String(), "smaller than configured") {
		t.Errorf("warned although the buffer was granted:\n%s", log.String())
	}
}

func readSysctlInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skip(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Datagrams the kernel drops for a full receive buffer show up in Stats.RxDropped.
func TestRxDropped(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, DisableGSO: true})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 16 << 10})
	buf := make([]byte, 1000)
	pk := make([]Packet, 50)
	for i := range pk {
		pk[i] = Packet{Buf: buf, N: len(buf), Addr: b.LocalAddr()}
	}
	for range 4 { // 200 datagrams into a 16 KiB buffer nobody reads
		if _, err := a.WriteBatch(pk); err != nil {
			t.Fatal(err)
		}
	}
	in := make([]Packet, 64)
	for i := range in {
		in[i].Buf = make([]byte, 2048)
	}
	got := 0
	for {
		b.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		k, err := b.ReadBatch(in)
		if err != nil {
			break
		}
		got += k
	}
	// One more into the empty buffer brings the final count.
	if _, err := a.WriteBatch(pk[:1]); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	k, err := b.ReadBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	got += k
	st := b.Stats()
	if got >= 200 || st.RxDropped == 0 || int(st.RxDropped) != 201-got {
		t.Fatalf("received %d of 201, RxDropped %d: want the rest counted as dropped", got, st.RxDropped)
	}
}
