package smarttd_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/wire"
)

// shardPayload is message seq of sender from: both numbers, then bytes derived from them
// (the receiver rebuilds and compares every byte).
func shardPayload(from, seq int) []byte {
	r := rand.New(rand.NewPCG(uint64(from), uint64(seq)))
	size := 8 + r.IntN(300<<10)
	if seq%4 == 0 {
		size = 8 + r.IntN(200) // some one-packet messages
	}
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, uint32(from))
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
	for i := 8; i < size; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestE2EShards runs a daemon with shards: 2 in namespace A against three daemons in B
// (one of them with shards: 2 too), every one sending 40 messages to the hub and the hub
// 40 to each: every message arrives exactly once, byte for byte, in its sender's order;
// both hub shards send and receive data. With udp.shard_steering: hash the kernel spreads
// datagrams by 4-tuple, so shards hand each other what is not theirs (counted); with cbpf
// the kernel steers by connection ID. Then forged datagrams (connection IDs naming either
// shard but no connection, a live connection's ID from another port) are counted by the
// shard they name, and the summed metrics match the shards' counters.
func TestE2EShards(t *testing.T) {
	for _, steering := range []string{"cbpf", "hash"} {
		t.Run("steering="+steering, func(t *testing.T) { testE2EShards(t, steering) })
	}
}

func testE2EShards(t *testing.T, steering string) {
	const perPeer = 40
	tp := nstest.Pair(t)
	dir := tempDir(t)
	hubAddr := netip.AddrPortFrom(tp.AddrA, 23600)
	hub := startIn(t, tp.A, hubAddr, dir, func(c *smarttd.Config) {
		c.Shards, c.UDP.ShardSteering = 2, steering
	})
	if n := hub.Node.NumShards(); n != 2 {
		t.Fatalf("hub runs %d shards", n)
	}
	var peers []*smarttd.Daemon
	var addrs []netip.AddrPort
	for i := range 3 {
		a := netip.AddrPortFrom(tp.AddrB, uint16(30000+1000*i))
		// Fixed seeds fix the peers' connection IDs, and so the hub shard that accepts
		// each peer's connection (the high byte of its ID): these split them over both.
		// The hub's own connections go to the shard its peer's address hashes to
		// (daemon.ShardOfPeer): ports 30000, 31000, 32000 go to shards 1, 0, 0.
		peers = append(peers, startInSeed(t, tp.B, a, dir, func(c *smarttd.Config) {
			c.API.Socket = fmt.Sprintf("%s/p%d.sock", dir, i)
			c.Transport.EVS = 16
			if i == 2 {
				c.Shards, c.UDP.ShardSteering = 2, steering
			}
		}, uint64(1501+i)))
		addrs = append(addrs, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	hs := session(t, ctx, hub, 1)
	var ps []*client.Session
	for _, p := range peers {
		ps = append(ps, session(t, ctx, p, 1))
	}
	// Receivers: the hub expects perPeer from each peer, each peer perPeer from the hub.
	errc := make(chan error, 8)
	var wg sync.WaitGroup
	recv := func(s *client.Session, n int, senderOf func(netip.AddrPort) int) {
		defer wg.Done()
		next := map[int]int{}
		for range n {
			m, err := s.Recv(ctx)
			if err != nil {
				errc <- err
				return
			}
			if len(m.Data) < 8 {
				errc <- fmt.Errorf("a %d-byte message", len(m.Data))
				return
			}
			from, seq := int(binary.BigEndian.Uint32(m.Data)), int(binary.BigEndian.Uint32(m.Data[4:]))
			if want := senderOf(m.From); from != want {
				errc <- fmt.Errorf("message claims sender %d, came from %v (sender %d)", from, m.From, want)
				return
			}
			if seq != next[from] {
				errc <- fmt.Errorf("from sender %d: message %d, want %d (lost, duplicated or reordered)", from, seq, next[from])
				return
			}
			next[from]++
			if !bytes.Equal(m.Data, shardPayload(from, seq)) {
				errc <- fmt.Errorf("message %d of sender %d: bytes differ", seq, from)
				return
			}
			m.Release()
		}
	}
	wg.Add(1 + len(ps))
	go recv(hs, perPeer*len(peers), func(a netip.AddrPort) int {
		for i, x := range addrs {
			if x == a {
				return i + 1
			}
		}
		return -1
	})
	for _, s := range ps {
		go recv(s, perPeer, func(netip.AddrPort) int { return 0 })
	}
	// Each peer's first message goes alone, so its connection is the first ID its engine
	// draws (a fixed one, from its seed); then everything at once, both ways.
	var pend []*client.Pending
	for i, s := range ps {
		if _, err := s.Send(ctx, hubAddr, 1, shardPayload(i+1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for seq := range perPeer {
		for i, s := range ps {
			if seq > 0 {
				p, err := s.SendAsync(hubAddr, 1, shardPayload(i+1, seq))
				if err != nil {
					t.Fatal(err)
				}
				pend = append(pend, p)
			}
			q, err := hs.SendAsync(addrs[i], 1, shardPayload(0, seq))
			if err != nil {
				t.Fatal(err)
			}
			pend = append(pend, q)
		}
	}
	for i, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Nothing more may arrive (a duplicate would, now).
	qctx, qcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if m, err := hs.Recv(qctx); err == nil {
		t.Fatalf("an extra message (%d bytes from %v)", len(m.Data), m.From)
	}
	qcancel()

	sh := hub.Node.Shards()
	var handed, adopted uint64
	for i, s := range sh {
		t.Logf("hub shard %d: conns %d, data sent %d received %d, msgs delivered %d, handed out %d, adopted %d, dropped %d",
			i, s.Conns, s.Engine.DataSent, s.Engine.DataRecv, s.Engine.MsgsDelivered, s.HandedOut, s.Adopted, s.HandoffDrops)
		if s.Engine.DataSent == 0 || s.Engine.DataRecv == 0 {
			t.Errorf("hub shard %d sent %d and received %d data packets: both shards must carry traffic", i, s.Engine.DataSent, s.Engine.DataRecv)
		}
		handed += s.HandedOut
		adopted += s.Adopted + s.HandoffDrops + s.HandoffDropsUnknown
	}
	if handed != adopted {
		t.Errorf("%d datagrams handed out, %d adopted or dropped", handed, adopted)
	}
	if steering == "hash" && handed == 0 {
		t.Error("hash steering: no datagram reached the wrong shard (the hand-over path went untested)")
	}

	// Forged datagrams from B: IDs that name shard 0 or 1 but no connection, and a live
	// connection's ID from the wrong port.
	conns := hub.Node.Conns(nil)
	var live transport.ConnInfo
	for _, c := range conns {
		if c.Peer.Addr() == tp.AddrB {
			live = c
		}
	}
	if live.ID == 0 {
		t.Fatal("no live connection to forge")
	}
	owner := transport.ShardOfID(live.ID, 2)
	before := hub.Node.Shards()
	ack := func(dst uint64) []byte {
		p := wire.Packet{Header: wire.Header{Type: wire.TypeAck, DstConn: dst, SrcConn: 0xbadc0ffee}}
		p.Ack.SackWords = 1
		b := make([]byte, wire.MaxAckLen)
		n, err := p.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		return b[:n]
	}
	const forgedPerShard = 5
	if err := tp.B.Do(func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: tp.AddrB.AsSlice()})
		if err != nil {
			return err
		}
		defer c.Close()
		dst := net.UDPAddrFromAddrPort(hubAddr)
		for s := range 2 {
			for i := range forgedPerShard {
				if _, err := c.WriteTo(ack(uint64(0x5eed0000+2*i+s)), dst); err != nil {
					return err
				}
			}
		}
		_, err = c.WriteTo(ack(uint64(live.ID)), dst)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := hub.Node.Shards()
		unk := [2]uint64{after[0].Engine.UnknownConn - before[0].Engine.UnknownConn, after[1].Engine.UnknownConn - before[1].Engine.UnknownConn}
		viol := after[owner].Engine.ProtoViolations - before[owner].Engine.ProtoViolations
		if unk == [2]uint64{forgedPerShard, forgedPerShard} && viol == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forged datagrams: unknown-connection counts per shard %v, want [%d %d]; violations on shard %d: %d, want 1",
				unk, forgedPerShard, forgedPerShard, owner, viol)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Node.Stats and the metrics are the shards' sums.
	var sumRecv, sumMsgs uint64
	for _, s := range hub.Node.Shards() {
		sumRecv += s.Engine.PacketsRecv
		sumMsgs += s.Engine.MsgsDelivered
	}
	if st := hub.Node.Stats(); st.MsgsDelivered != sumMsgs || sumMsgs != perPeer*uint64(len(peers)) {
		t.Errorf("Node.Stats delivered %d, shards %d, want %d", st.MsgsDelivered, sumMsgs, perPeer*len(peers))
	}
	if got := metric(t, registry(hub), "smartt_messages_total", "result", "delivered"); got != float64(perPeer*len(peers)) {
		t.Errorf("smartt_messages_total{result=delivered} = %v, want %d", got, perPeer*len(peers))
	}
	for i := range 2 {
		if got := metric(t, registry(hub), "smartt_shard_packets_total", "shard", fmt.Sprint(i), "dir", "rx"); got == 0 {
			t.Errorf("smartt_shard_packets_total{shard=%d,dir=rx} = 0", i)
		}
	}
}
