//go:build linux

package udp

import (
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ICMP errors: the send sockets set IP_RECVERR (and IPV6_RECVERR), so the kernel queues
// an ICMP destination-unreachable answer to one of our datagrams on the socket's error
// queue, with the datagram's destination. WaitUnreachable waits for such queues with
// its own epoll set (edge-triggered, EPOLLERR only: the Go poller does not report
// errors) and reads them; TX timestamp reports met on the way are kept for TxStamps.

// idleWake is the pause after a wake-up that found no ICMP report, which bounds the
// wake-ups TX timestamp reports cause to 1/idleWake a second (and delays an ICMP
// report by at most that).
const idleWake = 5 * time.Millisecond

// maxStash bounds the TX timestamps WaitUnreachable keeps for TxStamps.
const maxStash = 1024

// icmpState is the epoll set and what it found.
type icmpState struct {
	mu    sync.Mutex // epfd, efd (Close wakes the waiter through efd)
	epfd  int
	efd   int
	wait  sync.Mutex // one WaitUnreachable at a time
	evs   [16]unix.EpollEvent
	name  unix.RawSockaddrInet6
	stash []TxStamp // TX timestamps read while looking for ICMP errors (under Conn.smu)
	stray strayState
}

// setRecvErr asks for ICMP errors on the error queue of send socket fd.
func (c *Conn) setRecvErr(fd int) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1) // also IPv4 peers of a dual-stack socket
	if c.v6 {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
	}
}

// pendingICMP reports whether a send failed only because an earlier ICMP error was
// pending on the socket (IP_RECVERR sets it): the datagram was not sent, and the error
// concerns another datagram, so the send is retried.
func pendingICMP(errno unix.Errno) bool {
	return errno == unix.ECONNREFUSED || errno == unix.EHOSTUNREACH || errno == unix.ENETUNREACH || errno == unix.EACCES
}

// openICMP creates the epoll set over the send sockets (first WaitUnreachable).
func (c *Conn) openICMP() error {
	st := &c.icmp
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.epfd > 0 {
		return nil
	}
	if c.closed.Load() {
		return net.ErrClosed
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1}); err != nil {
		unix.Close(ep)
		unix.Close(efd)
		return err
	}
	for i, s := range c.socks {
		if c.raw {
			break // the raw carrier's socket does not set IP_RECVERR
		}
		ev := unix.EpollEvent{Events: unix.EPOLLERR | unix.EPOLLET, Fd: int32(i)}
		if c.answersStrays(s) {
			ev.Events |= unix.EPOLLIN
		}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, rxFD(s), &ev); err != nil {
			unix.Close(ep)
			unix.Close(efd)
			return err
		}
	}
	st.epfd, st.efd = ep, efd
	return nil
}

// closeICMP wakes a waiting WaitUnreachable (Close); the waiter closes the set.
func (c *Conn) closeICMP() {
	st := &c.icmp
	st.mu.Lock()
	if st.efd > 0 {
		one := [8]byte{1}
		_, _ = unix.Write(st.efd, one[:])
	}
	st.mu.Unlock()
}

// WaitUnreachable blocks until the kernel reports ICMP destination-unreachable errors
// for datagrams sent through the send sockets, fills dst with them and returns how
// many (reports beyond len(dst) in one socket's queue are dropped). After Close it
// returns net.ErrClosed. Calls are serialised.
func (c *Conn) WaitUnreachable(dst []Unreachable) (int, error) {
	st := &c.icmp
	st.wait.Lock()
	defer st.wait.Unlock()
	if err := c.openICMP(); err != nil {
		return 0, err
	}
	for {
		if c.closed.Load() {
			st.mu.Lock()
			unix.Close(st.epfd)
			unix.Close(st.efd)
			st.epfd, st.efd = -1, -1
			st.mu.Unlock()
			return 0, net.ErrClosed
		}
		k, err := unix.EpollWait(st.epfd, st.evs[:], 1000)
		if err != nil && err != unix.EINTR {
			return 0, err
		}
		n := 0
		for _, ev := range st.evs[:max(k, 0)] {
			if ev.Fd >= 0 && int(ev.Fd) < len(c.socks) {
				if ev.Events&unix.EPOLLIN != 0 {
					c.answerStrays(c.socks[ev.Fd])
				}
				n += c.drainErrQueue(c.socks[ev.Fd], dst[n:])
			}
		}
		if n > 0 {
			return n, nil
		}
		if k > 0 {
			// Only TX timestamp reports (one per sampled packet): let them gather rather
			// than wake per packet; events meanwhile wait in the epoll set.
			time.Sleep(idleWake)
		}
	}
}

// drainErrQueue reads s's whole error queue: ICMP unreachable reports into dst, TX
// timestamp reports into the stash for TxStamps. It returns the reports filled.
func (c *Conn) drainErrQueue(s *sock, dst []Unreachable) int {
	c.smu.Lock()
	defer c.smu.Unlock()
	n := 0
	for {
		c.eres = errResult{}
		// Control holds the descriptor for the call, so a concurrent Close cannot free it.
		if s.rc.Control(c.errFn) != nil || !c.eres.ok {
			return n
		}
		switch {
		case c.eres.is:
			s.pending.Add(-1)
			c.stashStamp()
		case c.eres.unreach != 0 && n < len(dst):
			dst[n] = Unreachable{Dst: parseName(&c.icmp.name), Port: c.eres.unreach == unreachPort}
			n++
			c.st.rxICMP.Add(1)
		case c.eres.unreach != 0:
			c.st.rxICMPDropped.Add(1)
		}
	}
}

// stashStamp keeps the TX timestamp report just read for the next TxStamps.
func (c *Conn) stashStamp() {
	c.ringMu.Lock()
	defer c.ringMu.Unlock()
	if c.txRing == nil {
		return
	}
	e := &c.txRing[c.eres.id%txRingSize]
	if !e.valid || e.id != c.eres.id || e.user == 0 || len(c.icmp.stash) >= maxStash {
		return
	}
	c.icmp.stash = append(c.icmp.stash, TxStamp{ID: e.id, EV: e.ev, UserTime: e.user, KernTime: c.eres.kern})
	e.valid = false
	c.st.txMatched.Add(1)
}

// ICMP unreachable kinds in errResult.unreach.
const (
	unreachPort = 1
	unreachHost = 2
)

// icmpUnreach classifies an extended error: unreachPort, unreachHost or 0 (not an ICMP
// destination-unreachable report).
func icmpUnreach(ee *unix.SockExtendedErr) uint8 {
	switch ee.Origin {
	case unix.SO_EE_ORIGIN_ICMP:
		if ee.Type != 3 { // ICMP_DEST_UNREACH
			return 0
		}
		if ee.Code == 3 { // ICMP_PORT_UNREACH
			return unreachPort
		}
		if ee.Code == 4 { // fragmentation needed: path MTU, not reachability
			return 0
		}
		return unreachHost
	case unix.SO_EE_ORIGIN_ICMP6:
		if ee.Type != 1 { // ICMPV6_DEST_UNREACH
			return 0
		}
		if ee.Code == 4 { // ICMPV6_PORT_UNREACH
			return unreachPort
		}
		return unreachHost
	}
	return 0
}
