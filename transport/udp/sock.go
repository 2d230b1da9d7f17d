//go:build linux

package udp

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// sock is one UDP socket registered with Go's poller (so blocking calls park the goroutine
// and Close wakes them) plus its raw descriptor for recvmmsg/sendmmsg.
type sock struct {
	uc   net.PacketConn // *net.UDPConn, or *net.IPConn for the raw carrier
	rc   syscall.RawConn
	port uint16
	ev   uint16

	pending atomic.Int32 // TX timestamps requested and maybe not yet read back
}

func (s *sock) close() error {
	if s.uc == nil {
		return nil
	}
	return s.uc.Close()
}

// newSock creates a UDP socket of the family, lets setup set options on the raw descriptor
// before bind, binds it to addr and hands it to the Go poller.
func newSock(v6 bool, addr netip.AddrPort, setup func(fd int) error) (*sock, netip.AddrPort, error) {
	family := unix.AF_INET
	if v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, netip.AddrPort{}, fmt.Errorf("socket: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	if v6 {
		// Dual stack when listening on ::, so IPv4 peers work too (as v4-mapped addresses).
		v6only := 1
		if addr.Addr().IsUnspecified() {
			v6only = 0
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only); err != nil {
			return nil, netip.AddrPort{}, fmt.Errorf("IPV6_V6ONLY: %w", err)
		}
	}
	if setup != nil {
		if err := setup(fd); err != nil {
			return nil, netip.AddrPort{}, err
		}
	}
	if err := unix.Bind(fd, sockaddr(v6, addr)); err != nil {
		return nil, netip.AddrPort{}, fmt.Errorf("bind %v: %w", addr, err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, netip.AddrPort{}, fmt.Errorf("getsockname: %w", err)
	}
	local := fromSockaddr(sa)
	f := os.NewFile(uintptr(fd), "udp")
	pc, err := net.FilePacketConn(f) // dups fd into the poller
	f.Close()
	ok = true // f.Close closed fd
	if err != nil {
		return nil, netip.AddrPort{}, fmt.Errorf("FilePacketConn: %w", err)
	}
	s, err := pollSock(pc)
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	s.port = local.Port()
	return s, local, nil
}

// pollSock wraps a socket the Go poller owns.
func pollSock(pc net.PacketConn) (*sock, error) {
	sc, ok := pc.(syscall.Conn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("%T has no raw descriptor", pc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		pc.Close()
		return nil, err
	}
	return &sock{uc: pc, rc: rc}, nil
}

func sockaddr(v6 bool, ap netip.AddrPort) unix.Sockaddr {
	if v6 {
		return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
}

func fromSockaddr(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// openSockets creates the listen socket and the EV pool.
func (c *Conn) openSockets() error {
	cfg := &c.cfg
	listen := cfg.Listen
	if !c.v6 {
		listen = netip.AddrPortFrom(listen.Addr().Unmap(), listen.Port())
	}
	rx, local, err := newSock(c.v6, listen, c.setupRx)
	if err != nil {
		return fmt.Errorf("udp: listen socket %v (Config.Listen): %w", listen, err)
	}
	c.rx, c.local = rx, local
	c.caps.RecvBuffer = c.sizeBuffer(rxFD(rx), unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, cfg.RecvBuffer, "net.core.rmem_max", "udp.recv_buffer", true)
	c.caps.SendBuffer = -1
	nsocks := cfg.EVS
	switch cfg.Carrier {
	case CarrierFlowLabel:
		nsocks = 1
		c.label = true
	case CarrierRaw:
		nsocks = 0
		s, err := c.openRaw()
		if err != nil {
			return fmt.Errorf("udp: raw carrier (Config.Carrier %q): %w", CarrierRaw, err)
		}
		c.socks = append(c.socks, s)
		c.caps.SendBuffer = c.sizeBuffer(rxFD(s), unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, cfg.SendBuffer, "net.core.wmem_max", "udp.send_buffer", true)
	}
	for i := 0; i < nsocks; i++ {
		port := uint16(0)
		if cfg.EVPortBase != 0 {
			port = cfg.EVPortBase + uint16(i)
		}
		s, _, err := newSock(c.v6, netip.AddrPortFrom(listen.Addr(), port), c.setupTx)
		if err != nil {
			return fmt.Errorf("udp: EV socket %d (port %d; Config.EVPortBase %d, EVS %d): %w", i, port, cfg.EVPortBase, cfg.EVS, err)
		}
		s.ev = uint16(i)
		c.socks = append(c.socks, s)
		// Buffer sizing warns once, not once per EV socket.
		sb := c.sizeBuffer(rxFD(s), unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, cfg.SendBuffer, "net.core.wmem_max", "udp.send_buffer", i == 0)
		if c.caps.SendBuffer < 0 || sb < c.caps.SendBuffer {
			c.caps.SendBuffer = sb
		}
	}
	c.evs = make([]*sock, cfg.EVS)
	for i := range c.evs {
		c.evs[i] = c.socks[i%len(c.socks)]
	}
	if c.label {
		if err := leaseFlowLabels(rxFD(c.socks[0]), cfg.EVS); err != nil {
			return fmt.Errorf("udp: flowlabel carrier (Config.Carrier): %w", err)
		}
	}
	return nil
}

// rxFD returns the socket's descriptor; it stays valid until the socket is closed.
func rxFD(s *sock) int {
	var fd int
	s.rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// setupRx sets the receive-side options; a refusal switches the feature off (fallback).
func (c *Conn) setupRx(fd int) error {
	if err := c.reusePort(fd); err != nil {
		return err
	}
	if c.caps.ECN {
		var err error
		if c.v6 {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
			// Dual-stack sockets see IPv4 packets too; their TOS comes as IP_TOS.
			if err == nil && c.cfg.Listen.Addr().IsUnspecified() {
				err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
			}
		} else {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
		}
		if err != nil {
			c.cfg.Logger.Warn("udp: kernel refused IP_RECVTOS/IPV6_RECVTCLASS; ECN and DSCP of received packets unknown", "err", err)
			c.caps.ECN = false
		}
	}
	if c.caps.GRO {
		c.enableGRO(fd)
	}
	// Every datagram then carries the count of datagrams dropped for a full buffer.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	// And its TTL / hop limit, from which the engine learns the path's length.
	var terr error
	if c.v6 {
		terr = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1)
		if terr == nil && c.cfg.Listen.Addr().IsUnspecified() {
			terr = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTTL, 1)
		}
	} else {
		terr = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTTL, 1)
	}
	c.caps.TTL = terr == nil
	if terr != nil {
		c.cfg.Logger.Warn("udp: kernel refused IP_RECVTTL/IPV6_RECVHOPLIMIT; path lengths unknown", "err", terr)
	}
	if c.caps.RxTimestamps {
		flags := unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
			c.cfg.Logger.Warn("udp: kernel refused SO_TIMESTAMPING; receive times come from the user clock", "err", err)
			c.caps.RxTimestamps = false
		}
	}
	return nil
}

// setupTx sets the send-side options of an EV socket.
func (c *Conn) setupTx(fd int) error {
	if err := c.reusePort(fd); err != nil {
		return err
	}
	// Replies go to the listen port (wire ReplyPort); anything arriving here is dropped
	// soon, but the TX-timestamp error queue is charged to this buffer, so keep some room.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
	if c.caps.GSO {
		// Probe only: the segment size goes per message as a control message.
		if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, 0); err != nil {
			c.cfg.Logger.Warn("udp: kernel refused UDP_SEGMENT; no UDP GSO", "err", err)
			c.caps.GSO = false
		}
	}
	if c.caps.DF && !c.raw && !c.setDF(fd) {
		c.caps.DF = false
	}
	if !c.raw {
		c.setRecvErr(fd)
	}
	if c.caps.TxTimestamps {
		flags := unix.SOF_TIMESTAMPING_SOFTWARE | unix.SOF_TIMESTAMPING_OPT_TSONLY | unix.SOF_TIMESTAMPING_OPT_ID
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
			c.cfg.Logger.Warn("udp: kernel refused SO_TIMESTAMPING on send sockets; no TX timestamps", "err", err)
			c.caps.TxTimestamps = false
		}
	}
	return nil
}

// sizeBuffer applies a buffer size: SO_*BUFFORCE first (needs CAP_NET_ADMIN, ignores the
// sysctl cap), else the capped option plus a warning naming the sysctl. It returns the
// effective size the kernel reports (Linux doubles the request for bookkeeping).
func (c *Conn) sizeBuffer(fd, opt, force, want int, sysctl, field string, warn bool) int {
	if want > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, want); err != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, want)
		}
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	if err != nil {
		return 0
	}
	// Linux doubles the value set (the other half is its bookkeeping) and getsockopt
	// reports the doubled value: halve it to compare with what was asked.
	got /= 2
	if warn && want > 0 && got < want {
		c.cfg.Logger.Warn("udp: socket buffer smaller than configured; raise the sysctl or run with CAP_NET_ADMIN",
			"field", field, "want", want, "got", got, "sysctl", fmt.Sprintf("sysctl -w %s=%d", sysctl, want))
	}
	return got
}

// reusePort sets SO_REUSEPORT when Config.ReusePort asks for it (engine shards).
func (c *Conn) reusePort(fd int) error {
	if !c.cfg.ReusePort {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fmt.Errorf("SO_REUSEPORT (Config.ReusePort, engine shards): %w", err)
	}
	return nil
}
