package seal

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
	keyF  = Key{1, 2, 3}
	keyG  = Key{9, 9, 9}
)

const sec = int64(1_000_000_000)

func cfgWith(mode Mode, k Key) Config {
	c := DefaultConfig()
	c.Mode = mode
	c.Key = k
	return c
}

func newSealer(t testing.TB, c Config, seed byte) *Sealer {
	t.Helper()
	s, err := New(c, [32]byte{seed})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// packet returns a buffer holding an n-byte packet with recognisable bytes and room for the trailer.
func packet(n int, fill byte) []byte {
	b := make([]byte, n+Overhead)
	for i := range n {
		b[i] = fill + byte(i*7)
	}
	return b
}

func seal(t testing.TB, s *Sealer, now int64, dst netip.Addr, b []byte, n, hdr int) []byte {
	t.Helper()
	m, err := s.Seal(now, dst, b, n, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if m != n+Overhead {
		t.Fatalf("sealed length %d, want %d", m, n+Overhead)
	}
	return b[:m]
}

func TestRoundTrip(t *testing.T) {
	for _, mode := range []Mode{Auth, Encrypt} {
		for _, size := range []int{24, 64, 65, 228, 64 + 4096} {
			t.Run(fmt.Sprintf("%v/%d", mode, size), func(t *testing.T) {
				tx := newSealer(t, cfgWith(mode, keyF), 1)
				rx := newSealer(t, cfgWith(mode, keyF), 2)
				out := make([]byte, size+Overhead)
				for k := range 3 {
					orig := packet(size, byte(k))
					want := append([]byte(nil), orig[:size]...)
					p := seal(t, tx, 5*sec, addrB, orig, size, 64)
					clear := min(64, size)
					if mode == Encrypt && size > 64 {
						if bytes.Equal(p[clear:size], want[clear:]) {
							t.Fatal("encrypt mode left the payload in clear")
						}
					} else if !bytes.Equal(p[:size], want) {
						t.Fatal("auth mode changed the packet body")
					}
					if !bytes.Equal(p[:clear], want[:clear]) {
						t.Fatal("the header is not in clear")
					}
					body, res := rx.Open(5*sec, addrA, p, 64, out)
					wantRes := OK
					if k == 0 {
						wantRes = NewSession
					}
					if res != wantRes || !bytes.Equal(body, want) {
						t.Fatalf("packet %d: %v, body equal %v", k, res, bytes.Equal(body, want))
					}
					if mode == Auth && &body[0] != &p[0] {
						t.Fatal("auth mode copied the packet")
					}
				}
				if rx.Sessions() != 1 {
					t.Fatalf("%d sessions, want 1", rx.Sessions())
				}
			})
		}
	}
}

// TestEveryBitFlipRejected flips every bit of a sealed packet (header, payload, tag,
// session ID, counter), against a receiver that holds the session and one that does not:
// nothing is accepted, nothing is remembered, and the original still opens afterwards.
func TestEveryBitFlipRejected(t *testing.T) {
	for _, mode := range []Mode{Auth, Encrypt} {
		t.Run(mode.String(), func(t *testing.T) {
			const size = 64 + 100
			tx := newSealer(t, cfgWith(mode, keyF), 1)
			known := newSealer(t, cfgWith(mode, keyF), 2)
			fresh := newSealer(t, cfgWith(mode, keyF), 3)
			out := make([]byte, size+Overhead)
			first := seal(t, tx, sec, addrB, packet(size, 0), size, 64)
			if _, res := known.Open(sec, addrA, first, 64, out); res != NewSession {
				t.Fatalf("first packet: %v", res)
			}
			p := seal(t, tx, sec, addrB, packet(size, 1), size, 64)
			for i := range len(p) * 8 {
				q := append([]byte(nil), p...)
				q[i/8] ^= 1 << (i % 8)
				for _, rx := range []*Sealer{known, fresh} {
					if body, res := rx.Open(sec, addrA, q, 64, out); res == OK || res == NewSession || body != nil {
						t.Fatalf("bit %d (byte %d) flipped: accepted (%v)", i, i/8, res)
					}
				}
			}
			if known.Sessions() != 1 || fresh.Sessions() != 0 {
				t.Fatalf("flipped packets left state: %d and %d sessions", known.Sessions(), fresh.Sessions())
			}
			if _, res := known.Open(sec, addrA, p, 64, out); res != OK {
				t.Fatalf("original after the flips: %v", res)
			}
			if _, res := fresh.Open(sec, addrA, p, 64, out); res != NewSession {
				t.Fatalf("original at the fresh receiver: %v", res)
			}
		})
	}
}

// sealN seals n packets of one session and returns them in counter order (counter i+1 at i).
func sealN(t testing.TB, tx *Sealer, now int64, n int) [][]byte {
	pk := make([][]byte, n)
	for i := range pk {
		pk[i] = append([]byte(nil), seal(t, tx, now, addrB, packet(24, byte(i)), 24, 64)...)
	}
	return pk
}

func counter(p []byte) uint32 { return binary.BigEndian.Uint32(p[len(p)-CounterLen:]) }

func TestReplayWindow(t *testing.T) {
	tx := newSealer(t, cfgWith(Auth, keyF), 1)
	rx := newSealer(t, cfgWith(Auth, keyF), 2)
	const n = 3 * ReplayWindow
	pk := sealN(t, tx, sec, n)
	open := func(i int) Result { _, r := rx.Open(sec, addrA, pk[i], 64, nil); return r }
	// Deliver everything except a few held back, in order.
	held := map[int]bool{1: true, 5000: true, 7000: true, 12000: true}
	for i := range 2 * ReplayWindow {
		if held[i] {
			continue
		}
		if r := open(i); r != OK && r != NewSession {
			t.Fatalf("packet %d: %v", i, r)
		}
		if r := open(i); r != Replayed {
			t.Fatalf("replay of packet %d: %v", i, r)
		}
	}
	top := 2*ReplayWindow - 1 // index of the highest counter seen
	// Counter top+1-ReplayWindow (index top-ReplayWindow+1 ... ) is the oldest accepted.
	oldestOK := top - ReplayWindow + 1
	if counter(pk[top])-counter(pk[oldestOK]) != ReplayWindow-1 {
		t.Fatal("test arithmetic")
	}
	if !held[12000] || oldestOK > 12000 || top-7000 < ReplayWindow {
		t.Fatal("test arithmetic: held packets on the wrong side of the window")
	}
	if r := open(12000); r != OK {
		t.Fatalf("reordered within the window (%d behind): %v", top-12000, r)
	}
	if r := open(12000); r != Replayed {
		t.Fatalf("replay of a reordered packet: %v", r)
	}
	// Exactly at the edge: ReplayWindow-1 behind is accepted, ReplayWindow behind is not.
	rx2 := newSealer(t, cfgWith(Auth, keyF), 3)
	for i := 1; i <= top; i++ {
		if i == oldestOK || i == oldestOK-1 {
			continue
		}
		if _, r := rx2.Open(sec, addrA, pk[i], 64, nil); r != OK && r != NewSession {
			t.Fatalf("rx2 packet %d: %v", i, r)
		}
	}
	if _, r := rx2.Open(sec, addrA, pk[oldestOK], 64, nil); r != OK {
		t.Fatalf("%d behind: %v, want accepted", top-oldestOK, r)
	}
	if _, r := rx2.Open(sec, addrA, pk[oldestOK-1], 64, nil); r != Replayed {
		t.Fatalf("%d behind: %v, want refused", top-oldestOK+1, r)
	}
	for _, i := range []int{1, 5000, 7000} {
		if r := open(i); r != Replayed {
			t.Fatalf("packet %d, %d behind: %v, want refused as too old", i, top-i, r)
		}
	}
	// A jump far ahead clears the ring: old bits must not make new counters look seen.
	if r := open(n - 1); r != OK {
		t.Fatalf("jump ahead: %v", r)
	}
	for i := n - ReplayWindow + 1; i < n-1; i += 997 {
		if r := open(i); r != OK {
			t.Fatalf("packet %d after the jump: %v", i, r)
		}
	}
}

// TestSessionTimeLimits checks admission and expiry at and beyond each limit: MaxAge
// (rekey 120 s + skew 3 s + 1 s = 124 s), MaxSkew into the future, and the receiver's start.
func TestSessionTimeLimits(t *testing.T) {
	cfg := cfgWith(Auth, keyF)
	maxAge := int64(124)
	if int64(cfg.MaxAge())/sec != maxAge {
		t.Fatalf("MaxAge %v, test assumes %d s", cfg.MaxAge(), maxAge)
	}
	first := func(txAt, rxStart, rxAt int64) Result {
		tx := newSealer(t, cfg, 1)
		rx := newSealer(t, cfg, 2)
		rx.start(rxStart * sec)
		p := seal(t, tx, txAt*sec+sec/2, addrB, packet(24, 0), 24, 64)
		_, r := rx.Open(rxAt*sec+sec/3, addrA, p, 64, nil)
		return r
	}
	cases := []struct {
		name                string
		txAt, rxStart, rxAt int64
		want                Result
	}{
		{"age at the limit", 1000, 0, 1000 + maxAge, NewSession},
		{"age beyond", 1000, 0, 1000 + maxAge + 1, Stale},
		{"future at the skew", 1003, 0, 1000, NewSession},
		{"future beyond", 1004, 0, 1000, Stale},
		{"begun before the receiver started, within skew", 1997, 2000, 2000, NewSession},
		{"begun before the receiver started, beyond skew", 1996, 2000, 2000, Stale},
	}
	for _, c := range cases {
		if r := first(c.txAt, c.rxStart, c.rxAt); r != c.want {
			t.Errorf("%s: %v, want %v", c.name, r, c.want)
		}
	}
	// A held session expires MaxAge after its start, and is forgotten.
	tx := newSealer(t, cfg, 1)
	rx := newSealer(t, cfg, 2)
	tx.rekeyNs = 1000 * sec // keep one session beyond its normal life for this test
	for _, c := range []struct {
		at   int64
		want Result
	}{{1000, NewSession}, {1000 + maxAge, OK}, {1000 + maxAge + 1, Stale}, {1000 + maxAge + 1, Stale}} {
		p := seal(t, tx, c.at*sec, addrB, packet(24, 0), 24, 64)
		if _, r := rx.Open(c.at*sec, addrA, p, 64, nil); r != c.want {
			t.Fatalf("session packet at %d s: %v, want %v", c.at, r, c.want)
		}
	}
	if rx.Sessions() != 0 {
		t.Fatalf("expired session still held (%d)", rx.Sessions())
	}
}

func TestRekey(t *testing.T) {
	cfg := cfgWith(Auth, keyF)
	tx := newSealer(t, cfg, 1)
	rx := newSealer(t, cfg, 2)
	rx.start(0)
	id := func(p []byte) string { return string(p[len(p)-SessionIDLen-CounterLen : len(p)-CounterLen]) }
	open := func(now int64, p []byte) Result { _, r := rx.Open(now, addrA, p, 64, nil); return r }
	p1 := seal(t, tx, 10*sec, addrB, packet(24, 0), 24, 64)
	s1 := id(p1)
	p2 := seal(t, tx, 10*sec+int64(cfg.RekeyInterval)-1, addrB, packet(24, 0), 24, 64)
	if id(p2) != s1 {
		t.Fatal("rekeyed before the interval")
	}
	p3 := seal(t, tx, 10*sec+int64(cfg.RekeyInterval), addrB, packet(24, 0), 24, 64)
	if id(p3) == s1 || counter(p3) != 1 {
		t.Fatal("no new session after the rekey interval")
	}
	if binary.BigEndian.Uint32(p3[len(p3)-SessionIDLen-CounterLen:]) != uint32(10+cfg.RekeyInterval/1e9) {
		t.Fatal("session ID does not start with its start time in seconds")
	}
	now := 10*sec + int64(cfg.RekeyInterval)
	for _, p := range [][]byte{p1, p3, p2} { // the old session stays valid for late packets
		if r := open(now, p); r != OK && r != NewSession {
			t.Fatalf("%v", r)
		}
	}
	// After RekeyPackets packets.
	tx.lastTx.ctr = RekeyPackets - 1
	p4 := seal(t, tx, now, addrB, packet(24, 0), 24, 64)
	p5 := seal(t, tx, now, addrB, packet(24, 0), 24, 64)
	if id(p4) != id(p3) || counter(p4) != RekeyPackets || id(p5) == id(p4) || counter(p5) != 1 {
		t.Fatal("no new session after RekeyPackets packets")
	}
	if tx.Rekeys != 3 {
		t.Fatalf("%d sessions started, want 3", tx.Rekeys)
	}
}

func TestWrongKeyAndPeerKeys(t *testing.T) {
	out := make([]byte, 200)
	// Wrong key: refused, no state.
	tx := newSealer(t, cfgWith(Encrypt, keyF), 1)
	rx := newSealer(t, cfgWith(Encrypt, keyG), 2)
	p := seal(t, tx, sec, addrB, packet(100, 0), 100, 64)
	if _, r := rx.Open(sec, addrA, p, 64, out); r != Failed || rx.Sessions() != 0 {
		t.Fatalf("wrong key: %v, %d sessions", r, rx.Sessions())
	}
	// The receiver picks the key by source address: longest prefix, else the fabric key.
	k24, k25 := Key{24}, Key{25}
	rcfg := cfgWith(Auth, keyF)
	rcfg.Peers = []Peer{{Prefix: netip.MustParsePrefix("10.0.1.0/24"), Key: k24},
		{Prefix: netip.MustParsePrefix("10.0.1.128/25"), Key: k25}}
	cases := []struct {
		src  string
		key  Key
		want bool
	}{
		{"10.0.1.5", k24, true}, {"10.0.1.5", keyF, false}, {"10.0.1.5", k25, false},
		{"10.0.1.200", k25, true}, {"10.0.1.200", k24, false},
		{"10.0.2.1", keyF, true}, {"10.0.2.1", k24, false},
		{"::ffff:10.0.1.200", k25, true}, // v4-mapped sources are matched as IPv4
	}
	for i, c := range cases {
		rx := newSealer(t, rcfg, 2)
		tx := newSealer(t, cfgWith(Auth, c.key), byte(10+i))
		p := seal(t, tx, sec, addrB, packet(30, 0), 30, 64)
		_, r := rx.Open(sec, netip.MustParseAddr(c.src), p, 64, nil)
		if (r == NewSession) != c.want {
			t.Errorf("source %s with key %x: %v, want accepted=%v", c.src, c.key[0], r, c.want)
		}
	}
	// The sender picks the key by destination address.
	tx = newSealer(t, rcfg, 3)
	for _, c := range cases {
		if !c.want {
			continue
		}
		rx := newSealer(t, cfgWith(Auth, c.key), 4)
		p := seal(t, tx, sec, netip.MustParseAddr(c.src), packet(30, 0), 30, 64)
		if _, r := rx.Open(sec, addrA, p, 64, nil); r != NewSession {
			t.Errorf("sender to %s did not use key %x: %v", c.src, c.key[0], r)
		}
	}
	// No key for a peer: Connect and Seal refuse, Open fails.
	only := cfgWith(Auth, Key{})
	only.Peers = rcfg.Peers
	s := newSealer(t, only, 5)
	if err := s.Connect(sec, addrB); err != ErrNoKey {
		t.Fatalf("Connect without a key: %v", err)
	}
	if _, err := s.Seal(sec, addrB, packet(30, 0), 30, 64); err != ErrNoKey {
		t.Fatalf("Seal without a key: %v", err)
	}
	if _, r := s.Open(sec, addrA, seal(t, newSealer(t, cfgWith(Auth, keyF), 6), sec, addrB, packet(30, 0), 30, 64), 64, nil); r != Failed {
		t.Fatalf("Open without a key: %v", r)
	}
}

// TestSessionSourceBinding: a session belongs to the address that first authenticated it,
// and our own sessions reflected back to us are refused.
func TestSessionSourceBinding(t *testing.T) {
	tx := newSealer(t, cfgWith(Auth, keyF), 1)
	rx := newSealer(t, cfgWith(Auth, keyF), 2)
	pk := sealN(t, tx, sec, 3)
	if _, r := rx.Open(sec, addrA, pk[0], 64, nil); r != NewSession {
		t.Fatal(r)
	}
	if _, r := rx.Open(sec, netip.MustParseAddr("10.6.6.6"), pk[1], 64, nil); r != Failed {
		t.Fatalf("session packet from another address: %v", r)
	}
	if _, r := rx.Open(sec, addrA, pk[1], 64, nil); r != OK {
		t.Fatalf("the same packet from the session's address: %v", r)
	}
	// Reflection: the sender receives its own packet as if from its peer.
	if _, r := tx.Open(sec, addrB, pk[2], 64, nil); r != Failed || tx.Sessions() != 0 {
		t.Fatalf("own packet reflected: %v, %d sessions", r, tx.Sessions())
	}
}

func TestSessionCap(t *testing.T) {
	cfg := cfgWith(Auth, keyF)
	cfg.MaxSessions = 16
	rx := newSealer(t, cfg, 1)
	txs := make([]*Sealer, cfg.MaxSessions+1)
	first := make([][]byte, len(txs))
	for i := range txs {
		txs[i] = newSealer(t, cfgWith(Auth, keyF), byte(10+i))
		first[i] = append([]byte(nil), seal(t, txs[i], sec, addrB, packet(24, 0), 24, 64)...)
	}
	for i := range cfg.MaxSessions {
		if _, r := rx.Open(sec, addrA, first[i], 64, nil); r != NewSession {
			t.Fatalf("session %d: %v", i, r)
		}
	}
	if _, r := rx.Open(sec, addrA, first[cfg.MaxSessions], 64, nil); r != Full {
		t.Fatalf("session beyond the cap: %v", r)
	}
	if rx.Sessions() != cfg.MaxSessions {
		t.Fatalf("%d sessions held", rx.Sessions())
	}
	// Live sessions are never evicted: each still works.
	for i := range cfg.MaxSessions {
		p := seal(t, txs[i], 2*sec, addrB, packet(24, 0), 24, 64)
		if _, r := rx.Open(2*sec, addrA, p, 64, nil); r != OK {
			t.Fatalf("held session %d after the refusal: %v", i, r)
		}
	}
	// Once they have expired, a new session gets in (it is a fresh one: the sender rekeyed).
	later := 1*sec + int64(cfg.MaxAge()) + 2*sec
	p := seal(t, txs[cfg.MaxSessions], later, addrB, packet(24, 0), 24, 64)
	if _, r := rx.Open(later, addrA, p, 64, nil); r != NewSession || rx.Sessions() != 1 {
		t.Fatalf("after expiry: %v, %d sessions", r, rx.Sessions())
	}
}

// TestConnectAndFollow: Connect starts a new sending session unless the current one began
// this second; a peer's newer session makes us start a new one to it.
func TestConnectAndFollow(t *testing.T) {
	a := newSealer(t, cfgWith(Auth, keyF), 1)
	b := newSealer(t, cfgWith(Auth, keyF), 2)
	sid := func(p []byte) string { return string(p[len(p)-SessionIDLen-CounterLen : len(p)-CounterLen]) }
	p1 := seal(t, a, 10*sec, addrB, packet(24, 0), 24, 64)
	if err := a.Connect(10*sec+sec/2, addrB); err != nil {
		t.Fatal(err)
	}
	p2 := seal(t, a, 10*sec+sec/2, addrB, packet(24, 0), 24, 64)
	if sid(p2) != sid(p1) {
		t.Fatal("Connect in the session's own second started a new one")
	}
	if err := a.Connect(11*sec, addrB); err != nil {
		t.Fatal(err)
	}
	p3 := seal(t, a, 11*sec, addrB, packet(24, 0), 24, 64)
	if sid(p3) == sid(p1) {
		t.Fatal("Connect a second later kept the old session")
	}
	// b has a session to a begun at 11 s; a's new session of 20 s makes b follow.
	q1 := seal(t, b, 11*sec, addrA, packet(24, 0), 24, 64)
	if _, r := b.Open(11*sec, addrA, p3, 64, nil); r != NewSession {
		t.Fatal(r)
	}
	q2 := seal(t, b, 11*sec, addrA, packet(24, 0), 24, 64)
	if sid(q2) != sid(q1) {
		t.Fatal("followed a session of the same second")
	}
	if err := a.Connect(20*sec, addrB); err != nil {
		t.Fatal(err)
	}
	p4 := seal(t, a, 20*sec, addrB, packet(24, 0), 24, 64)
	if _, r := b.Open(20*sec, addrA, p4, 64, nil); r != NewSession {
		t.Fatal(r)
	}
	q3 := seal(t, b, 20*sec, addrA, packet(24, 0), 24, 64)
	if sid(q3) == sid(q1) {
		t.Fatal("did not follow the peer's newer session")
	}
}

// TestRestartedReceiver: a receiver refuses sessions begun more than MaxSkew before it
// started (their packets may be replays), and the sender's Connect recovers.
func TestRestartedReceiver(t *testing.T) {
	cfg := cfgWith(Auth, keyF)
	tx := newSealer(t, cfg, 1)
	old := seal(t, tx, 100*sec, addrB, packet(24, 0), 24, 64)
	rx := newSealer(t, cfg, 2) // the receiver (re)starts at 110 s
	rx.start(110 * sec)
	if _, r := rx.Open(110*sec, addrA, old, 64, nil); r != Stale {
		t.Fatalf("session begun 10 s before the receiver's start: %v", r)
	}
	if err := tx.Connect(110*sec, addrB); err != nil {
		t.Fatal(err)
	}
	p := seal(t, tx, 110*sec, addrB, packet(24, 0), 24, 64)
	if _, r := rx.Open(110*sec, addrA, p, 64, nil); r != NewSession {
		t.Fatalf("after Connect: %v", r)
	}
}

func TestZeroAllocs(t *testing.T) {
	for _, mode := range []Mode{Auth, Encrypt} {
		tx := newSealer(t, cfgWith(mode, keyF), 1)
		rx := newSealer(t, cfgWith(mode, keyF), 2)
		const size = 64 + 4096
		buf := packet(size, 0)
		out := make([]byte, size+Overhead)
		now := sec
		step := func() {
			now += 1000
			n, err := tx.Seal(now, addrB, buf, size, 64)
			if err != nil {
				t.Fatal(err)
			}
			if _, r := rx.Open(now, addrA, buf[:n], 64, out); r != OK && r != NewSession {
				t.Fatal(r)
			}
		}
		step()
		if a := testing.AllocsPerRun(1000, step); a != 0 {
			t.Errorf("%v: %.1f allocations per sealed and opened packet", mode, a)
		}
		// A forged packet on a known session allocates nothing either.
		n, _ := tx.Seal(now, addrB, buf, size, 64)
		buf[10] ^= 1
		if a := testing.AllocsPerRun(1000, func() { rx.Open(now, addrA, buf[:n], 64, out) }); a != 0 {
			t.Errorf("%v: %.1f allocations per forged packet", mode, a)
		}
	}
}

// forgeSession writes a new session ID (time 1 s, random part x) into the trailer of
// p; with k it also writes the right check, as an attacker replaying real session IDs
// (or knowing the key) would.
func forgeSession(s *Sealer, k *keyEntry, p []byte, x uint64) {
	tr := p[len(p)-SessionIDLen-CounterLen:]
	binary.BigEndian.PutUint32(tr, 1)
	binary.BigEndian.PutUint64(tr[4:], x*0x9e3779b97f4a7c15)
	binary.BigEndian.PutUint32(tr[12:], 0)
	if k != nil {
		binary.BigEndian.PutUint32(tr[12:], s.sessionCheck(k, (*sessionID)(tr)))
	}
	binary.BigEndian.PutUint32(tr[SessionIDLen:], 1)
}

// TestForgedNewSessionsKeepNoState: forged packets naming new sessions leave no session
// behind. Without the right session check they are refused before any key derivation
// (no allocation); with it, each costs one (cached per session ID).
func TestForgedNewSessionsKeepNoState(t *testing.T) {
	rx := newSealer(t, cfgWith(Auth, keyF), 1)
	buf := packet(100, 0)
	x := uint64(0)
	blind := func() {
		x++
		forgeSession(rx, nil, buf, x)
		if _, r := rx.Open(sec, addrA, buf, 64, nil); r != Failed {
			t.Fatalf("forged packet %d: %v", x, r)
		}
	}
	if a := testing.AllocsPerRun(1000, blind); a != 0 {
		t.Errorf("%.1f allocations per blindly forged session", a)
	}
	derived := 0
	for range 1000 {
		x++
		forgeSession(rx, rx.fabric, buf, x)
		if _, r := rx.Open(sec, addrA, buf, 64, nil); r != Failed {
			t.Fatalf("forged packet %d: %v", x, r)
		}
		if rx.cand[buf[len(buf)-CounterLen-checkLen-1]%candSlots].aead != nil {
			derived++
		}
	}
	if derived != 1000 {
		t.Fatalf("%d of 1000 forgeries with a valid check reached key derivation", derived)
	}
	if rx.Sessions() != 0 {
		t.Fatalf("%d sessions after forgeries", rx.Sessions())
	}
}

// TestSessionKeyIsHKDF: the allocation-free expansion equals crypto/hkdf's.
func TestSessionKeyIsHKDF(t *testing.T) {
	s := newSealer(t, cfgWith(Auth, keyF), 1)
	id := sessionID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	prk, _ := hkdf.Extract(sha256.New, keyF[:], nil)
	want, _ := hkdf.Expand(sha256.New, prk, label+string(id[:]), 32)
	for range 2 { // twice: the reused HMAC must reset
		if got := s.sessionKey(s.fabric, &id); !bytes.Equal(got, want) {
			t.Fatalf("session key %x, HKDF gives %x", got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if d := DefaultConfig(); d.Validate() != nil {
		t.Fatal(d.Validate())
	}
	bad := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Mode = Auth }, "auth.mode = auth: needs auth.key"},
		{func(c *Config) { c.Mode = 7 }, "auth.mode = 7"},
		{func(c *Config) { c.Key = keyF; c.KeyFile = "/k" }, "auth.key and auth.key_file"},
		{func(c *Config) { c.Peers = []Peer{{Key: keyF}} }, "auth.peers[0].prefix: missing"},
		{func(c *Config) { c.Peers = []Peer{{Prefix: netip.MustParsePrefix("10.0.1.5/24"), Key: keyF}} }, "did you mean 10.0.1.0/24"},
		{func(c *Config) {
			p := netip.MustParsePrefix("10.0.1.0/24")
			c.Peers = []Peer{{Prefix: p, Key: keyF}, {Prefix: p, Key: keyG}}
		}, "auth.peers[1].prefix = 10.0.1.0/24: same prefix as auth.peers[0]"},
		{func(c *Config) { c.Peers = []Peer{{Prefix: netip.MustParsePrefix("10.0.1.0/24")}} }, "auth.peers[0]: give exactly one"},
		{func(c *Config) { c.RekeyInterval = 999_999_999 }, "auth.rekey_interval = 999.999999ms: must be in 1s..24h"},
		{func(c *Config) { c.MaxSkew = 0 }, "auth.max_skew = 0s: must be in 1s..10m"},
		{func(c *Config) { c.MaxSessions = 15 }, "auth.max_sessions = 15: must be in 16..1048576"},
	}
	for _, b := range bad {
		c := DefaultConfig()
		b.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("got %v, want an error containing %q", err, b.want)
		}
	}
	c := cfgWith(Auth, Key{})
	c.KeyFile = "/etc/smartt/key"
	if err := c.Validate(); err != nil {
		t.Fatalf("key_file alone: %v", err)
	}
	if _, err := New(c, [32]byte{}); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Fatalf("New with an unloaded key file: %v", err)
	}
}

func TestKeysNeverPrinted(t *testing.T) {
	var k Key
	hexKey := strings.Repeat("ab", 31) + "cd"
	if err := k.UnmarshalText([]byte(hexKey)); err != nil {
		t.Fatal(err)
	}
	if k[31] != 0xcd {
		t.Fatal("hex not decoded")
	}
	c := cfgWith(Encrypt, k)
	c.Peers = []Peer{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Key: k}}
	y, _ := yaml.Marshal(c)
	j, _ := json.Marshal(c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v %#v %x %s", c, c, k, k), string(y), string(j)} {
		if strings.Contains(strings.ToLower(s), "abab") || strings.Contains(s, "171") {
			t.Fatalf("key printed: %s", s)
		}
		if !strings.Contains(s, "redacted") {
			t.Fatalf("no redaction marker in %s", s)
		}
	}
	for _, in := range []string{"abc", strings.Repeat("zz", 32), "<redacted>"} {
		err := k.UnmarshalText([]byte(in))
		if err == nil || (in != "<redacted>" && strings.Contains(err.Error(), in)) {
			t.Errorf("key %q: error %v (must fail without echoing the text)", in, err)
		}
	}
	// YAML: mode "off" is a string here, not YAML 1.1's boolean; keys parse from hex.
	var got Config
	src := "mode: off\nkey: " + hexKey + "\npeers: [{prefix: 10.1.0.0/16, key: " + hexKey + "}]\n"
	if err := yaml.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	if got.Mode != Off || got.Key != k || got.Peers[0].Key != k || got.Peers[0].Prefix.Bits() != 16 {
		t.Fatalf("decoded %v", got)
	}
	for in, want := range map[string]Mode{"auth": Auth, "encrypt": Encrypt, "off": Off} {
		var m Mode
		if err := yaml.Unmarshal([]byte(in), &m); err != nil || m != want {
			t.Errorf("mode %q: %v %v", in, m, err)
		}
	}
	var m Mode
	if err := m.UnmarshalText([]byte("on")); err == nil {
		t.Error("mode \"on\" accepted")
	}
}
