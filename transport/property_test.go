package transport_test

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// propRun is one property-test run: two endpoints over an impaired test network, a batch
// of messages each way, every delivery checked against the hash of what was sent.
type propRun struct {
	t        *testing.T
	net      *testnet.Network
	ep       [2]*transport.Endpoint
	addr     [2]netip.AddrPort
	conn     [2]transport.ConnID
	want     [2]map[uint32][32]byte // per sender: message ID -> hash
	got      [2]map[uint32]bool     // per receiver side: message IDs delivered
	lastID   [2]int64               // per receiver side: last delivered ID (ordered check)
	sent     [2]int                 // MessageSent events per sender
	failed   int
	maxMsg   int
	ordered  bool
	received int
}

func (r *propRun) drain() {
	for side, ep := range r.ep {
		for ev := range transport.Pending(ep) {
			switch ev.Kind {
			case transport.MessageReceived:
				from := 1 - side
				h, ok := r.want[from][ev.MsgID]
				if !ok {
					r.t.Fatalf("side %d received unknown message %d", side, ev.MsgID)
				}
				if r.got[side][ev.MsgID] {
					r.t.Fatalf("side %d received message %d twice", side, ev.MsgID)
				}
				if sha256.Sum256(ev.Data) != h {
					r.t.Fatalf("side %d: message %d (%d bytes) corrupted", side, ev.MsgID, len(ev.Data))
				}
				if r.ordered && int64(ev.MsgID) <= r.lastID[side] {
					r.t.Fatalf("side %d: message %d delivered after %d", side, ev.MsgID, r.lastID[side])
				}
				r.lastID[side] = int64(ev.MsgID)
				r.got[side][ev.MsgID] = true
				r.received++
			case transport.MessageSent:
				r.sent[side]++
			case transport.MessageFailed:
				r.failed++
				r.t.Errorf("side %d: message %d failed: %v", side, ev.MsgID, ev.Err)
			}
		}
	}
}

// logUniform draws a size in [1, max] whose logarithm is uniform, so that every scale
// from single bytes to megabytes is exercised.
func logUniform(rng *rand.Rand, max int) int {
	return int(math.Exp(rng.Float64() * math.Log(float64(max))))
}

func runProperty(t *testing.T, seed uint64, loss float64, nMsgs int, unordered bool) {
	runPropertyWith(t, seed, loss, nMsgs, unordered, propOpts{})
}

// propOpts varies a property run: the engines' config (authentication, say) and the
// switch port toward each host (a trimming bottleneck, say).
type propOpts struct {
	tune  func(*transport.Config)
	host  testnet.HostConfig
	check func(t *testing.T, net testnet.Stats, a, b transport.Stats) // after a successful run
}

func runPropertyWith(t *testing.T, seed uint64, loss float64, nMsgs int, unordered bool, o propOpts) {
	const maxSize = 4 << 20
	netCfg := testnet.Config{
		Delay:        2000,
		Loss:         loss,
		Dup:          0.05,
		ReorderProb:  0.1,
		ReorderDepth: 100,
	}
	n := testnet.New(netCfg, seed)
	cfg := transport.DefaultConfig()
	cfg.Unordered = unordered
	cfg.RecvWindow = 6 << 20 // small enough that flow control binds
	cfg.MinRTO = 50_000
	cfg.InitialRTO = 100_000
	cfg.IdleTimeout = 10_000_000_000
	if o.tune != nil {
		o.tune(&cfg)
	}
	r := &propRun{t: t, net: n, ordered: !unordered, maxMsg: maxSize}
	for i := range 2 {
		ep, err := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(seed, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		r.ep[i] = ep
		r.addr[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 23600)
		r.want[i] = map[uint32][32]byte{}
		r.got[i] = map[uint32]bool{}
		r.lastID[i] = -1
		n.Attach(r.addr[i], ep, o.host)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	largest := 0
	for side := range 2 {
		id, err := r.ep[side].Dial(0, r.addr[1-side])
		if err != nil {
			t.Fatal(err)
		}
		r.conn[side] = id
	}
	// Most messages go one way, a tenth the other way at the same time.
	total := 0
	for k := 0; k < nMsgs; k++ {
		side := 0
		if k%10 == 9 {
			side = 1
		}
		size := logUniform(rng, maxSize)
		largest = max(largest, size)
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		id, err := r.ep[side].Send(0, r.conn[side], msg)
		if err != nil {
			t.Fatal(err)
		}
		r.want[side][id] = sha256.Sum256(msg)
		total += size
	}
	n.Wake(r.addr[0])
	n.Wake(r.addr[1])
	ok := n.RunUntil(600_000_000_000, func() bool {
		r.drain()
		return r.received == nMsgs && r.sent[0]+r.sent[1] == nMsgs || t.Failed()
	})
	if t.Failed() {
		return
	}
	if !ok {
		t.Fatalf("stalled at %d ns: received %d/%d, sent %d+%d; net %+v; a %+v; b %+v",
			n.Now(), r.received, nMsgs, r.sent[0], r.sent[1], n.Stats(), r.ep[0].Stats(), r.ep[1].Stats())
	}
	bound := uint64(max(cfg.RecvWindow, largest))
	for side, ep := range r.ep {
		st := ep.Stats()
		if st.RecvBufferedMax > bound {
			t.Errorf("side %d buffered %d bytes, bound %d", side, st.RecvBufferedMax, bound)
		}
		if st.RecvBuffered != 0 {
			t.Errorf("side %d still holds %d bytes", side, st.RecvBuffered)
		}
	}
	a, b := r.ep[0].Stats(), r.ep[1].Stats()
	if o.check != nil {
		o.check(t, n.Stats(), a, b)
	}
	t.Logf("%d msgs, %.1f MB in %.2f ms virtual; net lost %d dup %d reordered %d; a retx sack/nack/rto %d/%d/%d; b dups %d; buffered max %d/%d",
		nMsgs, float64(total)/1e6, float64(n.Now())/1e6, n.Stats().Lost, n.Stats().Duplicated, n.Stats().Reordered,
		a.RetxSack, a.RetxNack, a.RetxTimeout, b.DupData, max(a.RecvBufferedMax, b.RecvBufferedMax), bound)
}

// TestPropertyExactlyOnce is the engine's central property: over many seeds and loss
// rates up to 30 %, with 5 % duplication and reordering up to 100 packets deep, every
// message arrives exactly once, byte for byte, in order (or unordered when configured),
// and the receive buffers stay under the flow-control bound.
func TestPropertyExactlyOnce(t *testing.T) {
	seeds, msgs := 4, 1000
	if testing.Short() {
		seeds, msgs = 1, 150
	}
	for _, loss := range []float64{0, 0.01, 0.10, 0.30} {
		for s := range seeds {
			seed := uint64(1000*s) + uint64(loss*100)
			unordered := s%2 == 1
			t.Run(fmt.Sprintf("loss=%.0f%%/seed=%d/unordered=%v", loss*100, seed, unordered), func(t *testing.T) {
				t.Parallel()
				runProperty(t, seed, loss, msgs, unordered)
			})
		}
	}
}
