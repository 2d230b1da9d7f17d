package transport

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// ecKey names a packet's block: message and block's first byte.
type ecKey struct{ msg, off uint32 }

// ecBlockOf returns the block a DATA datagram belongs to (data or parity) and whether
// it is a first transmission.
func ecBlockOf(cfg *Config, b []byte) (ecKey, bool, bool) {
	var p wire.Packet
	if p.Decode(b) != nil || p.Type != wire.TypeData {
		return ecKey{}, false, false
	}
	d := &p.Data
	if p.Flags&wire.FlagEC != 0 {
		return ecKey{d.MsgID, d.Offset}, true, true
	}
	k, _ := cfg.ECBlock()
	span := uint32(k * cfg.MTU)
	return ecKey{d.MsgID, d.Offset / span * span}, p.Flags&wire.FlagRetx == 0, true
}

// TestECPropertyExactOnce: random messages, random loss. Within the parity's reach (at
// most M of each block's K+M packets lost) every message completes exactly once,
// byte-exact, and nothing is retransmitted; beyond it (any loss) the ordinary detectors
// resend what the parity could not rebuild, and every message is still exact.
func TestECPropertyExactOnce(t *testing.T) {
	for _, c := range []struct {
		mtu, k, m int
		capped    bool
		lossPct   int
	}{
		{4096, 20, 1, true, 30},
		{1500, 8, 3, true, 40}, // shards straddle 16 KiB receive chunks
		{4096, 4, 2, true, 50},
		{4096, 20, 1, false, 5},
		{1500, 8, 2, false, 8},
	} {
		for seed := uint64(1); seed <= 4; seed++ {
			name := fmt.Sprintf("mtu%d-k%d-m%d-capped%v-loss%d-seed%d", c.mtu, c.k, c.m, c.capped, c.lossPct, seed)
			t.Run(name, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.MTU, cfg.Recovery.Mode, cfg.Recovery.K, cfg.Recovery.M = c.mtu, RecoveryEC, c.k, c.m
				cfg.CC = "fixed"
				p := newPair(t, cfg, 5000)
				rng := rand.New(rand.NewPCG(seed, 99))
				var msgs [][]byte
				for i := 0; i < 12; i++ {
					var n int
					switch rng.IntN(4) {
					case 0:
						n = 1 + rng.IntN(c.mtu)
					case 1:
						n = c.k * c.mtu * (1 + rng.IntN(3)) // whole blocks
					default:
						n = 1 + rng.IntN(400<<10)
					}
					msgs = append(msgs, patterned(n, i+int(seed)))
				}
				lost := map[ecKey]int{}
				var ser serializer
				p.extra = func(from *Endpoint, b []byte) int64 { return ser.at(p.now) }
				p.drop = func(from *Endpoint, b []byte) bool {
					if from != p.a {
						return false
					}
					key, first, ok := ecBlockOf(&cfg, b)
					if !ok || rng.IntN(100) >= c.lossPct {
						return false
					}
					if c.capped && (!first || lost[key] >= c.m) {
						return false
					}
					lost[key]++
					return true
				}
				recoveryRun(t, p, msgs)
				s, r := p.a.Stats(), p.b.Stats()
				retx := s.RetxSack + s.RetxNack + s.RetxTimeout
				if r.MsgsDelivered != uint64(len(msgs)) {
					t.Fatalf("%d messages delivered, want %d", r.MsgsDelivered, len(msgs))
				}
				if r.RecvBuffered != 0 {
					t.Fatalf("%d bytes still held after every message was delivered", r.RecvBuffered)
				}
				total := 0
				for _, v := range lost {
					total += v
				}
				t.Logf("lost %d packets, rebuilt %d, resent %d, parity %d", total, r.ECRebuilt, retx, s.ParitySent)
				if c.capped && retx != 0 {
					t.Fatalf("%d retransmissions with losses within the parity's reach", retx)
				}
				if c.capped && total > 0 && r.ECRebuilt == 0 {
					t.Fatalf("nothing rebuilt")
				}
			})
		}
	}
}

// TestECRebuildsMLossesPerBlock: M lost data packets in every block are rebuilt from the
// block's parity without a retransmission round trip; one more is not, and is resent.
func TestECRebuildsMLossesPerBlock(t *testing.T) {
	for _, extra := range []int{0, 1} {
		cfg := DefaultConfig()
		cfg.Recovery.Mode, cfg.Recovery.K, cfg.Recovery.M = RecoveryEC, 10, 2
		cfg.CC = "fixed"
		p := newPair(t, cfg, 5000)
		msg := patterned(10*10*cfg.MTU, 7) // 10 blocks
		var ser serializer
		p.extra = func(from *Endpoint, b []byte) int64 { return ser.at(p.now) }
		p.drop = func(from *Endpoint, b []byte) bool {
			var q wire.Packet
			if from != p.a || q.Decode(b) != nil || q.Type != wire.TypeData || q.Flags&(wire.FlagEC|wire.FlagRetx) != 0 {
				return false
			}
			i := int(q.Data.Offset) / cfg.MTU % 10
			return i == 3 || i == 7 || (extra > 0 && i == 5)
		}
		recoveryRun(t, p, [][]byte{msg})
		s, r := p.a.Stats(), p.b.Stats()
		retx := s.RetxSack + s.RetxNack + s.RetxTimeout
		t.Logf("extra=%d: rebuilt %d, resent %d (sack %d, timeout %d)", extra, r.ECRebuilt, retx, s.RetxSack, s.RetxTimeout)
		switch {
		case extra == 0 && (r.ECRebuilt != 20 || retx != 0):
			t.Errorf("2 losses per block: rebuilt %d (want 20), resent %d (want 0)", r.ECRebuilt, retx)
		case extra == 1 && (retx == 0 || retx > 30):
			t.Errorf("3 losses per block: resent %d, want some, at most the 30 lost", retx)
		}
		if s.ParitySent != 20 {
			t.Errorf("%d parity packets sent, want 20", s.ParitySent)
		}
	}
}

// stepAny is throughputRig.step for a sender that also sends packets the receiver does
// not answer at once (parity): it moves one datagram and the ACK it caused, if any.
func (r *throughputRig) stepAny() {
	r.now += 40
	t, ok := r.snd.PollTransmit(r.now, r.pkt)
	if !ok {
		r.tb.Fatalf("sender stalled at %d", r.now)
	}
	r.rcv.HandlePacket(r.now, r.pkt[:t.N], RxMeta{From: r.sAddr})
	if a, ok := r.rcv.PollTransmit(r.now, r.ack); ok {
		r.snd.HandlePacket(r.now, r.ack[:a.N], RxMeta{From: r.rAddr})
	}
	for {
		ev, ok := r.snd.PollEvent()
		if !ok {
			break
		}
		if ev.Kind == MessageSent {
			r.queued--
		}
	}
	for {
		ev, ok := r.rcv.PollEvent()
		if !ok {
			break
		}
		if ev.Kind == MessageReceived {
			r.pool.Put(ev.Data)
		}
	}
	r.refill()
}

// TestECAllocatesNothingPerPacket: coding data and sending parity, and receiving both,
// allocate nothing per packet in steady state (no loss: nothing to rebuild).
func TestECAllocatesNothingPerPacket(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Recovery.Mode = RecoveryEC
	r := newThroughputRig(t, 1<<20, cfg)
	for range 10000 {
		r.stepAny()
	}
	if a := testing.AllocsPerRun(2560, r.stepAny); a > 0.05 {
		t.Errorf("%.3f allocations per packet", a)
	}
	s := r.snd.Stats()
	if s.ParitySent == 0 || s.MsgsSent == 0 {
		t.Fatalf("parity %d, messages %d", s.ParitySent, s.MsgsSent)
	}
}
