package transport

import (
	"fmt"
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/reps"
)

// Hooks are a driver's extensions to the engine, set in code and passed to NewEndpoint:
// what no configuration file can say (constructors, buffer pools, the daemon's placement
// and shard numbering). The zero value is the engine alone.
type Hooks struct {
	// NewCC, if set, overrides Config.CC with a constructor of the caller's.
	NewCC func() cc.Controller
	// NewBalancer, if set, overrides Config.LB with a constructor of the caller's.
	NewBalancer func(rng *rand.Rand) reps.Balancer
	// Buffers supplies receive buffers for messages (default: the Go heap).
	Buffers BufferPool
	// Placer, if set, may take large incoming messages into buffers of its own (Placer).
	Placer Placer
	// Gate, if set, may refuse a new message at its first packet while its destination
	// cannot take it (receiver not ready, rnr.go): the sender backs off and resends.
	Gate RecvGate
	// DeliverChunks delivers every message in the chunks it was received into
	// (Event.Chunks), recycled through PutChunks, instead of one buffer: no assembly copy
	// and no zeroed allocation per message (the daemon writes them to its clients with
	// writev). Buffers is then not used.
	DeliverChunks bool
	// IDShards and IDShard make every local connection ID name the engine shard that owns
	// it: its low byte modulo IDShards is IDShard (the daemon's engine shards steer
	// packets by it, docs/datapath.md "Engine shards"). IDShards 0 or 1: IDs are fully
	// random, as without shards.
	IDShards int
	// IDShard is this engine's shard (0..IDShards-1), as IDShards says.
	IDShard int
}

// validate checks the hooks' numbers.
func (h *Hooks) validate() error {
	if h.IDShards < 0 || h.IDShards > 256 || h.IDShard < 0 || (h.IDShards > 1 && h.IDShard >= h.IDShards) || (h.IDShards <= 1 && h.IDShard != 0) {
		return fmt.Errorf("id shards = %d, shard = %d: must be 0..256 shards and a shard in 0..shards-1", h.IDShards, h.IDShard)
	}
	return nil
}

// resolve fills NewCC and NewBalancer with what validate prepared from the CC and LB
// names, where the caller did not supply constructors, and Buffers with the Go heap.
func (h *Hooks) resolve(p prepared) {
	if h.NewCC == nil {
		h.NewCC = p.newCC
	}
	if h.NewBalancer == nil {
		h.NewBalancer = p.newLB
	}
	if h.Buffers == nil {
		h.Buffers = heapBuffers{}
	}
}

// Hooks returns the endpoint's hooks, with the controller and balancer constructors the
// configuration names filled in where the caller supplied none.
func (e *Endpoint) Hooks() Hooks { return e.hooks }
