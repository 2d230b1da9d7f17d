package smarttd_test

import (
	"context"
	"testing"
	"time"
)

// With the default config a message of 4 KiB (a page, the common RDMA-like size) leaves in
// one data packet: transport.mtu leaves room for the daemon's 12-byte envelope.
func TestE2EPageMessageIsOnePacket(t *testing.T) {
	_, a, b, _, lb := startPair(t, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 2)
	for _, size := range []int{4096, 4097} {
		before := a.Node.Stats()
		if _, err := sa.Send(ctx, lb, 2, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		st := a.Node.Stats()
		want := uint64(1)
		if size > 4096 {
			want = 2
		}
		if got := st.DataSent - before.DataSent - (st.RetxSack + st.RetxNack + st.RetxTimeout - before.RetxSack - before.RetxNack - before.RetxTimeout); got != want {
			t.Errorf("a %d-byte message took %d data packets, want %d", size, got, want)
		}
	}
}
