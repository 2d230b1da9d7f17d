package smarttd_test

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/metrics"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// startIn starts a daemon whose sockets live in namespace ns (opened on a thread locked
// into it; nil: the test's own); its API socket is a path, reachable from any namespace.
func startIn(t testing.TB, ns *nstest.NS, listen netip.AddrPort, dir string, mod func(*smarttd.Config)) *smarttd.Daemon {
	t.Helper()
	return startInSeed(t, ns, listen, dir, mod, 0)
}

// startInSeed is startIn with the engine's random seed (0: from the clock).
// startPair starts two daemons on port 23600 of a new namespace pair's IPv4 (v6: IPv6)
// addresses, a's configuration changed by modA; it returns the pair, the daemons and
// their listen addresses.
func startPair(t testing.TB, v6 bool, modA func(*smarttd.Config)) (tp *nstest.Topo, a, b *smarttd.Daemon, la, lb netip.AddrPort) {
	tp = nstest.Pair(t)
	dir := tempDir(t)
	la, lb = netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	if v6 {
		la, lb = netip.AddrPortFrom(tp.Addr6A, 23600), netip.AddrPortFrom(tp.Addr6B, 23600)
	}
	return tp, startIn(t, tp.A, la, dir, modA), startIn(t, tp.B, lb, dir, nil), la, lb
}

func startInSeed(t testing.TB, ns *nstest.NS, listen netip.AddrPort, dir string, mod func(*smarttd.Config), seed uint64) *smarttd.Daemon {
	t.Helper()
	cfg := smarttd.DefaultConfig()
	cfg.Listen = listen
	cfg.API.Socket = filepath.Join(dir, listen.Addr().String()+".sock")
	if mod != nil {
		mod(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return startWith(t, ns, cfg, smarttd.Options{Logger: log, Seed: seed, Metrics: metrics.ForDaemon})
}

// startWith starts a daemon of cfg and opts in namespace ns (nil: the test's own, for
// loopback tests); it is shut down when the test ends, or by stopDaemon.
func startWith(t testing.TB, ns *nstest.NS, cfg smarttd.Config, opts smarttd.Options) *smarttd.Daemon {
	t.Helper()
	var d *smarttd.Daemon
	start := func() error {
		var err error
		d, err = smarttd.Start(cfg, opts)
		return err
	}
	var err error
	if ns == nil {
		err = start()
	} else {
		err = ns.Do(start)
	}
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			d.Shutdown(ctx)
		})
	}
	stoppers.Store(d, stop)
	t.Cleanup(stop)
	return d
}

// stoppers holds each started daemon's shutdown (once), for stopDaemon.
var stoppers sync.Map

// stopDaemon shuts d down now rather than when the test ends (benchmarks that start
// daemons on the same ports run after run).
func stopDaemon(d *smarttd.Daemon) {
	if f, ok := stoppers.LoadAndDelete(d); ok {
		f.(func())()
	}
}

// session opens a client session on daemon d's API and binds endpoint ep; it is closed
// when the test ends.
func session(t testing.TB, ctx context.Context, d *smarttd.Daemon, ep uint32) *client.Session {
	t.Helper()
	s, err := client.New(d.Config.API.Socket).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Bind(ctx, ep); err != nil {
		t.Fatal(err)
	}
	return s
}

func tempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "se2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// metric returns the value of the series name{labels} in reg (counter, gauge, or a
// histogram's sample count).
// registry is d's Prometheus registry (started with metrics.ForDaemon).
func registry(d *smarttd.Daemon) *prometheus.Registry { return d.Metrics.(*metrics.Metrics).Registry }

func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

// streamSource yields size pseudo-random bytes and hashes them as they are read, so the
// sending client never holds the message.
type streamSource struct {
	rng  *rand.ChaCha8
	left int64
	h    interface{ Write([]byte) (int, error) }
}

func (s *streamSource) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.left)]
	s.rng.Read(p)
	s.h.Write(p)
	s.left -= int64(len(p))
	return len(p), nil
}

// TestE2EVethLargeAndSmallMessages runs two daemons in two namespaces joined by a veth
// pair: one 256 MiB message and 1,000 small ones through the API, SHA-256 equal on both
// sides, and the daemons' metrics agreeing with what was sent.
func TestE2EVethLargeAndSmallMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("large transfer: runs in the full (non-short) test pass, as CI's go test ./... does")
	}
	tp, a, b, _, lb := startPair(t, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 2)

	const big = 256 << 20
	const small = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	var sum int64
	hashes := make([][32]byte, 0, small+1)

	// The 256 MiB message, streamed from a generator.
	h := sha256.New()
	src := &streamSource{rng: rand.NewChaCha8([32]byte{1}), left: big, h: h}
	start := time.Now()
	pbig, err := sa.SendFrom(lb, 2, src, big, nil)
	if err != nil {
		t.Fatal(err)
	}
	hashes = append(hashes, [32]byte(h.Sum(nil)))
	sum += big
	// 1,000 small messages of 1 byte to 64 KiB, pipelined.
	pend := make([]*client.Pending, 0, small)
	for i := 0; i < small; i++ {
		m := make([]byte, 1+rng.IntN(64<<10))
		for j := range m {
			m[j] = byte(rng.Uint32())
		}
		hashes = append(hashes, sha256.Sum256(m))
		sum += int64(len(m))
		p, err := sa.SendAsync(lb, 2, m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		pend = append(pend, p)
	}
	// Receive everything, in send order (one connection, ordered delivery).
	for i := 0; i < small+1; i++ {
		m, err := sb.Recv(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if m.From.Addr() != tp.AddrA || m.FromEndpoint != 1 || m.Endpoint != 2 {
			t.Fatalf("message %d from %v/%d to %d", i, m.From, m.FromEndpoint, m.Endpoint)
		}
		if sha256.Sum256(m.Data) != hashes[i] {
			t.Fatalf("message %d (%d bytes): SHA-256 differs", i, len(m.Data))
		}
		if i == 0 {
			t.Logf("256 MiB delivered in %v (%.2f Gbit/s through the API)", time.Since(start),
				float64(big)*8/time.Since(start).Seconds()/1e9)
		}
	}
	if _, err := pbig.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}

	// Metrics agree with what was sent.
	const env = 12 // daemon envelope per message
	ra, rb := registry(a), registry(b)
	n := float64(small + 1)
	for _, c := range []struct {
		reg  *prometheus.Registry
		name string
		lv   []string
		want float64
	}{
		{ra, "smartt_messages_total", []string{"result", "sent"}, n},
		{ra, "smartt_messages_total", []string{"result", "failed"}, 0},
		{ra, "smartt_api_events_total", []string{"event", "message_accepted"}, n},
		{ra, "smartt_api_bytes_total", []string{"dir", "accepted"}, float64(sum)},
		{ra, "smartt_payload_bytes_total", []string{"dir", "tx"}, float64(sum) + env*n},
		{ra, "smartt_message_completion_seconds", nil, n},
		{rb, "smartt_messages_total", []string{"result", "delivered"}, n},
		{rb, "smartt_payload_bytes_total", []string{"dir", "rx"}, float64(sum) + env*n},
		{rb, "smartt_api_bytes_total", []string{"dir", "delivered"}, float64(sum)},
		{rb, "smartt_api_events_total", []string{"event", "message_delivered"}, n},
		{ra, "smartt_socket_capability", []string{"cap", "rx_timestamps"}, 1},
		{ra, "smartt_timestamp_source", []string{"source", "kernel"}, 1},
	} {
		if got := metric(t, c.reg, c.name, c.lv...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.lv, got, c.want)
		}
	}
	// Data packets: every first transmission of A arrived at B (B may see duplicates too).
	txData := metric(t, ra, "smartt_data_packets_total", "dir", "tx")
	rxData := metric(t, rb, "smartt_data_packets_total", "dir", "rx")
	dup := metric(t, rb, "smartt_duplicate_packets_total")
	if rxData-dup < txData {
		t.Errorf("B received %v data packets (%v duplicates), A sent %v", rxData, dup, txData)
	}
	// Kernel timestamps in use: (almost) every datagram B read carried one.
	stamped := metric(t, rb, "smartt_rx_kernel_timestamps_total")
	read := metric(t, rb, "smartt_packets_total", "dir", "rx")
	if stamped < 0.99*read || read < txData {
		t.Errorf("B: %v of %v datagrams kernel-timestamped (A sent %v data packets)", stamped, read, txData)
	}
	if metric(t, ra, "smartt_rtt_seconds") == 0 {
		t.Error("no RTT samples")
	}
	// One decision per ACK of new data and per packet judged lost, at most. A packet judged
	// lost may be acknowledged before its retransmission, so count judgements, not resends.
	st := a.Node.Stats()
	if dec := metric(t, ra, "smartt_cc_decision_seconds"); dec == 0 || dec > float64(st.AcksRecv+st.NacksRecv+st.LostSack+st.Timeouts) {
		t.Errorf("%v congestion-control decisions timed (%d ACKs)", dec, st.AcksRecv)
	}
	metric(t, ra, "smartt_lb_freeze_episodes_total") // present (REPS is the default balancer)
	t.Logf("A: %v data packets, retransmissions sack %v nack %v timeout %v; B: %v duplicates",
		txData, metric(t, ra, "smartt_retransmissions_total", "cause", "sack"),
		metric(t, ra, "smartt_retransmissions_total", "cause", "nack"),
		metric(t, ra, "smartt_retransmissions_total", "cause", "timeout"), dup)
}

// TestE2EIPv6 runs the daemons on the veth pair's IPv6 addresses.
func TestE2EIPv6(t *testing.T) {
	tp, a, b, _, lb := startPair(t, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 1)
	msg := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{6}).Read(msg)
	if _, err := sa.Send(ctx, lb, 1, msg); err != nil {
		t.Fatal(err)
	}
	m, err := sb.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.From.Addr() != tp.Addr6A || sha256.Sum256(m.Data) != sha256.Sum256(msg) {
		t.Fatalf("from %v, %d bytes, SHA-256 equal: %v", m.From, len(m.Data), sha256.Sum256(m.Data) == sha256.Sum256(msg))
	}
	if metric(t, registry(b), "smartt_timestamp_source", "source", "kernel") != 1 {
		t.Error("no kernel timestamps over IPv6")
	}
}

// TestE2EOneGiBMessage moves a 1 GiB message (the API's largest) between the namespaces:
// passed to daemon A as a sealed memfd (A sends from those pages), streamed out of daemon
// B into a hash. Besides the engine's reassembly buffer at B, no process holds a copy.
func TestE2EOneGiBMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB transfer: runs in the full (non-short) test pass, as CI's go test ./... does")
	}
	_, a, b, _, lb := startPair(t, false, func(c *smarttd.Config) { c.Transport.LB = "ecmp" })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 1)
	rh := sha256.New()
	sb.SetRecvWriter(func(*client.Message) io.Writer { return rh })

	const size = 1 << 30
	m, err := client.NewMessageFD(size)
	if err != nil {
		t.Fatal(err)
	}
	rand.NewChaCha8([32]byte{9}).Read(m.Data)
	want := sha256.Sum256(m.Data)
	if err := m.Seal(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := sa.SendFD(lb, 1, m)
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := sb.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if got.Size != size || [32]byte(rh.Sum(nil)) != want {
		t.Fatalf("received %d bytes, SHA-256 equal: %v", got.Size, [32]byte(rh.Sum(nil)) == want)
	}
	t.Logf("1 GiB in %v (%.2f Gbit/s)", el.Round(time.Millisecond), float64(size)*8/el.Seconds()/1e9)
	if got := metric(t, registry(b), "smartt_api_bytes_total", "dir", "delivered"); got != size {
		t.Errorf("B delivered %v bytes by its metrics", got)
	}
}

// TestE2EAuth runs two daemons in two namespaces with packet authentication in encrypt
// mode, keys read from files: a 3 MiB message and 200 small ones arrive intact, nothing
// honest is refused; a third daemon with another key gets nothing through and is counted.
func TestE2EAuth(t *testing.T) {
	tp := nstest.Pair(t)
	dir := tempDir(t)
	keyFile := filepath.Join(dir, "fabric.key")
	if err := os.WriteFile(keyFile, []byte("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := func(key string) func(*smarttd.Config) {
		return func(c *smarttd.Config) {
			c.Transport.Auth.Mode = seal.Encrypt
			if key == "" {
				c.Transport.Auth.KeyFile = keyFile
			} else if err := c.Transport.Auth.Key.UnmarshalText([]byte(key)); err != nil {
				t.Fatal(err)
			}
			if err := smarttd.LoadKeyFiles(&c.Transport.Auth); err != nil {
				t.Fatal(err)
			}
		}
	}
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	a := startIn(t, tp.A, la, dir, auth(""))
	b := startIn(t, tp.B, lb, dir, auth(""))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 1)
	msgs := [][]byte{make([]byte, 3<<20)}
	for i := range 200 {
		msgs = append(msgs, make([]byte, 1+i*97))
	}
	for i, m := range msgs {
		rand.NewChaCha8([32]byte{byte(i)}).Read(m)
		if _, err := sa.SendAsync(lb, 1, m); err != nil {
			t.Fatal(err)
		}
	}
	want := map[[32]byte]bool{}
	for _, m := range msgs {
		want[sha256.Sum256(m)] = true
	}
	for range msgs {
		m, err := sb.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !want[sha256.Sum256(m.Data)] {
			t.Fatalf("received %d bytes that were not sent", len(m.Data))
		}
		delete(want, sha256.Sum256(m.Data))
	}
	for _, d := range []*smarttd.Daemon{a, b} {
		for _, r := range []string{"failed", "unsealed", "stale", "sessions_full", "no_key"} {
			if v := metric(t, registry(d), "smartt_auth_dropped_total", "reason", r); v != 0 {
				t.Errorf("%v refused %v honest packets (%s)", d.Config.Listen, v, r)
			}
		}
	}
	// Another key: nothing it sends is accepted.
	c := startIn(t, tp.A, netip.AddrPortFrom(tp.AddrA, 6000), tempDir(t), auth("ff112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"))
	sc := session(t, ctx, c, 1)
	if _, err := sc.SendAsync(lb, 1, []byte("forged")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, registry(b), "smartt_auth_dropped_total", "reason", "failed") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("packets under another key were not counted as failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer rcancel()
	if m, err := sb.Recv(rctx); err == nil {
		t.Fatalf("received %q under another key", m.Data)
	}
}
