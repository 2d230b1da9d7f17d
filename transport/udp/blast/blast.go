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

	"smartt/transport/udp"
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
	sent := 0
	for sent < count {
		if sent%(batch*64) == 0 && time.Now().After(until) {
			break
		}
		k, err := bc.WriteBatch(ms[:min(batch, count-sent)], 0)
		sent += k
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// Receive reads datagrams of up to size bytes, batch at a time with recvmmsg, until count
// arrived or none came for idle.
func Receive(c *net.UDPConn, size, batch, count int, idle time.Duration) (Result, error) {
	bc := newBatcher(c)
	ms := make([]ipv4.Message, batch)
	for i := range ms {
		ms[i] = ipv4.Message{Buffers: [][]byte{make([]byte, size)}}
	}
	var r Result
	var first, last time.Time
	for r.Packets < uint64(count) {
		c.SetReadDeadline(time.Now().Add(idle))
		k, err := bc.ReadBatch(ms, 0)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return r, err
		}
		last = time.Now()
		if r.Packets == 0 {
			first = last
		}
		for _, m := range ms[:k] {
			r.Bytes += uint64(m.N)
		}
		r.Packets += uint64(k)
	}
	r.Elapsed = last.Sub(first)
	return r, nil
}

// SendConn is Send over a udp.Conn: data packets (ECT(0)) with the given EVs in turn
// (evs == 1: one EV, as a single ECMP connection sends).
func SendConn(c *udp.Conn, dst netip.AddrPort, size, batch, count, evs int, until time.Time) (int, error) {
	if size < 1 || batch < 1 || count < 0 || evs < 1 {
		return 0, fmt.Errorf("blast: size %d, batch %d, count %d, evs %d: need size, batch, evs >= 1 and count >= 0", size, batch, count, evs)
	}
	buf := make([]byte, size)
	pk := make([]udp.Packet, batch)
	sent, ev := 0, 0
	for sent < count {
		if sent%(batch*64) == 0 && time.Now().After(until) {
			break
		}
		n := min(batch, count-sent)
		for i := range pk[:n] {
			pk[i] = udp.Packet{Buf: buf, N: size, Addr: dst, EV: uint16(ev), ECN: udp.ECT0}
			ev = (ev + 1) % evs
		}
		k, err := c.WriteBatch(pk[:n])
		sent += k
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// ReceiveConn is Receive over a udp.Conn.
func ReceiveConn(c *udp.Conn, size, batch, count int, idle time.Duration) (Result, error) {
	pk := make([]udp.Packet, batch)
	for i := range pk {
		pk[i].Buf = make([]byte, size)
	}
	var r Result
	var first, last time.Time
	for r.Packets < uint64(count) {
		c.SetReadDeadline(time.Now().Add(idle))
		k, err := c.ReadBatch(pk)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return r, err
		}
		last = time.Now()
		if r.Packets == 0 {
			first = last
		}
		for _, p := range pk[:k] {
			r.Bytes += uint64(p.N)
		}
		r.Packets += uint64(k)
	}
	c.SetReadDeadline(time.Time{})
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
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcv)
		}
		if serr == nil && snd > 0 {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, snd)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
