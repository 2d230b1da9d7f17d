package smarttd_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/logsink"
	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/udp"
)

// The default config (4096-byte payloads) on a host whose only link has MTU 1500 refuses
// to start, and says which interface, which MTU, and what to set; the suggested
// transport.mtu then starts.
func TestDefaultConfigOnMTU1500LinkSaysWhatToChange(t *testing.T) {
	a, b := nstest.New(t, "m15-a"), nstest.New(t, "m15-b")
	pa, pb := netip.MustParsePrefix("10.96.0.1/24"), netip.MustParsePrefix("10.96.0.2/24")
	nstest.Connect(t, a, b, nstest.LinkOpts{MTU: 1500, A: pa, B: pb})
	dir := tempDir(t)
	for _, listen := range []string{"0.0.0.0:23600", "10.96.0.1:23600"} {
		cfg := smarttd.DefaultConfig() // the default listen address is 0.0.0.0:23600
		cfg.Listen = netip.MustParseAddrPort(listen)
		cfg.API.Socket = filepath.Join(dir, "a.sock")
		var err error
		a.Do(func() error {
			var d *smarttd.Daemon
			if d, err = smarttd.Start(cfg, smarttd.Options{Logger: slog.New(slog.NewTextHandler(new(logsink.Sink), nil))}); err == nil {
				d.Shutdown(context.Background())
			}
			return nil
		})
		var me *udp.MTUError
		if !errors.As(err, &me) {
			t.Fatalf("listen %s: default config on an MTU 1500 link started (err %v); want an MTU error", listen, err)
		}
		t.Logf("listen %s: %v", listen, err)
		for _, want := range []string{"interface veth0 has MTU 1500", "4208-byte datagrams need 4236-byte IP packets",
			"ip link set dev veth0 mtu 4236", "transport.mtu: 1372"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("listen %s: error lacks %q: %v", listen, want, err)
			}
		}
	}
	// The advice works: transport.mtu 1372 fits a 1500-byte link exactly.
	startIn(t, a, netip.MustParseAddrPort("10.96.0.1:23600"), dir, func(c *smarttd.Config) { c.Transport.MTU = 1372 })
}

// A path whose MTU is smaller than the local link's (a router with a 1500-byte link on the
// far side): packets leave with DF, the router drops them and reports the path MTU, the
// next send fails with EMSGSIZE, and the daemon warns naming the interface, the path MTU
// and the fix. No host or router creates a single IP fragment.
func TestPathMTUBelowLinkMTUWarnsAndNeverFragments(t *testing.T) {
	tp := nstest.Routed(t) // A -- R -- B, all links MTU 9000
	tp.R.SetMTU(t, "rb", 1500)
	tp.B.SetMTU(t, "veth0", 1500)
	dir := tempDir(t)
	var log logsink.Sink
	la, lb := netip.AddrPortFrom(tp.AddrA, smarttd.DefaultPort), netip.AddrPortFrom(tp.AddrB, smarttd.DefaultPort)
	cfg := smarttd.DefaultConfig()
	cfg.Listen, cfg.API.Socket = la, filepath.Join(dir, "a.sock")
	cfg.Transport.MaxRetransmits = 3
	da := startWith(t, tp.A, cfg, smarttd.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}) // A's link has MTU 9000
	startIn(t, tp.B, lb, dir, func(c *smarttd.Config) { c.Transport.MTU = 1372 })
	fragsBefore := map[string]uint64{}
	for _, ns := range []*nstest.NS{tp.A, tp.R, tp.B} {
		fragsBefore[ns.Name] = ns.SNMP(t)["Ip.FragCreates"]
	}
	rFailsBefore := tp.R.SNMP(t)["Ip.FragFails"]

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := session(t, ctx, da, 1)
	if _, err := s.SendAsync(lb, 1, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(log.String(), "larger than the path MTU") {
		if ctx.Err() != nil {
			t.Fatalf("no path-MTU warning within 20 s; log:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := log.String()
	for _, want := range []string{"datagram larger than the path MTU not sent", "interface=veth0", "mtu=1500",
		"the path through interface veth0 has an MTU of 1500 towards " + lb.String(), "transport.mtu: 1372",
		"enable jumbo frames on every link of the path", "ip route get " + lb.Addr().String()} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, ns := range []*nstest.NS{tp.A, tp.R, tp.B} {
		if after := ns.SNMP(t)["Ip.FragCreates"]; after != fragsBefore[ns.Name] {
			t.Errorf("%s created %d IP fragments", ns.Name, after-fragsBefore[ns.Name])
		}
	}
	// The router saw DF packets it could not forward (the evidence that DF was set).
	if fails := tp.R.SNMP(t)["Ip.FragFails"]; fails == rFailsBefore {
		t.Errorf("router FragFails stayed %d: the oversize packets never reached it with DF", fails)
	}
	if st := da.Socket.Counters().(udp.Stats); st.TxTooBig == 0 {
		t.Errorf("socket stats %+v: want TxTooBig > 0", st)
	}
}
