package reps

import (
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/cc"
)

// model is REPS written plainly (a slice of entries, oldest first) to check the packed,
// bit-twiddled implementation against on random operation sequences.
type model struct {
	p        params
	ents     []modelEnt
	explore  int
	frozen   bool
	t        uint32
	maxRTT   uint16
	cursor   int
	episodes uint64
	rng      *rand.Rand
}

type modelEnt struct {
	ev    uint16
	valid bool
}

// expire leaves freezing once its time is up: the entries are forgotten and a BDP is
// explored.
func (m *model) expire(now int64) {
	nowU := uint32(now >> tShift)
	if d := int32(nowU - m.t); m.frozen && (d >= 0 || d < -m.p.maxFreezeU) {
		m.frozen, m.ents, m.explore, m.t, m.maxRTT = false, nil, int(m.p.explore), nowU, 0
	}
}

func (m *model) next(now int64) uint16 {
	nowU := uint32(now >> tShift)
	d := int32(nowU - m.t)
	if m.frozen {
		m.expire(now)
	} else if d < 0 || uint32(d) > 2*m.p.windowU {
		for i := range m.ents {
			m.ents[i].valid = false
		}
		m.explore, m.t, m.maxRTT = int(m.p.explore), nowU, 0
	}
	if m.explore > 0 && !m.frozen {
		m.explore--
		return randomEV(m.rng, m.p.evs)
	}
	for i := range m.ents {
		if m.ents[i].valid {
			m.ents[i].valid = false
			return m.ents[i].ev
		}
	}
	if m.frozen && len(m.ents) > 0 {
		if m.cursor >= len(m.ents) {
			m.cursor = 0
		}
		m.cursor++
		return m.ents[m.cursor-1].ev
	}
	return randomEV(m.rng, m.p.evs)
}

func (m *model) ack(now int64, ev uint16, ce bool, rtt int64) {
	m.expire(now)
	if rtt > 0 {
		v := uint16(min(rtt>>rttShift, 0xffff))
		nowU := uint32(now >> tShift)
		if d := int32(nowU - m.t); !m.frozen && (d < 0 || uint32(d) > m.p.windowU) {
			m.t, m.maxRTT = nowU, v
		} else {
			m.maxRTT = max(m.maxRTT, v)
		}
	}
	if !ce {
		m.ents = append(m.ents, modelEnt{ev, true})
		if len(m.ents) > int(m.p.n) {
			m.ents = m.ents[1:]
		}
	}
}

func (m *model) loss(now int64, cause cc.LossCause) {
	if !m.p.freezing || cause == cc.LossTrim || (cause == cc.LossSack && !m.p.sackFails) {
		return
	}
	nowU := uint32(now >> tShift)
	m.expire(now)
	if m.frozen && !m.p.extend {
		return
	}
	if !m.p.trimming {
		recent := m.frozen
		if !m.frozen {
			d := int32(nowU - m.t)
			recent = d >= 0 && uint32(d) <= 2*m.p.windowU
		}
		if recent && m.maxRTT >= m.p.failRTT {
			return
		}
	}
	if !m.frozen {
		m.episodes++
		m.frozen, m.explore, m.cursor = true, 0, 0
	}
	m.t = nowU + m.p.freezeU
}

func TestREPSMatchesModel(t *testing.T) {
	for seed := uint64(0); seed < 400; seed++ {
		ops := rand.New(rand.NewPCG(seed, 99))
		env := Env{EVS: []int{32, 256, 1 << 16}[seed%3], BDPPackets: 1 + ops.IntN(6),
			BaseRTT: 10_000, Trimming: seed%2 == 0}
		cfg := DefaultConfig()
		cfg.Entries = 1 + int(seed%8)
		cfg.FreezeDuration = 50_000
		cfg.TimeoutOnly = seed%5 == 0
		cfg.NoFreeze = seed%7 == 0
		cfg.FreezeExtend = seed%4 == 1
		r := NewREPS(cfg, env, rand.New(rand.NewPCG(seed, 1)))
		m := &model{p: r.p, rng: rand.New(rand.NewPCG(seed, 1))}
		now := int64(1_000_000)
		for step := range 3000 {
			now += int64(ops.IntN(3000))
			if ops.IntN(100) == 0 {
				now += int64(ops.IntN(400_000)) // idle gaps and freeze expiries
			}
			switch k := ops.IntN(10); {
			case k < 4:
				got, want := r.NextEV(now, 4096, false), m.next(now)
				if got != want {
					t.Fatalf("seed %d step %d: NextEV %d, model %d", seed, step, got, want)
				}
			case k < 9:
				ev := uint16(ops.IntN(env.EVS))
				ce := ops.IntN(4) == 0
				rtt := int64(ops.IntN(40_000))
				r.OnAck(now, ev, ce, rtt)
				m.ack(now, ev, ce, rtt)
			default:
				cause := cc.LossCause(1 + ops.IntN(3))
				r.OnLoss(now, 0, cause)
				m.loss(now, cause)
			}
			if r.FreezeEpisodes() != m.episodes {
				t.Fatalf("seed %d step %d: %d episodes, model %d", seed, step, r.FreezeEpisodes(), m.episodes)
			}
		}
	}
}
