package smarttd

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/smartt-transport/smartt/transport"
)

// Returning memory after a mass release. When a flood's connections expire the engine
// frees what they held, but an idle Go process collects no garbage until the runtime's
// two-minute forced collection, the shared chunk pools (sync.Pool) keep their buffers
// through one collection more, and the scavenger keeps pages up to the heap goal of the
// last collection, which the flood set. So once what the engines and the API charge
// (their ledgers) has fallen far from its high-water mark and stays down, the daemon
// drains the chunk pools and returns free memory to the OS, at most once per releaseGap.
const (
	releaseEvery = time.Second      // how often the ledgers are sampled
	releaseMin   = 8 << 20          // the fall from the high-water mark that is a mass release
	releaseGap   = 10 * time.Second // at most one return per this long
)

// releaser decides when to return memory (sample) from samples of what is held.
type releaser struct {
	held func() int64 // bytes the ledgers charge now
	free func()       // drain the pools and return memory to the OS
	peak int64        // high-water mark of held since the last return
	low  int          // consecutive samples at or below half of peak
	last time.Time    // the last return
}

// sample takes one sample at now and returns whether it returned memory: when held has
// fallen by releaseMin or more from its high-water mark to at most half of it, for two
// samples in a row (a trough between bursts is not a release), releaseGap after the last.
func (r *releaser) sample(now time.Time) bool {
	h := r.held()
	if h >= r.peak {
		r.peak, r.low = h, 0
		return false
	}
	if r.peak-h < releaseMin || 2*h > r.peak {
		r.low = 0
		return false
	}
	r.low++
	if r.low < 2 || now.Sub(r.last) < releaseGap {
		return false
	}
	r.free()
	r.peak, r.low, r.last = h, 0, now
	return true
}

// heldBytes is what d's engines and API charge: message buffers, connection state and
// TIME_WAIT entries, client messages outstanding and received ones queued.
func (d *Daemon) heldBytes() int64 {
	st, a := d.Node.Stats(), d.API.Stats()
	return int64(st.RecvBuffered+st.ConnHeld+st.TimeWaitHeld) + a.Outstanding + a.RecvQueued
}

// returnMemory drains the shared chunk pools, so that one collection frees their
// buffers, and returns free memory to the OS (debug.FreeOSMemory: a full collection).
func returnMemory(log *slog.Logger, r *releaser) func() {
	return func() {
		t0 := time.Now()
		n := transport.DrainChunkPools()
		debug.FreeOSMemory()
		log.Info("memory returned to the OS after a mass release", "held_peak", r.peak, "pooled_buffers", n,
			"took", time.Since(t0).Round(time.Microsecond))
	}
}

// runReleaser samples d's ledgers every releaseEvery until ctx ends (releaser).
func (d *Daemon) runReleaser(ctx context.Context) {
	r := &releaser{held: d.heldBytes}
	r.free = returnMemory(d.log, r)
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.sample(now)
		}
	}
}
