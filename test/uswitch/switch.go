//go:build linux

package uswitch

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type port struct {
	name    string
	fd      int
	q       Queue
	rx      []*Frame // receive slots, one per recvmmsg entry
	rxIov   []unix.Iovec
	rxHdr   []unix.Mmsghdr
	tx      []*Frame // frames dequeued and not yet sent
	txIov   []unix.Iovec
	txHdr   []unix.Mmsghdr
	stats   [8]atomic.Uint64 // the switch's own PortStats counters, indexed by st*
	rxDrop  atomic.Uint64    // PACKET_STATISTICS drops, accumulated (the kernel resets them on read)
	pending bool
}

// Switch is an AF_PACKET switch over a set of ports.
type Switch struct {
	cfg   Config
	ports []*port
	free  []*Frame
	stop  int // eventfd: Stop and Do wake the loop through it
	epoch time.Time
	pfds  []unix.PollFd
	cpu   atomic.Int64

	halt    atomic.Bool
	mu      sync.Mutex
	todo    []func(now int64) // posted by Do, run on the switch thread
	running []func(now int64)
	tickAt  int64 // when Tick runs next (-1: after the next Do)
}

// Epoch is the switch clock's zero: the now given to queues, Tick and Capture is
// nanoseconds since Epoch.
func (s *Switch) Epoch() time.Time { return s.epoch }

// Do runs fn on the switch thread (between batches, with the switch's clock), so it may
// touch the queues and models, which only that thread uses. It returns at once; fn runs
// when Run next wakes (at once if it is running; at its start if not yet; never after it
// returned; not at all once the switch is closed).
func (s *Switch) Do(fn func(now int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop < 0 {
		return // closed: the eventfd's number may belong to another file by now
	}
	s.todo = append(s.todo, fn)
	var one = [8]byte{1}
	unix.Write(s.stop, one[:])
}

// CPUTime is the CPU time the switch's thread used in Run calls that returned (kernel work
// done on its behalf included, e.g. delivering frames into the next namespace).
func (s *Switch) CPUTime() time.Duration { return time.Duration(s.cpu.Load()) }

// Open opens one AF_PACKET socket per port in the calling thread's network namespace (the
// sockets stay there; call it from inside the switch namespace, e.g. in netbed.Do).
func Open(cfg Config) (*Switch, error) {
	if len(cfg.Ports) < 2 {
		return nil, fmt.Errorf("uswitch: %d ports; need at least 2", len(cfg.Ports))
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.Batch < 1 || cfg.Batch > 1024 {
		return nil, fmt.Errorf("uswitch: batch %d out of range [1, 1024]", cfg.Batch)
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = 9216
	}
	if cfg.MaxFrame < 64 || cfg.MaxFrame > 65550 {
		return nil, fmt.Errorf("uswitch: max frame %d out of range [64, 65550]", cfg.MaxFrame)
	}
	if cfg.Router == nil {
		cfg.Router = NewLearning()
	}
	if cfg.NewQueue == nil {
		cfg.NewQueue = func(int) Queue { return NewFIFO(1024, 0) }
	}
	if cfg.Frames == 0 {
		cfg.Frames = len(cfg.Ports) * (4*cfg.Batch + 1024)
	}
	if cfg.Frames < len(cfg.Ports)*cfg.Batch*2 {
		return nil, fmt.Errorf("uswitch: frames %d too few; need at least %d (2 batches per port)", cfg.Frames, len(cfg.Ports)*cfg.Batch*2)
	}
	s := &Switch{cfg: cfg, stop: -1, epoch: time.Now()}
	slot := VnetHdrLen + cfg.MaxFrame
	mem := make([]byte, slot*cfg.Frames)
	frames := make([]Frame, cfg.Frames)
	for i := range frames {
		frames[i].buf = mem[i*slot : (i+1)*slot : (i+1)*slot]
		s.free = append(s.free, &frames[i])
	}
	var err error
	if s.stop, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("uswitch: eventfd: %w", err)
	}
	for i, name := range cfg.Ports {
		p, err := s.openPort(name)
		if err != nil {
			s.Close()
			return nil, err
		}
		p.q = cfg.NewQueue(i)
		s.ports = append(s.ports, p)
	}
	s.pfds = make([]unix.PollFd, len(s.ports)+1)
	return s, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (s *Switch) openPort(name string) (*port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("uswitch: port %s: %w", name, err)
	}
	// Protocol 0 receives nothing until bind, so no frame of another interface slips in.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("uswitch: port %s: socket: %w", name, err)
	}
	p := &port{name: name, fd: fd}
	fail := func(what string, err error) (*port, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("uswitch: port %s: %s: %w", name, what, err)
	}
	// Our own transmissions would come back as outgoing frames on the same port.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	// The virtio-net header carries checksum offload through: without it a frame whose
	// checksum the sender left to veth offload would leave the switch with a wrong checksum.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return fail("PACKET_VNET_HDR", err)
	}
	// Frames leave straight to the veth driver, past the qdisc layer (veth has none anyway).
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		return fail("PACKET_QDISC_BYPASS", err)
	}
	for _, o := range []int{unix.SO_RCVBUFFORCE, unix.SO_SNDBUFFORCE} {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 8<<20) // best effort: needs CAP_NET_ADMIN
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	b := s.cfg.Batch
	p.rx, p.rxIov, p.rxHdr = make([]*Frame, b), make([]unix.Iovec, b), make([]unix.Mmsghdr, b)
	p.tx, p.txIov, p.txHdr = make([]*Frame, 0, b), make([]unix.Iovec, b), make([]unix.Mmsghdr, b)
	for i := range p.rx {
		p.rx[i] = s.get()
		p.setRx(i)
	}
	return p, nil
}

func (p *port) setRx(i int) {
	f := p.rx[i]
	p.rxIov[i].Base = &f.buf[0]
	p.rxIov[i].SetLen(len(f.buf))
	p.rxHdr[i].Hdr.Iov = &p.rxIov[i]
	p.rxHdr[i].Hdr.SetIovlen(1)
}

func (s *Switch) get() *Frame {
	n := len(s.free)
	if n == 0 {
		return nil
	}
	f := s.free[n-1]
	s.free = s.free[:n-1]
	f.n, f.Depart = 0, 0
	return f
}

func (s *Switch) put(f *Frame) { s.free = append(s.free, f) }

// Stats returns the counters of port i; safe to call while the switch runs and after Close.
func (s *Switch) Stats(i int) PortStats {
	p := s.ports[i]
	p.readDrops()
	return PortStats{p.stats[0].Load(), p.stats[1].Load(), p.stats[2].Load(), p.stats[3].Load(),
		p.stats[4].Load(), p.stats[5].Load(), p.stats[6].Load(), p.rxDrop.Load(), p.stats[stLost].Load()}
}

const (
	stRxF = iota
	stRxB
	stTxF
	stTxB
	stDrop
	stTxErr
	stTrunc
	stLost
)

// Stop makes Run return; safe from any goroutine.
func (s *Switch) Stop() {
	s.halt.Store(true)
	var one = [8]byte{1}
	unix.Write(s.stop, one[:])
}

// Close closes the sockets; call it after Run returned (or instead of Run).
func (s *Switch) Close() error {
	var errs []error
	for _, p := range s.ports {
		if p.fd >= 0 {
			p.readDrops()
			errs = append(errs, unix.Close(p.fd))
			p.fd = -1 // closed; the counters stay readable
		}
	}
	s.mu.Lock()
	if s.stop >= 0 {
		errs = append(errs, unix.Close(s.stop))
		s.stop = -1
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

func (s *Switch) now() int64 { return int64(time.Since(s.epoch)) }

// Run forwards frames until Stop. It occupies its goroutine's thread (blocking in ppoll).
func (s *Switch) Run() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c0 unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c0)
	defer func() {
		var c1 unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c1)
		s.cpu.Add(c1.Nano() - c0.Nano())
	}()
	var ts unix.Timespec
	s.tickAt = 0
	for {
		now := s.now()
		if s.cfg.Tick != nil && s.tickAt >= 0 && now >= s.tickAt {
			s.tickAt = s.cfg.Tick(now)
		}
		next := s.tickAt
		if s.cfg.Tick == nil {
			next = -1
		}
		for i, p := range s.ports {
			ev := int16(0)
			if len(s.free) >= s.cfg.Batch {
				ev |= unix.POLLIN // no buffers: leave frames in the socket (the kernel drops)
			}
			if p.pending {
				ev |= unix.POLLOUT // socket full: wait for room, not for the next departure
			}
			s.pfds[i] = unix.PollFd{Fd: int32(p.fd), Events: ev}
			if d := p.q.Next(); !p.pending && d >= 0 && (next < 0 || d < next) {
				next = d
			}
		}
		s.pfds[len(s.ports)] = unix.PollFd{Fd: int32(s.stop), Events: unix.POLLIN}
		tp := (*unix.Timespec)(nil)
		if next >= 0 {
			ts = unix.NsecToTimespec(max(0, next-now))
			tp = &ts
		}
		if _, err := unix.Ppoll(s.pfds, tp, nil); err != nil && err != unix.EINTR {
			return fmt.Errorf("uswitch: ppoll: %w", err)
		}
		if s.pfds[len(s.ports)].Revents != 0 {
			var b [8]byte
			unix.Read(s.stop, b[:])
			if s.halt.Load() {
				return nil
			}
			s.runTodo()
		}
		now = s.now()
		for i, p := range s.ports {
			if s.pfds[i].Revents&(unix.POLLIN|unix.POLLERR) != 0 {
				s.receive(i, p, now)
			}
		}
		for i, p := range s.ports {
			s.transmit(i, p, now)
		}
	}
}

// runTodo runs the functions Do posted, then Tick.
func (s *Switch) runTodo() {
	s.mu.Lock()
	s.running, s.todo = s.todo, s.running[:0]
	s.mu.Unlock()
	now := s.now()
	for i, fn := range s.running {
		fn(now)
		s.running[i] = nil
	}
	if s.cfg.Tick != nil && len(s.running) > 0 {
		s.tickAt = s.cfg.Tick(now)
	}
}

// receive drains up to a few batches from port in and routes each frame into its queue.
func (s *Switch) receive(in int, p *port, now int64) {
	for round := 0; round < 4; round++ {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.rxHdr[0])),
			uintptr(len(p.rxHdr)), unix.MSG_DONTWAIT, 0, 0)
		if errno != 0 {
			return // EAGAIN: drained
		}
		var bytes uint64
		for i := 0; i < int(n); i++ {
			f := p.rx[i]
			f.n, f.In = int(p.rxHdr[i].Len), in
			bytes += uint64(f.n - VnetHdrLen)
			p.rxHdr[i].Len = 0
			if p.rxHdr[i].Hdr.Flags&unix.MSG_TRUNC != 0 || f.n < VnetHdrLen+14 {
				p.stats[stTrunc].Add(1)
				continue // the slot keeps its frame
			}
			nf := s.get()
			if nf == nil { // pool empty (floods took it): drop, the slot keeps its frame
				p.stats[stDrop].Add(1)
				continue
			}
			p.rx[i] = nf
			p.setRx(i)
			if s.cfg.Capture != nil {
				s.cfg.Capture(in, f, now, false)
			}
			s.forward(f, in, now)
		}
		p.stats[stRxF].Add(uint64(n))
		p.stats[stRxB].Add(bytes)
		if int(n) < len(p.rxHdr) || len(s.free) < s.cfg.Batch {
			return
		}
	}
}

func (s *Switch) forward(f *Frame, in int, now int64) {
	if s.cfg.SoftwareChecksum {
		f.FinishChecksum()
	}
	f.buf[0] &^= vnetDataValid // a receive-side flag; sending needs only NEEDS_CSUM
	out := s.cfg.Router.Route(f, in)
	switch {
	case out == Flood:
		for o, q := range s.ports {
			if o == in {
				continue
			}
			c := s.get()
			if c == nil {
				q.stats[stDrop].Add(1)
				continue
			}
			c.n, c.In = f.n, f.In
			copy(c.buf, f.buf[:f.n])
			if !q.q.Enqueue(c, now) {
				q.stats[stDrop].Add(1)
				s.put(c)
			}
		}
		s.put(f)
	case out >= 0 && out < len(s.ports) && out != in:
		if !s.ports[out].q.Enqueue(f, now) {
			s.ports[out].stats[stDrop].Add(1)
			s.put(f)
		}
		if r, ok := s.ports[out].q.(Returner); ok {
			// Return-to-sender trimming: route the headers back toward their senders.
			for rf := r.TakeReturned(); rf != nil; rf = r.TakeReturned() {
				s.forward(rf, out, now)
			}
		}
	default:
		s.put(f)
	}
}

// transmit sends the frames of p's queue that are due, in batches.
func (s *Switch) transmit(i int, p *port, now int64) {
	for {
		for len(p.tx) < cap(p.tx) {
			f := p.q.Dequeue(now)
			if f == nil {
				break
			}
			if s.cfg.Lose != nil && s.cfg.Lose(i, f) {
				p.stats[stLost].Add(1)
				s.put(f)
				continue
			}
			p.tx = append(p.tx, f)
		}
		if len(p.tx) == 0 {
			p.pending = false
			return
		}
		for i, f := range p.tx {
			p.txIov[i].Base = &f.buf[0]
			p.txIov[i].SetLen(f.n)
			p.txHdr[i].Hdr.Iov = &p.txIov[i]
			p.txHdr[i].Hdr.SetIovlen(1)
		}
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.txHdr[0])),
			uintptr(len(p.tx)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
		case unix.EAGAIN:
			p.pending = true // socket buffer full: wait for POLLOUT
			return
		default:
			// The first frame was refused: ENOBUFS is the kernel dropping it (a port without
			// carrier), ENETDOWN a port that is down. Count it, drop it, go on.
			p.stats[stTxErr].Add(1)
			s.put(p.tx[0])
			p.tx = append(p.tx[:0], p.tx[1:]...)
			continue
		}
		sent := int(n)
		var bytes uint64
		for _, f := range p.tx[:sent] {
			bytes += uint64(f.n - VnetHdrLen)
			if s.cfg.Capture != nil {
				s.cfg.Capture(i, f, now, true)
			}
			s.put(f)
		}
		p.stats[stTxF].Add(uint64(sent))
		p.stats[stTxB].Add(bytes)
		rest := copy(p.tx, p.tx[sent:])
		p.tx = p.tx[:rest] // a short count: the next call sends the rest or reports why not
	}
}

// readDrops adds the kernel's receive drops since the last read to rxDrop.
func (p *port) readDrops() {
	if p.fd < 0 {
		return
	}
	if st, err := unix.GetsockoptTpacketStats(p.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		p.rxDrop.Add(uint64(st.Drops))
	}
}
