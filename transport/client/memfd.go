package client

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// MessageFD is a message built in shared memory (a memfd): write it through Data, Seal it,
// then SendFD passes the descriptor to the daemon, which sends straight from these pages.
// Use it for large messages; the daemon copies nothing.
type MessageFD struct {
	f    *os.File
	mem  []byte // the whole mapping: headroom + message
	Data []byte // the message, writable until Seal
	size int64
}

// NewMessageFD creates a message of size bytes (1 .. 1 GiB) in a new memfd.
func NewMessageFD(size int64) (*MessageFD, error) {
	if size <= 0 || size > 1<<32 {
		return nil, fmt.Errorf("message size %d: must be in 1..%d", size, int64(1)<<32)
	}
	fd, err := memfdCreate("smartt-msg")
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "smartt-msg")
	total := apitypes.FDHeadroom + size
	if err := f.Truncate(total); err != nil {
		f.Close()
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap memfd: %w", err)
	}
	return &MessageFD{f: f, mem: mem, Data: mem[apitypes.FDHeadroom:], size: size}, nil
}

// Seal makes the message immutable (F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW), as the
// daemon requires; Data is unusable afterwards.
func (m *MessageFD) Seal() error {
	if m.mem != nil {
		if err := unix.Munmap(m.mem); err != nil { // a writable shared mapping would block F_SEAL_WRITE
			return err
		}
		m.mem, m.Data = nil, nil
	}
	return sealAll(m.f.Fd())
}

// Size returns the message's length in bytes.
func (m *MessageFD) Size() int64 { return m.size }

// Close releases the client's descriptor (the daemon keeps its own until the message completes).
func (m *MessageFD) Close() error {
	if m.mem != nil {
		unix.Munmap(m.mem)
		m.mem, m.Data = nil, nil
	}
	return m.f.Close()
}

// SendFD passes the sealed message m to the daemon for endpoint ep at the daemon at to,
// and returns without waiting for the outcome. m may be closed once SendFD returns.
func (s *Session) SendFD(to netip.AddrPort, ep uint32, m *MessageFD) (*Pending, error) {
	if _, ok := s.conn.(*net.UnixConn); !ok {
		return nil, fmt.Errorf("SendFD needs a Unix socket session")
	}
	if s.dir.on {
		s.dir.route.RLock()
		defer s.dir.route.RUnlock()
		if p, _ := s.routeRLocked(destKey{to, ep}, false); p != nil {
			return s.sendOnPairFrom(p, io.NewSectionReader(m.f, apitypes.FDHeadroom, m.size), m.size, nil)
		}
	}
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		return nil, err
	}
	if err := s.writeSendFD(tag, apitypes.SendHeader{To: to, Endpoint: ep, Size: uint64(m.size)}, m.f); err != nil {
		s.unregister(tag)
		return nil, s.brokenErr(err)
	}
	return &Pending{s: s, tag: tag, ch: ch}, nil
}

// DefaultSendFDThreshold is the message size from which SendAsync and Send pass a message
// through one of the session's send memfds (one copy, into pages the daemon sends from)
// instead of streaming it through the socket (two kernel copies, one into the socket and
// one out of it at the daemon). docs/datapath.md has the measurements behind it.
const DefaultSendFDThreshold = 4 << 20

// The session's send memfds: a fresh memfd per message costs the kernel a page
// allocation, a memory-cgroup charge and a free for every 4 KiB, more than the two
// copies through the socket it saves (docs/datapath.md). So a session keeps its memfds,
// mapped and their pages allocated, and copies each message into an idle one. They are
// sealed against shrinking and growing (the daemon's mapping can never fault) but not
// against writes: the daemon only sends a message's bytes and never relies on them, so
// a client that writes into a memfd whose message is in flight only garbles that
// message, as with the receive ring. A memfd is idle again once its message's outcome
// (Sent, Failed or Error) arrived: the daemon reads it no more once it answers (it may
// keep it mapped for the memfd's next message).
const (
	fdPoolIdle  = 8         // idle send memfds a session keeps at most
	fdPoolBytes = 256 << 20 // and their bytes at most
	fdRound     = 64 << 10  // a new memfd's size is rounded up to this
)

// sendMemfd is one of a session's send memfds.
type sendMemfd struct {
	f   *os.File
	mem []byte // the whole file, mapped shared and writable
}

// fdPool is the session's send memfds. Its own lock: deliver (the reader) returns them.
type fdPool struct {
	mu      sync.Mutex
	idle    []*sendMemfd
	busy    map[uint32]*sendMemfd // by the tag of the message in them
	refused map[uint32]*sendMemfd // the daemon refused the message as a memfd: Wait streams it from here
	off     atomic.Bool           // a memfd was refused: stream from now on
}

// SetSendFDThreshold makes SendAsync and Send pass every message of at least n bytes
// through a memfd when the session's daemon takes them (a Unix socket session whose
// daemon said so when the session opened); smaller messages, and all with n <= 0 (off),
// are streamed. The default is DefaultSendFDThreshold. SendBatch and SendFrom always
// stream.
func (s *Session) SetSendFDThreshold(n int64) { s.snd.fdThreshold.Store(max(n, 0)) }

// autoFD reports whether a message of size bytes goes through a memfd.
func (s *Session) autoFD(size int) bool {
	t := s.snd.fdThreshold.Load()
	return s.fdOK && t > 0 && int64(size) >= t && !s.fds.off.Load()
}

// sendViaFD copies data into an idle send memfd (a new one if none fits) and passes it
// with a SendFD frame. ok is false when no memfd could be had (no memfd support,
// descriptors or shmem exhausted): then nothing was sent and the caller streams.
func (s *Session) sendViaFD(to netip.AddrPort, ep uint32, data []byte) (p *Pending, ok bool, err error) {
	m, err := s.fds.get(apitypes.FDHeadroom + int64(len(data)))
	if err != nil {
		return nil, false, nil
	}
	copy(m.mem[apitypes.FDHeadroom:], data)
	tag := s.nextTag()
	s.mu.Lock()
	if err := s.err; err != nil {
		s.mu.Unlock()
		s.fds.put(m)
		return nil, true, err
	}
	ch := s.registerPooledLocked(tag)
	s.fds.mu.Lock()
	s.fds.busy[tag] = m // before the write: the reply may come at once
	s.fds.mu.Unlock()
	s.mu.Unlock()
	if err := s.writeSendFD(tag, apitypes.SendHeader{To: to, Endpoint: ep, Size: uint64(len(data))}, m.f); err != nil {
		s.unregister(tag)
		s.fds.mu.Lock()
		delete(s.fds.busy, tag)
		s.fds.mu.Unlock()
		m.close() // the session is broken; the daemon may hold the descriptor
		return nil, true, s.brokenErr(err)
	}
	return &Pending{s: s, tag: tag, ch: ch, viaFD: true, to: to, ep: ep, size: int64(len(data))}, true, nil
}

// get returns an idle memfd of at least need bytes (and not more than twice that), or a
// new one.
func (fp *fdPool) get(need int64) (*sendMemfd, error) {
	fp.mu.Lock()
	best := -1
	for i, m := range fp.idle {
		if c := int64(len(m.mem)); c >= need && c <= 2*need && (best < 0 || c < int64(len(fp.idle[best].mem))) {
			best = i
		}
	}
	if best >= 0 {
		m := fp.idle[best]
		fp.idle = append(fp.idle[:best], fp.idle[best+1:]...)
		fp.mu.Unlock()
		return m, nil
	}
	fp.mu.Unlock()
	return newSendMemfd((need + fdRound - 1) / fdRound * fdRound)
}

// newSendMemfd makes a memfd of size bytes, sealed against shrinking and growing, mapped
// with its pages allocated (MAP_POPULATE: no page faults while messages are copied in).
func newSendMemfd(size int64) (*sendMemfd, error) {
	fd, err := memfdCreate("smartt-send")
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "smartt-send")
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	if err := sealSize(uintptr(fd)); err != nil {
		f.Close()
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|mapPopulate)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sendMemfd{f: f, mem: mem}, nil
}

func (m *sendMemfd) close() {
	unix.Munmap(m.mem)
	m.f.Close()
}

// put makes m idle, or closes it when the pool is full.
func (fp *fdPool) put(m *sendMemfd) {
	fp.mu.Lock()
	var total int64
	for _, x := range fp.idle {
		total += int64(len(x.mem))
	}
	if len(fp.idle) < fdPoolIdle && total+int64(len(m.mem)) <= fdPoolBytes && !fp.off.Load() {
		fp.idle = append(fp.idle, m)
		m = nil
	}
	fp.mu.Unlock()
	if m != nil {
		m.close()
	}
}

// done is called with every reply to a message: the memfd of a message that was in one
// is idle again, unless the daemon refused it as a memfd (code 9): then it is kept for
// Pending.Wait to stream the message from, and later messages are streamed.
func (fp *fdPool) done(tag uint32, r reply) {
	fp.mu.Lock()
	m := fp.busy[tag]
	if m == nil {
		fp.mu.Unlock()
		return
	}
	delete(fp.busy, tag)
	if isCodeFD(r.err) {
		fp.refused[tag] = m
		fp.off.Store(true)
		m = nil
	}
	fp.mu.Unlock()
	if m != nil {
		fp.put(m)
	}
}

// closeAll closes every memfd (the session ended; the daemon unmaps its own mappings).
func (fp *fdPool) closeAll() {
	fp.mu.Lock()
	all := fp.idle
	for _, m := range fp.busy {
		all = append(all, m)
	}
	for _, m := range fp.refused {
		all = append(all, m)
	}
	fp.idle, fp.busy, fp.refused = nil, map[uint32]*sendMemfd{}, map[uint32]*sendMemfd{}
	fp.off.Store(true)
	fp.mu.Unlock()
	for _, m := range all {
		m.close()
	}
}

// writeSendFD writes a SendFD frame with f's descriptor, after any frames before it.
func (s *Session) writeSendFD(tag uint32, sh apitypes.SendHeader, f *os.File) error {
	uc, ok := s.conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("SendFD needs a Unix socket session")
	}
	var b [apitypes.HeaderLen + apitypes.SendHeaderLen]byte
	frame := sh.Append(apitypes.AppendHeader(b[:0], apitypes.Header{Type: apitypes.FrameSendFD, Tag: tag, Len: apitypes.SendHeaderLen}))
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.flushReleasesLocked()
	if err == nil {
		err = s.bw.Flush() // frames before this one go first
	}
	if err == nil {
		var n int
		n, _, err = uc.WriteMsgUnix(frame, unix.UnixRights(int(f.Fd())), nil)
		if err == nil && n != len(frame) {
			err = fmt.Errorf("short write of a SendFD frame: %d of %d bytes", n, len(frame))
		}
	}
	return err
}

// resendStreamed streams the message of p, whose memfd the daemon refused, under a new
// tag, and points p at it.
func (p *Pending) resendStreamed() error {
	fp := &p.s.fds
	fp.mu.Lock()
	m := fp.refused[p.tag]
	delete(fp.refused, p.tag)
	fp.mu.Unlock()
	if m == nil {
		return fmt.Errorf("smarttd session ended") // closeAll took it
	}
	defer m.close()
	np, err := p.s.sendStream(p.to, p.ep, m.mem[apitypes.FDHeadroom:apitypes.FDHeadroom+p.size]) // in the socket once it returns
	if err != nil {
		return err
	}
	p.tag, p.ch = np.tag, np.ch
	return nil
}
