package transport

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/reps"
)

// The REPS paper's BitMap baseline (reps.Bitmap): per-EV penalties, STrack-like.
func init() {
	registerLB(LBRegistration{Name: "bitmap", Prepare: func(cfg *Config) (func(rng *rand.Rand) reps.Balancer, error) {
		env := lbEnv(cfg)
		return func(rng *rand.Rand) reps.Balancer { return reps.NewBitmap(env, rng) }, nil
	}})
}
