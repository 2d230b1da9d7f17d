package smarttd_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

// A message to a loopback port with no daemon fails fast through the kernel's ICMP port
// unreachable, naming the peer, instead of after the retransmission budget.
func TestE2EUnreachablePeerFailsFast(t *testing.T) {
	dir := tempDir(t)
	cfg := smarttd.DefaultConfig()
	cfg.Listen = netip.MustParseAddrPort("127.0.0.93:23600")
	cfg.API.Socket = filepath.Join(dir, "a.sock")
	d, err := smarttd.Start(cfg, smarttd.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d.Shutdown(ctx)
	})
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := session(t, ctx, d, 1)
	start := time.Now()
	_, err = s.Send(ctx, dead, 2, []byte("hello"))
	took := time.Since(start)
	if err == nil {
		t.Fatal("send to a port with no daemon succeeded")
	}
	want := "nothing listening at " + dead.String()
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("failure %q after %v, want it to name %q", err, took, want)
	}
	// Loose bound for a loaded machine; the retransmission budget takes 2.4 s or more.
	if took > 2*time.Second {
		t.Fatalf("failed after %v", took)
	}
	t.Logf("failed after %v: %v", took, err)
}
