package udp

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// closedPort returns a loopback UDP port with nothing listening (bound, then closed).
func closedPort(t *testing.T) netip.AddrPort {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	return ap
}

// A datagram to a port with nothing listening comes back as an ICMP port unreachable on
// the send socket's error queue: WaitUnreachable names its destination, and the next
// send on that socket (which the pending error would fail) still goes out.
func TestWaitUnreachableReadsErrorQueue(t *testing.T) {
	c := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, TxTimestampEvery: 1})
	sink := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	dead := closedPort(t)
	type res struct {
		n   int
		u   [4]Unreachable
		err error
	}
	got := make(chan res, 1)
	go func() {
		var r res
		r.n, r.err = c.WaitUnreachable(r.u[:])
		got <- r
	}()
	if _, err := c.WriteBatch([]Packet{{Buf: []byte("hello"), N: 5, Addr: dead}}); err != nil {
		t.Fatal(err)
	}
	var r res
	select {
	case r = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no ICMP report within 10 s")
	}
	if r.err != nil || r.n != 1 || r.u[0].Dst != dead || !r.u[0].Port {
		t.Fatalf("WaitUnreachable = %d %+v %v; want 1 port-unreachable report for %v", r.n, r.u[:r.n], r.err, dead)
	}
	if st := c.Stats(); st.RxICMPUnreachable != 1 {
		t.Fatalf("RxICMPUnreachable %d, want 1", st.RxICMPUnreachable)
	}
	// A second datagram to the dead port, then one to a live socket: neither send fails
	// for the other's pending error.
	for _, to := range []netip.AddrPort{dead, sink.LocalAddr()} {
		if _, err := c.WriteBatch([]Packet{{Buf: []byte("again"), N: 5, Addr: to}}); err != nil {
			t.Fatalf("send to %v: %v", to, err)
		}
	}
	readN(t, sink, 1, 64)
	// Close wakes a waiter with net.ErrClosed.
	done := make(chan error, 1)
	go func() {
		var u [4]Unreachable
		for {
			// The second datagram's report may come first.
			if _, err := c.WaitUnreachable(u[:]); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if err != net.ErrClosed {
			t.Fatalf("after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake WaitUnreachable")
	}
}

// TX timestamp reports that WaitUnreachable reads from the shared error queues while
// waiting for ICMP errors still reach TxStamps.
func TestWaitUnreachableKeepsTxStamps(t *testing.T) {
	c := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 2, TxTimestampEvery: 1})
	if !c.Caps().TxTimestamps {
		t.Skip("no TX timestamps here")
	}
	sink := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	go func() {
		var u [4]Unreachable
		for {
			if _, err := c.WaitUnreachable(u[:]); err != nil {
				return
			}
		}
	}()
	const n = 200
	pk := make([]Packet, 20)
	for sent := 0; sent < n; sent += len(pk) {
		for i := range pk {
			pk[i] = Packet{Buf: []byte("stamp me"), N: 8, Addr: sink.LocalAddr(), EV: uint16(i)}
		}
		if _, err := c.WriteBatch(pk); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // let the waiter read some of them
	}
	buf := make([]TxStamp, 64)
	got := 0
	for deadline := time.Now().Add(10 * time.Second); got < n && time.Now().Before(deadline); {
		got += c.TxStamps(buf)
		time.Sleep(time.Millisecond)
	}
	if got != n {
		t.Fatalf("TxStamps returned %d of %d sampled packets' timestamps", got, n)
	}
}
