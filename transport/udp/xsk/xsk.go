//go:build linux

// Package xsk is an AF_XDP socket on one queue of a network interface, written with
// golang.org/x/sys/unix only: a UMEM of fixed-size frames, the fill, completion, RX and TX
// rings mapped into the process, sendto to kick transmission and poll to wait for
// arrivals. On top of it, UDP4 builds and parses Ethernet + IPv4 + UDP frames itself (the
// source port of every packet is the caller's choice, so per-packet entropy values cost no
// system call each), and Program is the XDP program that steers the daemon's UDP port
// range to the socket and passes everything else to the kernel.
//
// Probe says why AF_XDP is unavailable (kernel, permissions, driver) so a caller can fall
// back to UDP sockets. The per-packet paths allocate nothing. See docs/datapath.md, "AF_XDP".
package xsk

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Defaults for zero Config fields.
const (
	DefaultFrameSize = 4096 // a page: the largest chunk the kernel accepts
	DefaultFrames    = 4096
	DefaultRingSize  = 2048

	DefaultMaxDatagram = 9000 - 28
)

// Config describes one AF_XDP socket.
type Config struct {
	Ifindex int // interface to bind
	Queue   int // its RX/TX queue

	// FrameSize is the size of one UMEM frame: 2048 or 4096 (the kernel refuses chunks
	// larger than a page, hugepages or not). A larger packet spans several frames
	// (multi-buffer AF_XDP, XDP_USE_SG, Linux 6.6+); copy-mode RX keeps 256 bytes of each
	// frame as headroom.
	FrameSize int
	Frames    int // UMEM frames; half feed RX (fill ring), half are TX buffers (default 4096)
	RingSize  int // entries of each ring, a power of two (default 2048)

	// MaxDatagram is the largest UDP payload SendUDP4 sends (default 8972: an MTU-9000
	// IPv4 datagram). Each TX buffer spans the neighbouring frames a frame of that size
	// needs, so a datagram is written (or built in place, TxBuffer) in one piece.
	MaxDatagram int

	ZeroCopy bool // bind with XDP_ZEROCOPY (driver support needed) instead of XDP_COPY
	NoRX     bool // no RX and fill rings (a send-only socket)
	NoTX     bool // no TX and completion rings (a receive-only socket)
}

// ring is one of the four single-producer single-consumer rings shared with the kernel.
// For the rings we produce into (fill, TX) cached is our producer index; for the rings we
// consume from (completion, RX) it is our consumer index.
type ring struct {
	mem   []byte
	prod  *uint32
	cons  *uint32
	flags *uint32
	desc  unsafe.Pointer
	mask  uint32
	size  uint32
}

func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}

func (r *ring) xdesc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// Socket is an AF_XDP socket with its UMEM. It is not safe for concurrent use except
// that the RX methods (Receive, Release, Wait, an RxReader's reads) and the TX methods
// (Frame, Queue, Kick, Reap, TxBuffer, ReturnLent, SendUDP4) may run in two different
// goroutines.
type Socket struct {
	fd    int
	cfg   Config
	umem  []byte
	fill  ring
	comp  ring
	rx    ring
	tx    ring
	zc    bool
	close atomic.Bool

	// TX buffers: units of txUnit neighbouring frames from txBase on, each holding one
	// datagram. A unit is free, lent (TxBuffer) or in flight until the kernel completes
	// every descriptor queued from it (unitOut).
	free    []uint64 // TX units not in flight (their first frame's offset)
	txBase  uint64
	txUnit  int      // frames per unit
	unitOut []uint8  // descriptors in flight per unit
	lent    []uint64 // units lent by TxBuffer and not yet sent or given back
	isLent  []bool   // per unit
	txOut   uint32   // TX descriptors queued but not yet completed
	txPub   uint32   // TX producer index published to the kernel
	pending uint32   // TX descriptors written after txPub, not yet published

	rxCons  uint32 // RX consumer index up to which frames were handed to the caller
	rxHeld  uint32 // RX descriptors handed out by Receive and not yet released
	fillPro uint32 // fill ring producer index

	pfd []unix.PollFd

	st Stats
}

// Stats are a Socket's cumulative counters (read with Socket.Stats from the TX goroutine
// or after the socket is idle).
type Stats struct {
	TxPackets, TxFrames, TxKicks, TxKickErrors, TxNoFrame uint64 // TxFrames: descriptors (a packet may span several)
	RxFrames, RxPolls                                     uint64
}

func (c *Config) normalize() error {
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.Frames == 0 {
		c.Frames = DefaultFrames
	}
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.MaxDatagram == 0 {
		c.MaxDatagram = DefaultMaxDatagram
	}
	if c.MaxDatagram < 0 || c.MaxDatagram > 65535-28 {
		return fmt.Errorf("xsk: MaxDatagram %d: allowed 1..%d", c.MaxDatagram, 65535-28)
	}
	pow2 := func(v int) bool { return v > 0 && v&(v-1) == 0 }
	if c.FrameSize != 2048 && c.FrameSize != 4096 {
		return fmt.Errorf("xsk: FrameSize %d: allowed 2048 or 4096", c.FrameSize)
	}
	if !pow2(c.RingSize) || c.RingSize < 2 {
		return fmt.Errorf("xsk: RingSize %d: need a power of two >= 2", c.RingSize)
	}
	if c.Frames < 2 || c.Frames > 1<<20 {
		return fmt.Errorf("xsk: Frames %d: allowed 2..%d", c.Frames, 1<<20)
	}
	if c.NoRX && c.NoTX {
		return errors.New("xsk: NoRX and NoTX: nothing to do")
	}
	if c.Ifindex <= 0 || c.Queue < 0 {
		return fmt.Errorf("xsk: Ifindex %d, Queue %d: need an interface index and a queue >= 0", c.Ifindex, c.Queue)
	}
	return nil
}

// Error is a failed step of opening an AF_XDP socket, with a reason a person can act on.
type Error struct {
	Step   string // "socket", "umem", "rings", "mmap", "bind", "bpf", "attach", ...
	Err    error  // the kernel's error
	Reason string // what it most likely means
}

// Error says which step failed, the kernel's error and the likely reason.
func (e *Error) Error() string {
	return fmt.Sprintf("af_xdp %s: %v (%s)", e.Step, e.Err, e.Reason)
}

// Unwrap returns the kernel's error (errors.Is(err, unix.EAFNOSUPPORT) and the like work).
func (e *Error) Unwrap() error { return e.Err }

// explain maps a step's errno to the likely cause.
func explain(step string, err error) *Error { return explainSG(step, err, false) }

func explainSG(step string, err error, sg bool) *Error {
	r := "unexpected error"
	switch {
	case step == "socket" && errors.Is(err, unix.EAFNOSUPPORT):
		r = "kernel without AF_XDP sockets (CONFIG_XDP_SOCKETS, Linux 4.18+)"
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		r = "permission: AF_XDP needs CAP_NET_RAW, XDP programs CAP_BPF+CAP_NET_ADMIN (or CAP_SYS_ADMIN)"
	case step == "umem" && errors.Is(err, unix.ENOMEM):
		r = "cannot pin the UMEM: raise RLIMIT_MEMLOCK or use fewer/smaller frames"
	case step == "umem" && errors.Is(err, unix.EINVAL):
		r = "kernel refuses this UMEM (frame size, alignment)"
	case step == "bind" && errors.Is(err, unix.EINVAL) && sg:
		r = "kernel or driver without multi-buffer AF_XDP (XDP_USE_SG, Linux 6.6+), or no such queue"
	case step == "bind" && errors.Is(err, unix.ENODEV):
		r = "no such interface"
	case step == "bind" && errors.Is(err, unix.EINVAL):
		r = "interface has no such queue, or the socket was set up inconsistently"
	case step == "bind" && errors.Is(err, unix.EBUSY):
		r = "the queue already has an AF_XDP socket or UMEM"
	case step == "bind" && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP)):
		r = "driver lacks zero-copy AF_XDP (use copy mode)"
	case step == "bpf" && errors.Is(err, unix.ENOSYS):
		r = "kernel without bpf(2) (CONFIG_BPF_SYSCALL)"
	case step == "bpf" && errors.Is(err, unix.EINVAL):
		r = "kernel refused the program or map (too old for XSKMAP or bpf_redirect_map's fallback action: Linux 5.3+)"
	case step == "attach" && errors.Is(err, unix.EOPNOTSUPP):
		r = "driver has no XDP in this mode"
	}
	return &Error{Step: step, Err: err, Reason: r}
}

// Open creates the socket, registers and maps the UMEM and rings, puts half the frames on
// the fill ring and binds to cfg's interface queue. Like every socket it is created in
// the network namespace of the calling OS thread.
func Open(cfg Config) (*Socket, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, explain("socket", err)
	}
	s := &Socket{fd: fd, cfg: cfg}
	if err := s.setup(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Socket) setup() error {
	cfg := &s.cfg
	var err error
	s.umem, err = unix.Mmap(-1, 0, cfg.Frames*cfg.FrameSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return explain("mmap", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))), Len: uint64(len(s.umem)), Size: uint32(cfg.FrameSize)}
	if err := setsockopt(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return explain("umem", err)
	}
	n := cfg.RingSize
	// The kernel wants fill and completion rings even on a one-way socket.
	for _, o := range []struct {
		opt  int
		skip bool
	}{{unix.XDP_UMEM_FILL_RING, false}, {unix.XDP_UMEM_COMPLETION_RING, false}, {unix.XDP_RX_RING, cfg.NoRX}, {unix.XDP_TX_RING, cfg.NoTX}} {
		if o.skip {
			continue
		}
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, o.opt, n); err != nil {
			return explain("rings", err)
		}
	}
	var off unix.XDPMmapOffsets
	ol := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&ol)), 0); e != 0 {
		return explain("rings", e)
	}
	if ol != uint32(unsafe.Sizeof(off)) {
		return &Error{Step: "rings", Err: fmt.Errorf("XDP_MMAP_OFFSETS returned %d bytes", ol), Reason: "kernel too old (no ring flags, before Linux 5.4)"}
	}
	mapRing := func(r *ring, o unix.XDPRingOffset, pgoff int64, descSize uintptr) error {
		m, err := unix.Mmap(s.fd, pgoff, int(o.Desc)+n*int(descSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return explain("mmap", err)
		}
		base := unsafe.Pointer(&m[0])
		*r = ring{mem: m, prod: (*uint32)(unsafe.Add(base, o.Producer)), cons: (*uint32)(unsafe.Add(base, o.Consumer)),
			flags: (*uint32)(unsafe.Add(base, o.Flags)), desc: unsafe.Add(base, o.Desc), mask: uint32(n - 1), size: uint32(n)}
		return nil
	}
	if err := mapRing(&s.fill, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, 8); err != nil {
		return err
	}
	if err := mapRing(&s.comp, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, 8); err != nil {
		return err
	}
	if !cfg.NoRX {
		if err := mapRing(&s.rx, off.Rx, unix.XDP_PGOFF_RX_RING, unsafe.Sizeof(unix.XDPDesc{})); err != nil {
			return err
		}
	}
	if !cfg.NoTX {
		if err := mapRing(&s.tx, off.Tx, unix.XDP_PGOFF_TX_RING, unsafe.Sizeof(unix.XDPDesc{})); err != nil {
			return err
		}
	}
	// Frames [0, rxFrames) feed the fill ring, the rest are TX buffers; the fill ring and
	// the TX ring can each hold all of theirs, so neither ever overflows.
	rxFrames, txFrames := cfg.Frames/2, cfg.Frames-cfg.Frames/2
	if cfg.NoRX {
		rxFrames, txFrames = 0, cfg.Frames
	} else if cfg.NoTX {
		rxFrames, txFrames = cfg.Frames, 0
	}
	rxFrames, txFrames = min(rxFrames, n), min(txFrames, n)
	for i := range rxFrames {
		*s.fill.addr(s.fillPro) = uint64(i * cfg.FrameSize)
		s.fillPro++
	}
	atomic.StoreUint32(s.fill.prod, s.fillPro)
	s.txUnit = (HeaderLen + cfg.MaxDatagram + cfg.FrameSize - 1) / cfg.FrameSize
	units := txFrames / s.txUnit
	if !cfg.NoTX && units == 0 {
		return fmt.Errorf("xsk: %d TX frames of %d bytes cannot hold one %d-byte datagram", txFrames, cfg.FrameSize, cfg.MaxDatagram)
	}
	s.txBase = uint64((cfg.Frames - txFrames) * cfg.FrameSize)
	s.free = make([]uint64, 0, units)
	for i := units - 1; i >= 0; i-- {
		s.free = append(s.free, s.unitAddr(i))
	}
	s.unitOut, s.isLent = make([]uint8, units), make([]bool, units)
	s.lent = make([]uint64, 0, units)
	if !cfg.NoTX {
		// Copy mode sends at most this many packets per kick (default 32, Linux 6.17+ lets
		// us raise it); a refusal only means more kicks.
		_ = unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, min(n, 256))
	}
	flags := uint16(unix.XDP_COPY)
	if cfg.ZeroCopy {
		flags = unix.XDP_ZEROCOPY
	}
	sa := &unix.SockaddrXDP{Flags: flags | unix.XDP_USE_NEED_WAKEUP | unix.XDP_USE_SG, Ifindex: uint32(cfg.Ifindex), QueueID: uint32(cfg.Queue)}
	// A socket closed just before (a probe's, or a restarted daemon's) frees its hold on
	// the queue from a kernel work queue, which on a loaded machine can take a while: a
	// queue that stays busy for 5 s is taken (2 s were not always enough at a load
	// average of 20 on 2 cores).
	err = unix.Bind(s.fd, sa)
	for deadline := time.Now().Add(5 * time.Second); err == unix.EBUSY && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		err = unix.Bind(s.fd, sa)
	}
	if err != nil {
		return explainSG("bind", err, true)
	}
	s.zc = cfg.ZeroCopy
	s.pfd = []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	return nil
}

func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		return e
	}
	return nil
}

// FD is the socket's descriptor, for an XSKMAP entry.
func (s *Socket) FD() int { return s.fd }

// FrameSize is the size of one UMEM frame (the largest frame Frame can hold).
func (s *Socket) FrameSize() int { return s.cfg.FrameSize }

// MaxDatagram is the largest UDP payload SendUDP4 takes (Config.MaxDatagram).
func (s *Socket) MaxDatagram() int { return s.cfg.MaxDatagram }

// ZeroCopy tells whether the socket is bound in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zc }

// Stats returns the cumulative counters.
func (s *Socket) Stats() Stats { return s.st }

// Close unmaps the rings and the UMEM and closes the socket.
func (s *Socket) Close() error {
	if s.close.Swap(true) {
		return nil
	}
	return s.release()
}

func (s *Socket) release() error {
	var first error
	for _, r := range []*ring{&s.rx, &s.tx, &s.fill, &s.comp} {
		if r.mem != nil {
			if err := unix.Munmap(r.mem); err != nil && first == nil {
				first = err
			}
			r.mem = nil
		}
	}
	if err := unix.Close(s.fd); err != nil && first == nil {
		first = err
	}
	if s.umem != nil {
		if err := unix.Munmap(s.umem); err != nil && first == nil {
			first = err
		}
		s.umem = nil
	}
	return first
}

// ---- TX ----

// Reap moves completed TX frames back to the free list and returns how many.
func (s *Socket) Reap() int {
	prod := atomic.LoadUint32(s.comp.prod)
	cons := *s.comp.cons // only we write it
	n := prod - cons
	for i := cons; i != prod; i++ {
		u, ok := s.unitOf(*s.comp.addr(i))
		if !ok || s.unitOut[u] == 0 {
			continue // an address we never queued: the kernel's bug, not a frame to reuse
		}
		if s.unitOut[u]--; s.unitOut[u] == 0 {
			s.free = append(s.free, s.unitAddr(u))
		}
	}
	if n > 0 {
		atomic.StoreUint32(s.comp.cons, prod)
		s.txOut -= n
	}
	return int(n)
}

// Frame returns the first frame (FrameSize bytes) of a free TX unit to write a packet
// into, reaping completions if none is free; ok is false when every unit is in flight
// (Kick, then try again). The unit is free again once what Queue put on the ring from
// it has completed.
func (s *Socket) Frame() (addr uint64, buf []byte, ok bool) {
	addr, ok = s.unit()
	if !ok {
		return 0, nil, false
	}
	return addr, s.umem[addr : addr+uint64(s.cfg.FrameSize) : addr+uint64(s.cfg.FrameSize)], true
}

// unit takes a free TX unit, reaping completions if none is free.
func (s *Socket) unit() (uint64, bool) {
	if len(s.free) == 0 && s.Reap() == 0 {
		s.st.TxNoFrame++
		return 0, false
	}
	addr := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return addr, true
}

func (s *Socket) unitBytes() uint64 { return uint64(s.txUnit * s.cfg.FrameSize) }

func (s *Socket) unitAddr(u int) uint64 { return s.txBase + uint64(u)*s.unitBytes() }

// unitOf returns the TX unit holding UMEM offset addr.
func (s *Socket) unitOf(addr uint64) (int, bool) {
	if addr < s.txBase || len(s.unitOut) == 0 {
		return 0, false
	}
	u := (addr - s.txBase) / s.unitBytes()
	return int(u), u < uint64(len(s.unitOut))
}

// TxBuffer lends the payload space of a free TX unit (after room for the headers) for a
// datagram built in place: SendUDP4 of a TxPacket whose Payload starts there sends it
// without a copy. ReturnLent gives back what was lent and not sent. ok is false when
// every unit is in flight or lent.
func (s *Socket) TxBuffer() (payload []byte, ok bool) {
	addr, ok := s.unit()
	if !ok {
		return nil, false
	}
	u, _ := s.unitOf(addr)
	s.isLent[u] = true
	s.lent = append(s.lent, addr)
	end := addr + s.unitBytes()
	return s.umem[addr+HeaderLen : end : end], true
}

// ReturnLent gives every unit TxBuffer lent and SendUDP4 did not send back to the free
// list; their payload slices must not be used again.
func (s *Socket) ReturnLent() {
	for _, a := range s.lent {
		if u, _ := s.unitOf(a); s.isLent[u] {
			s.isLent[u] = false
			s.free = append(s.free, a)
		}
	}
	s.lent = s.lent[:0]
}

// lentUnit returns the lent unit whose payload space b starts, if it is one.
func (s *Socket) lentUnit(b []byte) (uint64, bool) {
	if len(s.lent) == 0 || cap(b) == 0 {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(s.umem)))
	if p < HeaderLen || p >= uintptr(len(s.umem)) {
		return 0, false
	}
	a := uint64(p - HeaderLen)
	u, ok := s.unitOf(a)
	if !ok || s.unitAddr(u) != a || !s.isLent[u] {
		return 0, false
	}
	return a, true
}

// Queue puts the first n bytes of the frame at addr (from Frame) on the TX ring; more
// says the packet continues in the next frame queued (XDP_PKT_CONTD). Kick hands the
// queued frames to the kernel.
func (s *Socket) Queue(addr uint64, n int, more bool) {
	if u, ok := s.unitOf(addr); ok {
		s.unitOut[u]++
	}
	d := s.tx.xdesc(s.txPub + s.pending)
	*d = unix.XDPDesc{Addr: addr, Len: uint32(n)}
	if more {
		d.Options = unix.XDP_PKT_CONTD
	}
	s.pending++
}

// Kick publishes the queued TX frames and asks the kernel to send them (one sendto, more
// while copy mode's per-call budget leaves some on the ring).
func (s *Socket) Kick() error {
	if s.pending > 0 {
		s.txPub += s.pending
		s.txOut += s.pending
		s.st.TxFrames += uint64(s.pending)
		s.pending = 0
		atomic.StoreUint32(s.tx.prod, s.txPub)
	}
	for range 64 {
		if atomic.LoadUint32(s.tx.cons) == s.txPub {
			return nil
		}
		if s.zc && atomic.LoadUint32(s.tx.flags)&unix.XDP_RING_NEED_WAKEUP == 0 {
			return nil
		}
		s.st.TxKicks++
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
			// EAGAIN: budget used up or no skb; EBUSY/ENOBUFS: the device queue is full.
			if e != 0 {
				s.st.TxKickErrors++
			}
		default:
			s.st.TxKickErrors++
			return fmt.Errorf("xsk: sendto: %w", e)
		}
	}
	return nil
}

// TxUnits returns how many TX units are free (not in flight, not lent) and how many
// there are.
func (s *Socket) TxUnits() (free, total int) { return len(s.free), len(s.unitOut) }

// InFlight is the number of TX frames handed to the kernel and not yet completed.
func (s *Socket) InFlight() int { return int(s.txOut) + int(s.pending) }

// ---- RX ----

// Frame is one received buffer: a view into the UMEM, valid until Release.
type Frame struct {
	Data []byte
	More bool   // the packet continues in the next frame (multi-buffer)
	addr uint64 // UMEM offset of Data
}

// Receive fills frames with up to len(frames) received buffers and returns how many; 0 if
// none is waiting. A packet larger than a frame arrives as several, all but the last with
// More set; Receive may stop between two of them.
func (s *Socket) Receive(frames []Frame) int {
	prod := atomic.LoadUint32(s.rx.prod)
	i := s.rxCons + s.rxHeld
	k := 0
	for ; k < len(frames) && i != prod; i, k = i+1, k+1 {
		d := s.rx.xdesc(i)
		a, l := d.Addr, uint64(d.Len)
		if a+l > uint64(len(s.umem)) || l > uint64(s.cfg.FrameSize) {
			l = 0 // a descriptor the kernel should never give: an empty frame, dropped by the parser
			a = 0
		}
		frames[k] = Frame{Data: s.umem[a : a+l : a+l], More: d.Options&unix.XDP_PKT_CONTD != 0, addr: a}
	}
	// Hand out whole packets only: a packet whose last frame is not yet ours (our slice
	// ended) stays on the ring for the next call.
	for k > 0 && frames[k-1].More {
		k--
	}
	s.rxHeld += uint32(k)
	s.st.RxFrames += uint64(k)
	return k
}

// Unreceive puts the last n frames handed out by Receive back on the RX ring's unread
// side, so the next Receive returns them again (a caller that ran out of room).
func (s *Socket) Unreceive(n int) {
	n = min(n, int(s.rxHeld))
	s.rxHeld -= uint32(n)
	s.st.RxFrames -= uint64(n)
}

// KernelStats returns the kernel's counters of the socket (XDP_STATISTICS): packets
// dropped for a full RX ring or an empty fill ring, invalid descriptors.
func (s *Socket) KernelStats() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	l := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&l)), 0); e != 0 {
		return st, e
	}
	return st, nil
}

// Release gives the frames of every Receive since the last Release back to the fill ring.
func (s *Socket) Release() {
	if s.rxHeld == 0 {
		return
	}
	for i := s.rxCons; i != s.rxCons+s.rxHeld; i++ {
		a := s.rx.xdesc(i).Addr
		// Back to the start of its frame (copy mode hands out offsets inside the chunk).
		*s.fill.addr(s.fillPro) = a &^ uint64(s.cfg.FrameSize-1)
		s.fillPro++
	}
	s.rxCons += s.rxHeld
	s.rxHeld = 0
	atomic.StoreUint32(s.rx.cons, s.rxCons)
	atomic.StoreUint32(s.fill.prod, s.fillPro)
}

// Wait blocks in poll until a packet is waiting or timeoutMs passes (-1: forever; 0: no
// system call, only a look at the ring); it returns whether one is.
func (s *Socket) Wait(timeoutMs int) (bool, error) {
	if atomic.LoadUint32(s.rx.prod) != s.rxCons+s.rxHeld {
		return true, nil
	}
	if timeoutMs == 0 {
		return false, nil
	}
	s.st.RxPolls++
	for {
		n, err := unix.Poll(s.pfd, timeoutMs)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("xsk: poll: %w", err)
		}
		return n > 0 && atomic.LoadUint32(s.rx.prod) != s.rxCons+s.rxHeld, nil
	}
}
