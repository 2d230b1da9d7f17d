package transport

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
	"github.com/smartt-transport/smartt/transport/wire"
)

// ecKey names a packet's block: message and block's first byte.
type ecKey struct{ msg, off uint32 }

// isFirstData reports whether b is a message's first data packet (offset 0, not parity).
func isFirstData(b []byte) bool {
	var p wire.Packet
	return p.Decode(b) == nil && p.Type == wire.TypeData && p.Flags&wire.FlagEC == 0 && p.Data.Offset == 0
}

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

// ecWarm opens p's connection with one small message, delivered before it returns: the
// receiver keeps parity only from a peer that proved its address.
func ecWarm(t *testing.T, p *pair) {
	t.Helper()
	recoveryRun(t, p, [][]byte{patterned(100, 77)})
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
		reorder   bool // sprayed over 8 paths of very different delays
		trim      bool // losses are trims (the header arrives) instead of drops
	}{
		{4096, 20, 1, true, 30, false, false},
		{1500, 8, 3, true, 40, false, false}, // shards straddle 16 KiB receive chunks
		{4096, 4, 2, true, 50, false, false},
		{4096, 20, 1, false, 5, false, false},
		{1500, 8, 2, false, 8, false, false},
		{4096, 8, 2, false, 5, true, false},  // parity overtakes data: late originals arrive rebuilt
		{4096, 8, 2, true, 40, false, true},  // trims within reach: no NACK
		{4096, 8, 2, false, 10, false, true}, // beyond: NACKs of blocks beyond repair
	} {
		for seed := uint64(1); seed <= 4; seed++ {
			name := fmt.Sprintf("mtu%d-k%d-m%d-capped%v-loss%d-reorder%v-trim%v-seed%d", c.mtu, c.k, c.m, c.capped, c.lossPct, c.reorder, c.trim, seed)
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
				if c.reorder {
					cfg.LB = "ops"
					p = newPair(t, cfg, 5000)
					p.extra = pathsDelay(p, 8, 3000)
				}
				ecWarm(t, p)
				p.drop = func(from *Endpoint, b []byte) bool {
					if from != p.a {
						return false
					}
					key, first, ok := ecBlockOf(&cfg, b)
					if !ok || rng.IntN(100) >= c.lossPct {
						return false
					}
					if c.capped && isFirstData(b) {
						return false // parity never opens a message: its first packet arrives
					}
					if c.capped && (!first || lost[key] >= c.m) {
						return false
					}
					lost[key]++
					if c.trim {
						h := append([]byte(nil), b[:wire.DataHdrLen]...)
						h[1] |= byte(wire.FlagTrimmed)
						p.inflight = append(p.inflight, flight{at: p.now + p.delay, to: p.b, from: p.aAddr, data: h})
					}
					return true
				}
				recoveryRun(t, p, msgs)
				s, r := p.a.Stats(), p.b.Stats()
				retx := s.RetxSack + s.RetxNack + s.RetxTimeout
				if r.MsgsDelivered != uint64(len(msgs))+1 {
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
				if c.capped && (retx != 0 || r.NacksSent != 0) {
					t.Fatalf("%d retransmissions, %d NACKs with losses within the parity's reach", retx, r.NacksSent)
				}
				if c.capped && total > 0 && r.ECRebuilt == 0 {
					t.Fatalf("nothing rebuilt")
				}
			})
		}
	}
}

// ecConfig is the default config coding blocks of k data and m parity packets, with a
// fixed window.
func ecConfig(k, m int) Config {
	cfg := DefaultConfig()
	cfg.Recovery.Mode, cfg.Recovery.K, cfg.Recovery.M = RecoveryEC, k, m
	cfg.CC = "fixed"
	return cfg
}

// ec10x2Pair returns a pair coding blocks of 10 data and 2 parity packets at a fixed
// window, its packets serialised by ser, warmed up by one message; and its config.
func ec10x2Pair(t *testing.T) (cfg Config, p *pair, ser *serializer) {
	cfg = ecConfig(10, 2)
	p = newPair(t, cfg, 5000)
	ser = new(serializer)
	p.extra = func(from *Endpoint, b []byte) int64 { return ser.at(p.now) }
	ecWarm(t, p)
	return cfg, p, ser
}

// TestECRebuildsMLossesPerBlock: M lost data packets in every block are rebuilt from the
// block's parity without a retransmission round trip; one more is not, and is resent.
func TestECRebuildsMLossesPerBlock(t *testing.T) {
	for _, extra := range []int{0, 1} {
		cfg, p, _ := ec10x2Pair(t)
		msg := patterned(10*10*cfg.MTU, 7) // 10 blocks
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
		if s.ParitySent != 22 {
			t.Errorf("%d parity packets sent, want 22 (2 of the warm-up message)", s.ParitySent)
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
	for ev := range pending(r.snd) {
		if ev.Kind == MessageSent {
			r.queued--
		}
	}
	for ev := range pending(r.rcv) {
		if ev.Kind == MessageReceived {
			r.pool.Put(ev.Data)
		}
	}
	r.refill()
}

// TestECAllocatesNothingPerPacket: coding data and sending parity, and receiving both,
// allocate nothing per packet in steady state (no loss: nothing to rebuild).
func TestECAllocatesNothingPerPacket(t *testing.T) {
	a, s := steadyAllocs(t, RecoveryEC)
	if a > 0.05 {
		t.Errorf("%.3f allocations per packet", a)
	}
	if s.ParitySent == 0 || s.MsgsSent == 0 {
		t.Fatalf("parity %d, messages %d", s.ParitySent, s.MsgsSent)
	}
}

// BenchmarkECOverhead measures what each recovery costs on the wire: a transfer of 8
// messages of 1 MiB over a path losing data-direction packets at random (seeded), per
// op. Metrics: wire/msg is every byte the sender put on the wire in the data direction
// (headers, data, parity, retransmissions) over the message bytes; parity/msg the parity
// payload alone; retx/pkt retransmissions per data packet; rebuilt/op data packets the
// receiver rebuilt from parity. The ideal (headers only) is 1 + 64/4096 = 1.0156.
func BenchmarkECOverhead(b *testing.B) {
	type mode struct {
		name string
		set  func(*Config)
	}
	modes := []mode{
		{"sack", func(c *Config) {}},
		{"ec-k20-m1", func(c *Config) { c.Recovery.Mode, c.Recovery.K, c.Recovery.M = RecoveryEC, 20, 1 }},
		{"ec-k10-m2", func(c *Config) { c.Recovery.Mode, c.Recovery.K, c.Recovery.M = RecoveryEC, 10, 2 }},
	}
	for _, loss := range []float64{0, 0.01, 0.03} {
		for _, md := range modes {
			b.Run(fmt.Sprintf("loss=%g/%s", loss, md.name), func(b *testing.B) {
				var wire, msgBytes, parity, retx, data, rebuilt uint64
				for i := 0; i < b.N; i++ {
					cfg := DefaultConfig()
					cfg.CC = "fixed"
					md.set(&cfg)
					p := newPair(b, cfg, 5000)
					rng := rand.New(rand.NewPCG(uint64(i)+1, 7))
					var ser serializer
					p.extra = func(from *Endpoint, d []byte) int64 { return ser.at(p.now) }
					p.drop = func(from *Endpoint, d []byte) bool {
						if from != p.a {
							return false
						}
						wire += uint64(len(d))
						return rng.Float64() < loss
					}
					id, _ := p.a.Dial(0, p.bAddr)
					for k := 0; k < 8; k++ {
						p.a.Send(0, id, make([]byte, 1<<20))
					}
					msgBytes += 8 << 20
					got := 0
					p.runUntil(b, 1e11, func() bool {
						for ev := range pending(p.b) {
							if ev.Kind == MessageReceived {
								got++
							}
						}
						return got == 8
					})
					s, r := p.a.Stats(), p.b.Stats()
					parity += s.ParityBytes
					retx += s.RetxSack + s.RetxNack + s.RetxTimeout
					data += s.DataSent
					rebuilt += r.ECRebuilt
				}
				b.ReportMetric(float64(wire)/float64(msgBytes), "wire/msg")
				b.ReportMetric(float64(parity)/float64(msgBytes), "parity/msg")
				b.ReportMetric(float64(retx)/float64(data), "retx/pkt")
				b.ReportMetric(float64(rebuilt)/float64(b.N), "rebuilt/op")
			})
		}
	}
}

// TestECParityUntrusted: parity is kept only as the endpoint's own code would send it:
// never for a message none of whose data arrived, never of another block shape (K or M),
// never beyond the message or the receive window, never contradicting a block already
// held; what is kept is charged to the receive budget and returned once the message is
// delivered, and the real parity rebuilds a lost packet.
func TestECParityUntrusted(t *testing.T) {
	cfg := ecConfig(4, 2)
	r := newForgeRig(t, cfg)
	mtu := cfg.MTU
	next := patterned(6*mtu+100, 2) // 2 blocks: 4 + 3 data packets
	psn := r.last.PSN + 1
	d := wire.Data{PSN: psn, AckFloor: r.last.AckFloor, MsgID: r.next, MsgLen: uint32(len(next)),
		PayloadLen: uint16(mtu), StreamStart: r.stream, TxTime: r.p.now}
	parity := func(first uint32, off, shard int, k, m, idx uint8, crc uint32, payload []byte) {
		q := d
		q.PSN, q.Offset, q.PayloadLen, q.AckFloor, q.EC = first, uint32(off), uint16(shard), crc, wire.EC{K: k, M: m, Index: idx}
		if payload == nil {
			payload = make([]byte, shard)
		}
		r.inject(wire.FlagEC, q, payload)
	}
	s0 := r.p.b.Stats()
	parity(psn, 0, mtu, 4, 2, 0, 0, nil) // the message is not open: parity never opens one
	r.inject(0, d, next[:mtu])           // its first packet: open
	held := r.p.b.Stats().RecvBuffered
	parity(psn, 0, mtu, 8, 2, 0, 0, nil) // K is not the configured 4
	parity(psn, 0, mtu, 4, 3, 0, 0, nil) // M is not the configured 2
	parity(psn, 0, mtu, 2, 2, 0, 0, nil) // a short block that does not reach the end
	parity(psn+1, 0, mtu, 4, 2, 0, 0, nil)
	parity(psn+4, 4*mtu, 100, 3, 2, 0, 0, nil) // the second block with a wrong shard size
	s1 := r.p.b.Stats()
	if got := s1.ParityRefused - s0.ParityRefused; got != 6 || s1.RecvBuffered != held {
		t.Fatalf("refused %d of 6 forged parity packets; %d bytes held, %d before them", got, s1.RecvBuffered, held)
	}
	parity(psn+1<<20, 4*mtu, mtu, 3, 2, 0, 0, nil) // its data PSNs far beyond the window: refused too
	// The real parity of the first block is kept and charged.
	enc, _ := reedsolomon.New(4, 2)
	shards := make([][]byte, 6)
	for i := range shards {
		shards[i] = make([]byte, mtu)
		if i < 4 {
			copy(shards[i], next[i*mtu:])
		}
	}
	if err := enc.Encode(shards); err != nil {
		t.Fatal(err)
	}
	crc := crc32.Checksum(next[:4*mtu], castagnoli)
	parity(psn, 0, mtu, 4, 2, 1, crc, shards[5])
	s2 := r.p.b.Stats()
	if h := s2.RecvBuffered - s1.RecvBuffered; h != uint64(max(mtu, 4096))+ecBlockBytes {
		t.Fatalf("parity of %d bytes (a new block) charged %d, want its buffer's capacity and the block's record, %d", mtu, h, uint64(max(mtu, 4096))+ecBlockBytes)
	}
	parity(psn, 0, mtu, 4, 2, 1, crc, nil)   // the same index again
	parity(psn, 0, mtu, 4, 2, 0, crc+1, nil) // the same block, another checksum
	s3 := r.p.b.Stats()
	if s3.ParityDropped-s2.ParityDropped != 1 || s3.ProtoViolations-s2.ProtoViolations != 1 || s3.RecvBuffered != s2.RecvBuffered {
		t.Fatalf("duplicate / contradicting parity: dropped +%d, violations +%d", s3.ParityDropped-s2.ParityDropped, s3.ProtoViolations-s2.ProtoViolations)
	}
	// The rest of the block but its fourth packet: the parity rebuilds it.
	for i := 1; i < 3; i++ {
		q := d
		q.PSN, q.Offset = psn+uint32(i), uint32(i*mtu)
		r.inject(0, q, next[i*mtu:(i+1)*mtu])
	}
	if s := r.p.b.Stats(); s.ECRebuilt != 1 || s.ECBad != 0 {
		t.Fatalf("rebuilt %d (want 1), %d failed the checksum", s.ECRebuilt, s.ECBad)
	}
}

// TestECNacksTrimsBeyondParity: trimmed data packets are NACKed only when their block's
// parity cannot rebuild them: with m trims per block nothing is NACKed or resent; with
// m+1 the block's parity shows it beyond repair and its trimmed packets are NACKed and
// resent at once (no SACK-gap wait, no timeout); a trimmed parity packet counts as lost
// parity.
func TestECNacksTrimsBeyondParity(t *testing.T) {
	for _, c := range []struct {
		name       string
		trim       []int // data packet indices trimmed in every block
		trimParity bool  // also trim each block's first parity packet
		nacks      uint64
	}{
		{"m trims", []int{3, 7}, false, 0},
		{"m+1 trims", []int{2, 5, 8}, false, 3 * 10},
		{"m-1 trims and a trimmed parity", []int{4}, true, 0},
		{"m trims and a trimmed parity", []int{1, 6}, true, 2 * 10},
	} {
		cfg, p, ser := ec10x2Pair(t)
		msg := patterned(10*10*cfg.MTU, 5) // 10 blocks
		p.drop = func(from *Endpoint, b []byte) bool {
			var q wire.Packet
			if from != p.a || q.Decode(b) != nil || q.Type != wire.TypeData || q.Flags&wire.FlagRetx != 0 {
				return false
			}
			hit := false
			if q.Flags&wire.FlagEC != 0 {
				hit = c.trimParity && q.Data.EC.Index == 0
			} else {
				i := int(q.Data.Offset) / cfg.MTU % 10
				for _, x := range c.trim {
					hit = hit || i == x
				}
			}
			if !hit {
				return false
			}
			// A switch cut it to its header and forwarded it.
			h := append([]byte(nil), b[:wire.DataHdrLen]...)
			h[1] |= byte(wire.FlagTrimmed)
			p.inflight = append(p.inflight, flight{at: p.now + p.delay + ser.at(p.now), to: p.b, from: p.aAddr, data: h})
			return true
		}
		recoveryRun(t, p, [][]byte{msg})
		s, r := p.a.Stats(), p.b.Stats()
		t.Logf("%s: trimmed %d, rebuilt %d, NACKs %d, resent nack/sack/timeout %d/%d/%d", c.name, r.Trimmed, r.ECRebuilt, r.NacksSent, s.RetxNack, s.RetxSack, s.RetxTimeout)
		if r.NacksSent != c.nacks || s.RetxNack != c.nacks || s.RetxSack != 0 || s.RetxTimeout != 0 {
			t.Errorf("%s: %d NACKs, resent %d/%d/%d (nack/sack/timeout), want %d NACKs and resends, nothing else",
				c.name, r.NacksSent, s.RetxNack, s.RetxSack, s.RetxTimeout, c.nacks)
		}
	}
}
