package daemon

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// TestHandoffFloodKeepsConnectionsQueue: with hash steering, shard 0's socket receives a
// flood of datagrams naming shard 1 (unknown connection IDs, DstConn 0 first contacts)
// beyond shard 1's whole hand-off queue; the datagrams of shard 1's live connection (and
// a returned header naming it) still get into its queue, and the flood's drops are
// counted apart. (The node is not started: nothing drains the queues.)
func TestHandoffFloodKeepsConnectionsQueue(t *testing.T) {
	mn := NewMemNet()
	ap := netip.MustParseAddrPort("10.0.0.1:23600")
	socks := shardSockets(mn, ap, 2, wire.Shard)
	const queue = 64
	n, err := NewShards(testConfig(ap.Port()), socks, Options{Seed: 11, ShardQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := n.shards[0], n.shards[1]
	live := uint64(0x1234_5678_9abc_de01) // names shard 1
	s1.setKnown(transport.ConnID(live), true)
	pkt := func(dst, src uint64, flags wire.Flags) Packet {
		b := make([]byte, wire.DataHdrLen)
		b[0], b[1] = wire.Version<<4|byte(wire.TypeData), byte(flags)
		binary.BigEndian.PutUint64(b[8:], dst)
		binary.BigEndian.PutUint64(b[16:], src)
		return Packet{Buf: b, N: len(b), Addr: netip.MustParseAddrPort("10.6.6.6:23600")}
	}
	for i := 0; i < 4*queue; i++ {
		p := pkt(uint64(i)<<8|1, 7, 0) // unknown IDs naming shard 1
		if i%2 == 1 {
			p = pkt(0, 1<<56|uint64(i), 0) // first contacts naming shard 1
		}
		s0.handOff(s1, &p)
	}
	honest := 0
	for i := 0; i < queue/2; i++ {
		p := pkt(live, 99, 0)
		if i == 0 {
			p = pkt(42, live, wire.FlagTrimmed|wire.FlagReturned) // a returned header of ours
		}
		s0.handOff(s1, &p)
		honest++
	}
	st := n.Shards()[1]
	if st.HandoffDrops != 0 || len(s1.inbox) != honest {
		t.Fatalf("the live connection's datagrams: %d dropped, %d of %d queued", st.HandoffDrops, len(s1.inbox), honest)
	}
	if st.HandoffDropsUnknown != 4*queue-queue/4 || len(s1.inboxUnknown) != queue/4 {
		t.Fatalf("flood: %d dropped (want %d), %d queued (want %d)", st.HandoffDropsUnknown, 4*queue-queue/4, len(s1.inboxUnknown), queue/4)
	}
	s1.setKnown(transport.ConnID(live), false)
	p := pkt(live, 99, 0)
	s0.handOff(s1, &p)
	if len(s1.inbox) != honest || len(s1.inboxUnknown) != queue/4 || n.Shards()[1].HandoffDropsUnknown != 4*queue-queue/4+1 {
		t.Fatal("a closed connection's datagram was queued as a live one's")
	}
}
