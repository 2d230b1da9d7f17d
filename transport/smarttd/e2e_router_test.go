package smarttd_test

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// ruleCount returns the packet counter of the first rule with target in `iptables -L -v -x -n` output.
func ruleCount(t *testing.T, table, target string) uint64 {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == target {
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatalf("rule counter %q: %v", f[0], err)
			}
			return n
		}
	}
	t.Fatalf("no %s rule in\n%s", target, table)
	return 0
}

// TestE2ERouterCEAndTrimDSCP sends messages from A to B through router R, whose mangle
// table marks CE on every 4th forwarded packet to B and sets the configured trimmed DSCP
// on another every 4th (disjoint): B's engine must count exactly the router's marks, A
// must hear of every CE mark through ACKs and of every trimmed packet through a NACK, and
// every message must still arrive intact.
func TestE2ERouterCEAndTrimDSCP(t *testing.T) {
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("iptables not installed (apt-get install -y iptables; .ci/run does this): %v", err)
	}
	tp := nstest.Routed(t)
	dir := tempDir(t)
	const trimDSCP = 33
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	// No UDP GSO at A: the router's nth rule counts forwarded skbs, and a GSO super-packet
	// is one skb whose mark all its segments inherit.
	a := startIn(t, tp.A, la, dir, func(c *smarttd.Config) { c.UDP.DataDSCP, c.UDP.DisableGSO = 10, true })
	b := startIn(t, tp.B, lb, dir, func(c *smarttd.Config) { c.Transport.TrimDSCP = trimDSCP })
	for _, rule := range [][]string{
		{"-m", "statistic", "--mode", "nth", "--every", "4", "--packet", "0", "-j", "TOS", "--set-tos", "0x03/0x03"},
		{"-m", "statistic", "--mode", "nth", "--every", "4", "--packet", "2", "-j", "DSCP", "--set-dscp", strconv.Itoa(trimDSCP)},
	} {
		tp.R.MustExec(t, "iptables", append([]string{"-t", "mangle", "-A", "FORWARD", "-p", "udp",
			"-d", tp.AddrB.String(), "--dport", "23600"}, rule...)...)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 100
	hashes := make([][32]byte, n)
	pend := make([]*client.Pending, n)
	for i := range pend {
		m := make([]byte, 1+rng.IntN(256<<10))
		for j := range m {
			m[j] = byte(rng.Uint32())
		}
		hashes[i] = sha256.Sum256(m)
		var err error
		if pend[i], err = sa.SendAsync(lb, 1, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pend {
		m, err := sb.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if sha256.Sum256(m.Data) != hashes[i] {
			// A failed message (its sender told) is not delivered: say why, if so.
			wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, werr := pend[i].Wait(wctx)
			wcancel()
			t.Fatalf("message %d is not the one sent (the sender's result: %v); A %+v", i, werr, a.Node.Stats())
		}
		if _, err := pend[i].Wait(ctx); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	// Let the last ACKs and NACKs land.
	time.Sleep(50 * time.Millisecond)
	table := string(tp.R.MustExec(t, "iptables", "-t", "mangle", "-L", "FORWARD", "-v", "-x", "-n"))
	ceMarked, trimMarked := ruleCount(t, table, "TOS"), ruleCount(t, table, "DSCP")
	sA, sB := a.Node.Stats(), b.Node.Stats()
	t.Logf("router: %d CE, %d trimmed DSCP; B: %d data, %d CE, %d trimmed, %d NACKs sent; A: %d CE reported, %d NACKs received, %d NACK retransmissions",
		ceMarked, trimMarked, sB.DataRecv, sB.CERecv, sB.Trimmed, sB.NacksSent, sA.CEReported, sA.NacksRecv, sA.RetxNack)
	if ceMarked == 0 || trimMarked == 0 {
		t.Fatal("the router marked nothing")
	}
	if sB.DataRecv != sB.PacketsRecv {
		t.Errorf("B received %d packets of which %d data: the router's counts include non-data packets", sB.PacketsRecv, sB.DataRecv)
	}
	if sB.CERecv != ceMarked {
		t.Errorf("B counted %d CE-marked packets, the router marked %d", sB.CERecv, ceMarked)
	}
	if sA.CEReported != ceMarked {
		t.Errorf("A heard of %d CE marks through ACKs, the router marked %d", sA.CEReported, ceMarked)
	}
	if sB.Trimmed != trimMarked {
		t.Errorf("B counted %d trimmed packets, the router set the trimmed DSCP on %d", sB.Trimmed, trimMarked)
	}
	// Every trimmed packet is NACKed unless B already holds a copy (a spurious
	// retransmission of A's was trimmed): at most as many as A retransmitted otherwise.
	if sA.NacksRecv != sB.NacksSent || sB.NacksSent > sB.Trimmed || sB.Trimmed-sB.NacksSent > sA.RetxTimeout+sA.RetxSack {
		t.Errorf("NACKs: B sent %d for %d trimmed packets, A received %d (A retransmitted %d after timeouts, %d after SACK gaps)",
			sB.NacksSent, sB.Trimmed, sA.NacksRecv, sA.RetxTimeout, sA.RetxSack)
	}
	if sA.RetxNack == 0 || sA.RetxNack > sA.NacksRecv {
		t.Errorf("A retransmitted %d packets after %d NACKs", sA.RetxNack, sA.NacksRecv)
	}
	if got := metric(t, registry(b), "smartt_ce_marks_total", "kind", "received"); got != float64(ceMarked) {
		t.Errorf("B's metric says %v CE marks, router %d", got, ceMarked)
	}
	if got := metric(t, registry(a), "smartt_nacks_total", "dir", "rx"); got != float64(sA.NacksRecv) {
		t.Errorf("A's NACK metric %v, engine %d", got, sA.NacksRecv)
	}
	// One router between A and B: both learnt the path's length from the IP TTL.
	for name, n := range map[string]*smarttd.Daemon{"A": a, "B": b} {
		cs := n.Node.Conns(nil)
		if len(cs) != 1 || cs[0].PathHops != 1 {
			t.Errorf("%s's connections %+v: want one with path_hops 1", name, cs)
		}
	}
}

// TestE2ERTTExcludesHoldTime makes B hold every ACK for 40 ms (ACK only after far more
// packets than a window, or at ack.max_delay): A's RTT samples must still be the path's
// round trip, because each ACK reports its hold time and A subtracts it. Were the hold
// counted, every sample but the last would be 40 ms or more; on a loaded machine a
// sample or two of the path's own may exceed a quarter of that, so a few are allowed.
func TestE2ERTTExcludesHoldTime(t *testing.T) {
	tp := nstest.Pair(t)
	dir := tempDir(t)
	const hold = 40 * time.Millisecond
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	a := startIn(t, tp.A, la, dir, func(c *smarttd.Config) {
		c.Transport.MinRTO, c.Transport.InitialRTO, c.Transport.MaxRTO = 500_000_000, 500_000_000, 2_000_000_000
		c.Transport.CC = "fixed"              // the window must stay below ack.every packets
		c.Transport.InitialWindow = 128 << 10 // 32 packets, below ack.every
	})
	startIn(t, tp.B, lb, dir, func(c *smarttd.Config) {
		c.Transport.Ack.Every = 64
		c.Transport.Ack.EveryBytes = 0 // packets only: no ACK before 64 of them
		c.Transport.Ack.MaxDelay = config.Duration(hold)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := session(t, ctx, a, 1)
	// 2 MiB = 512 packets; the 128 KiB window (32 packets) is below ack.every (64), so
	// every ACK but the message's last waits out the hold.
	info, err := s.Send(ctx, lb, 1, make([]byte, 2<<20))
	if err != nil {
		t.Fatal(err)
	}
	st := a.Node.Stats()
	var samples, above uint64
	limit := int64(hold / 4)
	for i, n := range st.RTTHist {
		samples += n
		lo := int64(0)
		if i > 0 {
			lo = transport.RTTBucketBound(i - 1)
		}
		if lo >= limit {
			above += n
		}
	}
	t.Logf("completion %v, srtt %v, %d RTT samples, %d at or above %v", time.Duration(info.Elapsed), time.Duration(info.SRTT), samples, above, time.Duration(limit))
	if time.Duration(info.Elapsed) < 5*hold {
		t.Fatalf("completion %v: the receiver did not hold its ACKs (want >= %v)", time.Duration(info.Elapsed), 5*hold)
	}
	if samples < 5 || above*10 > samples || time.Duration(info.SRTT) >= hold/4 {
		t.Fatalf("RTT samples include the hold time: %d of %d samples >= %v, srtt %v", above, samples, time.Duration(limit), time.Duration(info.SRTT))
	}
}
