package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

func startShards(t *testing.T, mn *MemNet, addr string, n int, pick func([]byte, int) int, onRecv func(Received)) *Node {
	t.Helper()
	return startShardsCfg(t, mn, addr, n, pick, onRecv, nil)
}

func startShardsCfg(t *testing.T, mn *MemNet, addr string, n int, pick func([]byte, int) int, onRecv func(Received), mod func(*transport.Config)) *Node {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	socks := shardSockets(mn, ap, n, pick)
	cfg := testConfig(ap.Port())
	if mod != nil {
		mod(&cfg)
	}
	node, err := NewShards(cfg, socks, Options{OnReceive: onRecv, Seed: 11})
	return running(t, node, err)
}

// shardSockets is mn's n shard sockets at ap (pick steers datagrams to them) as Sockets.
func shardSockets(mn *MemNet, ap netip.AddrPort, n int, pick func(b []byte, n int) int) []Socket {
	var socks []Socket
	for _, s := range mn.Shards(ap, n, pick) {
		socks = append(socks, s)
	}
	return socks
}

// startSeeded starts a one-shard node with its own seed (peers with one seed would draw
// the same connection IDs, and so reach the same shard).
func startSeeded(t *testing.T, mn *MemNet, addr string, seed uint64, onRecv func(Received), mod func(*transport.Config)) *Node {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	cfg := testConfig(ap.Port())
	if mod != nil {
		mod(&cfg)
	}
	n, err := New(cfg, mn.Socket(ap), Options{OnReceive: onRecv, Seed: seed})
	return running(t, n, err)
}

// shardMsg is a message that says who sent it and its number, then pseudo-random bytes
// derived from both: the receiver checks every byte.
func shardMsg(from, seq, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, uint32(from))
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
	r := rand.New(rand.NewPCG(uint64(from), uint64(seq)))
	for i := 8; i < size; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestShardsExactlyOnce runs a node of two shards against four peers (three of one shard,
// one of two) in both directions: every message arrives once, byte for byte, and both
// shards carry connections. "steered" gives each datagram to the shard wire.Shard names
// (what the kernel's program does); "misrouted" gives every datagram to the other shard,
// which must hand it over; "mixed" misroutes every other datagram.
func TestShardsExactlyOnce(t *testing.T) {
	var flip sync.Mutex
	k := 0
	picks := map[string]func([]byte, int) int{
		"steered":   wire.Shard,
		"misrouted": func(b []byte, n int) int { return (wire.Shard(b, n) + 1) % n },
		"mixed": func(b []byte, n int) int {
			flip.Lock()
			defer flip.Unlock()
			k++
			return (wire.Shard(b, n) + k%2) % n
		},
	}
	for _, name := range []string{"steered", "misrouted", "mixed", "misrouted+auth"} {
		pick := picks[strings.TrimSuffix(name, "+auth")]
		var mod func(*transport.Config)
		if strings.HasSuffix(name, "+auth") {
			// Sealed packets: any shard admits a peer's session (its ID and key travel in
			// the trailer), each shard keeps its own replay windows.
			mod = func(c *transport.Config) { c.Auth.Mode, c.Auth.Key = seal.Auth, seal.Key{9} }
		}
		t.Run(name, func(t *testing.T) {
			const perPeer = 24
			mn := NewMemNet()
			type key struct{ from, seq int }
			var mu sync.Mutex
			got := map[key]int{}
			bad := []string{}
			recvd := make(chan struct{}, 1024)
			check := func(r Received) {
				from, seq := int(binary.BigEndian.Uint32(r.Data)), int(binary.BigEndian.Uint32(r.Data[4:]))
				mu.Lock()
				got[key{from, seq}]++
				if want := shardMsg(from, seq, len(r.Data)); !bytes.Equal(r.Data, want) {
					bad = append(bad, fmt.Sprintf("message %d of %d differs", seq, from))
				}
				mu.Unlock()
				recvd <- struct{}{}
			}
			hub := startShardsCfg(t, mn, "10.0.0.1:23600", 2, pick, check, mod)
			peers := []*Node{
				startSeeded(t, mn, "10.0.0.2:23600", 2, check, mod),
				startSeeded(t, mn, "10.0.0.3:23600", 3, check, mod),
				startSeeded(t, mn, "10.0.0.4:23600", 4, check, mod),
				startShardsCfg(t, mn, "10.0.0.5:23600", 2, pick, check, mod),
			}
			addrs := []string{"10.0.0.2:23600", "10.0.0.3:23600", "10.0.0.4:23600", "10.0.0.5:23600"}
			hubAddr := netip.MustParseAddrPort("10.0.0.1:23600")
			results := make(chan error, 2*perPeer*len(peers))
			done := func(r SendResult) { results <- r.Err }
			total := 0
			for seq := 0; seq < perPeer; seq++ {
				size := 100 + seq*4099 // one packet to 24 packets
				for i, p := range peers {
					if err := p.Send(hubAddr, shardMsg(i+1, seq, size), done); err != nil {
						t.Fatal(err)
					}
					if err := hub.Send(netip.MustParseAddrPort(addrs[i]), shardMsg(100+i, seq, size), done); err != nil {
						t.Fatal(err)
					}
					total += 2
				}
			}
			for i := 0; i < total; i++ {
				select {
				case err := <-results:
					if err != nil {
						t.Fatalf("send: %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("%d of %d messages completed", i, total)
				}
			}
			for i := 0; i < total; i++ {
				select {
				case <-recvd:
				case <-time.After(10 * time.Second):
					t.Fatalf("%d of %d messages delivered", i, total)
				}
			}
			time.Sleep(50 * time.Millisecond) // a duplicate would arrive now
			mu.Lock()
			defer mu.Unlock()
			if len(bad) > 0 {
				t.Fatal(bad)
			}
			for k, v := range got {
				if v != 1 {
					t.Errorf("message %d of %d delivered %d times", k.seq, k.from, v)
				}
			}
			if len(got) != total {
				t.Errorf("%d distinct messages delivered, want %d", len(got), total)
			}
			sh := hub.Shards()
			for i, s := range sh {
				if s.Engine.DataRecv == 0 || s.Engine.DataSent == 0 {
					t.Errorf("shard %d carried nothing: %+v", i, s)
				}
				t.Logf("shard %d: data sent %d received %d, handed out %d, adopted %d, dropped %d",
					i, s.Engine.DataSent, s.Engine.DataRecv, s.HandedOut, s.Adopted, s.HandoffDrops)
			}
			if mod != nil && hub.Stats().Auth.Failed+hub.Stats().Auth.Replayed != 0 {
				t.Errorf("auth: %+v", hub.Stats().Auth)
			}
			if name != "steered" && (sh[0].Adopted == 0 || sh[1].Adopted == 0 || sh[0].HandedOut == 0 || sh[1].HandedOut == 0) {
				t.Errorf("%s: shards handed nothing over: %+v", name, sh)
			}
			if name == "steered" && sh[0].HandedOut+sh[1].HandedOut != 0 {
				t.Errorf("steered: %d datagrams handed over", sh[0].HandedOut+sh[1].HandedOut)
			}
			var sum transport.Stats
			for _, s := range sh {
				AddStats(&sum, &s.Engine)
			}
			if st := hub.Stats(); st.DataRecv < sum.DataRecv || st.MsgsDelivered < sum.MsgsDelivered || st.MsgsDelivered != uint64(perPeer*len(peers)) {
				t.Errorf("Node.Stats %+v is not the shards' sum (%d messages delivered, want %d)", st.MsgsDelivered, sum.MsgsDelivered, perPeer*len(peers))
			}
		})
	}
}

// TestShardsForgedIDs sends forged datagrams to a node of two shards: connection IDs that
// name either shard but no connection, a live connection's ID from another address, and
// junk. Each is counted where it lands and nothing is delivered.
func TestShardsForgedIDs(t *testing.T) {
	mn := NewMemNet()
	delivered := make(chan Received, 16)
	hub := startShards(t, mn, "10.0.0.1:23600", 2, wire.Shard, func(r Received) { delivered <- r })
	peer := startNode(t, mn, "10.0.0.2:23600", nil)
	hubAddr := netip.MustParseAddrPort("10.0.0.1:23600")
	res := make(chan SendResult, 1)
	if err := peer.Send(hubAddr, []byte("real"), func(r SendResult) { res <- r }); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.Err != nil {
		t.Fatal(r.Err)
	}
	<-delivered
	conns := hub.Conns(nil)
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	live := uint64(conns[0].ID)
	owner := transport.ShardOfID(conns[0].ID, 2)
	before := hub.Shards()
	evil := mn.Socket(netip.MustParseAddrPort("10.6.6.6:23600"))
	ack := func(dst uint64) []byte {
		p := wire.Packet{Header: wire.Header{Type: wire.TypeAck, DstConn: dst, SrcConn: 0xbad}}
		p.Ack.SackWords = 1
		b := make([]byte, wire.MaxAckLen)
		n, err := p.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		return b[:n]
	}
	var pkts []Packet
	for s := 0; s < 2; s++ {
		for i := 0; i < 5; i++ {
			b := ack(uint64(0xdead0000 + i*2 + s)) // names shard s, held by nobody
			pkts = append(pkts, Packet{Buf: b, N: len(b), Addr: hubAddr})
		}
	}
	b := ack(live) // the live connection's ID, from the wrong address
	pkts = append(pkts, Packet{Buf: b, N: len(b), Addr: hubAddr})
	junk := []byte("0123456789012345678901234567890123456789")
	pkts = append(pkts, Packet{Buf: junk, N: len(junk), Addr: hubAddr})
	evil.WriteBatch(pkts)
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := hub.Shards()
		unk := [2]uint64{}
		for s := range after {
			unk[s] = after[s].Engine.UnknownConn - before[s].Engine.UnknownConn
		}
		viol := after[owner].Engine.ProtoViolations - before[owner].Engine.ProtoViolations
		js := wire.Shard(junk, 2)
		mal := after[js].Engine.Malformed - before[js].Engine.Malformed
		if unk == [2]uint64{5, 5} && viol == 1 && mal == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forged datagrams: unknown per shard %v (want 5, 5), violations on shard %d: %d (want 1), malformed on shard %d: %d (want 1)", unk, owner, viol, js, mal)
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-delivered:
		t.Fatalf("forged datagrams delivered a message: %q", r.Data)
	default:
	}
}

// TestAddStatsCoversEveryField: every counter of transport.Stats is summed.
func TestAddStatsCoversEveryField(t *testing.T) {
	var one transport.Stats
	var set func(v reflect.Value)
	set = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Array:
			for i := 0; i < v.Len(); i++ {
				set(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				set(v.Field(i))
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(1)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(1)
		case reflect.Float32, reflect.Float64:
			v.SetFloat(1)
		}
	}
	set(reflect.ValueOf(&one).Elem())
	var sum, two transport.Stats
	AddStats(&sum, &one)
	AddStats(&sum, &one)
	AddStats(&two, &one)
	AddStats(&two, &one)
	if sum != two || sum.PacketsRecv != 2 || sum.MalformedByKind[0] != 2 || sum.Auth == one.Auth {
		t.Fatalf("sum of two ones: %+v", sum)
	}
}

// TestShardOfPeerSpreads: peers that differ only in port, or only in the last address
// byte, spread over the shards (FNV's low bit alone would put 10.99.0.2:30000, :31000 and
// :32000 on one shard of two).
func TestShardOfPeerSpreads(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		seen := make([]int, n)
		for i := range 64 {
			seen[ShardOfPeer(netip.AddrPortFrom(netip.MustParseAddr("10.99.0.2"), uint16(30000+1000*i)), n)]++
			seen[ShardOfPeer(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 23600), n)]++
		}
		for s, k := range seen {
			if k < 128/n/2 {
				t.Errorf("n=%d: shard %d got %d of 128 peers", n, s, k)
			}
		}
	}
	if ShardOfPeer(netip.MustParseAddrPort("10.0.0.1:1"), 1) != 0 {
		t.Error("one shard: not 0")
	}
}

// TestShardsDecisionsMerged: with decision timing on, a sharded node's Decisions merges
// the histograms of the shards that carried traffic.
func TestShardsDecisionsMerged(t *testing.T) {
	mn := NewMemNet()
	ap := netip.MustParseAddrPort("10.0.0.1:23600")
	socks := shardSockets(mn, ap, 2, wire.Shard)
	hub, err := NewShards(testConfig(23600), socks, Options{Seed: 3, TimeDecisions: true, DecisionBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	hub.Start()
	defer hub.Shutdown(context.Background())
	res := make(chan SendResult, 4)
	var peers []netip.AddrPort
	for i := range 4 {
		a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(2 + i)}), 23600)
		startSeeded(t, mn, a.String(), uint64(20+i), nil, nil)
		peers = append(peers, a)
	}
	for _, p := range peers {
		if err := hub.Send(p, make([]byte, 256<<10), func(r SendResult) { res <- r }); err != nil {
			t.Fatal(err)
		}
	}
	for range peers {
		if r := <-res; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	d := hub.Decisions()
	var perShard uint64
	for _, s := range hub.shards {
		s.mu.Lock()
		if s.decisions.Hist.Count == 0 && s.ep.Stats().AcksRecv > 0 {
			t.Errorf("shard %d received ACKs but timed no decision", s.idx)
		}
		perShard += s.decisions.Hist.Count
		s.mu.Unlock()
	}
	if d.Hist.Count == 0 || d.Hist.Count != perShard || d.Overruns != d.Hist.Count || d.Budget != 1 {
		t.Fatalf("merged %+v, shards' counts sum to %d", d, perShard)
	}
}

// TestShardsHoldNoACKs: with several shards a request's connection and its answer's are
// mostly in different engines, so held completion ACKs (ack.complete_delay) are off; one
// shard keeps them.
func TestShardsHoldNoACKs(t *testing.T) {
	mn := NewMemNet()
	ap := netip.MustParseAddrPort("10.0.0.1:23600")
	cfg := testConfig(23600)
	cfg.Ack.CompleteDelay = 100_000
	socks := shardSockets(mn, ap, 2, wire.Shard)
	multi, err := NewShards(cfg, socks, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range multi.shards {
		if d := s.ep.Config().Ack.CompleteDelay; d != 0 {
			t.Errorf("shard %d holds completion ACKs %v, want 0", s.idx, d)
		}
	}
	one, err := New(cfg, mn.Socket(netip.MustParseAddrPort("10.0.0.9:23600")), Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if d := one.Config().Ack.CompleteDelay; d != 100_000 {
		t.Errorf("one shard holds %v, want 100us", d)
	}
}

// TestShardsSplitBundles: peers of one shard that hold their completion ACKs answer a
// node of two shards; each answer carries the request's ACK in its datagram (a bundle),
// and the ACK and the answer can belong to different shards of the node. The node splits
// them: every request completes, every answer arrives once, nothing is malformed or
// unknown, and some bundles were split across the shards.
func TestShardsSplitBundles(t *testing.T) {
	mn := NewMemNet()
	hold := func(c *transport.Config) { c.Ack.CompleteDelay = 1_000_000 }
	answers := make(chan Received, 1024)
	hub := startShards(t, mn, "10.0.0.1:23600", 2, wire.Shard, func(r Received) { answers <- r })
	var peers []*Node
	var addrs []netip.AddrPort
	for i := range 6 {
		addr := fmt.Sprintf("10.0.0.%d:23600", i+2)
		reqs := make(chan Received, 256)
		p := startSeeded(t, mn, addr, uint64(100+i), func(r Received) { reqs <- r }, hold)
		go func() { // answer from a goroutine of its own (OnReceive must not call back)
			for r := range reqs {
				p.Send(r.From, r.Data, nil)
			}
		}()
		t.Cleanup(func() { close(reqs) })
		peers = append(peers, p)
		addrs = append(addrs, netip.MustParseAddrPort(addr))
	}
	const rounds = 20
	results := make(chan error, rounds*len(peers))
	for k := range rounds {
		for i, a := range addrs {
			msg := []byte(fmt.Sprintf("request %d to peer %d", k, i))
			if err := hub.Send(a, msg, func(r SendResult) { results <- r.Err }); err != nil {
				t.Fatal(err)
			}
		}
		for range addrs { // one round at a time: each answer finds its ACK held
			select {
			case r := <-answers:
				if !strings.HasPrefix(string(r.Data), "request ") {
					t.Fatalf("answer %q", r.Data)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: an answer is missing", k)
			}
		}
	}
	for range rounds * len(peers) {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-answers:
		t.Fatalf("an extra answer: %q", r.Data)
	case <-time.After(20 * time.Millisecond):
	}
	var bundles uint64
	for _, p := range peers {
		bundles += p.Stats().BundlesSent
	}
	st := hub.Stats()
	var handed uint64
	for _, s := range hub.Shards() {
		handed += s.HandedOut
	}
	if bundles < rounds || st.BundlesRecv == 0 || st.Malformed != 0 || st.UnknownConn != 0 {
		t.Fatalf("peers sent %d bundles, the hub received %d; %d malformed, %d for unknown connections", bundles, st.BundlesRecv, st.Malformed, st.UnknownConn)
	}
	if handed == 0 {
		t.Fatal("no bundle was split across the hub's shards: the test did not exercise the split")
	}
}
