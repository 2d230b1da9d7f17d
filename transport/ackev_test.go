package transport

import (
	"bytes"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// TestControlEVs: a connection's control packets (ACKs, NACKs, CLOSE retries) each take
// the next EV of a per-connection rotation, so they spread over the reverse paths even
// when the data keeps one EV (ECMP). They used to share one EV, and so one path: a failed
// link on it cut the connection off from every ACK until routing converged.
func TestControlEVs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LB = "ecmp" // one EV for all data
	cfg.TrimDSCP = 46
	p := newPair(t, cfg, 0) // stepped by hand below
	a, b := p.a, p.b
	buf, rbuf := make([]byte, 70000), make([]byte, 70000)
	now := int64(1000)
	id, _ := a.Dial(now, p.bAddr)
	if _, err := a.Send(now, id, bytes.Repeat([]byte{1}, 40*cfg.MTU)); err != nil {
		t.Fatal(err)
	}
	var pkt wire.Packet
	evs, ctrlEVs := map[uint16]bool{}, map[uint16]bool{}
	acks, nacks := 0, 0
	last := -1
	next := func(ev uint16) {
		if last >= 0 && int(ev) != (last+1)%cfg.EVS {
			t.Fatalf("control packet on EV %d after one on EV %d; want the next EV", ev, last)
		}
		last = int(ev)
		ctrlEVs[ev] = true
	}
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
			if pkt.EV != rt.EV {
				t.Fatalf("%v: header EV %d, transmit EV %d", rt.Type, pkt.EV, rt.EV)
			}
			switch rt.Type {
			case wire.TypeAck:
				acks++
			case wire.TypeNack:
				nacks++
			}
			next(rt.EV)
			a.HandlePacket(now, rbuf[:rt.N], RxMeta{From: p.bAddr, RxTime: now})
		}
		now += 1000
	}
	if sent := a.Stats().MsgsSent; sent != 1 {
		t.Fatalf("%d messages sent, want 1", sent)
	}
	if acks < 20 || nacks < 5 || len(evs) != 1 || len(ctrlEVs) != acks+nacks {
		t.Fatalf("%d ACKs and %d NACKs on %d EVs, data on %d; want at least 20 and 5, each on its own EV, data on one",
			acks, nacks, len(ctrlEVs), len(evs))
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

// ack.echo_ev (htsim's rule): each ACK travels on the EV of the data packet
// that triggered it, so the ACK takes a path the sender's balancer chose.
func TestAckEchoEV(t *testing.T) {
	for _, echo := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.LB = "ops" // a random EV per data packet
		cfg.Ack.EchoEV = echo
		p := newPair(t, cfg, 0)
		a, b := p.a, p.b
		buf, rbuf := make([]byte, 70000), make([]byte, 70000)
		now := int64(1000)
		id, _ := a.Dial(now, p.bAddr)
		if _, err := a.Send(now, id, bytes.Repeat([]byte{1}, 30*cfg.MTU)); err != nil {
			t.Fatal(err)
		}
		acks, same := 0, 0
		for {
			tx, ok := a.PollTransmit(now, buf)
			if !ok {
				break
			}
			if tx.Type != wire.TypeData {
				continue
			}
			b.HandlePacket(now, buf[:tx.N], RxMeta{From: p.aAddr, RxTime: now})
			for {
				rt, ok := b.PollTransmit(now, rbuf)
				if !ok {
					break
				}
				if rt.Type == wire.TypeAck {
					acks++
					if rt.EV == tx.EV {
						same++
					}
				}
				a.HandlePacket(now, rbuf[:rt.N], RxMeta{From: p.bAddr, RxTime: now})
			}
			now += 1000
		}
		if acks < 20 {
			t.Fatalf("echo %v: %d ACKs, want at least 20", echo, acks)
		}
		if echo && same != acks {
			t.Fatalf("echo_ev: %d of %d ACKs on their data packet's EV, want all", same, acks)
		}
		if !echo && same > acks/4 {
			t.Fatalf("rotation: %d of %d ACKs on their data packet's EV", same, acks)
		}
	}
}
