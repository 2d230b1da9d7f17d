package api

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/daemon"
)

// Local delivery: a message whose destination is this daemon (one of its own addresses
// and its port) and an endpoint bound here goes from the sending session's buffer to the
// receiving session's queue in memory, never through the engine and UDP. The sender's
// Sent frame says the message is in the receiving session's queue; when that queue is
// full (api.max_recv_queue, max_recv_queue_total) the message waits, in order behind any
// other waiting local message to that session, and its Sent frame waits with it: nothing
// is dropped. A waiting message stays charged to its sender's outstanding bytes.

// ownAddrs is the set of addresses at which this daemon receives messages.
type ownAddrs struct {
	port  uint16
	addrs map[netip.Addr]struct{}
}

// newOwnAddrs is the daemon's own addresses for its listen address: that address alone,
// or, for a wildcard one, every address of the host's interfaces at start (loopback
// included).
func newOwnAddrs(listen netip.AddrPort) ownAddrs {
	if !listen.IsValid() || listen.Port() == 0 {
		return ownAddrs{}
	}
	o := ownAddrs{port: listen.Port(), addrs: make(map[netip.Addr]struct{})}
	if a := listen.Addr().Unmap(); !a.IsUnspecified() {
		o.addrs[a] = struct{}{}
		return o
	}
	o.addrs[netip.MustParseAddr("127.0.0.1")] = struct{}{}
	o.addrs[netip.IPv6Loopback()] = struct{}{}
	ifas, _ := net.InterfaceAddrs()
	for _, ia := range ifas {
		if ipn, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(ipn.IP); ok {
				o.addrs[a.Unmap()] = struct{}{}
			}
		}
	}
	return o
}

// has reports whether ap is this daemon.
func (o ownAddrs) has(ap netip.AddrPort) bool {
	if o.addrs == nil || ap.Port() != o.port {
		return false
	}
	_, ok := o.addrs[ap.Addr().Unmap()]
	return ok
}

// localDst returns the session bound to the Send's destination when that is an endpoint
// of this daemon, else nil.
func (s *Server) localDst(sh SendHeader) *session {
	if !s.own.has(sh.To) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eps[sh.Endpoint]
}

// localMsg is a message on its way to a session of this daemon.
type localMsg struct {
	frame *outFrame // a marker, not a message: a frame queued once what waits before it went in (direct.go)
	m     *sendMsg
	from  *session
	tag   uint32
	start time.Time
	h     RecvHeader
}

// body is the received message's body: the sender's buffer behind the envelope; it goes
// back to the sender's pool once written to the receiver.
func (l *localMsg) body() msgBody {
	l.m.piece[0] = l.m.buf
	return msgBody{pieces: l.m.piece[:], skip: envelopeLen, n: int64(l.h.Size), local: l.m}
}

// maxLocalWaiting bounds the local messages waiting for room, all sessions together:
// each holds a buffer of at least a few hundred bytes whatever its size, which the
// outstanding limits (bytes) alone would not bound.
var maxLocalWaiting int64 = 1 << 16

// errLocalGone fails a local message whose receiving session ended before it took it.
var errLocalGone = errors.New("the receiving endpoint's session closed before the message reached it")

// errCancelled fails a message its client cancelled.
var errCancelled = errors.New(apitypes.CancelledReason)

// sendLocal hands message m (read whole into m.buf) from endpoint ep to dst, the session
// bound to the destination endpoint: at once when dst's queue has room, else when it
// has (m waits in dst.localWait). The Sent or Failed frame follows either way.
func (x *session) sendLocal(m *sendMsg, sh SendHeader, ep uint32, dst *session) {
	s := x.srv
	l := localMsg{m: m, from: x, tag: m.tag, start: time.Now(),
		h: RecvHeader{From: sh.To, FromEndpoint: ep, Endpoint: sh.Endpoint, Size: sh.Size}}
	x.track(m.tag, m, dst)
	s.msgsAccepted.Add(1)
	s.bytesAccepted.Add(sh.Size)
	s.msgsLocal.Add(1)
	handed, err := dst.offerLocal(l)
	if err != nil {
		m.put()
	}
	if handed || err != nil {
		x.localDone(l, err)
	}
}

// offerLocal queues l for this (the receiving) session if its queue has room and no
// other local message waits; else l waits. It reports whether l was queued; an error
// when the session is gone.
func (x *session) offerLocal(l localMsg) (bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.dead || x.draining {
		return false, errLocalGone
	}
	if len(x.localWait) == 0 && x.takeLocalLocked(l) {
		return true, nil
	}
	x.srv.localWaits.Add(1)
	x.srv.localWaiting.Add(1)
	x.localWait = append(x.localWait, l)
	return false, nil
}

// takeLocalLocked queues l if the session's queue has room for it (the rule of
// max_recv_queue: any message when nothing is queued) and max_recv_queue_total does.
// x.mu is held.
func (x *session) takeLocalLocked(l localMsg) bool {
	if l.frame != nil {
		x.flushHeldLocked()
		x.queue = append(x.queue, *l.frame)
		x.cond.Signal()
		return true
	}
	body := l.body()
	n := heldSize(body) // charged as a received message is (enqueueRecvLocked)
	if x.recvFullLocked(n) {
		return false
	}
	if _, ok := x.srv.reserveRecv(n); !ok {
		if !x.localRetry {
			// Other sessions hold the total: nothing of this session's will wake us.
			x.localRetry = true
			time.AfterFunc(2*time.Millisecond, x.admitLocal)
		}
		return false
	}
	if x.enqueueRecvLocked(l.h, body, true) != recvQueued {
		return false // stalled and gone: the caller fails it
	}
	x.srv.msgsDelivered.Add(1)
	x.srv.bytesDelivered.Add(l.h.Size)
	return true
}

// admitLocal queues the local messages waiting for this session that fit now and
// completes them for their senders. The writer calls it after each frame.
func (x *session) admitLocal() {
	x.mu.Lock()
	x.localRetry = false
	if len(x.localWait) == 0 {
		x.mu.Unlock()
		return
	}
	done := x.localDoneBuf[:0]
	for len(x.localWait) > 0 && !x.dead && x.takeLocalLocked(x.localWait[0]) {
		done = append(done, x.localWait[0])
		x.srv.localWaiting.Add(-1)
		x.localWait[0] = localMsg{}
		x.localWait = popFront(x.localWait)
	}
	x.localDoneBuf = done[:0]
	x.mu.Unlock()
	for _, l := range done {
		if l.m != nil {
			l.from.localDone(l, nil)
		}
	}
	clear(done)
}

// failLocal fails the local messages still waiting for this session (it ended).
func (x *session) failLocal() {
	x.mu.Lock()
	wait := x.localWait
	x.localWait = nil
	x.srv.localWaiting.Add(-int64(len(wait)))
	x.mu.Unlock()
	for _, l := range wait {
		if l.frame != nil {
			if l.frame.fd != nil {
				l.frame.fd.Close()
			}
			continue
		}
		l.m.put()
		l.from.localDone(l, errLocalGone)
	}
}

// unpark takes the local message from's tag out of this session's wait list; false when
// it is not there (queued already, or never waited).
func (x *session) unpark(from *session, tag uint32) (localMsg, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, l := range x.localWait {
		if l.from == from && l.tag == tag && l.m != nil {
			x.srv.localWaiting.Add(-1)
			x.localWait = append(x.localWait[:i], x.localWait[i+1:]...)
			return l, true
		}
	}
	return localMsg{}, false
}

// localDone completes a local message for its sender (this session): Sent when it was
// queued for its receiver (err nil), else Failed. A failed message's buffer must have
// been given back by the caller.
func (x *session) localDone(l localMsg, err error) {
	x.release(int64(l.h.Size))
	x.completed(l.tag, l.m, daemon.SendResult{Err: err, Elapsed: int64(time.Since(l.start))})
}
