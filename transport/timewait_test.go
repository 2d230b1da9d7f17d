package transport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
)

// spoofedWhole is a spoofed first-contact DATA packet carrying a whole 1-byte message:
// connection i+1 from a source address of its own.
func spoofedWhole(t testing.TB, i int) ([]byte, netip.AddrPort) {
	b := tinyPacket(t, uint64(i+1), 0, 1, 0, 0, 100)
	return b, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 23600)
}

// timeWaitCheck: the TIME_WAIT gauges agree with the tables, to the entry, and the
// entries stay within their caps (all: MaxConns+MaxTimeWait; unproven ones with the live
// unproven connections: MaxConns+MaxTimeWait/unprovenShare).
func timeWaitCheck(e *Endpoint) error {
	var peers, unproven int
	for i := range e.twQueue.len() {
		q := &e.twQueue
		t := q.buf[(q.head+i)&(len(q.buf)-1)]
		if t.peer.id != 0 {
			peers++
		}
		if t.unproven {
			unproven++
		}
	}
	st, n := e.Stats(), e.twQueue.len()
	switch {
	case st.TimeWait != uint64(n) || st.TimeWaitHeld != uint64(n)*TimeWaitCharge:
		return fmt.Errorf("TimeWait %d, TimeWaitHeld %d for %d entries", st.TimeWait, st.TimeWaitHeld, n)
	case len(e.twLocal) != n || len(e.twPeer) != peers || e.twUnproven != unproven:
		return fmt.Errorf("%d entries (%d with a peer ID, %d unproven): twLocal %d, twPeer %d, twUnproven %d",
			n, peers, unproven, len(e.twLocal), len(e.twPeer), e.twUnproven)
	case n+len(e.list) > e.cfg.MaxConns+e.cfg.MaxTimeWait:
		return fmt.Errorf("%d entries and %d connections: over %d + %d", n, len(e.list), e.cfg.MaxConns, e.cfg.MaxTimeWait)
	case unproven+e.unproven.n > e.cfg.MaxConns+e.cfg.MaxTimeWait/unprovenShare:
		return fmt.Errorf("%d unproven entries and %d unproven connections: over %d + %d/%d",
			unproven, e.unproven.n, e.cfg.MaxConns, e.cfg.MaxTimeWait, unprovenShare)
	}
	return nil
}

func checkTimeWait(t *testing.T, e *Endpoint) {
	t.Helper()
	if err := timeWaitCheck(e); err != nil {
		t.Fatal(err)
	}
}

// TestTimeWaitSpoofedFloodChargedAndCapped: the engine in the daemon's configuration gets
// 50,000 spoofed one-packet messages, each on a fresh connection from a source of its
// own. Each delivered message leaves a TIME_WAIT entry (a late duplicate must not be
// delivered again); the entries are charged (Stats.TimeWaitHeld) and, with the live
// unproven connections, stay within MaxConns+MaxTimeWait/8: beyond it every first contact
// is dropped unacknowledged and counted (Stats.TimeWaitRefused). The live heap grows by
// at most twice what is charged plus floodSlack, checked every 5,000 packets; once the
// connections expire into entries, the same holds of the entries alone; once the
// entries expire, a new first contact is admitted. (Before, 45,904 entries were left,
// uncharged and unbounded.)
func TestTimeWaitSpoofedFloodChargedAndCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: measures the heap over 50,000 packets")
	}
	const total = 50000
	e, err := NewEndpoint(daemonEngineConfig(), nil2(), daemonHooks(&ringPlacer{}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	capU := cfg.MaxConns + cfg.MaxTimeWait/unprovenShare
	out := make([]byte, 9000)
	alloc0, _ := heapStats()
	now := flood(e, 1e9, total, 5000, func(i int) ([]byte, netip.AddrPort) { return spoofedWhole(t, i) }, func(n int, grown int64) {
		checkTimeWait(t, e)
		checkLedger(t, e)
		st := e.Stats()
		charged := st.RecvBuffered + st.ConnHeld + st.TimeWaitHeld
		t.Logf("%d packets: heap +%d bytes, charged %d (ConnHeld %d for %d connections, TimeWaitHeld %d for %d entries), %d refused",
			n, grown, charged, st.ConnHeld, e.NumConns(), st.TimeWaitHeld, st.TimeWait, st.TimeWaitRefused)
		if grown > int64(2*charged+floodSlack) {
			t.Fatalf("after %d packets the heap grew %d bytes, more than 2 x %d charged + %d", n, grown, charged, floodSlack)
		}
	})
	st := e.Stats()
	if int(st.TimeWait)+e.NumConns() != capU || st.TimeWaitRefused != uint64(total-capU) ||
		st.ConnsAccepted != uint64(capU) || st.MsgsDelivered != uint64(capU) {
		t.Fatalf("%d entries + %d connections (cap %d), %d refused, %d accepted, %d delivered",
			st.TimeWait, e.NumConns(), capU, st.TimeWaitRefused, st.ConnsAccepted, st.MsgsDelivered)
	}
	// The live connections expire (UnprovenTimeout) into entries: what remains is theirs.
	now += int64(cfg.UnprovenTimeout) + 1
	e.HandleTimeout(now)
	drainEngine(e, now, out)
	checkTimeWait(t, e)
	alloc, _ := heapStats()
	st = e.Stats()
	grown := int64(alloc) - int64(alloc0)
	t.Logf("connections expired: %d entries hold heap +%d bytes (%d per entry), charged %d (%d each)",
		st.TimeWait, grown, grown/int64(st.TimeWait), st.TimeWaitHeld, TimeWaitCharge)
	if e.NumConns() != 0 || st.TimeWait != uint64(capU) || grown > int64(2*st.TimeWaitHeld+floodSlack) {
		t.Fatalf("%d connections, %d entries (want %d): heap +%d bytes, more than 2 x %d charged + %d",
			e.NumConns(), st.TimeWait, capU, grown, st.TimeWaitHeld, floodSlack)
	}
	now += e.timeWait() + 1
	e.HandleTimeout(now)
	b, from := spoofedWhole(t, total)
	e.HandlePacket(now, b, RxMeta{From: from})
	drainEngine(e, now, out)
	checkTimeWait(t, e)
	if st := e.Stats(); st.TimeWait != 0 || st.MsgsDelivered != uint64(capU)+1 {
		t.Fatalf("after expiry: %d entries, %d delivered (want %d)", st.TimeWait, st.MsgsDelivered, capU+1)
	}
	runtime.KeepAlive(e)
}

// TestTimeWaitCapRefusesNotEvicts: MaxConns 4 and MaxTimeWait 16 (unproven cap 4+2).
// Spoofed one-packet messages fill live connections and entries to the cap exactly; the
// next first contact is dropped unacknowledged (no RESET, no connection) and counted.
// Duplicates of every delivered message, sent at and after the cap and after the live
// connections expired into entries, are never delivered again; proven dialling still
// works; once the entries expire a refused sender's retry is delivered, once.
func TestTimeWaitCapRefusesNotEvicts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConns, cfg.MaxTimeWait = 4, 16
	e := newEndpoint(t, cfg)
	const capU = 4 + 16/unprovenShare
	out := make([]byte, 9000)
	now := int64(1e9)
	delivered := map[netip.AddrPort]int{}
	send := func(i int) (sent int) {
		b, from := spoofedWhole(t, i)
		e.HandlePacket(now, b, RxMeta{From: from})
		for {
			if _, ok := e.PollTransmit(now, out); !ok {
				break
			}
			sent++
		}
		for ev := range pending(e) {
			if ev.Kind == MessageReceived {
				delivered[ev.Peer]++
			}
		}
		checkTimeWait(t, e)
		return sent
	}
	for i := range capU {
		now += 1000
		send(i)
	}
	if st := e.Stats(); st.MsgsDelivered != capU || int(st.TimeWait)+e.NumConns() != capU || st.TimeWaitRefused != 0 {
		t.Fatalf("at the cap: %d delivered, %d entries + %d connections (want %d), %d refused", st.MsgsDelivered, st.TimeWait, e.NumConns(), capU, st.TimeWaitRefused)
	}
	now += 1000
	if sent := send(capU); sent != 0 || e.Stats().TimeWaitRefused != 1 || e.Stats().ConnsAccepted != capU {
		t.Fatalf("beyond the cap: %d packets answered, %d refused, %d accepted", sent, e.Stats().TimeWaitRefused, e.Stats().ConnsAccepted)
	}
	dups := func(when string) {
		for i := range capU {
			now += 1000
			send(i)
		}
		for from, n := range delivered {
			if n != 1 {
				t.Fatalf("%s: the message from %v delivered %d times", when, from, n)
			}
		}
	}
	dups("duplicates at the cap")
	now += int64(cfg.UnprovenTimeout) + 1 // the live connections expire into entries
	e.HandleTimeout(now)
	checkTimeWait(t, e)
	if st := e.Stats(); e.NumConns() != 0 || st.TimeWait != capU {
		t.Fatalf("after UnprovenTimeout: %d connections, %d entries (want %d)", e.NumConns(), st.TimeWait, capU)
	}
	dups("duplicates after expiry into TIME_WAIT")
	if _, err := e.Dial(now, netip.MustParseAddrPort("10.200.0.1:23600")); err != nil {
		t.Fatalf("a dial with unproven entries at their cap: %v", err)
	}
	now += e.timeWait() + 1
	e.HandleTimeout(now)
	send(capU) // the refused sender retries
	if st := e.Stats(); delivered[netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, capU}), 23600)] != 1 || st.MsgsDelivered != capU+1 {
		t.Fatalf("after TIME_WAIT: the retry delivered %d times, %d delivered in all", delivered[netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, capU}), 23600)], st.MsgsDelivered)
	}
}

// TestTimeWaitCapBoundsDials: with MaxConns 2 and MaxTimeWait 8, an application that
// dials, sends and closes proven connections in a loop leaves one entry per connection;
// the tenth dial is the last admitted and the eleventh fails with ErrTimeWaitFull (the
// entries are never evicted), and dialling works again once they expire.
func TestTimeWaitCapBoundsDials(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConns, cfg.MaxTimeWait = 2, 8
	p := newPair(t, cfg, 5000)
	for i := range 11 {
		id, err := p.a.Dial(p.now, p.bAddr)
		if i == 10 {
			if !errors.Is(err, ErrTimeWaitFull) {
				t.Fatalf("dial %d with %d entries: %v, want ErrTimeWaitFull", i+1, p.a.Stats().TimeWait, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("dial %d with %d entries: %v", i+1, p.a.Stats().TimeWait, err)
		}
		if _, err := p.a.Send(p.now, id, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := p.a.Close(p.now, id); err != nil {
			t.Fatal(err)
		}
		p.runUntil(t, p.now+1e9, func() bool { return p.a.NumConns() == 0 && p.b.NumConns() == 0 })
		checkTimeWait(t, p.a)
		checkTimeWait(t, p.b)
	}
	if sa, sb := p.a.Stats(), p.b.Stats(); sa.TimeWait != 10 || sb.MsgsDelivered != 10 || sb.TimeWait > 10 {
		t.Fatalf("%d entries at the dialler, %d at the acceptor, %d delivered", sa.TimeWait, sb.TimeWait, sb.MsgsDelivered)
	}
	p.now += p.a.timeWait() + 1
	if _, err := p.a.Dial(p.now, p.bAddr); err != nil {
		t.Fatalf("dial after TIME_WAIT: %v", err)
	}
}

// TestTimeWaitHonestPeerDuringFlood: in the daemon's configuration, a proven peer's
// connection keeps delivering every message exactly once, and the victim can still dial
// out, while spoofed one-packet messages hold the unproven TIME_WAIT share at its cap.
func TestTimeWaitHonestPeerDuringFlood(t *testing.T) {
	cfg := daemonEngineConfig()
	cfg.MaxConns, cfg.MaxTimeWait = 64, 512
	a, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)), daemonHooks(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), daemonHooks(nil))
	if err != nil {
		t.Fatal(err)
	}
	aAddr, bAddr := netip.MustParseAddrPort("10.250.0.1:23600"), netip.MustParseAddrPort("10.250.0.2:23600")
	got := map[[2]uint64]int{} // (receiver's connection, message) -> deliveries
	now := int64(1e9)
	link := newLink(a, b, aAddr, bAddr, got)
	id, err := a.Dial(now, bAddr)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("honest message")
	if _, err := a.Send(now, id, msg); err != nil {
		t.Fatal(err)
	}
	link.run(now)
	capU := cfg.MaxConns + cfg.MaxTimeWait/unprovenShare
	sent := 1
	for i := range 4 * capU {
		now += 1000
		pkt, from := spoofedWhole(t, i)
		b.HandlePacket(now, pkt, RxMeta{From: from})
		if i%16 == 0 {
			if _, err := a.Send(now, id, msg); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		link.run(now)
		checkTimeWait(t, b)
	}
	back, err := b.Dial(now, aAddr)
	if err != nil {
		t.Fatalf("victim's dial during the flood: %v", err)
	}
	if _, err := b.Send(now, back, msg); err != nil {
		t.Fatal(err)
	}
	link.run(now)
	honest := 0
	for k, n := range got {
		if n != 1 {
			t.Fatalf("message %v delivered %d times", k, n)
		}
		honest++
	}
	st := b.Stats()
	if honest != sent+1 || st.TimeWaitRefused == 0 || st.MsgsDelivered != uint64(sent+capU) {
		t.Fatalf("%d of %d honest messages delivered; victim: %d refused, %d delivered (want %d)",
			honest, sent+1, st.TimeWaitRefused, st.MsgsDelivered, sent+capU)
	}
	t.Logf("%d honest messages delivered during %d spoofed first contacts (%d refused)", honest, 4*capU, st.TimeWaitRefused)
}

// link joins two endpoints at fixed addresses; what either sends elsewhere (to spoofed
// sources) is dropped. Deliveries between them are counted in got.
type link struct {
	e    [2]*Endpoint
	addr [2]netip.AddrPort
	got  map[[2]uint64]int
	buf  []byte
}

func newLink(a, b *Endpoint, aAddr, bAddr netip.AddrPort, got map[[2]uint64]int) *link {
	return &link{e: [2]*Endpoint{a, b}, addr: [2]netip.AddrPort{aAddr, bAddr}, got: got, buf: make([]byte, 9000)}
}

// run moves datagrams and events at now until both endpoints are quiet.
func (l *link) run(now int64) {
	for moved := true; moved; {
		moved = false
		for i, e := range l.e {
			for {
				t, ok := e.PollTransmit(now, l.buf)
				if !ok {
					break
				}
				if t.To == l.addr[1-i] {
					l.e[1-i].HandlePacket(now, append([]byte(nil), l.buf[:t.N]...), RxMeta{From: l.addr[i]})
					moved = true
				}
			}
			for ev := range pending(e) {
				if ev.Kind == MessageReceived && ev.Peer == l.addr[1-i] {
					l.got[[2]uint64{uint64(ev.Conn), uint64(ev.MsgID)}]++
				}
			}
			if d, ok := e.NextTimeout(); ok && d <= now {
				e.HandleTimeout(now)
			}
		}
	}
}

// TestTimeWaitChargeMatchesHeap: TimeWaitCharge is what an entry really holds. With
// MaxConns 1 (each spoofed one-packet message evicts the last connection into TIME_WAIT,
// so nearly all the engine holds is entries) and MaxTimeWait large, the live heap grows
// by at most what the entries are charged plus 1 MiB, and by at least half of it (the
// charge is the entries' size, not a loose bound), at every 10,000 of 120,000 entries.
func TestTimeWaitChargeMatchesHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: measures the heap over 120,000 packets")
	}
	cfg := daemonEngineConfig()
	cfg.MaxConns, cfg.MaxTimeWait = 1, 1<<24
	e, err := NewEndpoint(cfg, nil2(), daemonHooks(nil))
	if err != nil {
		t.Fatal(err)
	}
	flood(e, 1e9, 120000, 10000, func(i int) ([]byte, netip.AddrPort) { return spoofedWhole(t, i) }, func(_ int, grown int64) {
		st := e.Stats()
		t.Logf("%d entries: heap +%d bytes (%d per entry), charged %d", st.TimeWait, grown, grown/int64(st.TimeWait), st.TimeWaitHeld)
		if grown > int64(st.TimeWaitHeld)+1<<20 || grown < int64(st.TimeWaitHeld/2) {
			t.Fatalf("%d entries: heap +%d bytes, charged %d", st.TimeWait, grown, st.TimeWaitHeld)
		}
	})
	checkTimeWait(t, e)
	runtime.KeepAlive(e)
}
