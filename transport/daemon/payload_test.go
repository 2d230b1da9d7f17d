package daemon

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// countingSocket counts the datagrams written with a Payload beside Buf.
type countingSocket struct {
	*MemSocket
	gather   bool
	payloads atomic.Int64
}

func (c *countingSocket) GathersPayload() bool { return c.gather }

func (c *countingSocket) WriteBatch(pkts []Packet) (int, error) {
	for i := range pkts {
		if len(pkts[i].Payload) > 0 {
			c.payloads.Add(1)
		}
	}
	return c.MemSocket.WriteBatch(pkts)
}

// Data packets leave as a header plus the message's own bytes (Packet.Payload) on a
// socket that gathers them, and arrive byte for byte, exactly once, also when a tenth of
// the first transmissions are lost and the retransmissions are sent from the message's
// buffer again; with authentication or encryption on, or Options.CopyPayload, or a
// socket that does not gather, the payload is copied as before and arrives the same.
func TestPayloadFromMessageBuffer(t *testing.T) {
	for _, v := range []struct {
		name         string
		mode         seal.Mode
		gather, copy bool
		wantPayloads bool
	}{
		{"gather", seal.Off, true, false, true},
		{"auth", seal.Auth, true, false, false},
		{"encrypt", seal.Encrypt, true, false, false},
		{"copy_payload", seal.Off, true, true, false},
		{"socket does not gather", seal.Off, false, false, false},
	} {
		t.Run(v.name, func(t *testing.T) {
			mn := NewMemNet()
			var dropped atomic.Int64
			var n atomic.Int64
			mn.Mark = func(p *Packet) bool {
				b := p.Buf[:p.N]
				if len(b) > 0 && wire.Type(b[0]&0x0f) == wire.TypeData && b[1]&byte(wire.FlagRetx) == 0 && n.Add(1)%10 == 3 {
					dropped.Add(1)
					return false
				}
				return true
			}
			cfg := func(port uint16) transport.Config {
				c := testConfig(port)
				if v.mode != seal.Off {
					c.Auth.Mode, c.Auth.Key = v.mode, seal.Key{9}
				}
				return c
			}
			ap, bp := netip.MustParseAddrPort("10.0.0.1:23600"), netip.MustParseAddrPort("10.0.0.2:23600")
			sa := &countingSocket{MemSocket: mn.Socket(ap), gather: v.gather}
			a, err := New(cfg(ap.Port()), sa, Options{Seed: 3, CopyPayload: v.copy})
			if err != nil {
				t.Fatal(err)
			}
			a.Start()
			t.Cleanup(func() { stop(a) })
			var mu sync.Mutex
			got := map[int][]byte{}
			count := map[int]int{}
			recvd := make(chan struct{}, 100)
			b, err := New(cfg(bp.Port()), mn.Socket(bp), Options{Seed: 4, OnReceive: func(r Received) {
				mu.Lock()
				id := int(r.Data[0])
				got[id] = r.Data
				count[id]++
				mu.Unlock()
				recvd <- struct{}{}
			}})
			if err != nil {
				t.Fatal(err)
			}
			b.Start()
			t.Cleanup(func() { stop(b) })
			sizes := []int{1, 100, 4095, 4096, 4097, 3<<20 + 5, 70000}
			want := make([][]byte, len(sizes))
			done := make(chan SendResult, len(sizes))
			for i, size := range sizes {
				m := make([]byte, size)
				for j := range m {
					m[j] = byte(i*31 + j*7 + j>>12)
				}
				m[0] = byte(i)
				want[i] = append([]byte(nil), m...)
				if err := a.Send(bp, m, func(r SendResult) { done <- r }); err != nil {
					t.Fatal(err)
				}
			}
			completions(t, done, recvd, len(sizes), 20*time.Second, func(r SendResult) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			})
			mu.Lock()
			defer mu.Unlock()
			for i := range sizes {
				if count[i] != 1 || !bytes.Equal(got[i], want[i]) {
					t.Fatalf("message %d (%d bytes): received %d times, %d bytes (or different ones)", i, sizes[i], count[i], len(got[i]))
				}
			}
			st := a.Stats()
			if dropped.Load() == 0 || st.RetxSack+st.RetxNack+st.RetxTimeout == 0 {
				t.Fatalf("nothing lost and retransmitted (dropped %d, %+v)", dropped.Load(), st)
			}
			if p := sa.payloads.Load(); (p > 0) != v.wantPayloads {
				t.Fatalf("%d datagrams with a Payload, want them: %v", p, v.wantPayloads)
			}
		})
	}
}

func stop(n *Node) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n.Shutdown(ctx)
}
