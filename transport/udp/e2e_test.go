package udp_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp"
)

// OpenIn opens a Conn inside a namespace.
func openIn(t testing.TB, ns *nstest.NS, cfg udp.Config) *udp.Conn {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nstest.Open(t, ns, func() (*udp.Conn, error) { return udp.Open(cfg) })
}

// needTool fails (never skips) when a tool the test needs is missing: CI installs it.
func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not installed (apt-get install -y iptables; .ci/run does this): %v", name, err)
	}
}

// TestRouterMarksCEAndDSCP sends data packets from A to B through router R, whose mangle
// table sets CE on every 4th and a "trimmed" DSCP on every 5th forwarded packet; B's Conn
// must report exactly those counts, per family.
func TestRouterMarksCEAndDSCP(t *testing.T) {
	needTool(t, "iptables")
	needTool(t, "ip6tables")
	tp := nstest.Routed(t)
	const (
		n        = 1000
		ceEvery  = 4
		trEvery  = 5
		dataDSCP = 10
		trimDSCP = 33
	)
	for _, fam := range []struct {
		name     string
		ipt      string
		src, dst netip.Addr
		carrier  string
	}{
		{"ipv4-port", "iptables", tp.AddrA, tp.AddrB, udp.CarrierPort},
		{"ipv6-port", "ip6tables", tp.Addr6A, tp.Addr6B, udp.CarrierPort},
		{"ipv4-raw", "iptables", tp.AddrA, tp.AddrB, udp.CarrierRaw},
		{"ipv6-raw", "ip6tables", tp.Addr6A, tp.Addr6B, udp.CarrierRaw},
		{"ipv6-flowlabel", "ip6tables", tp.Addr6A, tp.Addr6B, udp.CarrierFlowLabel},
	} {
		t.Run(fam.name, func(t *testing.T) {
			// Fixed ports below the ephemeral range: the raw carrier does not bind its EV ports.
			a := openIn(t, tp.A, udp.Config{Listen: netip.AddrPortFrom(fam.src, 19000), EVPortBase: 19100, EVS: 16,
				Carrier: fam.carrier, DataDSCP: dataDSCP, ControlDSCP: 46,
				// The router marks per forwarded skb, and a GSO message crosses veth as one.
				DisableGSO: true})
			b := openIn(t, tp.B, udp.Config{Listen: netip.AddrPortFrom(fam.dst, 0), EVS: 1, RecvBuffer: 8 << 20})
			port := strconv.Itoa(int(b.LocalAddr().Port()))
			tp.R.MustExec(t, fam.ipt, "-t", "mangle", "-F", "FORWARD")
			tp.R.MustExec(t, fam.ipt, "-t", "mangle", "-A", "FORWARD", "-p", "udp", "--dport", port,
				"-m", "statistic", "--mode", "nth", "--every", strconv.Itoa(ceEvery), "--packet", "0",
				"-j", "TOS", "--set-tos", "0x03/0x03")
			tp.R.MustExec(t, fam.ipt, "-t", "mangle", "-A", "FORWARD", "-p", "udp", "--dport", port,
				"-m", "statistic", "--mode", "nth", "--every", strconv.Itoa(trEvery), "--packet", "0",
				"-j", "DSCP", "--set-dscp", strconv.Itoa(trimDSCP))

			done := make(chan error, 1)
			got := make([]udp.Packet, 0, n)
			go func() {
				pk := make([]udp.Packet, 64)
				for i := range pk {
					pk[i].Buf = make([]byte, 2048)
				}
				b.SetReadDeadline(time.Now().Add(10 * time.Second))
				for len(got) < n {
					k, err := b.ReadBatch(pk)
					if err != nil {
						done <- fmt.Errorf("after %d packets: %w", len(got), err)
						return
					}
					for _, p := range pk[:k] {
						p.Buf = nil
						got = append(got, p)
					}
				}
				done <- nil
			}()
			out := make([]udp.Packet, 0, 50)
			buf := make([]byte, 1200)
			for i := 0; i < n; i += 50 {
				out = out[:0]
				for j := i; j < i+50; j++ {
					out = append(out, udp.Packet{Buf: buf, N: len(buf), Addr: b.LocalAddr(), EV: uint16(j % 16), ECN: udp.ECT0})
				}
				if k, err := a.WriteBatch(out); k != len(out) || err != nil {
					t.Fatalf("WriteBatch: %d, %v", k, err)
				}
				time.Sleep(time.Millisecond) // stay well inside B's receive buffer
			}
			if err := <-done; err != nil {
				t.Fatalf("ReadBatch: %v", err)
			}

			wantCE, wantTrim := (n+ceEvery-1)/ceEvery, (n+trEvery-1)/trEvery
			var ce, ect, trim, data, kern int
			ports := map[uint16]bool{}
			for _, p := range got {
				switch p.ECN {
				case udp.CE:
					ce++
				case udp.ECT0:
					ect++
				default:
					t.Errorf("packet from %v arrived with ECN %d, want ECT(0) or CE", p.Addr, p.ECN)
				}
				switch p.DSCP {
				case trimDSCP:
					trim++
				case dataDSCP:
					data++
				default:
					t.Errorf("packet from %v arrived with DSCP %d", p.Addr, p.DSCP)
				}
				if p.RxKernel {
					kern++
				}
				ports[p.Addr.Port()] = true
			}
			if ce != wantCE || ect != n-wantCE || trim != wantTrim || data != n-wantTrim {
				t.Errorf("CE %d ECT %d trimmed-DSCP %d data-DSCP %d; want %d %d %d %d", ce, ect, trim, data, wantCE, n-wantCE, wantTrim, n-wantTrim)
			}
			st := b.Stats()
			if st.RxCE != uint64(wantCE) || st.RxECT != uint64(n-wantCE) || st.RxDSCP[trimDSCP] != uint64(wantTrim) || st.RxPackets != n {
				t.Errorf("B stats: CE %d ECT %d DSCP[%d] %d packets %d; want %d %d %d %d", st.RxCE, st.RxECT, trimDSCP, st.RxDSCP[trimDSCP], st.RxPackets, wantCE, n-wantCE, wantTrim, n)
			}
			if kern < n-1 {
				t.Errorf("%d of %d packets carried a kernel RX timestamp", kern, n)
			}
			wantPorts := 16
			if fam.carrier == udp.CarrierFlowLabel {
				wantPorts = 1 // the EV is in the flow label
			}
			if len(ports) != wantPorts {
				t.Errorf("packets came from %d source ports, want %d", len(ports), wantPorts)
			}
			for ev := range 16 {
				if !ports[a.EVPort(uint16(ev))] {
					t.Errorf("no packet from EV %d's port %d", ev, a.EVPort(uint16(ev)))
				}
			}
			// The router's rule counters agree with what B saw.
			table := string(tp.R.MustExec(t, fam.ipt, "-t", "mangle", "-L", "FORWARD", "-v", "-x", "-n"))
			for target, want := range map[string]int{"TOS": wantCE, "DSCP": wantTrim} {
				if got := ruleCount(table, target); got != want {
					t.Errorf("router rule %s matched %d packets, want %d:\n%s", target, got, want, table)
				}
			}
		})
	}
}

// ruleCount returns the packet counter of the first rule with the target in iptables -L -v -x output.
func ruleCount(table, target string) int {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == target {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	return -1
}

// A GSO segment larger than the link MTU makes the kernel refuse the send; the Conn must
// switch GSO off, say so, and still deliver every packet (as IP fragments: DF is off here,
// TestDFRefusesOversizeDatagrams covers the default).
func TestGSOFallbackOnSmallMTU(t *testing.T) {
	a, b := nstest.New(t, "gso-a"), nstest.New(t, "gso-b")
	pa, pb := netip.MustParsePrefix("10.98.0.1/24"), netip.MustParsePrefix("10.98.0.2/24")
	nstest.Connect(t, a, b, nstest.LinkOpts{MTU: 1500, A: pa, B: pb})
	var log strings.Builder
	tx := openIn(t, a, udp.Config{Listen: netip.AddrPortFrom(pa.Addr(), 0), EVS: 1, DisableDF: true,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	rx := openIn(t, b, udp.Config{Listen: netip.AddrPortFrom(pb.Addr(), 0), EVS: 1, RecvBuffer: 8 << 20})
	if !tx.Caps().GSO {
		t.Fatalf("caps %+v: want GSO before the first send", tx.Caps())
	}
	const n = 20
	pk := make([]udp.Packet, n)
	for i := range pk {
		buf := make([]byte, 2000)
		buf[0] = byte(i)
		pk[i] = udp.Packet{Buf: buf, N: len(buf), Addr: rx.LocalAddr(), ECN: udp.ECT0}
	}
	if k, err := tx.WriteBatch(pk); k != n || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	if tx.Caps().GSO || !strings.Contains(log.String(), "refused a UDP GSO send") {
		t.Fatalf("caps %+v after a refused GSO send; log:\n%s", tx.Caps(), log.String())
	}
	in := make([]udp.Packet, n)
	for i := range in {
		in[i].Buf = make([]byte, 4096)
	}
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < n; {
		k, err := rx.ReadBatch(in)
		if err != nil {
			t.Fatalf("after %d packets: %v", got, err)
		}
		for _, p := range in[:k] {
			if p.N != 2000 || int(p.Buf[0]) != got {
				t.Fatalf("packet %d: %d bytes, first byte %d", got, p.N, p.Buf[0])
			}
			got++
		}
	}
	if st := tx.Stats(); st.TxPackets != n || st.TxErrors != 0 {
		t.Fatalf("sender stats %+v", st)
	}
}

// TestEVSteersPath: behind a router with two equal-cost paths to B, every EV keeps to one
// path and the EVs spread over both, for every carrier: the EV really is what the
// network hashes (ports for port/raw with an L4 hash, the flow label with IPv6's
// default L3 hash, where the flow-label carrier's packets all share one source port).
func TestEVSteersPath(t *testing.T) {
	needTool(t, "iptables")
	needTool(t, "ip6tables")
	tp := nstest.Multipath(t, 2)
	const evs, per = 24, 6
	for _, tc := range []struct {
		name, ipt, carrier, policy string
		src, dst                   netip.Addr
	}{
		{"ipv4-port", "iptables", udp.CarrierPort, "net/ipv4/fib_multipath_hash_policy", tp.AddrA, tp.AddrB},
		{"ipv4-raw", "iptables", udp.CarrierRaw, "net/ipv4/fib_multipath_hash_policy", tp.AddrA, tp.AddrB},
		{"ipv6-port", "ip6tables", udp.CarrierPort, "net/ipv6/fib_multipath_hash_policy", tp.Addr6A, tp.Addr6B},
		{"ipv6-flowlabel", "ip6tables", udp.CarrierFlowLabel, "", tp.Addr6A, tp.Addr6B},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// L4 hash for the port carriers; the flow label needs none (policy 0 hashes it).
			for _, k := range []string{"net/ipv4/fib_multipath_hash_policy", "net/ipv6/fib_multipath_hash_policy"} {
				v := "0"
				if k == tc.policy {
					v = "1"
				}
				if err := tp.R.Sysctl(k, v); err != nil {
					t.Fatal(err)
				}
			}
			a := openIn(t, tp.A, udp.Config{Listen: netip.AddrPortFrom(tc.src, 19000), EVPortBase: 19100, EVS: evs, Carrier: tc.carrier, DisableGSO: true})
			b := openIn(t, tp.B, udp.Config{Listen: netip.AddrPortFrom(tc.dst, 0), EVS: 1, RecvBuffer: 8 << 20})
			port := strconv.Itoa(int(b.LocalAddr().Port()))
			tp.R.MustExec(t, tc.ipt, "-t", "mangle", "-F", "FORWARD")
			for k := range tp.Paths {
				tp.R.MustExec(t, tc.ipt, "-t", "mangle", "-A", "FORWARD", "-o", fmt.Sprintf("rb%d", k), "-p", "udp", "--dport", port, "-j", "ACCEPT")
			}
			counts := func() []int {
				table := string(tp.R.MustExec(t, tc.ipt, "-t", "mangle", "-L", "FORWARD", "-v", "-x", "-n"))
				c := make([]int, len(tp.Paths))
				for _, line := range strings.Split(table, "\n") {
					f := strings.Fields(line)
					for k := range c {
						if len(f) > 6 && f[2] == "ACCEPT" && (f[6] == fmt.Sprintf("rb%d", k) || f[5] == fmt.Sprintf("rb%d", k)) {
							c[k], _ = strconv.Atoi(f[0])
						}
					}
				}
				return c
			}
			in := make([]udp.Packet, 16)
			for i := range in {
				in[i].Buf = make([]byte, 256)
			}
			pathOf := make([]int, evs)
			used := map[int]int{}
			for ev := 0; ev < evs; ev++ {
				before := counts()
				pk := make([]udp.Packet, per)
				for i := range pk {
					pk[i] = udp.Packet{Buf: []byte("ev"), N: 2, Addr: b.LocalAddr(), EV: uint16(ev), ECN: udp.ECT0}
				}
				if k, err := a.WriteBatch(pk); k != per || err != nil {
					t.Fatalf("WriteBatch: %d, %v", k, err)
				}
				b.SetReadDeadline(time.Now().Add(5 * time.Second))
				for got := 0; got < per; {
					k, err := b.ReadBatch(in)
					if err != nil {
						t.Fatalf("EV %d: %d of %d packets arrived: %v", ev, got, per, err)
					}
					got += k
				}
				after := counts()
				pathOf[ev] = -1
				for k := range after {
					switch d := after[k] - before[k]; d {
					case per:
						pathOf[ev] = k
					case 0:
					default:
						t.Errorf("EV %d: %d of its %d packets took path %d: an EV must keep to one path", ev, d, per, k)
					}
				}
				used[pathOf[ev]]++
			}
			if len(used) != len(tp.Paths) || used[-1] != 0 {
				t.Errorf("%d EVs over the paths: %v (path per EV %v); want every path used", evs, used, pathOf)
			}
			t.Logf("EVs per path: %v", used)
		})
	}
}
