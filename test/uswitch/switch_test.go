package uswitch_test

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/uswitch"
)

// star builds hosts h0..h(n-1) on switch namespace sw0 (no kernel bridge) and starts a
// userspace switch there (MAC table pinned to the hosts); both go away when the test ends.
func star(t testing.TB, hosts int, cfg uswitch.Config) (*netbed.Testbed, *uswitch.Switch, func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	tb, err := netbed.Up("u"+hex.EncodeToString(b), netbed.Spec{Kind: netbed.KindStar, Mode: netbed.ModeEmulated, Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Down(); err != nil {
			t.Error(err)
		}
	})
	_, sws, err := tb.OpenSwitches(nil, func(_ string, c *uswitch.Config) {
		c.Batch, c.SoftwareChecksum, c.NewQueue = cfg.Batch, cfg.SoftwareChecksum, cfg.NewQueue
		c.Tick, c.Lose, c.Capture = cfg.Tick, cfg.Lose, cfg.Capture
	})
	if err != nil || len(sws) != 1 {
		t.Fatalf("open switches: %d, %v", len(sws), err)
	}
	sw := sws[0]
	done := make(chan error, 1)
	go func() { done <- sw.Run() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			sw.Stop()
			if err := <-done; err != nil {
				t.Error(err)
			}
			sw.Close()
		})
	}
	t.Cleanup(stop)
	return tb, sw, stop
}

func udp(t testing.TB, tb *netbed.Testbed, node string, fn func() (*net.UDPConn, error)) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := netbed.Do(tb.Ns(node), func() (err error) { c, err = fn(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// csumErrors reads the UDP InCsumErrors counter of node's namespace.
func csumErrors(t testing.TB, tb *netbed.Testbed, node string) int {
	var v int
	err := netbed.Do(tb.Ns(node), func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		var head []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) == 0 || fs[0] != "Udp:" {
				continue
			}
			if head == nil {
				head = fs
				continue
			}
			for i, h := range head {
				if h == "InCsumErrors" {
					v, err = strconv.Atoi(fs[i])
					return err
				}
			}
		}
		return fmt.Errorf("no Udp InCsumErrors in snmp")
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestForward: 4 KiB datagrams cross the switch intact, with checksum offload left on at
// the sender (passed through in the virtio-net header) or completed by the switch.
func TestForward(t *testing.T) {
	for _, soft := range []bool{false, true} {
		t.Run(fmt.Sprintf("softcsum=%v", soft), func(t *testing.T) {
			tb, sw, _ := star(t, 2, uswitch.Config{SoftwareChecksum: soft})
			rx := udp(t, tb, "h1", func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{Port: 9000}) })
			dst := &net.UDPAddr{IP: tb.Addr("h1").AsSlice(), Port: 9000}
			tx := udp(t, tb, "h0", func() (*net.UDPConn, error) { return net.DialUDP("udp4", nil, dst) })
			payload := make([]byte, 4096)
			got := make([]byte, 9000)
			const n = 200
			for i := 0; i < n; i++ {
				binary.BigEndian.PutUint32(payload, uint32(i))
				if _, err := tx.Write(payload); err != nil {
					t.Fatal(err)
				}
				rx.SetReadDeadline(time.Now().Add(2 * time.Second))
				m, err := rx.Read(got)
				if err != nil {
					t.Fatalf("datagram %d: %v (switch port stats %+v %+v, h1 csum errors %d)", i, err, sw.Stats(0), sw.Stats(1), csumErrors(t, tb, "h1"))
				}
				if m != len(payload) || binary.BigEndian.Uint32(got) != uint32(i) {
					t.Fatalf("datagram %d: got %d bytes, seq %d", i, m, binary.BigEndian.Uint32(got))
				}
			}
			if e := csumErrors(t, tb, "h1"); e != 0 {
				t.Fatalf("receiver counted %d checksum errors", e)
			}
			// The counters move just after sendmmsg returns, which may be after the read.
			for end := time.Now().Add(time.Second); sw.Stats(1).TxFrames < n && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			if s := sw.Stats(1); s.TxFrames < n || s.TxBytes < n*4096 {
				t.Fatalf("port h1 sent %+v; want at least %d frames", s, n)
			}
		})
	}
}

// TestRate: the FIFO's departure times pace frames at its rate whatever the arrival burst.
func TestRate(t *testing.T) {
	const rate = 50e6 // bit/s
	tb, _, _ := star(t, 2, uswitch.Config{NewQueue: func(int) uswitch.Queue { return uswitch.NewFIFO(1024, rate) }})
	rx := udp(t, tb, "h1", func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{Port: 9000}) })
	dst := &net.UDPAddr{IP: tb.Addr("h1").AsSlice(), Port: 9000}
	tx := udp(t, tb, "h0", func() (*net.UDPConn, error) { return net.DialUDP("udp4", nil, dst) })
	const n = 60
	payload := make([]byte, 4096)
	var wg sync.WaitGroup
	var got int
	var last time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 9000)
		for got < n {
			rx.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := rx.Read(buf); err != nil {
				return
			}
			got++
			last = time.Now()
		}
	}()
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := tx.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if got != n {
		t.Fatalf("received %d of %d", got, n)
	}
	el := last.Sub(start)
	want := time.Duration(float64((n-1)*(4096+8+20+14+24)*8) / rate * 1e9)
	t.Logf("%d frames in %v at %g bit/s (serialisation alone %v)", n, el, rate, want)
	if el < want*9/10 {
		t.Fatalf("%d frames took %v; a %g bit/s port needs at least %v", n, el, rate, want)
	}
}

// TestFinishChecksum completes a UDP checksum left for offload and checks it against a
// checksum computed from scratch.
func TestFinishChecksum(t *testing.T) {
	payload := []byte("hello, switch: an odd-length payload")
	frame := make([]byte, 14+20+8+len(payload))
	ip := frame[14:]
	ip[0], ip[9] = 0x45, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	copy(ip[12:], []byte{10, 3, 0, 1, 10, 3, 0, 2})
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], 9000)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	pseudo := make([]byte, 12)
	copy(pseudo, ip[12:20])
	pseudo[9] = 17
	binary.BigEndian.PutUint16(pseudo[10:], uint16(8+len(payload)))
	want := ^fold(sum(pseudo) + sum(u))
	binary.BigEndian.PutUint16(u[6:], fold(sum(pseudo))) // what the stack leaves for offload

	f := uswitch.NewTestFrame(frame, 14+20, 6)
	if !f.NeedsChecksum() {
		t.Fatal("test frame does not ask for a checksum")
	}
	if err := f.FinishChecksum(); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint16(f.Data()[14+20+6:]); got != want || f.NeedsChecksum() {
		t.Fatalf("checksum %#04x, want %#04x (needs %v)", got, want, f.NeedsChecksum())
	}
}

func sum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// sender blasts size-byte UDP datagrams from node to dst until stop is closed or max
// datagrams went out.
func sender(t testing.TB, tb *netbed.Testbed, node string, dst netip.Addr, size, max int, stop <-chan struct{}) func() {
	bl, err := netbed.NewBlaster(tb.Ns(node), 0, netip.AddrPortFrom(dst, 9000), size)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		defer bl.Close()
		bl.Send(max, stop)
	}
}

func rxPackets(t testing.TB, tb *netbed.Testbed, node string) uint64 {
	st, err := tb.Stats(node)
	if err != nil || len(st) != 1 {
		t.Fatalf("stats of %s: %v %v", node, st, err)
	}
	return st[0].RxPackets
}

// BenchmarkSwitch measures the switch's capacity with frames of a 4 KiB payload (4138 bytes
// on the wire) or 1472 bytes (1514) from h0 to h1 (uni) or both ways (bidi) through one
// switch namespace. One op is one datagram offered. fwd/s counts frames delivered per
// second in total, per-port/s per output port; cpu-us/frame is the switch thread's CPU
// time per forwarded frame, so 1e6/cpu-us/frame is what one dedicated core would forward.
func BenchmarkSwitch(b *testing.B) {
	for _, c := range []struct {
		name    string
		payload int
		bidi    bool
		batch   int
		soft    bool
	}{
		{"4K/uni/batch64", 4096, false, 64, false},
		{"4K/uni/batch1", 4096, false, 1, false},
		{"4K/uni/batch64-softcsum", 4096, false, 64, true},
		{"4K/bidi/batch64", 4096, true, 64, false},
		{"1500/uni/batch64", 1472, false, 64, false},
		{"1500/uni/batch1", 1472, false, 1, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			tb, sw, stopSwitch := star(b, 2, uswitch.Config{Batch: c.batch, SoftwareChecksum: c.soft})
			for _, h := range []string{"h0", "h1"} { // a bound socket: no ICMP unreachable back
				udp(b, tb, h, func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{Port: 9000}) })
			}
			senders := []string{"h0"}
			if c.bidi {
				senders = append(senders, "h1")
			}
			before := rxPackets(b, tb, "h0") + rxPackets(b, tb, "h1")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			// The switch and the sender allocate nothing per frame.
			b.ReportAllocs()
			timer := time.AfterFunc(20*time.Second, func() { close(stop) }) // bound, whatever b.N
			b.ResetTimer()
			start := time.Now()
			for _, h := range senders {
				peer := "h1"
				if h == "h1" {
					peer = "h0"
				}
				run := sender(b, tb, h, tb.Addr(peer), c.payload, b.N/len(senders)+1, stop)
				wg.Add(1)
				go func() { defer wg.Done(); run() }()
			}
			wg.Wait()
			timer.Stop()
			// Let the switch drain, then count what arrived.
			var delivered uint64
			for prev := uint64(0); ; prev = delivered {
				time.Sleep(5 * time.Millisecond)
				delivered = rxPackets(b, tb, "h0") + rxPackets(b, tb, "h1") - before
				if delivered == prev {
					break
				}
			}
			el := time.Since(start).Seconds()
			b.StopTimer()
			stopSwitch()
			frame := float64(c.payload + 8 + 20 + 14)
			b.ReportMetric(float64(delivered)/el, "fwd/s")
			b.ReportMetric(float64(delivered)/el/float64(len(senders)), "per-port/s")
			b.ReportMetric(float64(delivered)*frame*8/el/1e9, "Gbit/s")
			b.ReportMetric(float64(delivered)/float64(b.N), "delivered")
			if delivered > 0 {
				b.ReportMetric(float64(sw.CPUTime().Microseconds())/float64(delivered), "cpu-us/frame")
			}
		})
	}
}
