package udp

import (
	"net/netip"
	"testing"
	"time"
)

// TestBusyPoll: with Config.BusyPoll a read that finds the socket empty keeps polling, so
// datagrams that come within the window are read without the goroutine sleeping
// (RxBusyPollHits counts them); every datagram arrives; without it nothing is counted;
// and Close still ends a read that is polling or asleep.
func TestBusyPoll(t *testing.T) {
	for _, spin := range []time.Duration{0, MaxBusyPoll} {
		dst := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, BusyPoll: spin})
		src := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
		const n = 40
		got := make(chan error, 1)
		go func() {
			readN(t, dst, n, 2048)
			got <- nil
		}()
		for i := range n {
			// Gaps well inside the poll window: the reader is polling when most arrive.
			time.Sleep(50 * time.Microsecond)
			if _, err := src.WriteBatch([]Packet{{Buf: payload(i), N: len(payload(i)), Addr: dst.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("busy_poll %v: not every datagram arrived", spin)
		}
		hits := dst.Stats().RxBusyPollHits
		if (spin > 0) != (hits > 0) {
			t.Fatalf("busy_poll %v: %d reads found datagrams while polling", spin, hits)
		}
		t.Logf("busy_poll %v: %d of %d datagrams read while polling", spin, hits, n)
		closeUnblocks(t, dst) // a read that polls, then sleeps, on an empty socket
	}
}
