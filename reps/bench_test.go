package reps

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDecision measures one decision: the EV of a packet plus the ACK that comes
// back for an earlier one (one in eight CE-marked), per balancer.
func BenchmarkDecision(b *testing.B) {
	env := Env{EVS: 256, BDPPackets: 37, BaseRTT: 12_000, Trimming: true}
	cfg := DefaultConfig()
	for _, c := range []struct {
		name string
		new  func(*rand.Rand) Balancer
	}{
		{"reps", func(r *rand.Rand) Balancer { return NewREPS(cfg, env, r) }},
		{"ops", func(r *rand.Rand) Balancer { return NewOPS(env, r) }},
		{"ecmp", func(r *rand.Rand) Balancer { return NewECMP(r, env.EVS) }},
		{"plb", func(r *rand.Rand) Balancer { return NewPLB(cfg, env, r) }},
		{"flowlet", func(r *rand.Rand) Balancer { return NewFlowlet(cfg, env, r) }},
		{"mptcp", func(r *rand.Rand) Balancer { return NewMPTCP(cfg, env, r) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			lb := c.new(rand.New(rand.NewPCG(1, 2)))
			var ring [16]uint16
			now := int64(1_000_000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += 330 // one 4 KiB packet at 100 Gbit/s
				ev := lb.NextEV(now, 4096, false)
				ring[i&15] = ev
				lb.OnAck(now, ring[(i-8)&15], i&7 == 0, 12_000)
			}
		})
	}
}
