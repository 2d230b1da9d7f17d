//go:build linux

package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

// xdpPath is the AF_XDP datapath of a Conn: an XDP program on the listen address's
// interface steers IPv4 UDP to the listen port into an AF_XDP socket on queue 0, and
// packets to peers whose next hop is known leave through that socket with the EV's
// source port in a header we build. The sockets stay open: a packet to a peer whose MAC is
// not yet in the neighbour table leaves through them (which makes the kernel resolve it),
// and whatever the program passes to the kernel on the listen port (IP options,
// fragments, other queues) is read from the listen socket.
type xdpPath struct {
	sock    *xsk.Socket
	prog    *xsk.Program
	rd      *xsk.RxReader
	ifindex int
	src     netip.Addr
	srcMAC  [6]byte

	// write side (under c.wmu)
	hops  map[netip.Addr]*xsk.Hop // nil value: the destination is not on our interface: sockets
	tried map[netip.Addr]time.Time
	tx    []xsk.TxPacket

	// read side (under c.rmu)
	batches  uint64 // read batches, for sampling the kernel's drop counters
	rx       []xsk.RxPacket
	pfd      [3]unix.PollFd // AF_XDP socket, listen socket, close eventfd
	evfd     int
	deadline atomic.Int64 // Unix ns; 0: none
}

// xdpRetry is how often a destination without a neighbour entry is looked up again
// (its packets meanwhile leave through the sockets).
const xdpRetry = time.Millisecond

// xdpFits says why the AF_XDP datapath would not carry all of the listen port's traffic
// (for DatapathAuto), or "" if it would: it needs a specific IPv4 listen address on an
// interface with one receive queue (on more, what the NIC spreads to the other queues
// reaches only the listen socket).
func (c *Conn) xdpFits() string {
	la := c.local.Addr()
	if !la.Is4() && !la.Is4In6() || la.IsUnspecified() {
		return fmt.Sprintf("listen address %v is not a specific IPv4 address", la)
	}
	if c.nl == nil {
		return "no netlink socket"
	}
	link, err := c.xdpLink(la.Unmap())
	if err != nil {
		return err.Error()
	}
	// The queues in use (ethtool), else the queues the device was made with.
	q, err := xsk.RxQueues(link.Attrs().Name)
	if err != nil {
		q = link.Attrs().NumRxQueues
	}
	if q > 1 {
		return fmt.Sprintf("%s has %d receive queues; the AF_XDP socket serves queue 0 only", link.Attrs().Name, q)
	}
	return ""
}

// xdpLink is the interface holding the IPv4 address la.
func (c *Conn) xdpLink(la netip.Addr) (netlink.Link, error) {
	addrs, err := c.nl.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == la {
			return c.nl.LinkByIndex(a.LinkIndex)
		}
	}
	return nil, fmt.Errorf("no interface has %v", la)
}

// openXDP sets up the AF_XDP datapath, or says why it cannot.
func (c *Conn) openXDP() error {
	la := c.local.Addr()
	if !la.Is4() && !la.Is4In6() || la.IsUnspecified() {
		return fmt.Errorf("needs a specific IPv4 listen address, not %v", la)
	}
	if c.nl == nil {
		return errors.New("no netlink socket")
	}
	la = la.Unmap()
	link, err := c.xdpLink(la)
	if err != nil {
		return err
	}
	ifindex := link.Attrs().Index
	if len(link.Attrs().HardwareAddr) != 6 {
		return fmt.Errorf("%s is not an Ethernet interface", link.Attrs().Name)
	}
	x := &xdpPath{ifindex: ifindex, src: la, hops: map[netip.Addr]*xsk.Hop{}, tried: map[netip.Addr]time.Time{},
		tx: make([]xsk.TxPacket, c.cfg.BatchSize), rx: make([]xsk.RxPacket, c.cfg.BatchSize), evfd: -1}
	copy(x.srcMAC[:], link.Attrs().HardwareAddr)
	ok := false
	defer func() {
		if !ok {
			x.close()
		}
	}()
	// No separate xsk.Probe: Open fails with the same explained errors, and a probe's
	// socket would hold the queue for a while after closing.
	cfg := xsk.Config{Ifindex: ifindex, Queue: 0, MaxDatagram: c.cfg.MaxDatagram}
	// On a veth, packets arrive as the peer's skbs: native XDP converts each into an
	// xdp_buff in page-pool pages behind veth's NAPI ring, generic XDP works on the skb.
	// The daemon pair measured 1.10x the goodput at 0.92x the CPU per GB with generic
	// (docs/datapath.md, "AF_XDP"); on a NIC native is the one to have.
	mode := xsk.ModeAuto
	if link.Type() == "veth" {
		mode = xsk.ModeGeneric
	}
	// Only datagrams to our address and port: the interface may hold other addresses, and
	// a datagram to the subnet broadcast is not ours either.
	x.prog, err = xsk.AttachTo(ifindex, la, c.local.Port(), c.local.Port(), 1, mode)
	if err != nil && mode != xsk.ModeAuto {
		x.prog, err = xsk.AttachTo(ifindex, la, c.local.Port(), c.local.Port(), 1, xsk.ModeAuto)
	}
	if err != nil {
		return err
	}
	if x.sock, err = xsk.Open(cfg); err != nil {
		return err
	}
	if err := x.prog.Register(0, x.sock); err != nil {
		return err
	}
	x.rd = xsk.NewRxReader(x.sock, c.cfg.BatchSize)
	x.rd.SetDst(netip.AddrPortFrom(la, c.local.Port())) // as the program, in case another put it there
	if x.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	rxfd := -1
	if err := c.rx.rc.Control(func(fd uintptr) { rxfd = int(fd) }); err != nil {
		return err
	}
	x.pfd = [3]unix.PollFd{{Fd: int32(x.sock.FD()), Events: unix.POLLIN}, {Fd: int32(rxfd), Events: unix.POLLIN}, {Fd: int32(x.evfd), Events: unix.POLLIN}}
	c.xdp = x
	ok = true
	return nil
}

func (x *xdpPath) setDeadline(t time.Time) {
	if t.IsZero() {
		x.deadline.Store(0)
	} else {
		x.deadline.Store(t.UnixNano())
	}
	x.wake()
}

func (x *xdpPath) wake() {
	if x.evfd >= 0 {
		var one = [8]byte{1}
		unix.Write(x.evfd, one[:])
	}
}

// closeXDP stops the AF_XDP datapath: it wakes a reader blocked in poll (which sees
// c.closed and returns), waits until no reader or writer is inside (the rings are about
// to be unmapped), then detaches the program and closes the socket.
func (c *Conn) closeXDP() error {
	c.xdp.wake()
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.xdp.kernelDrops(c)
	return c.xdp.close()
}

// kernelDrops samples the AF_XDP socket's drop counters into c's stats (c.rmu held: the
// socket is open). The kernel counts per socket, so no one else sees them reset.
func (x *xdpPath) kernelDrops(c *Conn) {
	if ks, err := x.sock.KernelStats(); err == nil {
		c.st.rxXDPDropped.Store(ks.Rx_dropped + ks.Rx_ring_full) // an empty fill ring counts in Rx_dropped
	}
}

func (x *xdpPath) close() error {
	var first error
	if x.prog != nil {
		first = x.prog.Close()
	}
	if x.sock != nil {
		if err := x.sock.Close(); err != nil && first == nil {
			first = err
		}
	}
	if x.evfd >= 0 {
		unix.Close(x.evfd)
		x.evfd = -1
	}
	return first
}

// xdpRead is ReadBatch on the AF_XDP datapath (c.rmu held): frames from the AF_XDP socket
// first; when there are none, poll it, the listen socket and the close/deadline eventfd.
func (c *Conn) xdpRead(pkts []Packet, inPlace bool) (int, error) {
	x := c.xdp
	n := min(len(pkts), len(x.rx))
	for {
		if c.closed.Load() {
			return 0, net.ErrClosed
		}
		for i := range n {
			x.rx[i].Buf = pkts[i].Buf
		}
		before := x.rd.Stats()
		var k int
		var err error
		if inPlace {
			k, err = x.rd.ReadUDP4InPlace(x.rx[:n], 0)
		} else {
			k, err = x.rd.ReadUDP4(x.rx[:n], 0)
		}
		if err != nil {
			return 0, err
		}
		if after := x.rd.Stats(); after.Packets-before.Packets != uint64(k) {
			c.st.rxTrunc.Add(after.Truncated - before.Truncated)
			c.st.rxWrongDst.Add(after.WrongDst - before.WrongDst)
			var bad uint64
			for i := range after.Malformed {
				bad += after.Malformed[i] - before.Malformed[i]
			}
			c.st.rxMalformed.Add(bad)
		}
		if k > 0 {
			now := time.Now().UnixNano() // copy mode carries no kernel receive timestamp
			for i := range k {
				p, q := &pkts[i], &x.rx[i]
				p.Buf = q.Buf // in place: the payload in the UMEM
				p.N, p.Addr, p.ECN, p.DSCP, p.RxTime, p.RxKernel, p.TTL = q.N, q.Src, q.TOS&3, q.TOS>>2, now, false, q.TTL
				c.account(p)
				q.Buf = nil
			}
			c.st.rxBatches.Add(1)
			if x.batches++; x.batches%256 == 0 {
				x.kernelDrops(c)
			}
			return k, nil
		}
		timeout := -1
		if d := x.deadline.Load(); d != 0 {
			left := time.Until(time.Unix(0, d))
			if left <= 0 {
				return 0, fmt.Errorf("udp: read: %w", os.ErrDeadlineExceeded)
			}
			timeout = int(left/time.Millisecond) + 1
		}
		if _, err := unix.Poll(x.pfd[:], timeout); err != nil && err != unix.EINTR {
			return 0, fmt.Errorf("udp: poll: %w", err)
		}
		if x.pfd[2].Revents != 0 {
			var b [8]byte
			unix.Read(x.evfd, b[:]) // a deadline change or Close: look again
		}
		if x.pfd[1].Revents != 0 {
			return c.readSockets(pkts)
		}
	}
}

// TxBuffers points pkts[i].Buf at send buffers of the AF_XDP datapath's own (the payload
// space of free UMEM frames, len(Buf) at least the largest datagram) for up to len(pkts)
// packets and returns how many; 0 on the sockets datapath. WriteBatch sends a packet
// built in such a Buf without copying it; the next TxBuffers or WriteBatch takes back
// the ones not sent, so the caller stops using them then.
func (c *Conn) TxBuffers(pkts []Packet) int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.xdp == nil || c.closed.Load() {
		return 0
	}
	s := c.xdp.sock
	s.ReturnLent()
	for i := range pkts {
		b, ok := s.TxBuffer()
		if !ok {
			return i
		}
		pkts[i].Buf = b
	}
	return len(pkts)
}

// xdpWrite is WriteBatch on the AF_XDP datapath (c.wmu held): runs of packets to one
// destination whose next hop is known go out as frames we build; the others through the
// sockets. Buffers TxBuffers lent and not sent go back.
func (c *Conn) xdpWrite(pkts []Packet) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	x := c.xdp
	defer x.sock.ReturnLent()
	sent := 0
	for sent < len(pkts) {
		dst := pkts[sent].Addr
		h := x.hop(c, dst.Addr())
		if h == nil || pkts[sent].N > x.sock.MaxDatagram() {
			// No next hop yet, or larger than the AF_XDP socket's buffers: the sockets.
			k, err := c.writeSockets(pkts[sent : sent+1])
			sent += k
			if err != nil {
				return sent, err
			}
			continue
		}
		j := 0
		for sent+j < len(pkts) && j < len(x.tx) && pkts[sent+j].Addr == dst {
			p := &pkts[sent+j]
			if p.N < 0 || p.N > len(p.Buf) || len(p.Payload) > 0 {
				if j == 0 {
					c.st.txErrors.Add(1)
					return sent, fmt.Errorf("udp: WriteBatch: Packet.N %d outside 0..len(Buf) %d, or a Payload (GathersPayload is false)", p.N, len(p.Buf))
				}
				break
			}
			if p.N > x.sock.MaxDatagram() {
				break
			}
			x.tx[j] = xsk.TxPacket{Payload: p.Buf[:p.N], SrcPort: c.EVPort(p.EV), DstPort: dst.Port(), TOS: uint8(c.tos(p))}
			j++
		}
		k, err := x.sock.SendUDP4(h, x.tx[:j]) // in place where p.Buf is from TxBuffers
		var bytes uint64
		for i := range x.tx[:k] {
			bytes += uint64(len(x.tx[i].Payload))
		}
		for i := range x.tx[:j] {
			x.tx[i].Payload = nil
		}
		c.st.txPackets.Add(uint64(k))
		c.st.txBytes.Add(bytes)
		c.st.txBatches.Add(1)
		sent += k
		if err != nil {
			c.st.txErrors.Add(1)
			return sent, err
		}
		if k < j {
			return sent, fmt.Errorf("udp: AF_XDP: every TX frame in flight")
		}
	}
	return sent, nil
}

// hop returns the frame header data for dst, or nil to use the sockets (not IPv4, another
// interface, or no neighbour entry yet: looked up again every xdpRetry).
func (x *xdpPath) hop(c *Conn, dst netip.Addr) *xsk.Hop {
	dst = dst.Unmap()
	if h, ok := x.hops[dst]; ok {
		return h
	}
	if !dst.Is4() {
		return nil
	}
	now := time.Now()
	if t, ok := x.tried[dst]; ok && now.Sub(t) < xdpRetry {
		return nil
	}
	x.tried[dst] = now
	rt, err := xsk.Resolve(c.nl, dst, 0)
	if err != nil {
		return nil
	}
	if rt.Ifindex != x.ifindex {
		x.hops[dst] = nil // routed out of another interface: always the sockets
		c.log.Info("udp: AF_XDP: destination not on the AF_XDP interface, using sockets", "dst", dst, "ifindex", rt.Ifindex)
		return nil
	}
	h := rt.Hop
	h.Src, h.SrcMAC = x.src, x.srcMAC
	x.hops[dst] = &h
	delete(x.tried, dst)
	return &h
}
