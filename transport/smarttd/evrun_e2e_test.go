package smarttd_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/test/logsink"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/udp"
)

// A pair of default daemons on loopback (udp.datapath sockets, lb reps, reps.run auto)
// resolves reps.run to the run that fills one GSO send, logs it, and sends a bulk
// message mostly in GSO sends: on main (per-packet EVs) about 0.4 % of the data packets
// left in one (docs/datapath.md, "EV runs", k = 1).
func TestE2EDefaultDaemonsSendGSORuns(t *testing.T) {
	dir := tempDir(t)
	// Addresses and port of this run, away from other tests' fixed ones.
	net2 := rand.IntN(200) + 20
	port := uint16(20000 + 300*rand.IntN(100))
	var logs logsink.Sink
	start := func(host int) *smarttd.Daemon {
		cfg := smarttd.DefaultConfig()
		cfg.Listen = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 83, byte(net2), byte(host)}), port)
		cfg.API.Socket = filepath.Join(dir, fmt.Sprintf("d%d.sock", host))
		if cfg.Transport.REPS.Run != reps.RunAuto || cfg.UDP.Datapath != udp.DatapathSockets || cfg.Transport.LB != "reps" {
			t.Fatalf("defaults changed: reps.run %v, datapath %q, lb %q", cfg.Transport.REPS.Run, cfg.UDP.Datapath, cfg.Transport.LB)
		}
		return startWith(t, nil, cfg, smarttd.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}
	a, b := start(1), start(2)
	want := udp.GSORun(a.Config.MaxDatagram())
	if a.REPSRun != want || b.REPSRun != want || want < 2 {
		t.Fatalf("reps.run auto resolved to %d and %d, want %d", a.REPSRun, b.REPSRun, want)
	}
	if line := fmt.Sprintf("msg=\"reps.run auto\" run=%d", want); strings.Count(logs.String(), line) != 2 {
		t.Errorf("log lacks %q twice:\n%s", line, logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 2)
	msg := make([]byte, 8<<20)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	u0, e0 := udpStats(a), a.Node.Stats()
	if _, err := sa.Send(ctx, b.Config.Listen, 2, msg); err != nil {
		t.Fatal(err)
	}
	m, err := sb.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, msg) {
		t.Fatal("message received differs from the one sent")
	}
	u1, e1 := udpStats(a), a.Node.Stats()
	data := float64(e1.DataSent - e0.DataSent)
	segs, sends := float64(u1.TxGSOSegments-u0.TxGSOSegments), float64(u1.TxGSOMessages-u0.TxGSOMessages)
	t.Logf("run %d: %.0f data packets, %.0f of them in %.0f GSO sends (%.2f per send), %d sendmmsg calls",
		want, data, segs, sends, segs/max(sends, 1), u1.TxBatches-u0.TxBatches)
	if !udpCaps(a).GSO {
		t.Skip("the kernel refused UDP GSO on loopback")
	}
	if segs < data/2 {
		t.Fatalf("%.0f of %.0f data packets left in GSO sends, want at least half", segs, data)
	}
}

// udpCaps are d's socket capabilities (zero for a socket layer that is not UDP's).
func udpCaps(d *smarttd.Daemon) udp.Caps {
	if d.Socket.Caps != nil {
		if c, ok := d.Socket.Caps().(udp.Caps); ok {
			return c
		}
	}
	return udp.Caps{}
}
