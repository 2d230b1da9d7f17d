package transport

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"smartt/transport/wire"
)

// TestControlEVs: every ACK leaves on the EV of the data packet it answers and a NACK on
// the EV of the trimmed packet, so a sender spraying EVs gets its acknowledgements back
// over as many paths (a connection's ACKs used to share one EV, and so one path: a failed
// link on it cut the connection off from every ACK). CLOSE retries each take a new EV.
func TestControlEVs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LB = "ops" // a random EV per packet
	cfg.TrimDSCP = 46
	a, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	p := newPair(t, cfg, 0)
	buf, rbuf := make([]byte, 70000), make([]byte, 70000)
	now := int64(1000)
	id, _ := a.Dial(now, p.bAddr)
	if _, err := a.Send(now, id, bytes.Repeat([]byte{1}, 40*cfg.MTU)); err != nil {
		t.Fatal(err)
	}
	var pkt wire.Packet
	evs := map[uint16]bool{}
	acks, nacks := 0, 0
	for i := 0; ; i++ {
		tx, ok := a.PollTransmit(now, buf)
		if !ok {
			break
		}
		if tx.Type != wire.TypeData {
			continue
		}
		evs[tx.EV] = true
		meta := RxMeta{From: p.aAddr, RxTime: now}
		if i%5 == 4 {
			meta.DSCP = cfg.TrimDSCP // the fabric trimmed it
		}
		b.HandlePacket(now, buf[:tx.N], meta)
		for {
			rt, ok := b.PollTransmit(now, rbuf)
			if !ok {
				break
			}
			if err := pkt.Decode(rbuf[:rt.N]); err != nil {
				t.Fatal(err)
			}
			switch rt.Type {
			case wire.TypeAck:
				acks++
				if rt.EV != tx.EV || pkt.EV != tx.EV {
					t.Fatalf("ACK of a packet on EV %d left on EV %d (header %d)", tx.EV, rt.EV, pkt.EV)
				}
			case wire.TypeNack:
				nacks++
				if rt.EV != tx.EV || pkt.EV != tx.EV {
					t.Fatalf("NACK of a packet trimmed on EV %d left on EV %d (header %d)", tx.EV, rt.EV, pkt.EV)
				}
			}
			a.HandlePacket(now, rbuf[:rt.N], RxMeta{From: p.bAddr, RxTime: now})
		}
		now += 1000
	}
	if sent := a.Stats().MsgsSent; sent != 1 {
		t.Fatalf("%d messages sent, want 1", sent)
	}
	if acks < 20 || nacks < 5 || len(evs) < 10 {
		t.Fatalf("%d ACKs and %d NACKs over %d data EVs; want at least 20, 5 and 10", acks, nacks, len(evs))
	}

	// CLOSE is resent every RTO until answered: each try on another EV.
	if err := a.Close(now, id); err != nil {
		t.Fatal(err)
	}
	closeEVs := map[uint16]bool{}
	for try := 0; try < 3; try++ {
		sent := false
		for {
			tx, ok := a.PollTransmit(now, buf)
			if !ok {
				break
			}
			if tx.Type == wire.TypeClose {
				closeEVs[tx.EV], sent = true, true
			}
		}
		if !sent {
			t.Fatalf("try %d: no CLOSE sent", try)
		}
		d, _ := a.NextTimeout()
		now = d
		a.HandleTimeout(now)
	}
	if len(closeEVs) != 3 {
		t.Fatalf("3 CLOSE tries went out on %d distinct EVs", len(closeEVs))
	}
}
