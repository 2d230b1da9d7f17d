// Package ec links the erasure code of loss-recovery mode "ec" (Reed-Solomon over
// GF(2^8), github.com/klauspost/reedsolomon) into a program: import it for its side
// effect. smarttd, smartt-lab and the simulator do; the operator CLI (smartt) does not,
// which keeps its demo small, and a config asking for recovery.mode: ec there is refused
// before any socket opens (transport.Config.CheckLinked).
package ec

import (
	"github.com/klauspost/reedsolomon"

	"github.com/smartt-transport/smartt/transport"
)

func init() { transport.RegisterECCodec(New) }

// New returns the code of k data and m parity shards as the engine uses it: one goroutine
// (the engine's) and no inversion cache, since each erasure pattern a peer can choose
// would otherwise cache a matrix forever; a reconstruction inverts its k x k matrix afresh.
func New(k, m int) (transport.ECCoder, error) {
	return reedsolomon.New(k, m, reedsolomon.WithMaxGoroutines(1), reedsolomon.WithInversionCache(false))
}
