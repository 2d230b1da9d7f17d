//go:build linux

package udp

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TX timestamps: every TxTimestampEvery-th packet carries a SO_TIMESTAMPING control
// message asking for a software transmit timestamp, and an SCM_TS_OPT_ID message with our
// own sample number, which the kernel echoes in the error-queue report (ee_data). The
// user-space send time is remembered in a ring under that number; TxStamps reads the
// error queues and pairs both times.

const txRingSize = 4096

type errResult struct {
	ok   bool // one message was read
	id   uint32
	kern int64
	is   bool // it was a TX timestamp report
	// unreach: an ICMP destination-unreachable report (unreachPort, unreachHost), for the
	// destination in Conn.icmp.name
	unreach uint8
}

// sampleTx allocates a sample number for a packet about to be sent on s.
func (c *Conn) sampleTx(ev uint16, s *sock) uint32 {
	id := c.txID
	c.txID++
	c.ringMu.Lock()
	e := &c.txRing[id%txRingSize]
	if e.valid {
		c.st.txLost.Add(1)
	}
	*e = txPending{id: id, valid: true, ev: ev}
	c.ringMu.Unlock()
	c.txRun = append(c.txRun, id)
	s.pending.Add(1)
	c.st.txSampled.Add(1)
	return id
}

// stampUserTime records the user-space send time of the samples in the run about to go out.
func (c *Conn) stampUserTime(s *sock) {
	now := time.Now().UnixNano()
	c.ringMu.Lock()
	for _, id := range c.txRun {
		if e := &c.txRing[id%txRingSize]; e.valid && e.id == id {
			e.user = now
		}
	}
	c.ringMu.Unlock()
	c.txRun = c.txRun[:0]
}

// TxStamps reads the kernel's transmit timestamps of sampled packets that have arrived so
// far into dst and returns how many it filled. It never blocks. The send-path delay of a
// sample is KernTime - UserTime.
func (c *Conn) TxStamps(dst []TxStamp) int {
	if !c.caps.TxTimestamps || c.closed.Load() {
		return 0
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	n := copy(dst, c.icmp.stash) // read by WaitUnreachable
	c.icmp.stash = c.icmp.stash[:copy(c.icmp.stash, c.icmp.stash[n:])]
	for _, s := range c.socks {
		pend := s.pending.Load()
		if pend <= 0 {
			continue
		}
		for n < len(dst) {
			c.eres = errResult{}
			if s.rc.Control(c.errFn) != nil || !c.eres.ok {
				// Queue empty: stop polling this socket until it sends another sample.
				s.pending.CompareAndSwap(pend, 0)
				break
			}
			s.pending.Add(-1)
			if !c.eres.is {
				if c.eres.unreach != 0 {
					s.pending.Add(1)       // not a timestamp
					c.st.rxICMPLost.Add(1) // read here, so WaitUnreachable will not see it
				}
				continue
			}
			c.ringMu.Lock()
			e := &c.txRing[c.eres.id%txRingSize]
			if e.valid && e.id == c.eres.id && e.user != 0 {
				dst[n] = TxStamp{ID: e.id, EV: e.ev, UserTime: e.user, KernTime: c.eres.kern}
				e.valid = false
				n++
				c.st.txMatched.Add(1)
			}
			c.ringMu.Unlock()
		}
		if n == len(dst) {
			break
		}
	}
	return n
}

// readErrQueue reads one message from the socket's error queue without blocking.
func (c *Conn) readErrQueue(fd uintptr) {
	c.eiov.Base = &c.errBuf[0]
	c.eiov.SetLen(len(c.errBuf))
	c.icmp.name = unix.RawSockaddrInet6{}
	c.emsg = unix.Msghdr{Iov: &c.eiov, Iovlen: 1, Control: &c.errOOB[0],
		Name: (*byte)(unsafe.Pointer(&c.icmp.name)), Namelen: uint32(unsafe.Sizeof(c.icmp.name))}
	c.emsg.SetControllen(len(c.errOOB))
	_, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.emsg)), unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
	if e != 0 {
		return
	}
	c.eres.ok = true
	oob := c.errOOB[:c.emsg.Controllen]
	var kern int64
	var ee *unix.SockExtendedErr
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		oob = rest
		switch {
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_TIMESTAMPING && len(data) >= int(unsafe.Sizeof(unix.ScmTimestamping{})):
			t := (*unix.ScmTimestamping)(unsafe.Pointer(&data[0]))
			kern = t.Ts[0].Nano()
		case (h.Level == unix.IPPROTO_IP && h.Type == unix.IP_RECVERR || h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_RECVERR) &&
			len(data) >= int(unsafe.Sizeof(unix.SockExtendedErr{})):
			ee = (*unix.SockExtendedErr)(unsafe.Pointer(&data[0]))
		}
	}
	if ee != nil && ee.Origin == unix.SO_EE_ORIGIN_TIMESTAMPING && ee.Info == unix.SCM_TSTAMP_SND && kern != 0 {
		c.eres.is, c.eres.id, c.eres.kern = true, ee.Data, kern
	} else if ee != nil {
		c.eres.unreach = icmpUnreach(ee)
	}
}
