//go:build linux

package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/bpf"

	"github.com/smartt-transport/smartt/transport/wire"
)

// forged returns datagrams with hostile and ordinary headers: every DstConn low byte, a
// zero DstConn with every SrcConn high byte, zero in one half of DstConn only, short
// datagrams and random junk.
func forged() [][]byte {
	rng := rand.New(rand.NewPCG(15, 15))
	var out [][]byte
	hdr := func(dst, src uint64, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if n >= wire.CommonLen {
			binary.BigEndian.PutUint64(b[8:], dst)
			binary.BigEndian.PutUint64(b[16:], src)
		}
		return b
	}
	for v := 0; v < 256; v++ {
		out = append(out, hdr(rng.Uint64()&^0xff|uint64(v), rng.Uint64(), 64))        // DstConn low byte v
		out = append(out, hdr(0, uint64(v)<<56|rng.Uint64()>>8, wire.CommonLen+v%40)) // new connection, SrcConn high byte v
		out = append(out, hdr(uint64(v)<<32, rng.Uint64(), 32))                       // DstConn high half only
		out = append(out, hdr(uint64(v), 0, 24))                                      // DstConn low byte only, SrcConn 0
		out = append(out, hdr(0, 0, v%wire.CommonLen+1))                              // short
		// Returned headers (ours: SrcConn low byte v), and near misses of one.
		for _, f := range []wire.Flags{wire.FlagTrimmed | wire.FlagReturned, wire.FlagTrimmed, wire.FlagReturned | wire.FlagRetx | wire.FlagTrimmed} {
			b := hdr(rng.Uint64(), rng.Uint64()&^0xff|uint64(v), 64)
			b[0], b[1] = wire.Version<<4|byte(wire.TypeData), byte(f)
			out = append(out, b)
			c := append([]byte(nil), b...)
			c[0] = wire.Version<<4 | byte(wire.TypeAck)
			out = append(out, c)
		}
	}
	return out
}

// TestSteeringProgramMatchesSteerShard runs the classic BPF program in x/net/bpf's
// interpreter on forged headers: it must pick the shard SteerShard names, always below n.
func TestSteeringProgramMatchesSteerShard(t *testing.T) {
	pkts := forged()
	for _, n := range []int{2, 3, 4, 7, 64, 255, 256} {
		vm, err := bpf.NewVM(SteeringProgram(n))
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		seen := make([]int, n)
		for i, b := range pkts {
			got, err := vm.Run(b)
			if err != nil {
				t.Fatalf("n=%d packet %d: %v", n, i, err)
			}
			want := SteerShard(b, n)
			if got != want || got >= n {
				t.Fatalf("n=%d packet %d (% x): program says %d, SteerShard %d", n, i, b[:min(len(b), 24)], got, want)
			}
			seen[got]++
		}
		for s, k := range seen {
			if k == 0 {
				t.Errorf("n=%d: no forged packet reached shard %d", n, s)
			}
		}
	}
	if SteerShard(make([]byte, 64), 1) != 0 {
		t.Error("one shard: SteerShard must say 0")
	}
}

// TestOpenShardsSteersInKernel sends forged datagrams to a group of three shards on
// loopback: each must arrive at the socket of the shard SteerShard names.
func TestOpenShardsSteersInKernel(t *testing.T) {
	const n = 3
	conns, err := OpenShards(Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 2, DisableGRO: true, RecvBuffer: 4 << 20, Logger: quiet()}, n, SteerCBPF)
	if err != nil {
		t.Skipf("no reuseport steering here: %v", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	port := conns[0].LocalAddr().Port()
	for i, c := range conns {
		if c.LocalAddr().Port() != port {
			t.Fatalf("shard %d listens on %v, shard 0 on port %d", i, c.LocalAddr(), port)
		}
	}
	src, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := net.UDPAddrFromAddrPort(conns[0].LocalAddr())
	want := make([]map[string]bool, n)
	for i := range want {
		want[i] = map[string]bool{}
	}
	for _, b := range forged() {
		if len(b) < 16 {
			continue // the short ones differ only by length; the VM test covers them
		}
		want[SteerShard(b, n)][string(b)] = true
	}
	// Readers first, so that no receive buffer overflows while the datagrams go out.
	type result struct {
		got int
		err error
	}
	res := make(chan result, n)
	quietFor := make(chan struct{})
	for s, c := range conns {
		go func() {
			got := 0
			buf := make([]Packet, 16)
			for {
				for i := range buf {
					buf[i] = Packet{Buf: make([]byte, 128)}
				}
				select {
				case <-quietFor: // everything sent: stop at the first quiet 300 ms
					c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				default:
					c.SetReadDeadline(time.Now().Add(5 * time.Second))
				}
				k, err := c.ReadBatch(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					res <- result{got, nil}
					return
				}
				if err != nil {
					res <- result{got, err}
					return
				}
				for _, p := range buf[:k] {
					if !want[s][string(p.Buf[:p.N])] {
						res <- result{got, fmt.Errorf("shard %d got a datagram (% x) steered to shard %d", s, p.Buf[:min(p.N, 24)], SteerShard(p.Buf[:p.N], n))}
						return
					}
					got++
				}
			}
		}()
	}
	sent := 0
	for _, b := range forged() {
		if len(b) < 16 {
			continue
		}
		if _, err := src.WriteTo(b, dst); err != nil {
			t.Fatal(err)
		}
		if sent++; sent%32 == 0 {
			time.Sleep(time.Millisecond) // let the readers keep up (no assertion on time)
		}
	}
	close(quietFor)
	for _, c := range conns { // wake readers parked on the long deadline
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	}
	total, wantTotal := 0, 0
	for range conns {
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		total += r.got
	}
	for s := range want {
		wantTotal += len(want[s])
		if len(want[s]) == 0 {
			t.Errorf("no forged datagram names shard %d", s)
		}
	}
	if total != wantTotal {
		t.Errorf("got %d datagrams over the shards, sent %d distinct", total, wantTotal)
	}
}

func TestOpenShardsRefuses(t *testing.T) {
	l := netip.MustParseAddrPort("127.0.0.1:0")
	if _, err := OpenShards(Config{Listen: l, Logger: quiet()}, 0, SteerCBPF); err == nil {
		t.Error("0 shards: no error")
	}
	if _, err := OpenShards(Config{Listen: l, Logger: quiet()}, 2, "ebpf"); err == nil {
		t.Error("steering ebpf: no error")
	}
	if _, err := OpenShards(Config{Listen: l, Datapath: DatapathAFXDP, Logger: quiet()}, 2, SteerCBPF); err == nil {
		t.Error("afxdp with 2 shards: no error")
	}
}
