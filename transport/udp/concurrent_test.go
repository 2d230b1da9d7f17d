package udp

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// The daemon reads, writes, drains TX stamps and reads stats from different goroutines,
// then closes under a blocked reader. Run with -race.
func TestConcurrentUse(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 8, TxTimestampEvery: 3})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 8 << 20})
	const n = 2000
	var wg sync.WaitGroup
	readErr := make(chan error, 1)
	received := make(chan int, 1)
	go func() {
		pk := make([]Packet, 32)
		for i := range pk {
			pk[i].Buf = make([]byte, 256)
		}
		got := 0
		for {
			k, err := b.ReadBatch(pk)
			if err != nil {
				received <- got
				readErr <- err
				return
			}
			got += k
		}
	}()
	stop := make(chan struct{})
	stamps := 0
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]TxStamp, 16)
		for {
			select {
			case <-stop:
				return
			default:
			}
			stamps += a.TxStamps(buf)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = a.Stats()
			_ = b.Stats()
			_ = a.Caps()
			time.Sleep(100 * time.Microsecond)
		}
	}()
	payload := make([]byte, 200)
	pk := make([]Packet, 50)
	for sent := 0; sent < n; sent += len(pk) {
		for i := range pk {
			pk[i] = Packet{Buf: payload, N: len(payload), Addr: b.LocalAddr(), EV: uint16((sent + i) / 10), ECN: ECT0}
		}
		if k, err := a.WriteBatch(pk); k != len(pk) || err != nil {
			t.Fatalf("WriteBatch: %d, %v", k, err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Stats().RxPackets < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	b.Close()
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("reader ended with %v, want net.ErrClosed", err)
	}
	if got := <-received; got != n {
		t.Fatalf("received %d of %d", got, n)
	}
	if stamps == 0 || a.Stats().TxStampsSampled != n/3 {
		t.Fatalf("%d TX stamps read, stats %+v", stamps, a.Stats())
	}
}
