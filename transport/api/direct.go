package api

import (
	"errors"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// The direct path: two sessions of this daemon that both negotiated it (DirectHeader)
// exchange messages over a Unix socket pair the daemon creates and hands to both
// clients, instead of through the daemon (two Unix socket hops instead of four per
// round trip). A client asks for it per destination (FrameDirect); the daemon answers
// DirectRelay unless the destination is an endpoint bound here by a session with the
// direct path. When it grants it, it queues a FrameDirectPeer to the destination's
// session behind everything queued for it and every local message waiting for room in
// its queue (so the asker's earlier messages through the daemon reach that client
// first: it starts reading the pair only then) and answers the asker with FrameDirectOK
// at once; the first grant between two sessions creates the pair and passes one end with
// each frame. The daemon keeps no descriptor of a pair once it wrote them.
//
// A client learns which passed descriptor is which pair only from frame order, so the
// first frame naming a pair that reaches a session must bring its end: grants are
// serialised (server.directMu) from the pair table through both frames being queued,
// so a grant that finds the pair known (the other session asking at the same moment)
// queues its frames behind the new pair's. Its DirectOK may still overtake a
// DirectPeer held behind local messages waiting for room: that client then finds the
// pair unknown and sends through the daemon until it asks again.

// maxDirectPairs bounds the pairs a session takes part in: each costs its client a
// descriptor and a reader; beyond it, messages to new local peers go through the daemon.
var maxDirectPairs = 1024

// handleDirect answers a FrameDirect from this session for endpoint ep at to.
func (x *session) handleDirect(tag uint32, to netip.AddrPort, ep uint32) {
	x.srv.directMu.Lock()
	defer x.srv.directMu.Unlock()
	st, pair, mine := x.grantDirect(to, ep)
	if st == apitypes.DirectNew || st == apitypes.DirectKnown {
		x.srv.directGrants.Add(1)
	}
	x.enqueue(outFrame{typ: apitypes.FrameDirectOK, tag: tag, payload: apitypes.AppendDirectOK(nil, st, pair), fd: mine})
}

// grantDirect decides a FrameDirect and, when it is granted, queues the destination's
// FrameDirectPeer; it returns the answer and, for a new pair, the asker's end. Only
// this session's reader calls it, so no message of the asker starts meanwhile.
func (x *session) grantDirect(to netip.AddrPort, ep uint32) (st uint8, pair uint64, mine *os.File) {
	s := x.srv
	if !s.own.has(to) {
		return apitypes.DirectRelay, 0, nil
	}
	s.mu.Lock()
	dst := s.eps[ep]
	s.mu.Unlock()
	if dst == nil || dst == x || !dst.directOK {
		return apitypes.DirectRelay, 0, nil
	}
	var theirs *os.File
	s.mu.Lock()
	myEP := x.endpoint
	if s.eps[ep] != dst || myEP == 0 {
		s.mu.Unlock()
		return apitypes.DirectRelay, 0, nil
	}
	pair, known := x.pairs[dst]
	if !known && (len(x.pairs) >= maxDirectPairs || len(dst.pairs) >= maxDirectPairs) {
		s.mu.Unlock()
		return apitypes.DirectRelay, 0, nil
	}
	if !known {
		var err error
		if mine, theirs, err = socketPair(); err != nil {
			s.mu.Unlock()
			s.log.Warn("direct path: socketpair", "err", err)
			return apitypes.DirectRelay, 0, nil
		}
		s.pairSeq++
		pair = s.pairSeq
		if x.pairs == nil {
			x.pairs = make(map[*session]uint64)
		}
		if dst.pairs == nil {
			dst.pairs = make(map[*session]uint64)
		}
		x.pairs[dst], dst.pairs[x] = pair, pair
		s.directPairs.Add(1)
	}
	s.mu.Unlock()
	peer := apitypes.DirectPeer{Pair: pair, From: to, FromEndpoint: myEP, Endpoint: ep}
	if !dst.queueBehindLocal(outFrame{typ: apitypes.FrameDirectPeer, payload: peer.Append(nil), fd: theirs}) {
		if theirs != nil {
			theirs.Close()
			mine.Close()
		}
		return apitypes.DirectRelay, 0, nil
	}
	if known {
		return apitypes.DirectKnown, pair, nil
	}
	return apitypes.DirectNew, pair, mine
}

// queueBehindLocal queues f for this session behind the local messages waiting for room
// in its queue (local.go), or at once when none waits; false when the session is gone.
func (x *session) queueBehindLocal(f outFrame) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.dead || x.draining {
		return false
	}
	if len(x.localWait) == 0 {
		return x.takeLocalLocked(localMsg{frame: &f})
	}
	x.srv.localWaiting.Add(1)
	x.localWait = append(x.localWait, localMsg{frame: &f})
	return true
}

// forgetPairsLocked drops the pairs of this (ended) session from its peers' tables: a
// later FrameDirect to its endpoint's next owner makes a new pair. s.mu is held.
func (x *session) forgetPairsLocked() {
	for p := range x.pairs {
		delete(p.pairs, x)
	}
	x.pairs = nil
}

// socketPair makes a connected pair of Unix stream sockets (close-on-exec).
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|sockCloexec, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "smartt-direct"), os.NewFile(uintptr(fds[1]), "smartt-direct"), nil
}

// writeWithFD writes the frame b (header and payload) and passes f with it (SCM_RIGHTS),
// then closes the daemon's copy of f.
func (x *session) writeWithFD(b []byte, f *os.File) error {
	defer f.Close()
	uc, ok := x.conn.(*net.UnixConn)
	if !ok {
		return errors.New("descriptors need a Unix socket session")
	}
	x.conn.SetWriteDeadline(x.writeDeadline())
	n, _, err := uc.WriteMsgUnix(b, unix.UnixRights(int(f.Fd())), nil)
	if err == nil && n < len(b) {
		_, err = x.conn.Write(b[n:])
	}
	return err
}
