//go:build linux

package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
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
	// oobSlot is the control buffer of one message: receive needs TOS or TCLASS (24),
	// SCM_TIMESTAMPING (64), UDP_GRO (24), SO_RXQ_OVFL (24) and TTL or HOPLIMIT (24); send needs TOS/TCLASS (24),
	// SO_TIMESTAMPING (24), SCM_TS_OPT_ID (24) and UDP_SEGMENT (24).
	oobSlot = 192
)

// batch is a preallocated recvmmsg/sendmmsg argument block.
type batch struct {
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	// hdrs4raw holds the IP+UDP header of each message for the raw carrier.
	hdrs4raw []byte

	// Per write message: packets and payload bytes in it, GSO segment size, destination,
	// TOS, and whether more segments may join.
	msgPkts, msgBytes, msgSeg []int
	msgDst                    []netip.AddrPort
	msgTOS                    []uint32
	msgEV                     []int // EV mod EVS (the flow label differs per EV on one socket)
	msgOpen                   []bool
	names                     []unix.RawSockaddrInet6
	oob                       []byte

	// Arguments and results of one raw call (set before, read after RawConn.Read/Write).
	start, n, got int
	errno         syscall.Errno
	single        bool // use recvmsg/sendmsg (batching off)
	rawFn         func(fd uintptr) bool

	// Busy polling (reads, Config.BusyPoll): spin > 0 turns it on; a poll started at
	// spinFrom lasts until spinUntil (0: not polling) as busy allows; dryAt is when a read
	// went to sleep (0: not asleep); spinHits counts polls that found datagrams.
	spin, spinFrom, spinUntil, dryAt int64
	busy                             busyPolicy
	spinHits                         *atomic.Uint64
	closed                           *atomic.Bool
}

func (b *batch) init(size int, write bool) {
	b.hdrs = make([]unix.Mmsghdr, size)
	b.iovs = make([]unix.Iovec, 2*size) // message i uses iovs[2i] (and iovs[2i+1]: raw header + payload)
	b.hdrs4raw = make([]byte, size*rawHdrMax)
	if write {
		b.msgPkts, b.msgBytes, b.msgSeg = make([]int, size), make([]int, size), make([]int, size)
		b.msgDst, b.msgTOS, b.msgOpen = make([]netip.AddrPort, size), make([]uint32, size), make([]bool, size)
		b.msgEV = make([]int, size)
	}
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
// "would block", so the poller waits and calls again. The calls are raw: the socket is
// non-blocking, and a scheduler-visible syscall wakes the runtime's sysmon thread from
// its deep sleep, which then polls every 20 us until the daemon idles again: about four
// context switches per message on a latency-bound exchange.
func (b *batch) call(fd uintptr, mmsg, msg uintptr) bool {
	for {
		var r uintptr
		var e syscall.Errno
		if b.single {
			r, _, e = unix.RawSyscall(msg, fd, uintptr(unsafe.Pointer(&b.hdrs[b.start].Hdr)), 0)
			if e == 0 {
				b.hdrs[b.start].Len = uint32(r)
				r = 1
			}
		} else {
			r, _, e = unix.RawSyscall6(mmsg, fd, uintptr(unsafe.Pointer(&b.hdrs[b.start])), uintptr(b.n), 0, 0, 0)
		}
		switch e {
		case 0:
			b.got, b.errno = int(r), 0
			if b.spinUntil != 0 || b.dryAt != 0 {
				b.busyDone()
			}
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if b.spin > 0 && b.busyPoll() {
				continue
			}
			return false
		default:
			b.got, b.errno = 0, e
			return true
		}
	}
}

// busyPoll reports whether a read that found the socket empty is to try again (after
// yielding the processor), within Config.BusyPoll of the first empty read; the poller
// reads the fd under its read lock, so polling here cannot miss a readiness event.
func (b *batch) busyPoll() bool {
	now := time.Now().UnixNano()
	if b.spinUntil == 0 && b.dryAt == 0 {
		d := b.busy.budget()
		if d <= 0 {
			b.dryAt = now // not worth polling: sleep, and see how long the wait was
			return false
		}
		b.spinFrom, b.spinUntil = now, now+d
	}
	if b.spinUntil != 0 && now < b.spinUntil && !b.closed.Load() {
		runtime.Gosched()
		return true
	}
	if b.spinUntil != 0 {
		b.busy.polled(now-b.spinFrom, false)
		b.spinUntil, b.dryAt = 0, now
	}
	return false
}

// busyDone records a read that found datagrams after polling or sleeping.
func (b *batch) busyDone() {
	now := time.Now().UnixNano()
	if b.spinUntil != 0 {
		b.busy.polled(now-b.spinFrom, true)
		b.spinHits.Add(1)
	} else {
		b.busy.slept(now - b.dryAt)
	}
	b.spinUntil, b.dryAt = 0, 0
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
	if c.xdp != nil {
		return c.xdpRead(pkts, false)
	}
	return c.readSockets(pkts)
}

// ReadBatchInPlace is ReadBatch that, on the AF_XDP datapath, may point pkts[i].Buf at
// the datagram where it arrived (the AF_XDP socket's UMEM, len(Buf) == N) instead of
// copying it into the Buf offered. Such a Buf is valid until the next ReadBatch or
// ReadBatchInPlace (which hands its memory back to the kernel) or Close: the caller
// offers its own storage again on every call, as for ReadBatch.
func (c *Conn) ReadBatchInPlace(pkts []Packet) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.xdp != nil {
		return c.xdpRead(pkts, true)
	}
	return c.readSockets(pkts)
}

// readSockets is ReadBatch on the listen socket (c.rmu held).
func (c *Conn) readSockets(pkts []Packet) (int, error) {
	if c.gro.bufs != nil {
		return c.readGRO(pkts)
	}
	b := &c.rb
	n := min(len(pkts), len(b.hdrs))
	for i := 0; i < n; i++ {
		if len(pkts[i].Buf) == 0 {
			return 0, fmt.Errorf("udp: ReadBatch: Packet %d has an empty Buf", i)
		}
		b.iovs[2*i].Base = &pkts[i].Buf[0]
		b.iovs[2*i].SetLen(len(pkts[i].Buf))
	}
	got, err := c.recv(n)
	if err != nil {
		return 0, err
	}
	var user int64
	for i := 0; i < got; i++ {
		p := &pkts[i]
		h := &b.hdrs[i]
		p.N = int(h.Len)
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			c.st.rxTrunc.Add(1)
			p.N = min(p.N, len(p.Buf))
		}
		p.Addr = parseName(&b.names[i])
		o := c.parseRxOOB(b.oob[i*oobSlot : i*oobSlot+int(h.Hdr.Controllen)])
		p.ECN, p.DSCP, p.TTL = o.tos&3, o.tos>>2, o.ttl
		p.RxTime, p.RxKernel = o.ts, o.ts != 0
		if o.ts == 0 {
			if user == 0 {
				user = time.Now().UnixNano()
			}
			p.RxTime = user
		}
		c.account(p)
		b.iovs[2*i].Base = nil // do not keep the caller's buffer reachable
	}
	return got, nil
}

// recv runs recvmmsg for messages 0..n-1 of the read batch, whose iovecs are set.
func (c *Conn) recv(n int) (int, error) {
	b := &c.rb
	if !c.caps.Batch {
		n = 1
	}
	for i := 0; i < n; i++ {
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
	c.st.rxBatches.Add(1)
	return b.got, nil
}

// account adds one received packet to the counters.
func (c *Conn) account(p *Packet) {
	c.st.rxPackets.Add(1)
	c.st.rxBytes.Add(uint64(p.N))
	if !p.RxKernel {
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

// rxOOB is what the receive control messages of one datagram say.
type rxOOB struct {
	tos     uint8 // TOS / traffic-class byte
	ttl     uint8 // IP TTL / IPv6 hop limit (0: none came)
	ts      int64 // kernel software receive time (0: none)
	seg     int   // GRO segment size (0: a single datagram)
	drops   uint32
	dropsOK bool // drops holds the kernel's cumulative count of datagrams dropped for a full buffer
}

// parseRxOOB parses a datagram's receive control messages and records the kernel's drop count.
func (c *Conn) parseRxOOB(oob []byte) rxOOB {
	r := parseRxOOB(oob)
	if r.dropsOK {
		// A cumulative count since the socket was created, as of this datagram.
		for old := c.st.rxDropped.Load(); uint64(r.drops) > old && !c.st.rxDropped.CompareAndSwap(old, uint64(r.drops)); old = c.st.rxDropped.Load() {
		}
	}
	return r
}

// parseRxOOB is the pure parser of the receive control messages.
func parseRxOOB(oob []byte) (r rxOOB) {
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return
		}
		oob = rest
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			r.tos = data[0]
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			r.tos = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TTL && len(data) >= 4:
			r.ttl = uint8(binary.NativeEndian.Uint32(data)) // an int
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_HOPLIMIT && len(data) >= 4:
			r.ttl = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_TIMESTAMPING && len(data) >= int(unsafe.Sizeof(unix.ScmTimestamping{})):
			t := (*unix.ScmTimestamping)(unsafe.Pointer(&data[0]))
			if t.Ts[0].Sec != 0 || t.Ts[0].Nsec != 0 {
				r.ts = t.Ts[0].Nano()
			}
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			r.drops, r.dropsOK = binary.NativeEndian.Uint32(data), true
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			r.seg = int(binary.NativeEndian.Uint32(data)) // the kernel writes an int
		}
	}
	return
}

// WriteBatch sends pkts in order, each from the source port of its EV with the TOS byte
// of its class and ECN codepoint. Consecutive packets of the same EV go out in one
// sendmmsg; with UDP GSO, consecutive packets of one EV to one destination with the same
// TOS and size travel as one message the kernel splits. It returns how many packets the
// kernel took; on an error that count is the index of the packet that failed (the caller
// may drop it and send the rest).
func (c *Conn) WriteBatch(pkts []Packet) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.xdp != nil {
		return c.xdpWrite(pkts)
	}
	return c.writeSockets(pkts)
}

// writeSockets is WriteBatch through the send sockets (c.wmu held).
func (c *Conn) writeSockets(pkts []Packet) (int, error) {
	b := &c.wb
	b.single = !c.caps.Batch
	sent := 0
	for sent < len(pkts) {
		s := c.evs[int(pkts[sent].EV)%len(c.evs)]
		m, j := 0, 0 // messages and packets in this run
		sampled := false
		for sent+j < len(pkts) && j < len(b.hdrs) && c.evs[int(pkts[sent+j].EV)%len(c.evs)] == s {
			p := &pkts[sent+j]
			if m > 0 && c.join(m-1, j, p) {
				j++
				continue
			}
			smp, err := c.fillTx(m, j, p, s)
			if err != nil {
				if j == 0 {
					c.st.txErrors.Add(1)
					return sent, err
				}
				break // send what is ready; the bad packet fails on the next round
			}
			sampled = sampled || smp
			m++
			j++
		}
		if sampled {
			c.stampUserTime(s)
		}
		done, err := c.sendRun(s, m)
		for i := range b.iovs[:2*j] {
			b.iovs[i].Base = nil
		}
		if err == errGSORefused {
			sent += done // resend the rest of the run one message per packet
			continue
		}
		if err != nil {
			return sent + done, err
		}
		sent += j
	}
	return sent, nil
}

var errGSORefused = errors.New("udp: GSO refused")

// sendRun sends messages 0..m-1 of the write batch on s and returns the packets sent.
func (c *Conn) sendRun(s *sock, m int) (int, error) {
	b := &c.wb
	done := 0
	retried := false
	for off := 0; off < m; {
		b.start, b.n = off, m-off
		if b.single {
			b.n = 1
		}
		if err := s.rc.Write(b.rawFn); err != nil {
			if c.closed.Load() || errors.Is(err, net.ErrClosed) {
				return done, net.ErrClosed
			}
			return done, err
		}
		if b.errno != 0 && pendingICMP(b.errno) && !retried {
			retried = true // the pending error was another datagram's, and is now consumed
			continue
		}
		if b.errno != 0 {
			if (b.errno == unix.EINVAL || b.errno == unix.EMSGSIZE || b.errno == unix.EIO) && b.msgPkts[off] > 1 {
				// The kernel refuses GSO for this message (a segment larger than the
				// route's MTU allows, or no checksum offload: EIO): stop using it.
				c.log.Warn("udp: kernel refused a UDP GSO send; sending one datagram per message from now on",
					"segment", b.msgSeg[off], "segments", b.msgPkts[off], "err", b.errno)
				c.gso.Store(false)
				return done, errGSORefused
			}
			c.st.txErrors.Add(1)
			if b.errno == unix.EMSGSIZE {
				return done, c.tooBig(b.msgDst[off], b.msgBytes[off])
			}
			return done, os.NewSyscallError("sendmmsg", b.errno)
		}
		var bytes uint64
		for k := off; k < off+b.got; k++ {
			done += b.msgPkts[k]
			c.st.txPackets.Add(uint64(b.msgPkts[k]))
			bytes += uint64(b.msgBytes[k])
			if b.msgPkts[k] > 1 {
				c.st.txGSOMsgs.Add(1)
				c.st.txGSOSegs.Add(uint64(b.msgPkts[k]))
			}
		}
		c.st.txBytes.Add(bytes)
		c.st.txBatches.Add(1)
		off += b.got
	}
	return done, nil
}

// join appends p (packet j of the run) to message mi as one more GSO segment if it can
// travel in it: same destination and TOS, not larger than the segment size, and room left.
func (c *Conn) join(mi, j int, p *Packet) bool {
	b := &c.wb
	n := p.N + len(p.Payload) // the datagram: Buf[:N], then Payload
	if !b.msgOpen[mi] || !c.gso.Load() || p.Addr != b.msgDst[mi] || int(p.EV)%len(c.evs) != b.msgEV[mi] || n <= 0 || n > b.msgSeg[mi] || p.N < 0 || p.N > len(p.Buf) ||
		b.msgPkts[mi] >= gsoMaxSegs || b.msgBytes[mi]+n > gsoMaxBytes || c.tos(p) != b.msgTOS[mi] {
		return false
	}
	if c.caps.TxTimestamps && (c.txSeq+1)%uint64(c.cfg.TxTimestampEvery) == 0 {
		return false // a sampled packet goes in a message of its own
	}
	if c.caps.TxTimestamps {
		c.txSeq++
	}
	setIov(&b.iovs[2*j], p.Buf[:p.N])
	setIov(&b.iovs[2*j+1], p.Payload)
	h := &b.hdrs[mi].Hdr
	h.Iovlen += 2 // the kernel cuts the message's bytes at the segment size, across iovecs
	if b.msgPkts[mi] == 1 {
		oob := b.oob[mi*oobSlot : (mi+1)*oobSlot]
		off := int(h.Controllen)
		off += putCmsg16(oob[off:], unix.SOL_UDP, unix.UDP_SEGMENT, uint16(b.msgSeg[mi]))
		h.SetControllen(off)
	}
	b.msgPkts[mi]++
	b.msgBytes[mi] += n
	if n < b.msgSeg[mi] {
		b.msgOpen[mi] = false // only the last segment may be short
	}
	return true
}

// tos is the TOS / traffic-class byte p leaves with.
func (c *Conn) tos(p *Packet) uint32 {
	dscp := c.cfg.DataDSCP
	if p.Control {
		dscp = c.cfg.ControlDSCP
	}
	ecn := p.ECN & 3
	if !c.caps.ECN {
		ecn = 0
	}
	return uint32(dscp)<<2 | uint32(ecn)
}

// fillTx prepares message m of the write batch for p, packet j of the run, sent from
// socket s. It reports whether the packet carries a TX-timestamp request.
// setIov points v at b (nil and 0 for an empty b).
func setIov(v *unix.Iovec, b []byte) {
	if len(b) > 0 {
		v.Base = &b[0]
	} else {
		v.Base = nil
	}
	v.SetLen(len(b))
}

func (c *Conn) fillTx(m, j int, p *Packet, s *sock) (bool, error) {
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
	if c.raw && c.v6 && to4 {
		return false, fmt.Errorf("udp: WriteBatch: IPv4 destination %v on the IPv6 raw carrier", p.Addr)
	}
	if c.label && to4 {
		return false, fmt.Errorf("udp: WriteBatch: IPv4 destination %v cannot carry a flow label (Config.Carrier %q)", p.Addr, CarrierFlowLabel)
	}
	if len(p.Payload) > 0 && c.raw {
		return false, fmt.Errorf("udp: WriteBatch: Packet.Payload on the raw carrier (GathersPayload is false)")
	}
	h := &b.hdrs[m]
	n := p.N + len(p.Payload)
	if c.raw {
		setIov(&b.iovs[2*j+1], p.Buf[:p.N])
		h.Hdr.Iov = &b.iovs[2*j+1]
		h.Hdr.Iovlen = 1
	} else {
		// Packet j takes iovecs 2j and 2j+1 (its Payload, maybe empty), so that the
		// packets GSO joins into one message have adjacent iovecs.
		setIov(&b.iovs[2*j], p.Buf[:p.N])
		setIov(&b.iovs[2*j+1], p.Payload)
		h.Hdr.Iov = &b.iovs[2*j]
		h.Hdr.Iovlen = 2
	}
	name := &b.names[m]
	port := p.Addr.Port()
	if c.raw {
		port = 0 // raw sockets take the protocol, not a port, from the address
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
	tos := c.tos(p)
	oob := b.oob[m*oobSlot : (m+1)*oobSlot]
	var off int
	if c.raw {
		// Our own IP+UDP header goes first; the payload follows from the caller's buffer.
		hdr := c.rawHeader(b.hdrs4raw[j*rawHdrMax:(j+1)*rawHdrMax], p, dst, uint8(tos))
		b.iovs[2*j].Base = &hdr[0]
		b.iovs[2*j].SetLen(len(hdr))
		h.Hdr.Iov = &b.iovs[2*j]
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
	b.msgPkts[m], b.msgBytes[m], b.msgSeg[m] = 1, n, n
	b.msgDst[m], b.msgTOS[m], b.msgEV[m] = p.Addr, tos, int(p.EV)%len(c.evs)
	b.msgOpen[m] = !c.raw && !sampled && n > 0 && c.gso.Load()
	return sampled, nil
}

// putCmsg16 writes one control message with a 2-byte value and returns its space.
func putCmsg16(b []byte, level, typ int32, val uint16) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], val)
	return unix.CmsgSpace(2)
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
