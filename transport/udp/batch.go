package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// x/net's ipv4/ipv6 ReadBatch returns every source as a freshly allocated *net.UDPAddr and
// takes destinations as net.Addr, so the hot path calls recvmmsg/sendmmsg itself on
// preallocated mmsghdr arrays, through the socket's RawConn so Go's poller still parks
// the goroutine when the socket would block. See docs/datapath.md.

const (
	sizeofSockaddr4 = unix.SizeofSockaddrInet4
	sizeofSockaddr6 = unix.SizeofSockaddrInet6
	// oobSlot is the control buffer of one message: receive needs TOS or TCLASS (24) plus
	// SCM_TIMESTAMPING (64); send needs TOS/TCLASS (24), SO_TIMESTAMPING (24), SCM_TS_OPT_ID (24).
	oobSlot = 128
)

// batch is a preallocated recvmmsg/sendmmsg argument block.
type batch struct {
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	// hdrs4raw holds the IP+UDP header of each message for the raw carrier.
	hdrs4raw []byte
	names    []unix.RawSockaddrInet6
	oob      []byte

	// Arguments and results of one raw call (set before, read after RawConn.Read/Write).
	start, n, got int
	errno         syscall.Errno
	single        bool // use recvmsg/sendmsg (batching off)
	rawFn         func(fd uintptr) bool
}

func (b *batch) init(size int, write bool) {
	b.hdrs = make([]unix.Mmsghdr, size)
	b.iovs = make([]unix.Iovec, 2*size) // message i uses iovs[2i] (and iovs[2i+1]: raw header + payload)
	b.hdrs4raw = make([]byte, size*rawHdrMax)
	b.names = make([]unix.RawSockaddrInet6, size)
	b.oob = make([]byte, size*oobSlot)
	for i := range b.hdrs {
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[2*i]
		h.Iovlen = 1
		h.Control = &b.oob[i*oobSlot]
	}
}

// call runs recvmmsg/sendmmsg (or recvmsg/sendmsg for one message) on fd; false means
// "would block", so the poller waits and calls again.
func (b *batch) call(fd uintptr, mmsg, msg uintptr) bool {
	for {
		var r uintptr
		var e syscall.Errno
		if b.single {
			r, _, e = unix.Syscall(msg, fd, uintptr(unsafe.Pointer(&b.hdrs[b.start].Hdr)), 0)
			if e == 0 {
				b.hdrs[b.start].Len = uint32(r)
				r = 1
			}
		} else {
			r, _, e = unix.Syscall6(mmsg, fd, uintptr(unsafe.Pointer(&b.hdrs[b.start])), uintptr(b.n), 0, 0, 0)
		}
		switch e {
		case 0:
			b.got, b.errno = int(r), 0
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			b.got, b.errno = 0, e
			return true
		}
	}
}

func (c *Conn) rxRecv(fd uintptr) bool { return c.rb.call(fd, unix.SYS_RECVMMSG, unix.SYS_RECVMSG) }
func (c *Conn) txSend(fd uintptr) bool { return c.wb.call(fd, unix.SYS_SENDMMSG, unix.SYS_SENDMSG) }

// ReadBatch receives up to len(pkts) datagrams (at most Config.BatchSize) into the
// packets' buffers, blocking until at least one arrives. It returns how many it filled;
// after Close it returns net.ErrClosed.
func (c *Conn) ReadBatch(pkts []Packet) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	b := &c.rb
	n := min(len(pkts), len(b.hdrs))
	if !c.caps.Batch {
		n = 1
	}
	for i := 0; i < n; i++ {
		p := &pkts[i]
		if len(p.Buf) == 0 {
			return 0, fmt.Errorf("udp: ReadBatch: Packet %d has an empty Buf", i)
		}
		b.iovs[2*i].Base = &p.Buf[0]
		b.iovs[2*i].SetLen(len(p.Buf))
		h := &b.hdrs[i]
		h.Hdr.Namelen = sizeofSockaddr6
		h.Hdr.SetControllen(oobSlot)
		h.Hdr.Flags = 0
		h.Len = 0
	}
	b.start, b.n, b.single = 0, n, !c.caps.Batch
	if err := c.rx.rc.Read(b.rawFn); err != nil {
		if c.closed.Load() || errors.Is(err, net.ErrClosed) {
			return 0, net.ErrClosed
		}
		return 0, err
	}
	if b.errno != 0 {
		c.st.rxErrors.Add(1)
		return 0, os.NewSyscallError("recvmmsg", b.errno)
	}
	got := b.got
	var user int64
	var bytes uint64
	for i := 0; i < got; i++ {
		p := &pkts[i]
		h := &b.hdrs[i]
		p.N = int(h.Len)
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			c.st.rxTrunc.Add(1)
			p.N = min(p.N, len(p.Buf))
		}
		bytes += uint64(p.N)
		p.Addr = parseName(&b.names[i])
		tos, ts := parseRxOOB(b.oob[i*oobSlot : i*oobSlot+int(h.Hdr.Controllen)])
		p.ECN, p.DSCP = tos&3, tos>>2
		if ts != 0 {
			p.RxTime, p.RxKernel = ts, true
		} else {
			if user == 0 {
				user = time.Now().UnixNano()
			}
			p.RxTime, p.RxKernel = user, false
			c.st.rxNoStamp.Add(1)
		}
		if c.caps.ECN {
			switch p.ECN {
			case CE:
				c.st.rxCE.Add(1)
			case ECT0, ECT1:
				c.st.rxECT.Add(1)
			}
			c.st.rxDSCP[p.DSCP].Add(1)
		}
		b.iovs[2*i].Base = nil // do not keep the caller's buffer reachable
	}
	c.st.rxPackets.Add(uint64(got))
	c.st.rxBytes.Add(bytes)
	c.st.rxBatches.Add(1)
	return got, nil
}

// parseName decodes the kernel-filled source address without allocating.
func parseName(sa *unix.RawSockaddrInet6) (ap netip.AddrPort) {
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	switch sa.Family {
	case unix.AF_INET:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// parseRxOOB extracts the TOS/traffic-class byte and the software receive timestamp.
func parseRxOOB(oob []byte) (tos uint8, ts int64) {
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return
		}
		oob = rest
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			tos = data[0]
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			tos = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_TIMESTAMPING && len(data) >= int(unsafe.Sizeof(unix.ScmTimestamping{})):
			t := (*unix.ScmTimestamping)(unsafe.Pointer(&data[0]))
			if t.Ts[0].Sec != 0 || t.Ts[0].Nsec != 0 {
				ts = t.Ts[0].Nano()
			}
		}
	}
	return
}

// WriteBatch sends pkts in order, each from the source port of its EV with the TOS byte
// of its class and ECN codepoint. Consecutive packets of the same EV go out in one
// sendmmsg. It returns how many packets the kernel took; on an error that count is the
// index of the packet that failed (the caller may drop it and send the rest).
func (c *Conn) WriteBatch(pkts []Packet) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := &c.wb
	b.single = !c.caps.Batch
	sent := 0
	for sent < len(pkts) {
		s := c.evs[int(pkts[sent].EV)%len(c.evs)]
		n := 0
		sampled := false
		for sent+n < len(pkts) && n < len(b.hdrs) && c.evs[int(pkts[sent+n].EV)%len(c.evs)] == s {
			smp, err := c.fillTx(n, &pkts[sent+n], s)
			if err != nil {
				if n == 0 {
					c.st.txErrors.Add(1)
					return sent, err
				}
				break // send what is ready; the bad packet fails on the next round
			}
			sampled = sampled || smp
			n++
		}
		if sampled {
			c.stampUserTime(s)
		}
		for off := 0; off < n; {
			b.start, b.n = off, n-off
			if b.single {
				b.n = 1
			}
			if err := s.rc.Write(b.rawFn); err != nil {
				if c.closed.Load() || errors.Is(err, net.ErrClosed) {
					return sent + off, net.ErrClosed
				}
				return sent + off, err
			}
			if b.errno != 0 {
				c.st.txErrors.Add(1)
				return sent + off, os.NewSyscallError("sendmmsg", b.errno)
			}
			var bytes uint64
			for i := off; i < off+b.got; i++ {
				bytes += uint64(pkts[sent+i].N)
			}
			c.st.txPackets.Add(uint64(b.got))
			c.st.txBytes.Add(bytes)
			c.st.txBatches.Add(1)
			off += b.got
		}
		for i := 0; i < 2*n; i++ {
			b.iovs[i].Base = nil
		}
		sent += n
	}
	return sent, nil
}

// fillTx prepares slot i of the write batch for p, sent from socket s. It reports whether
// the packet carries a TX-timestamp request.
func (c *Conn) fillTx(i int, p *Packet, s *sock) (bool, error) {
	b := &c.wb
	if p.N < 0 || p.N > len(p.Buf) {
		return false, fmt.Errorf("udp: WriteBatch: Packet.N %d outside 0..len(Buf) %d", p.N, len(p.Buf))
	}
	dst := p.Addr.Addr()
	to4 := dst.Is4() || dst.Is4In6()
	if !dst.IsValid() || p.Addr.Port() == 0 {
		return false, fmt.Errorf("udp: WriteBatch: Packet.Addr %v is not a destination address:port", p.Addr)
	}
	if !c.v6 && !to4 {
		return false, fmt.Errorf("udp: WriteBatch: IPv6 destination %v on an IPv4 socket layer", p.Addr)
	}
	iov := &b.iovs[2*i]
	if p.N > 0 {
		iov.Base = &p.Buf[0]
	} else {
		iov.Base = nil
	}
	iov.SetLen(p.N)
	h := &b.hdrs[i]
	h.Hdr.Iovlen = 1
	name := &b.names[i]
	port := p.Addr.Port()
	if c.raw {
		port = 0 // raw sockets take the protocol, not a port, from the address
	}
	if c.label && to4 {
		return false, fmt.Errorf("udp: WriteBatch: IPv4 destination %v cannot carry a flow label (Config.Carrier %q)", p.Addr, CarrierFlowLabel)
	}
	if c.v6 {
		*name = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.As16()}
		if c.label {
			name.Flowinfo = htonl(uint32(int(p.EV)%len(c.evs)) + 1)
		}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&name.Port))[:], port)
		h.Hdr.Namelen = sizeofSockaddr6
	} else {
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Unmap().As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:], port)
		h.Hdr.Namelen = sizeofSockaddr4
	}
	dscp := c.cfg.DataDSCP
	if p.Control {
		dscp = c.cfg.ControlDSCP
	}
	ecn := p.ECN & 3
	if !c.caps.ECN {
		ecn = 0
	}
	tos := uint32(dscp)<<2 | uint32(ecn)
	oob := b.oob[i*oobSlot : (i+1)*oobSlot]
	var off int
	if c.raw {
		// Our own IP+UDP header goes first; the payload follows from the caller's buffer.
		b.iovs[2*i+1] = *iov
		hdr := c.rawHeader(b.hdrs4raw[i*rawHdrMax:(i+1)*rawHdrMax], p, dst, uint8(tos))
		iov.Base = &hdr[0]
		iov.SetLen(len(hdr))
		h.Hdr.Iovlen = 2
	} else if to4 {
		off = putCmsg(oob, unix.IPPROTO_IP, unix.IP_TOS, tos)
	} else {
		off = putCmsg(oob, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos)
	}
	sampled := false
	if c.caps.TxTimestamps {
		c.txSeq++
		if c.txSeq%uint64(c.cfg.TxTimestampEvery) == 0 {
			id := c.sampleTx(p.EV, s)
			off += putCmsg(oob[off:], unix.SOL_SOCKET, unix.SO_TIMESTAMPING, unix.SOF_TIMESTAMPING_TX_SOFTWARE)
			off += putCmsg(oob[off:], unix.SOL_SOCKET, unix.SCM_TS_OPT_ID, id)
			sampled = true
		}
	}
	h.Hdr.SetControllen(off)
	h.Hdr.Flags = 0
	h.Len = 0
	return sampled, nil
}

// putCmsg writes one control message with a 4-byte value and returns its space.
func putCmsg(b []byte, level, typ int32, val uint32) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], val)
	return unix.CmsgSpace(4)
}

func htonl(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}
