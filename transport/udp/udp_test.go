package udp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t testing.TB, cfg Config) *Conn {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readN reads until n packets arrived or the deadline passed.
func readN(t testing.TB, c *Conn, n int, size int) []Packet {
	t.Helper()
	out := make([]Packet, 0, n)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]Packet, 16)
	for len(out) < n {
		for i := range buf {
			buf[i] = Packet{Buf: make([]byte, size)}
		}
		k, err := c.ReadBatch(buf)
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d packets: %v", len(out), n, err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}

func payload(i int) []byte { return fmt.Appendf(nil, "packet %04d %s", i, strings.Repeat("x", i%50)) }

// roundTrip sends 40 packets over a spread of EVs, data and control, and checks every
// field the receiver reports.
func roundTrip(t *testing.T, src, dst netip.AddrPort) {
	const evs = 8
	a := open(t, Config{Listen: src, EVS: evs, DataDSCP: 10, ControlDSCP: 46})
	b := open(t, Config{Listen: dst, EVS: 4})
	for _, c := range []*Conn{a, b} {
		caps := c.Caps()
		if !caps.ECN || !caps.RxTimestamps || !caps.Batch || caps.TimestampSource != "kernel" {
			t.Fatalf("caps on loopback: %+v, want ECN, RX timestamps, batch, kernel source", caps)
		}
	}
	to := b.LocalAddr()
	if dst.Addr().IsUnspecified() {
		to = netip.AddrPortFrom(src.Addr(), to.Port())
	}
	const n = 40
	pk := make([]Packet, n)
	for i := range pk {
		p := payload(i)
		pk[i] = Packet{Buf: p, N: len(p), Addr: to, EV: uint16(i / 3 % evs), ECN: ECT0, Control: i%5 == 4}
		if pk[i].Control {
			pk[i].ECN = NotECT
		}
	}
	before := time.Now().UnixNano()
	if k, err := a.WriteBatch(pk); k != n || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", k, err, n)
	}
	got := readN(t, b, n, 256)
	after := time.Now().UnixNano()
	kernel := 0
	for i, p := range got {
		var j int
		if _, err := fmt.Sscanf(string(p.Buf[:p.N]), "packet %d", &j); err != nil || j < 0 || j >= n {
			t.Fatalf("packet %d: payload %q", i, p.Buf[:p.N])
		}
		if !bytes.Equal(p.Buf[:p.N], payload(j)) {
			t.Errorf("packet %d: payload %q, want %q", j, p.Buf[:p.N], payload(j))
		}
		wantPort := a.EVPort(uint16(j / 3 % evs))
		if p.Addr.Port() != wantPort || p.Addr.Addr() != src.Addr().Unmap() {
			t.Errorf("packet %d: source %v, want %v port %d (EV %d)", j, p.Addr, src.Addr(), wantPort, j/3%evs)
		}
		wantECN, wantDSCP := uint8(ECT0), uint8(10)
		if j%5 == 4 {
			wantECN, wantDSCP = NotECT, 46
		}
		if p.ECN != wantECN || p.DSCP != wantDSCP {
			t.Errorf("packet %d: ECN %d DSCP %d, want ECN %d DSCP %d", j, p.ECN, p.DSCP, wantECN, wantDSCP)
		}
		if p.RxTime < before || p.RxTime > after {
			t.Errorf("packet %d: RxTime %d outside [%d, %d]", j, p.RxTime, before, after)
		}
		if p.RxKernel {
			kernel++
		}
	}
	// The first packet after enabling timestamps may carry none; the rest must.
	if kernel < n-1 {
		t.Errorf("%d of %d packets carried a kernel timestamp", kernel, n)
	}
	st := b.Stats()
	if st.RxPackets != n || st.RxECT != n-n/5 || st.RxCE != 0 || st.RxDSCP[10] != n-n/5 || st.RxDSCP[46] != n/5 {
		t.Errorf("receiver stats %+v", st)
	}
	if sa := a.Stats(); sa.TxPackets != n || sa.TxErrors != 0 {
		t.Errorf("sender stats %+v", sa)
	}
}

func TestRoundTripIPv4(t *testing.T) {
	roundTrip(t, netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("127.0.0.1:0"))
}

func TestRoundTripIPv6(t *testing.T) {
	roundTrip(t, netip.MustParseAddrPort("[::1]:0"), netip.MustParseAddrPort("[::1]:0"))
}

// A dual-stack receiver on [::] sees an IPv4 sender as a plain IPv4 address, with its TOS.
func TestDualStackReceivesIPv4(t *testing.T) {
	roundTrip(t, netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("[::]:0"))
}

// A dual-stack sender on [::] reaches an IPv4 peer and still sets its TOS byte.
func TestDualStackSendsIPv4(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("[::]:0"), EVS: 2, DataDSCP: 12})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	p := []Packet{{Buf: []byte("hello"), N: 5, Addr: b.LocalAddr(), EV: 1, ECN: ECT0}}
	if k, err := a.WriteBatch(p); k != 1 || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	got := readN(t, b, 1, 64)[0]
	if got.ECN != ECT0 || got.DSCP != 12 || got.Addr.Port() != a.EVPort(1) || !got.Addr.Addr().Is4() {
		t.Fatalf("got %+v, want ECT(0), DSCP 12 from IPv4 port %d", got, a.EVPort(1))
	}
}

func TestEVPortRange(t *testing.T) {
	c := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVPortBase: 41000, EVS: 16})
	for ev := range 20 {
		if got, want := c.EVPort(uint16(ev)), uint16(41000+ev%16); got != want {
			t.Errorf("EVPort(%d) = %d, want %d", ev, got, want)
		}
	}
	// The same range again is taken: Open must fail and say which port.
	_, err := Open(Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVPortBase: 41008, EVS: 4, Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "41008") || !strings.Contains(err.Error(), "EVPortBase") {
		t.Fatalf("overlapping EV range: err %v, want a bind error naming port 41008 and EVPortBase", err)
	}
	// Default base: the port after the listen port.
	d := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:42000"), EVS: 3})
	if d.LocalAddr().Port() != 42000 || d.EVPort(0) != 42001 || d.EVPort(2) != 42003 {
		t.Fatalf("listen %v, EV ports %d..%d; want 42000 and 42001..42003", d.LocalAddr(), d.EVPort(0), d.EVPort(2))
	}
}

func TestConfigErrors(t *testing.T) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.Listen"},
		{Config{Listen: lo, EVS: -1}, "Config.EVS: evs = -1: must be in 1..65536"},
		{Config{Listen: lo, EVS: 65536}, "Config.EVS 65536: allowed range is 1..65535 for the port carrier"},
		{Config{Listen: netip.MustParseAddrPort("127.0.0.1:1"), Carrier: CarrierRaw, EVS: 65536}, "for the raw carrier"},
		{Config{Listen: lo, EVS: 65537}, "Config.EVS: evs = 65537: must be in 1..65536"},
		{Config{Listen: lo, EVPortBase: 65500, EVS: 256}, "Config.EVPortBase 65500"},
		{Config{Listen: netip.MustParseAddrPort("127.0.0.1:5000"), EVPortBase: 4900, EVS: 256}, "inside the EV port range"},
		{Config{Listen: lo, DataDSCP: 64}, "Config.DataDSCP 64: allowed range is 0..63"},
		{Config{Listen: lo, ControlDSCP: 99}, "Config.ControlDSCP 99"},
		{Config{Listen: lo, TxTimestampEvery: -2}, "Config.TxTimestampEvery -2"},
		{Config{Listen: lo, RecvBuffer: -1}, "Config.RecvBuffer -1"},
		{Config{Listen: lo, BatchSize: 5000}, "Config.BatchSize 5000: allowed range is 1..1024"},
		{Config{Listen: lo, Carrier: "carrier-pigeon"}, `Config.Carrier "carrier-pigeon"`},
	} {
		tc.cfg.Logger = quiet()
		c, err := Open(tc.cfg)
		if err == nil {
			c.Close()
			t.Errorf("Open(%+v) succeeded, want error containing %q", tc.cfg, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v) = %q, want it to contain %q", tc.cfg, err, tc.want)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	good := Packet{Buf: []byte("ok"), N: 2, Addr: b.LocalAddr()}
	for _, tc := range []struct {
		bad  Packet
		want string
	}{
		{Packet{Buf: []byte("x"), N: 2, Addr: b.LocalAddr()}, "Packet.N 2"},
		{Packet{Buf: []byte("x"), N: 1}, "Packet.Addr"},
		{Packet{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("[::1]:9")}, "IPv6 destination"},
	} {
		k, err := a.WriteBatch([]Packet{good, tc.bad, good})
		if k != 1 || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WriteBatch(good, %+v, good) = %d, %v; want 1 and an error containing %q", tc.bad, k, err, tc.want)
		}
	}
	if got := readN(t, b, 3, 16); len(got) != 3 {
		t.Fatalf("read %d good packets, want 3", len(got))
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	c := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	closeUnblocks(t, c)
	if _, err := c.WriteBatch([]Packet{{Buf: []byte("x"), N: 1, Addr: c.LocalAddr()}}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WriteBatch after Close: %v, want net.ErrClosed", err)
	}
}

// The off switches take effect: no ECN bits leave, RX times come from the user clock, and
// one datagram per system call still moves everything.
func TestOffSwitches(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 2, DisableECN: true, DisableBatch: true, DataDSCP: 8})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, DisableTimestamps: true, DisableBatch: true})
	if c := a.Caps(); c.ECN || c.Batch {
		t.Fatalf("caps %+v with ECN and batching switched off", c)
	}
	if c := b.Caps(); c.RxTimestamps || c.TxTimestamps || c.TimestampSource != "user" {
		t.Fatalf("caps %+v with timestamps switched off", c)
	}
	pk := make([]Packet, 10)
	for i := range pk {
		pk[i] = Packet{Buf: payload(i), N: len(payload(i)), Addr: b.LocalAddr(), EV: uint16(i), ECN: ECT0}
	}
	if k, err := a.WriteBatch(pk); k != 10 || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	got := readN(t, b, 10, 128)
	for _, p := range got {
		if p.ECN != NotECT || p.DSCP != 8 || p.RxKernel || p.RxTime == 0 {
			t.Errorf("packet %+v: want Not-ECT, DSCP 8 (TOS still read), user-clock RxTime", p)
		}
	}
	if st := a.Stats(); st.TxBatches != 10 {
		t.Errorf("TxBatches %d with batching off, want 10 (one per packet)", st.TxBatches)
	}
	if st := b.Stats(); st.RxBatches != 10 || st.RxNoKernelStamp != 10 {
		t.Errorf("receiver stats %+v, want 10 single reads without kernel stamps", st)
	}
}

func TestTxTimestamps(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 4, TxTimestampEvery: 4})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 1 << 20})
	if !a.Caps().TxTimestamps {
		t.Fatalf("caps %+v: want TX timestamps", a.Caps())
	}
	const n = 64
	pk := make([]Packet, n)
	for i := range pk {
		pk[i] = Packet{Buf: payload(i), N: len(payload(i)), Addr: b.LocalAddr(), EV: uint16(i % 4)}
	}
	start := time.Now().UnixNano()
	if k, err := a.WriteBatch(pk); k != n || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	readN(t, b, n, 128)
	var got []TxStamp
	buf := make([]TxStamp, 8)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < n/4 && time.Now().Before(deadline) {
		k := a.TxStamps(buf)
		got = append(got, buf[:k]...)
		if k == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if len(got) != n/4 {
		t.Fatalf("got %d TX timestamps, want %d (stats %+v)", len(got), n/4, a.Stats())
	}
	seen := map[uint32]bool{}
	for _, s := range got {
		if seen[s.ID] {
			t.Errorf("sample %d reported twice", s.ID)
		}
		seen[s.ID] = true
		if s.UserTime < start || s.KernTime < s.UserTime || s.KernTime-s.UserTime > int64(time.Second) {
			t.Errorf("stamp %+v: want start %d <= user <= kernel < user+1s", s, start)
		}
		// Packets 3, 7, 11, ... were sampled: EV (i%4) = 3.
		if s.EV != 3 {
			t.Errorf("stamp %+v: EV %d, want 3", s, s.EV)
		}
	}
	if st := a.Stats(); st.TxStampsSampled != n/4 || st.TxStampsMatched != n/4 || st.TxStampsLost != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestBufferSizing(t *testing.T) {
	c := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 2, RecvBuffer: 8 << 20, SendBuffer: 1 << 20})
	// As root SO_RCVBUFFORCE passes the sysctl cap; Linux reports twice the request.
	if caps := c.Caps(); caps.RecvBuffer < 8<<20 || caps.SendBuffer < 1<<20 {
		t.Fatalf("caps %+v, want buffers of at least 8 MiB / 1 MiB", caps)
	}
}

// closeUnblocks checks that Close ends a ReadBatch blocked on c's empty socket with
// net.ErrClosed.
func closeUnblocks(t *testing.T, c *Conn) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := c.ReadBatch([]Packet{{Buf: make([]byte, 64)}})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadBatch after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still blocked 5 s after Close")
	}
}
