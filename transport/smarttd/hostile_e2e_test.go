//go:build linux

package smarttd_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/wire"
)

// soakShape is the size of one hostile soak: the short one runs in CI, the full one
// (SMARTT_SOAK_FULL=1) repeats the attacks and sends more honest messages.
type soakShape struct {
	rounds   int           // times both attacks are repeated
	tiny     int           // one-packet DATA packets per round, heads never sent
	perConn  int           // of them per forged connection
	parity   int           // forged parity blocks per round
	honest   int           // honest messages, 4 KiB..1 MiB each, verified
	settle   time.Duration // how long RSS may take to come back after expiry
	tinyRate int           // tiny packets per second the attacker aims at
}

func soakSize() soakShape {
	s := soakShape{rounds: 1, tiny: 320_000, perConn: 500, parity: 1800, honest: 200, tinyRate: 40_000, settle: 30 * time.Second}
	if os.Getenv("SMARTT_SOAK_FULL") == "1" {
		// Past the runtime's two-minute forced GC: an idle daemon collects nothing before.
		s.rounds, s.honest, s.settle = 6, 1200, 150*time.Second
	}
	return s
}

// receiverYAML is the receiving daemon's config: the defaults (budgets included) but
// its addresses and recovery ec, so that forged parity is parsed.
const receiverYAML = `listen: %s
memory_limit: none
log_level: info
api:
  socket: %s
transport:
  recovery: {mode: ec, k: 16, m: 4}
`

// spoofNet is where the spoofed sources are: the router sends what goes there to the
// attacker's namespace, which drops it (the addresses are not its own).
var spoofNet = netip.MustParsePrefix("10.200.0.0/15")

// ringFill is the byte of the ring holder's message (trickleSocket lets its packets out
// one per ringTrickle).
const (
	ringFill    = 0xEE
	ringTrickle = 2 * time.Second
)

// TestE2EHostileSoak runs the receiving daemon as its own process (so its RSS is its
// own), default budgets and the Go runtime's defaults (GOGC 100, no GOMEMLIMIT), behind a
// router, with an honest daemon sending verified messages to a client whose shared-memory
// receive ring a third daemon holds (it proved its address, then trickles a 3 MiB
// message into the ring, one packet per 2 s), while a raw socket in the attacker's
// namespace sends, from spoofed sources (10.200.0.0/15, a fresh one per connection), (1)
// 320,000 one-packet messages whose heads never arrive and (2) 1,800 forged parity blocks
// of arbitrary K and M. The receiver's RSS, sampled every 200 ms, must stay within the
// memory_bound it serves in /v1/status less its kernel socket buffers (not in RSS); every
// honest message reported Sent must arrive intact at the victim, which stays connected
// (clients_stalled 0) although its ring was held (ring_displaced); and once the attacks
// stop and their connections expire, RSS must come back within 64 MiB of its start, and
// its anonymous part (the heap's pages) within 32 MiB.
func TestE2EHostileSoak(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: a soak of 20-90 s (the race run skips it)")
	}
	shape := soakSize()
	bin := buildSmarttd(t)
	tp := nstest.Routed(t)
	atkNS, spoof := attackerNS(t, tp)
	dir := tempDir(t)
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	sock := filepath.Join(dir, "receiver.sock")
	yaml := fmt.Sprintf(receiverYAML, lb, sock)
	pid := startChild(t, bin, tp.B, dir, sock, yaml)
	ec := func(c *smarttd.Config) {
		c.Transport.Recovery = transport.RecoveryConfig{Mode: transport.RecoveryEC, K: 16, M: 4}
	}
	sender := startIn(t, tp.A, la, dir, ec)
	holder := startTrickler(t, atkNS, netip.AddrPortFrom(atkAddr, 23600), dir, ec)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	rc := client.New(sock)
	st, err := rc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bound, procBound := st.MemoryBound, processBound(t, yaml)
	if bound <= 0 || procBound > bound {
		t.Fatalf("receiver serves memory_bound %d; its config's process share is %d", bound, procBound)
	}
	victim := openRing(t, ctx, rc)
	sendSess := session(t, ctx, sender, 1)
	holdSess := session(t, ctx, holder, 1)
	time.Sleep(500 * time.Millisecond) // let the runtime settle before the baseline
	start, startAnon := readRSS(t, pid), readAnon(t, pid)
	t.Logf("receiver at the start: %s", procMem(pid))
	rss := sampleRSS(pid, start)
	defer rss.stop()

	holdRing(t, ctx, holdSess, lb, rc)
	var wg sync.WaitGroup
	var sent [2]int64
	var atkErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent, atkErr = attack(spoof, lb, shape)
	}()
	delivered := honestTraffic(t, ctx, sendSess, victim, la, lb, shape.honest)
	wg.Wait()
	if atkErr != nil {
		t.Fatalf("attacker: %v", atkErr)
	}
	attackPeak := rss.peak.Load()
	stopDaemon(holder) // the holder's connection goes silent and expires too

	// After the attacks the connections expire (unproven ones after 1 s, the holder's
	// after idle_timeout 5 s); poll RSS up to shape.settle for it to come back within
	// 32 MiB of the start (the bound asserted is 64).
	left := waitConns(t, ctx, rc, 1, 30*time.Second)
	expired := time.Now()
	end, endAnon := settleRSS(t, pid, start, startAnon, shape.settle)
	rss.stop()
	t.Logf("receiver at the end, %v after the connections expired: %s", time.Since(expired).Round(100*time.Millisecond), procMem(pid))
	t.Logf("receiver RSS: start %d MiB, peak %d MiB (during the attacks %d MiB), memory_bound %d MiB (without kernel socket buffers %d MiB), end %d MiB (after expiry: %d connections left); honest %d/%d delivered intact",
		start>>20, rss.peak.Load()>>20, attackPeak>>20, bound>>20, procBound>>20, end>>20, left, delivered, shape.honest)
	if p := rss.peak.Load(); p > procBound {
		t.Errorf("receiver RSS peaked at %d bytes, over its computed memory_bound %d less the kernel's socket buffers (%d)", p, bound, procBound)
	}
	if end > start+64<<20 {
		t.Errorf("receiver RSS %d bytes %v after the attack, more than 64 MiB over its start %d", end, shape.settle, start)
	}
	// The heap's own pages (RSS less the ring's shared pages and the binary's), tighter:
	// without the return to the OS they stayed 58 MiB over their start here.
	if endAnon > startAnon+32<<20 {
		t.Errorf("receiver anonymous RSS %d bytes after the attack, more than 32 MiB over its start %d: memory freed was not returned", endAnon, startAnon)
	}
	checkAttacksLanded(t, ctx, rc, sent, shape)
}

// checkAttacksLanded checks in the receiver's counters that the flood reached it and that
// the ring hold was real (a placement displaced) and disconnected no one.
func checkAttacksLanded(t *testing.T, ctx context.Context, rc *client.Client, sent [2]int64, shape soakShape) {
	t.Helper()
	cs, err := rc.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, a := cs.Engine, cs.API
	t.Logf("attacker sent %d tiny packets and %d forged parity blocks from spoofed sources in %d rounds; receiver: %d packets in, %d connections accepted, %d budget drops, parity %d in, %d refused, %d dropped, %d rebuilt; ring placed %d, displaced %d, clients stalled %d",
		sent[0], sent[1], shape.rounds, e.PacketsRecv, e.ConnsAccepted, e.RecvBudgetDrops, e.ParityRecv, e.ParityRefused, e.ParityDropped, e.ECRebuilt, a.RingPlaced, a.RingDisplaced, a.ClientsStalled)
	if e.PacketsRecv < uint64(sent[0])/2 || e.ConnsAccepted < uint64(shape.tiny/shape.perConn) {
		t.Errorf("the receiver took in %d packets of the attacker's %d (%d connections): the flood did not reach it", e.PacketsRecv, sent[0], e.ConnsAccepted)
	}
	if a.RingDisplaced < 1 || a.ClientsStalled != 0 {
		t.Errorf("ring hold: ring_displaced %d (want >= 1: the held placement moved out), clients_stalled %d (want 0)", a.RingDisplaced, a.ClientsStalled)
	}
}

// settleRSS polls process pid's RSS and anonymous RSS for up to settle until both are
// within 32 MiB of their start, and returns the last.
func settleRSS(t *testing.T, pid int, start, startAnon int64, settle time.Duration) (end, endAnon int64) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		end, endAnon = readRSS(t, pid), readAnon(t, pid)
		if (end <= start+32<<20 && endAnon <= startAnon+32<<20) || time.Now().After(deadline) {
			return end, endAnon
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// attack runs shape.rounds rounds of the tiny flood and the parity forgery and returns
// how many packets and blocks it sent.
func attack(sp *spoofer, to netip.AddrPort, shape soakShape) ([2]int64, error) {
	var sent [2]int64
	for r := 0; r < shape.rounds; r++ {
		n, err := tinyFlood(sp, to, shape, uint64(r))
		sent[0] += n
		if err != nil {
			return sent, err
		}
		n, err = parityForgery(sp, to, shape.parity, uint64(r))
		sent[1] += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// rssSampler keeps the highest RSS of a process, sampled every 200 ms until stop.
type rssSampler struct {
	peak atomic.Int64
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func sampleRSS(pid int, start int64) *rssSampler {
	s := &rssSampler{quit: make(chan struct{}), done: make(chan struct{})}
	s.peak.Store(start)
	go func() {
		defer close(s.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-tick.C:
				if r, err := rssOf(pid); err == nil && r > s.peak.Load() {
					s.peak.Store(r)
				}
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}

// openRing opens the victim's session on endpoint 1 with an 8 MiB receive ring.
func openRing(t *testing.T, ctx context.Context, c *client.Client) *client.Session {
	t.Helper()
	s, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Bind(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.EnableRecvRing(ctx, 8<<20); err != nil {
		t.Fatal(err)
	}
	return s
}

// holdRing makes the holder prove its address with a small message to the victim, then
// start a 3 MiB one (trickled), and waits until the receiver has placed it in the ring.
func holdRing(t *testing.T, ctx context.Context, holder *client.Session, to netip.AddrPort, rc *client.Client) {
	t.Helper()
	if _, err := holder.Send(ctx, to, 1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.SendAsync(to, 1, bytes.Repeat([]byte{ringFill}, 3<<20)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cs, err := rc.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cs.API.RingPlaced >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder's message was not placed in the victim's ring in 20 s (counters %+v)", cs.API)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitConns waits until the daemon at c has at most n connections and returns how many
// it has; it fails the test after timeout.
func waitConns(t *testing.T, ctx context.Context, c *client.Client, n int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Connections <= n {
			return st.Connections
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver still has %d connections %v after the attack", st.Connections, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// processBound is the worst-case memory of the daemon running yaml less the terms the
// kernel holds (socket buffers, charged to the cgroup but not to the process's RSS).
func processBound(t *testing.T, yaml string) int64 {
	t.Helper()
	cfg, err := smarttd.Load([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	b := smarttd.WorstCaseMemory(&cfg)
	n := b.Total
	for _, it := range b.Items {
		if it.Name == "udp.socket_buffers" || it.Name == "api.socket_buffer" {
			n -= it.Bytes
		}
	}
	return n
}

// buildSmarttd builds cmd/smarttd into a temporary directory.
func buildSmarttd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "smarttd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/smartt-transport/smartt/cmd/smarttd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/smarttd: %v\n%s", err, out)
	}
	return bin
}

// startChild starts bin with config yaml in namespace ns and waits until its API at sock answers;
// it is killed when the test ends, and its output shown if the test failed.
func startChild(t *testing.T, bin string, ns *nstest.NS, dir, sock, yaml string) int {
	t.Helper()
	cfgPath := filepath.Join(dir, "receiver.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	cmd := exec.Command("ip", "netns", "exec", ns.Name, bin, "-config", cfgPath)
	// The Go runtime's defaults: nothing inherited tunes the collector.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") || strings.HasPrefix(kv, "GODEBUG=")
	})
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("receiver daemon output:\n%s", logBuf.String())
		}
	})
	c := client.New(sock)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Status(ctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("receiver daemon exited: %s", logBuf.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver daemon not answering after 20 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// ip netns exec execs the daemon in place, so the child's PID is the daemon's.
	return cmd.Process.Pid
}

// atkAddr is the attacker namespace's own address (the ring holder's).
var atkAddr = netip.MustParseAddr("10.99.3.1")

// attackerNS adds namespace C behind the router (10.99.3.0/24; the router also sends
// spoofNet there) and returns it with a raw socket in it that sends from any source.
func attackerNS(t *testing.T, tp *nstest.Topo) (*nstest.NS, *spoofer) {
	t.Helper()
	c := nstest.New(t, "c")
	nstest.Connect(t, tp.R, c, nstest.LinkOpts{IfA: "rc", IfB: "veth0",
		A: netip.MustParsePrefix("10.99.3.254/24"), B: netip.PrefixFrom(atkAddr, 24)})
	c.Route(t, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.99.3.254"))
	tp.R.Route(t, spoofNet, atkAddr)
	sp := nstest.Open(t, c, func() (*spoofer, error) {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW) // IP_HDRINCL
		return &spoofer{fd: fd, buf: make([]byte, 9000)}, err
	})
	return c, sp
}

// spoofer sends UDP datagrams with any source address and port (a raw socket: the
// kernel fills in the IP checksum and ID; the UDP checksum is left out, as IPv4 allows).
type spoofer struct {
	fd  int
	buf []byte
}

func (s *spoofer) Close() error { return syscall.Close(s.fd) }

// send sends payload from src to dst.
func (s *spoofer) send(src netip.AddrPort, dst netip.AddrPort, payload []byte) error {
	n := 28 + len(payload)
	b := s.buf[:n]
	clear(b[:28])
	b[0], b[6], b[8], b[9] = 0x45, 0x40, 64, syscall.IPPROTO_UDP // IPv4, DF, TTL 64, UDP
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(b[12:], s4[:])
	copy(b[16:], d4[:])
	binary.BigEndian.PutUint16(b[20:], src.Port())
	binary.BigEndian.PutUint16(b[22:], dst.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	for {
		err := syscall.Sendto(s.fd, b, 0, &syscall.SockaddrInet4{Addr: d4})
		if err != syscall.ENOBUFS {
			return err
		}
		time.Sleep(100 * time.Microsecond) // the qdisc is full: wait for it, as a UDP socket would
	}
}

// spoofedSrc is the spoofed source of connection i of kind (0: flood, 1: parity).
func spoofedSrc(kind, i int) netip.AddrPort {
	a := spoofNet.Addr().As4()
	a[1] += byte(kind)
	a[2], a[3] = byte(i>>8), byte(i)
	return netip.AddrPortFrom(netip.AddrFrom4(a), uint16(20000+i%40000))
}

// tinyFlood sends shape.tiny one-packet DATA packets (2-byte messages whose first byte
// never comes) in fresh connections of shape.perConn messages each, every connection
// from a spoofed source of its own, paced at shape.tinyRate, and returns how many it sent.
func tinyFlood(sp *spoofer, to netip.AddrPort, shape soakShape, round uint64) (int64, error) {
	buf := make([]byte, 128)
	begin := time.Now()
	var n int64
	for conn := 0; n < int64(shape.tiny); conn++ {
		from := spoofedSrc(0, int(round)*4096+conn)
		src := round<<40 | uint64(conn+1)<<8 | 0x5a
		for m := 0; m < shape.perConn && n < int64(shape.tiny); m++ {
			p := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: src}}
			p.Data = wire.Data{PSN: 100 + uint32(m), AckFloor: 100, MsgID: uint32(m), MsgLen: 2, Offset: 1,
				PayloadLen: 1, StreamStart: uint64(m) * (2 + transport.MsgOverhead)}
			p.Payload = []byte{0xee}
			k, err := p.Encode(buf)
			if err != nil {
				return n, err
			}
			if err := sp.send(from, to, buf[:k]); err != nil {
				return n, err
			}
			n++
		}
		if ahead := time.Duration(n)*time.Second/time.Duration(shape.tinyRate) - time.Since(begin); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	return n, nil
}

// parityForgery sends blocks forged EC blocks, each in a fresh connection from a spoofed
// source of its own: half of the configured shape (K 16, M 4), half of arbitrary K
// 1..255 and M 1..16; each is up to 7 data packets of 1 KiB of a message of K of them, one
// missing, and a 1 KiB parity packet of the forger's bytes. It returns how many blocks
// it sent.
func parityForgery(sp *spoofer, to netip.AddrPort, blocks int, round uint64) (int64, error) {
	const shard = 1024
	buf := make([]byte, 4096)
	payload := make([]byte, shard)
	rng := rand.New(rand.NewPCG(round, 26))
	send := func(from netip.AddrPort, p *wire.Packet) error {
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		p.Payload, p.Data.PayloadLen = payload, shard
		k, err := p.Encode(buf)
		if err == nil {
			err = sp.send(from, to, buf[:k])
		}
		return err
	}
	for i := 0; i < blocks; i++ {
		k, m := 1+(i*37)%255, 1+(i*7)%16
		if i%2 == 0 {
			k, m = 16, 4
		}
		from := spoofedSrc(1, int(round)*4096+i)
		src := round<<40 | uint64(i+1)<<8 | 0xec
		miss := (i * 5) % k
		for j := 0; j < k && j < 8; j++ {
			if j == miss {
				continue
			}
			p := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: src}}
			p.Data = wire.Data{PSN: 100 + uint32(j), AckFloor: 100, MsgLen: uint32(k) * shard, Offset: uint32(j) * shard}
			if err := send(from, &p); err != nil {
				return int64(i), err
			}
		}
		p := wire.Packet{Header: wire.Header{Type: wire.TypeData, Flags: wire.FlagEC, SrcConn: src}}
		p.Data = wire.Data{PSN: 100, AckFloor: rng.Uint32(), MsgLen: uint32(k) * shard,
			EC: wire.EC{K: uint8(k), M: uint8(m), Index: uint8(i % m)}}
		if err := send(from, &p); err != nil {
			return int64(i), err
		}
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
	return int64(blocks), nil
}

// startTrickler starts a daemon in namespace ns at listen whose data packets of a
// message of ringFill bytes leave one per ringTrickle (its other packets, the message's
// first included, pass): a peer that holds what it sends into a receive ring.
func startTrickler(t *testing.T, ns *nstest.NS, listen netip.AddrPort, dir string, mod func(*smarttd.Config)) *smarttd.Daemon {
	t.Helper()
	cfg := smarttd.DefaultConfig()
	cfg.Listen = listen
	cfg.API.Socket = filepath.Join(dir, "holder.sock")
	mod(&cfg)
	open := func(c *smarttd.Config, log *slog.Logger) (*smarttd.SocketLayer, error) {
		sl, err := smarttd.OpenUDP(c, log)
		if err == nil {
			sl.Socket = &trickleSocket{Socket: sl.Socket}
		}
		return sl, err
	}
	return startWith(t, ns, cfg, smarttd.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OpenSocket: open})
}

// trickleSocket lets data packets whose payload starts with four ringFill bytes out one
// per ringTrickle. It lends no buffers and gathers no payloads, so each packet's payload
// is in its Buf.
type trickleSocket struct {
	daemon.Socket
	mu   sync.Mutex
	last time.Time
	out  []daemon.Packet
}

func (s *trickleSocket) WriteBatch(pkts []daemon.Packet) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = s.out[:0]
	fill := bytes.Repeat([]byte{ringFill}, 4)
	for _, p := range pkts {
		b := p.Buf[:p.N]
		if len(b) >= wire.DataHdrLen+4 && wire.Type(b[0]&0x0f) == wire.TypeData && bytes.Equal(b[wire.DataHdrLen:wire.DataHdrLen+4], fill) {
			if time.Since(s.last) < ringTrickle {
				continue
			}
			s.last = time.Now()
		}
		s.out = append(s.out, p)
	}
	if _, err := s.Socket.WriteBatch(s.out); err != nil {
		return 0, err
	}
	return len(pkts), nil
}

// honestTraffic sends n messages of 4 KiB..1 MiB from snd (at from) to rcv's endpoint
// 1 at to and returns how many arrived intact; rcv releases every message and skips
// those of other peers. It fails the test on any error.
func honestTraffic(t *testing.T, ctx context.Context, snd, rcv *client.Session, from, to netip.AddrPort, n int) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(26, 1))
	var mu sync.Mutex
	want := map[[32]byte]int{}
	pend := make([]*client.Pending, n)
	errc := make(chan error, 1)
	go func() {
		for i := range pend {
			m := make([]byte, 4<<10+rng.IntN(1<<20-4<<10+1))
			for j := 0; j+8 <= len(m); j += 8 {
				binary.LittleEndian.PutUint64(m[j:], rng.Uint64())
			}
			h := sha256.Sum256(m)
			mu.Lock()
			want[h]++ // before the send: the receiver looks only after its Recv
			mu.Unlock()
			p, err := snd.SendAsync(to, 1, m)
			if err != nil {
				errc <- err
				return
			}
			pend[i] = p
		}
		errc <- nil
	}()
	got := map[[32]byte]int{}
	for i := 0; i < n; {
		m, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatalf("honest message %d: %v (the victim was disconnected?)", i, err)
		}
		if m.From == from {
			got[sha256.Sum256(m.Data)]++
			i++
		}
		m.Release()
	}
	if err := <-errc; err != nil {
		t.Fatalf("send: %v", err)
	}
	for i, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("honest message %d: %v", i, err)
		}
	}
	ok := 0
	mu.Lock()
	defer mu.Unlock()
	for h, c := range got {
		ok += min(c, want[h])
	}
	if ok != n {
		t.Fatalf("%d of %d honest messages arrived intact", ok, n)
	}
	return ok
}

// procMem is the memory lines of /proc/pid/status (RSS by kind: the ring's shared pages
// are RssShmem).
func procMem(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Rss") || strings.HasPrefix(l, "VmRSS") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

// readRSS is rssOf that fails the test on error.
func readRSS(t *testing.T, pid int) int64 {
	t.Helper()
	r, err := rssOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readAnon reads RssAnon of process pid in bytes, failing the test on error.
func readAnon(t *testing.T, pid int) int64 {
	t.Helper()
	r, err := procStatus(pid, "RssAnon")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rssOf reads VmRSS of process pid in bytes.
func rssOf(pid int) (int64, error) { return procStatus(pid, "VmRSS") }

// procStatus reads the kB line key of /proc/pid/status in bytes.
func procStatus(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("%s line %q", key, sc.Text())
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}
