package uswitch_test

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/uswitch"
)

// TestHooks: Tick runs on its schedule, Do runs posted functions on the switch thread,
// Lose loses the frames it picks (counted as Lost, never delivered) and Capture sees every
// received frame and every sent one.
func TestHooks(t *testing.T) {
	var ticks, rxCap, txCap atomic.Int64
	odd := func(f *uswitch.Frame) bool {
		d := f.Data()
		return len(d) >= 14+20+8+4 && d[23] == 17 && binary.BigEndian.Uint32(d[42:])%2 == 1
	}
	cfg := uswitch.Config{
		Tick: func(now int64) int64 { ticks.Add(1); return now + int64(time.Millisecond) },
		Lose: func(port int, f *uswitch.Frame) bool { return odd(f) },
		Capture: func(port int, f *uswitch.Frame, now int64, tx bool) {
			if d := f.Data(); len(d) < 42 || d[23] != 17 {
				return // not UDP
			}
			if tx {
				txCap.Add(1)
			} else {
				rxCap.Add(1)
			}
		},
	}
	tb, sw, stop := star(t, 2, cfg)
	ran := make(chan int64, 1)
	sw.Do(func(now int64) { ran <- now })
	select {
	case now := <-ran:
		if now < 0 || now > int64(time.Since(sw.Epoch())) {
			t.Errorf("Do ran with now %d, want within [0, %d]", now, time.Since(sw.Epoch()))
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Do's function did not run within 2 s")
	}
	rx := udp(t, tb, "h1", func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{Port: 9000}) })
	dst := &net.UDPAddr{IP: tb.Addr("h1").AsSlice(), Port: 9000}
	tx := udp(t, tb, "h0", func() (*net.UDPConn, error) { return net.DialUDP("udp4", nil, dst) })
	const n = 100
	b := make([]byte, 1000)
	t0 := time.Now()
	for i := range n {
		binary.BigEndian.PutUint32(b, uint32(i))
		if _, err := tx.Write(b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond)
	}
	got := 0
	for got < n/2 {
		rx.SetReadDeadline(time.Now().Add(2 * time.Second))
		m, err := rx.Read(b)
		if err != nil {
			t.Fatalf("after %d datagrams: %v", got, err)
		}
		if v := binary.BigEndian.Uint32(b[:m]); v%2 == 1 {
			t.Fatalf("datagram %d arrived; Lose should have lost it", v)
		}
		got++
	}
	rx.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := rx.Read(b); err == nil {
		t.Error("more than n/2 datagrams arrived")
	}
	elapsed := time.Since(t0)
	stop()
	if l := sw.Stats(1).Lost; l != n/2 {
		t.Errorf("port 1 lost %d frames, want %d", l, n/2)
	}
	if r, x := rxCap.Load(), txCap.Load(); r != n || x != n/2 {
		t.Errorf("captured %d received and %d sent UDP frames, want %d and %d", r, x, n, n/2)
	}
	// One tick per millisecond of running time, give or take the scheduler.
	if k := ticks.Load(); k < int64(elapsed/time.Millisecond)/4 || k > int64(elapsed/time.Millisecond)*2+50 {
		t.Errorf("%d ticks in %v at 1 ms", k, elapsed)
	}
}
