package smarttd_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// The zero-copy paths end to end over the veth pair with ECMP (GSO and GRO):
// large messages through the session's memfds and smaller ones streamed, data packets as
// header + payload iovecs (or copied: udp.copy_payload, and with encryption on), received
// datagrams read in the GRO buffer (udp.gro_in_place) or copied; every message arrives
// exactly once and intact.
func TestE2EZeroCopyPaths(t *testing.T) {
	tp := nstest.Pair(t)
	for _, v := range []struct {
		name string
		mod  func(*smarttd.Config)
	}{
		{"defaults", nil},
		{"gro_in_place", func(c *smarttd.Config) { c.UDP.GROInPlace = true }},
		{"copy_payload", func(c *smarttd.Config) { c.UDP.CopyPayload = true }},
		{"encrypt", func(c *smarttd.Config) {
			c.Transport.Auth.Mode, c.Transport.Auth.Key = seal.Encrypt, seal.Key{0x5e}
			c.UDP.GROInPlace = true
		}},
	} {
		t.Run(v.name, func(t *testing.T) {
			dir := tempDir(t)
			la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
			mod := func(c *smarttd.Config) {
				c.Transport.LB = "ecmp"
				if v.mod != nil {
					v.mod(c)
				}
			}
			a := startIn(t, tp.A, la, dir, mod)
			b := startIn(t, tp.B, lb, dir, mod)
			defer stopDaemon(a)
			defer stopDaemon(b)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 1)
			sizes := []int{client.DefaultSendFDThreshold + 5, 3 << 20, 100, client.DefaultSendFDThreshold, 1}
			msgs := make([][]byte, len(sizes))
			var pend []*client.Pending
			buf := make([]byte, client.DefaultSendFDThreshold+5)
			for i, n := range sizes {
				msgs[i] = make([]byte, n)
				rand.NewChaCha8([32]byte{byte(i)}).Read(msgs[i])
				copy(buf, msgs[i])
				p, err := sa.SendAsync(lb, 1, buf[:n])
				if err != nil {
					t.Fatal(err)
				}
				clear(buf)
				pend = append(pend, p)
			}
			for i := range sizes {
				m, err := sb.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.Data, msgs[i]) {
					t.Fatalf("message %d: %d bytes, want %d (or different ones)", i, len(m.Data), sizes[i])
				}
				m.Release()
			}
			for _, p := range pend {
				if _, err := p.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := a.API.Stats().MsgsFD; got != 2 {
				t.Fatalf("%d messages went through memfds, want 2", got)
			}
		})
	}
}
