// Package blast is a raw UDP blaster for throughput baselines: it moves fixed-size
// datagrams as fast as batched system calls allow, either over plain sockets with x/net's
// ipv4/ipv6 WriteBatch/ReadBatch (sendmmsg/recvmmsg) or over a udp.Conn, so the daemon's
// goodput can be compared with both on the same link in one run. Every loop is bounded in
// packets and time.
package blast

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/udp"
)

// Result is what a receiver counted.
type Result struct {
	Packets uint64        // datagrams received
	Bytes   uint64        // payload bytes received
	Elapsed time.Duration // from the first to the last datagram
}

// PacketRate is datagrams per second between the first and the last arrival.
func (r Result) PacketRate() float64 {
	if r.Packets < 2 || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Packets-1) / r.Elapsed.Seconds()
}

// Gbps is payload gigabits per second between the first and the last arrival.
func (r Result) Gbps() float64 {
	if r.Packets < 2 || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) * float64(r.Packets-1) / float64(r.Packets) * 8 / r.Elapsed.Seconds() / 1e9
}

// String summarises the result on one line.
func (r Result) String() string {
	return fmt.Sprintf("%d packets, %d bytes in %v: %.0f packets/s, %.2f Gbit/s", r.Packets, r.Bytes, r.Elapsed, r.PacketRate(), r.Gbps())
}

// batcher is the part of ipv4.PacketConn and ipv6.PacketConn the blaster uses.
type batcher interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func newBatcher(c *net.UDPConn) batcher {
	if la, ok := c.LocalAddr().(*net.UDPAddr); ok && la.IP.To4() == nil {
		return ipv6.NewPacketConn(c)
	}
	return ipv4.NewPacketConn(c)
}

// Send sends count datagrams of size bytes to dst, batch at a time with sendmmsg, and
// stops early at until. It returns how many the kernel took.
func Send(c *net.UDPConn, dst netip.AddrPort, size, batch, count int, until time.Time) (int, error) {
	if size < 1 || batch < 1 || count < 0 {
		return 0, fmt.Errorf("blast: size %d, batch %d, count %d: need size, batch >= 1 and count >= 0", size, batch, count)
	}
	bc := newBatcher(c)
	to := net.UDPAddrFromAddrPort(dst)
	buf := make([]byte, size)
	ms := make([]ipv4.Message, batch)
	for i := range ms {
		ms[i] = ipv4.Message{Buffers: [][]byte{buf}, Addr: to}
	}
	return send(batch, count, until, func(n int) (int, error) { return bc.WriteBatch(ms[:n], 0) })
}

// Receive reads datagrams of up to size bytes, batch at a time with recvmmsg, until count
// arrived or none came for idle.
func Receive(c *net.UDPConn, size, batch, count int, idle time.Duration) (Result, error) {
	bc := newBatcher(c)
	ms := make([]ipv4.Message, batch)
	for i := range ms {
		ms[i] = ipv4.Message{Buffers: [][]byte{make([]byte, size)}}
	}
	return receive(c.SetReadDeadline, count, idle, func() (int, uint64, error) {
		k, err := bc.ReadBatch(ms, 0)
		k = max(k, 0) // recvmmsg's -1 on an error (the idle deadline after a loss)
		var n uint64
		for _, m := range ms[:k] {
			n += uint64(m.N)
		}
		return k, n, err
	})
}

// SendConn is Send over a udp.Conn: data packets (ECT(0)) with the given EVs in turn
// (evs == 1: one EV, as a single ECMP connection sends).
func SendConn(c *udp.Conn, dst netip.AddrPort, size, batch, count, evs int, until time.Time) (int, error) {
	if size < 1 || batch < 1 || count < 0 || evs < 1 {
		return 0, fmt.Errorf("blast: size %d, batch %d, count %d, evs %d: need size, batch, evs >= 1 and count >= 0", size, batch, count, evs)
	}
	buf := make([]byte, size)
	pk := make([]udp.Packet, batch)
	ev := 0
	return send(batch, count, until, func(n int) (int, error) {
		for i := range pk[:n] {
			pk[i] = udp.Packet{Buf: buf, N: size, Addr: dst, EV: uint16(ev), ECN: udp.ECT0}
			ev = (ev + 1) % evs
		}
		return c.WriteBatch(pk[:n])
	})
}

// ReceiveConn is Receive over a udp.Conn.
func ReceiveConn(c *udp.Conn, size, batch, count int, idle time.Duration) (Result, error) {
	pk := make([]udp.Packet, batch)
	for i := range pk {
		pk[i].Buf = make([]byte, size)
	}
	return receive(c.SetReadDeadline, count, idle, func() (int, uint64, error) {
		k, err := c.ReadBatch(pk)
		k = max(k, 0)
		var n uint64
		for _, p := range pk[:k] {
			n += uint64(p.N)
		}
		return k, n, err
	})
}

// send is the loop of Send and SendConn: write sends n datagrams and returns how many
// the kernel took; the clock is read once per 64 batches.
func send(batch, count int, until time.Time, write func(n int) (int, error)) (int, error) {
	sent := 0
	for sent < count {
		if sent%(batch*64) == 0 && time.Now().After(until) {
			break
		}
		k, err := write(min(batch, count-sent))
		sent += max(k, 0) // sendmmsg's -1 on an error
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// receive is the loop of Receive and ReceiveConn: read returns the datagrams and bytes of
// one batch; it stops after count datagrams or once none came for idle.
func receive(setDeadline func(time.Time) error, count int, idle time.Duration, read func() (int, uint64, error)) (Result, error) {
	var r Result
	var first, last time.Time
	defer setDeadline(time.Time{})
	for r.Packets < uint64(count) {
		setDeadline(time.Now().Add(idle))
		k, n, err := read()
		if k > 0 {
			last = time.Now()
			if r.Packets == 0 {
				first = last
			}
			r.Packets += uint64(k)
			r.Bytes += n
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			r.Elapsed = last.Sub(first)
			return r, err
		}
	}
	r.Elapsed = last.Sub(first)
	return r, nil
}

// ForceBuffers sets a plain socket's receive and send buffers past the sysctl caps
// (SO_RCVBUFFORCE/SO_SNDBUFFORCE, needs CAP_NET_ADMIN), as udp.Conn does.
func ForceBuffers(c *net.UDPConn, rcv, snd int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if rcv > 0 {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, soRcvbufForce, rcv)
		}
		if serr == nil && snd > 0 {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, soSndbufForce, snd)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
