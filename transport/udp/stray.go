//go:build linux

package udp

import (
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Strays: nothing should arrive on an EV port (replies go to the listen port, wire
// ReplyPort), so a datagram that does was sent to the wrong port, typically a peer
// configured with one of our EV ports instead of the listen port. The socket is bound,
// so the kernel sends no ICMP port unreachable, and the peer's dial would fail only
// after its retransmission budget. WaitUnreachable therefore also reads the EV
// sockets (port carrier) and answers a smartt first contact (DATA or PROBE to no
// connection yet, unsealed) with an EV-port RESET from the same port: SrcConn repeats
// the dialler's ID, which no engine does (transport.IsEVPortReset), so its engine fails
// the dial at once naming the address as an EV port. The answers are rate-limited and
// no larger than what they answer, so a forged source gains nothing.

// Bounds on the EV-port RESETs one Conn sends.
const (
	strayRate  = 100 // answers a second
	strayBurst = 16
)

// strayState is the answering's buffers and token bucket (under icmpState.wait).
type strayState struct {
	buf    [256]byte // a first contact's header is all we read
	reset  [wire.ResetLen]byte
	pkt    wire.Packet
	tokens float64
	last   time.Time
}

// answersStrays reports whether s is an EV socket of its own (port carrier): the
// flow-label carrier's send socket and the raw carrier's are not bound to EV ports.
func (c *Conn) answersStrays(s *sock) bool { return !c.raw && !c.label && s != c.rx }

// answerStrays reads every datagram waiting on EV socket s and answers the smartt first
// contacts among them (within the rate) with an EV-port RESET.
func (c *Conn) answerStrays(s *sock) {
	st := &c.icmp.stray
	_ = s.rc.Control(func(fd uintptr) {
		for {
			n, from, err := unix.Recvfrom(int(fd), st.buf[:], unix.MSG_DONTWAIT|unix.MSG_TRUNC)
			if err != nil {
				return
			}
			c.st.rxStrays.Add(1)
			to, ok := st.answer(st.buf[:min(n, len(st.buf))], fromSockaddr(from))
			if !ok || !st.take(time.Now()) {
				continue
			}
			if unix.Sendto(int(fd), st.reset[:], unix.MSG_DONTWAIT, sockaddr(c.v6, to)) == nil {
				c.st.txStrayResets.Add(1)
			}
		}
	})
}

// answer decodes a datagram from from and, if it is an unsealed smartt first contact,
// encodes the EV-port RESET into st.reset and returns where it goes.
func (st *strayState) answer(b []byte, from netip.AddrPort) (netip.AddrPort, bool) {
	p := &st.pkt
	if p.Decode(b) != nil {
		return netip.AddrPort{}, false
	}
	if p.Type != wire.TypeData && p.Type != wire.TypeProbe || p.DstConn != 0 || p.SrcConn == 0 || p.Flags&wire.FlagSealed != 0 {
		return netip.AddrPort{}, false
	}
	to := from
	if p.ReplyPort != 0 {
		to = netip.AddrPortFrom(from.Addr(), p.ReplyPort)
	}
	id := p.SrcConn
	*p = wire.Packet{Header: wire.Header{Type: wire.TypeReset, DstConn: id, SrcConn: id}}
	if _, err := p.Encode(st.reset[:]); err != nil || !to.IsValid() || to.Port() == 0 {
		return netip.AddrPort{}, false
	}
	return to, true
}

// take spends a token of the answers' bucket at now, if there is one.
func (st *strayState) take(now time.Time) bool {
	if st.last.IsZero() {
		st.tokens = strayBurst
	} else {
		st.tokens = min(strayBurst, st.tokens+now.Sub(st.last).Seconds()*strayRate)
	}
	st.last = now
	if st.tokens < 1 {
		return false
	}
	st.tokens--
	return true
}
