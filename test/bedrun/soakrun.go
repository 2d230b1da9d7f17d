package bedrun

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// SoakOptions steer a soak.
type SoakOptions struct {
	Name string       // testbed name (namespaces smartt-<name>-*); default "soak"
	Log  *slog.Logger // daemon logs (default: discarded)
	// Progress, if set, gets the fault log and a progress line every soak.progress as the
	// soak goes.
	Progress io.Writer
	// Control, if set, is a unix socket path where the soak takes faults while the
	// workload runs (smartt-lab testbed fail), as Options.Control.
	Control string
	// Interrupt, if set, ends the workload early when it is closed (or receives); the
	// soak still drains, checks and reports.
	Interrupt <-chan struct{}
}

// crashSocket wraps a daemon's socket layer so the soak can crash the daemon: once dead,
// nothing goes out and whatever comes in is dropped, as after a SIGKILL (no RESET, no
// CLOSE, no last ACK). While held, it is the same: a restarted daemon receives nothing
// until its host's application has bound its endpoint again (the daemon acknowledges
// messages for endpoints nobody bound and drops them; docs/api.md).
type crashSocket struct {
	daemon.Socket
	dead, held atomic.Bool
}

func (s *crashSocket) silent() bool { return s.dead.Load() || s.held.Load() }

// ReadBatch implements daemon.Socket.
func (s *crashSocket) ReadBatch(pkts []daemon.Packet) (int, error) {
	for {
		n, err := s.Socket.ReadBatch(pkts)
		if err != nil || !s.silent() {
			return n, err
		}
	}
}

// WriteBatch implements daemon.Socket.
func (s *crashSocket) WriteBatch(pkts []daemon.Packet) (int, error) {
	if s.silent() {
		return len(pkts), nil
	}
	return s.Socket.WriteBatch(pkts)
}

// instance is one life of a host's daemon with its application's session.
type instance struct {
	life     int // 0 first, 1 after the restart
	d        *smarttd.Daemon
	sock     *crashSocket
	sess     *client.Session
	recvDone chan struct{}
}

// soakHost is a host of the soak.
type soakHost struct {
	mu   sync.Mutex
	inst *instance // nil while its daemon is down
	old  []transport.Stats
	sem  chan struct{} // messages without an outcome
}

func (h *soakHost) current() *instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inst
}

// msgRec is what the soak knows about one message.
type msgRec struct {
	size        int32
	dst         int16
	kind        uint8
	outcome     uint8 // outNone, outSent, outFailed, outSkipped
	deliveries  uint8
	life        uint8 // the receiver's life at the first delivery
	reason      uint16
	crc         uint64
	submitted   int64 // ns since the workload's start
	outcomeAt   int64
	deliveredAt int64
}

const (
	outNone = iota
	outSent
	outFailed
	outSkipped // not submitted: the host's own daemon was down
)

// soaker runs a soak.
type soaker struct {
	r      *Run
	sc     *SoakScenario
	c      *SoakConfig
	o      SoakOptions
	hosts  []*soakHost
	start  time.Time
	ctx    context.Context // outcome waits; cancelled after the tally
	cancel context.CancelFunc

	mu       sync.Mutex
	msgs     [][]msgRec // per source host, by sequence number
	reasons  []string   // failure reasons, by msgRec.reason
	reasonIx map[string]uint16
	corrupt  []string // descriptions of corrupted deliveries (the first 20)
	nCorrupt int
	recvErrs map[string]int
	late     int   // planned before the end, no slot before the end
	maxLag   int64 // largest delay of a submission behind its planned time, ns
	faultLog []string
	faultErr []error
	killAt   int64 // ns; -1: no kill yet
	restAt   int64
	killHost int
	inFlight [2]int // at the kill: to the killed host, from it

	mem memTrack
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// Soak runs a soak scenario on a fresh testbed and removes the testbed afterwards. The
// error is for the run itself (setup, a fault that could not be applied); what the soak
// checks is in the report (SoakReport.Violations).
func Soak(sc *SoakScenario, o SoakOptions) (rep *SoakReport, err error) {
	if err := sc.Check(); err != nil {
		return nil, err
	}
	m, err := Map(sc.scenario())
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = "soak"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tb, err := netbed.Up(o.Name, m.Spec)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tb.Down()) }()
	fab, err := tb.RunFabric(m.Model)
	if err != nil {
		return nil, err
	}
	r, release, err := newRun(&Run{TB: tb, Fabric: fab, Mapped: m, Scenario: sc.scenario(), control: o.Control, log: o.Log}, "smartt-soak-")
	defer release()
	if err != nil {
		return nil, err
	}
	for _, n := range tb.Plan.Hosts() {
		r.Addrs = append(r.Addrs, netip.AddrPortFrom(tb.Plan.Nodes[n].Addr, Port))
	}
	s := &soaker{r: r, sc: sc, c: &sc.Soak, o: o, reasonIx: map[string]uint16{}, recvErrs: map[string]int{}, killAt: -1, killHost: -1}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	defer s.cancel()
	s.msgs = make([][]msgRec, len(r.Addrs))
	for range r.Addrs {
		s.hosts = append(s.hosts, &soakHost{sem: make(chan struct{}, s.c.MaxOutstanding)})
	}
	defer s.stopAll()
	for i := range s.hosts {
		inst, err := s.startInstance(i, 0)
		if err != nil {
			return nil, err
		}
		s.hosts[i].inst = inst
	}
	rep, err = s.run()
	if rep == nil {
		return nil, err
	}
	s.stopAll()
	r.fabStopped = true
	if ferr := fab.Stop(); ferr != nil {
		err = errors.Join(err, fmt.Errorf("switches: %w", ferr))
	}
	for _, p := range fab.Counters() {
		f := &rep.Fabric
		f.FlakyLost += p.Lost
		f.LinkRefused += p.TxErrors
		f.Trims += p.Model.Trims
		f.Marks += p.Model.Marks
		f.Drops += p.Model.Drops + p.Truncated
	}
	return rep, err
}

// startInstance starts host h's daemon (life 0 at the start, 1 after the restart), opens
// its application's session and binds endpoint 1; its socket is held silent until then.
func (s *soaker) startInstance(h, life int) (*instance, error) {
	cs := &crashSocket{}
	cs.held.Store(true)
	open := func(cfg *smarttd.Config, log *slog.Logger) (*smarttd.SocketLayer, error) {
		sl, err := smarttd.OpenUDP(cfg, log)
		if err != nil {
			return nil, err
		}
		cs.Socket, sl.Socket = sl.Socket, cs
		return sl, nil
	}
	d, err := s.r.startDaemon(h, s.sc.Seed+uint64(h)+uint64(life)<<32, open)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := client.New(d.Config.API.Socket).Open(ctx)
	if err == nil {
		if _, err = sess.Bind(ctx, 1); err != nil {
			sess.Close()
		}
	}
	if err != nil {
		cs.dead.Store(true)
		d.Shutdown(ctx)
		return nil, fmt.Errorf("h%d's application: %w", h, err)
	}
	cs.held.Store(false)
	inst := &instance{life: life, d: d, sock: cs, sess: sess, recvDone: make(chan struct{})}
	go s.receive(h, inst)
	return inst, nil
}

// crash kills an instance: its socket goes silent, its application's session ends (every
// message it was waiting for is reported failed to it, every message it had not read is
// gone), then the daemon's goroutines and sockets are released.
func (s *soaker) crash(inst *instance) {
	inst.sock.dead.Store(true)
	inst.sess.Close()
	<-inst.recvDone
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: the daemon fails what it holds, to nobody (its socket is dead)
	inst.d.Shutdown(ctx)
}

// stopAll ends every instance gracefully-enough for teardown (idempotent).
func (s *soaker) stopAll() {
	var wg sync.WaitGroup
	for _, h := range s.hosts {
		h.mu.Lock()
		inst := h.inst
		h.inst = nil
		h.mu.Unlock()
		if inst == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst.sess.Close()
			<-inst.recvDone
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			inst.d.Shutdown(ctx)
		}()
	}
	wg.Wait()
}

func (s *soaker) now() int64 { return time.Since(s.start).Nanoseconds() }

func (s *soaker) logf(format string, a ...any) {
	line := fmt.Sprintf("%8.1fs  ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, a...)
	s.mu.Lock()
	s.faultLog = append(s.faultLog, line)
	s.mu.Unlock()
	if s.o.Progress != nil {
		fmt.Fprintln(s.o.Progress, line)
	}
}

// run drives the workload and the faults, drains, and tallies.
func (s *soaker) run() (*SoakReport, error) {
	c := s.c
	r := s.r
	hosts := len(s.hosts)
	p := r.TB.Plan
	var links []string
	for _, l := range p.Links {
		links = append(links, l.Name)
	}
	eps, bursts := c.plan(s.sc.Seed, hosts)
	evs := c.schedule(s.sc.Seed, links, r.hostLink, hosts, bursts)
	// Memory before the workload: daemons up, sessions bound, a forced GC.
	s.mem.init(hosts)
	s.start = time.Now()
	r.start = s.start
	s.mem.start = s.sample(true)
	wctx, wcancel := context.WithCancel(s.ctx) // the workload and the faults
	defer wcancel()
	r.faults.ctx, r.faults.conv = wctx, time.Duration(s.sc.RoutingConvergence)
	r.faults.downAt, r.faults.refused = map[string]uint64{}, map[string]uint64{}
	stopCtl := func() {}
	if s.o.Control != "" {
		stop, err := r.serveControl(s.o.Control)
		if err != nil {
			return nil, err
		}
		var once sync.Once
		stopCtl = func() { once.Do(stop) }
		defer stopCtl()
	}
	var bg sync.WaitGroup
	bg.Add(3)
	go func() { defer bg.Done(); s.faults(wctx, evs) }()
	go func() { defer bg.Done(); s.monitor(wctx) }()
	go func() {
		defer bg.Done()
		select {
		case <-s.o.Interrupt:
			s.logf("interrupted: the workload ends now")
			wcancel()
		case <-wctx.Done():
		}
	}()
	var subs sync.WaitGroup
	for h := range hosts {
		subs.Add(1)
		go func() { defer subs.Done(); s.submit(wctx, h, eps, bursts) }()
	}
	subs.Wait()
	workEnd := time.Since(s.start)
	s.logf("workload over: %d messages planned; draining (at most %v)", s.planned(), time.Duration(c.Drain))
	// The faults are over by the cooldown; wait for the schedule to finish anyway.
	stopCtl()
	wcancel()
	bg.Wait()
	_, ferr := r.endFailures()
	ferr = errors.Join(ferr, s.restoreLinks())
	for h, hs := range s.hosts { // a restart the schedule did not reach (a late machine)
		s.mu.Lock()
		killed := s.killHost == h
		s.mu.Unlock()
		if killed && hs.current() == nil {
			if err := s.restart(h); err != nil {
				ferr = errors.Join(ferr, err)
			}
		}
	}
	// Drain: every message gets its outcome, every one reported sent its delivery.
	drainStart := time.Now()
	for time.Since(drainStart) < time.Duration(c.Drain) && !s.settled() {
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(drainStart)
	// A moment for anything late (a duplicate, a connection's last packets), then the
	// memory after the drain, with a forced GC.
	time.Sleep(2 * time.Second)
	s.mem.end = s.sample(true)
	rep := s.report(workEnd, drained)
	s.mu.Lock()
	rep.Faults = append([]string(nil), s.faultLog...)
	errs := append([]error{ferr}, s.faultErr...)
	s.mu.Unlock()
	s.cancel() // outcomes not in by now stay "no outcome"
	return rep, errors.Join(errs...)
}

// restoreLinks brings back every link still down and heals every flaky one, so the drain
// runs on a whole fabric (after an interrupt, or a fault from smartt-lab testbed fail).
func (s *soaker) restoreLinks() error {
	r := s.r
	fs := &r.faults
	fs.mu.Lock()
	var down []string
	for l := range fs.downAt {
		down = append(down, l)
	}
	fs.mu.Unlock()
	var errs []error
	for _, l := range down {
		errs = append(errs, r.TB.LinkUp(l), r.Fabric.Converge(l, false))
		s.logf("up %s (still down after the workload)", l)
	}
	for _, l := range r.TB.Plan.Links {
		errs = append(errs, r.Fabric.Flaky(l.Name, 0, 0, 0))
	}
	return errors.Join(errs...)
}

// planned counts the messages planned (submitted or skipped).
func (s *soaker) planned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		n += len(m)
	}
	return n
}

// faults applies the schedule.
func (s *soaker) faults(ctx context.Context, evs []soakEvent) {
	for _, e := range evs {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.start.Add(e.At))):
		}
		var err error
		switch e.Kind {
		case "flaky":
			err = s.r.Fabric.Flaky(e.Link, e.Gap, e.Burst, e.Seed)
		case "heal":
			err = s.r.Fabric.Flaky(e.Link, 0, 0, 0)
		case "down", "up":
			err = s.r.Apply(Fault{Kind: e.Kind, Link: e.Link})
		case "kill":
			s.kill(e.Host)
		case "restart":
			err = s.restart(e.Host)
		}
		if e.Kind != "kill" && e.Kind != "restart" {
			s.logf("%v", e)
		}
		if err != nil {
			s.mu.Lock()
			s.faultErr = append(s.faultErr, fmt.Errorf("%v at %v: %w", e, e.At, err))
			s.mu.Unlock()
			s.logf("FAULT FAILED: %v: %v", e, err)
		}
	}
}

// kill crashes host h's daemon.
func (s *soaker) kill(h int) {
	hs := s.hosts[h]
	hs.mu.Lock()
	inst := hs.inst
	hs.inst = nil
	hs.mu.Unlock()
	if inst == nil {
		return
	}
	s.mu.Lock()
	s.killAt, s.killHost = s.now(), h
	for src, ms := range s.msgs {
		for i := range ms {
			if ms[i].outcome != outNone {
				continue
			}
			if int(ms[i].dst) == h {
				s.inFlight[0]++
			}
			if src == h {
				s.inFlight[1]++
			}
		}
	}
	to, from := s.inFlight[0], s.inFlight[1]
	s.mu.Unlock()
	t0 := time.Now()
	s.crash(inst)
	st := inst.d.Node.Stats()
	hs.mu.Lock()
	hs.old = append(hs.old, st)
	hs.mu.Unlock()
	s.logf("kill h%d's daemon: %d messages to it and %d from it without an outcome (crash took %v)", h, to, from, time.Since(t0).Round(time.Millisecond))
}

// restart starts host h's daemon again.
func (s *soaker) restart(h int) error {
	hs := s.hosts[h]
	if hs.current() != nil {
		return fmt.Errorf("h%d's daemon is running", h)
	}
	t0 := time.Now()
	inst, err := s.startInstance(h, 1)
	if err != nil {
		return err
	}
	hs.mu.Lock()
	hs.inst = inst
	hs.mu.Unlock()
	s.mu.Lock()
	s.restAt = s.now()
	s.mu.Unlock()
	s.logf("restart h%d's daemon (took %v)", h, time.Since(t0).Round(time.Millisecond))
	return nil
}

// submit runs host h's workload: its background stream and its share of the bursts, in
// time order, until the duration is over.
func (s *soaker) submit(ctx context.Context, h int, eps []epochPlan, bursts []burst) {
	bg := newBackground(s.c, eps, s.sc.Seed, h, len(s.hosts))
	d := time.Duration(s.c.Duration)
	buf := make([]byte, 0, 1<<20)
	bi := 0
	var batch []plannedMsg
	for {
		var t time.Duration
		batch = batch[:0]
		if bi < len(bursts) && bursts[bi].At <= bg.next {
			b := &bursts[bi]
			bi++
			t = b.At
			for k, src := range b.Src {
				if src == h {
					batch = append(batch, plannedMsg{dst: b.Dst[k], size: b.Size, kind: b.Kind})
				}
			}
		} else {
			var m plannedMsg
			t, m = bg.pop()
			batch = append(batch, m)
		}
		if t >= d {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.start.Add(t))):
		}
		for _, m := range batch {
			if !s.send(ctx, h, t, m, &buf) {
				return
			}
		}
	}
}

// send submits one message from host h (planned at t) once the host has a free slot;
// false when the workload is over.
func (s *soaker) send(ctx context.Context, h int, t time.Duration, m plannedMsg, buf *[]byte) bool {
	hs := s.hosts[h]
	select {
	case hs.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if time.Since(s.start) >= time.Duration(s.c.Duration) {
		<-hs.sem
		s.mu.Lock()
		s.late++
		s.mu.Unlock()
		return false
	}
	if cap(*buf) < m.size {
		*buf = make([]byte, 0, m.size)
	}
	b := (*buf)[:m.size]
	s.mu.Lock()
	seq := uint64(len(s.msgs[h]))
	s.mu.Unlock()
	id := uint64(h)<<40 | seq
	crc := fill(b, s.sc.Seed, id)
	inst := hs.current()
	now := s.now()
	rec := msgRec{size: int32(m.size), dst: int16(m.dst), kind: m.kind, crc: crc, submitted: now}
	if inst == nil {
		rec.outcome = outSkipped
	}
	s.mu.Lock()
	s.msgs[h] = append(s.msgs[h], rec)
	s.maxLag = max(s.maxLag, now-int64(t))
	s.mu.Unlock()
	if inst == nil {
		<-hs.sem
		return true
	}
	p, err := inst.sess.SendAsync(s.r.Addrs[m.dst], 1, b)
	if err != nil {
		s.outcome(h, seq, fmt.Errorf("submit: %w", err))
		<-hs.sem
		return true
	}
	go func() {
		_, err := p.Wait(s.ctx)
		if s.ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			s.outcome(h, seq, err)
		}
		<-hs.sem
	}()
	return true
}

// fill writes message id's content into b (the soak header, then bytes drawn from the
// seed and id) and returns the CRC-64 of the body.
func fill(b []byte, seed, id uint64) uint64 {
	body := b[soakHeader:]
	g := rand.NewPCG(seed, id)
	i := 0
	for ; i+8 <= len(body); i += 8 {
		binary.LittleEndian.PutUint64(body[i:], g.Uint64())
	}
	for x := g.Uint64(); i < len(body); i, x = i+1, x>>8 {
		body[i] = byte(x)
	}
	crc := crc64.Checksum(body, crcTable)
	copy(b, "SoaK")
	binary.LittleEndian.PutUint64(b[4:], id)
	binary.LittleEndian.PutUint64(b[12:], crc)
	return crc
}

// outcome records message (h, seq)'s outcome: err nil is sent.
func (s *soaker) outcome(h int, seq uint64, err error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.msgs[h][seq]
	if r.outcome != outNone {
		return
	}
	r.outcomeAt = now
	if err == nil {
		r.outcome = outSent
		return
	}
	r.outcome = outFailed
	reason := failReason(err)
	ix, ok := s.reasonIx[reason]
	if !ok {
		ix = uint16(len(s.reasons))
		s.reasons = append(s.reasons, reason)
		s.reasonIx[reason] = ix
	}
	r.reason = ix
}

// failReason reduces a failure to its kind (the engine's reason, or how the session ended).
func failReason(err error) string {
	t := err.Error()
	switch {
	case strings.HasPrefix(t, "submit: "):
		return "refused at submission (own daemon killed)"
	case strings.Contains(t, "session ended"):
		return "session ended (own daemon killed)"
	}
	t = strings.TrimPrefix(t, client.ErrFailed.Error()+": ")
	t = strings.TrimPrefix(t, "transport: ")
	if len(t) > 70 {
		t = t[:70]
	}
	return t
}

// receive reads instance inst's deliveries on host h until its session ends.
func (s *soaker) receive(h int, inst *instance) {
	defer close(inst.recvDone)
	for {
		msg, err := inst.sess.Recv(context.Background())
		if err != nil {
			var ce *client.Error
			if errors.As(err, &ce) {
				s.mu.Lock()
				s.recvErrs[fmt.Sprintf("h%d: %v", h, ce)]++
				s.mu.Unlock()
				continue
			}
			return
		}
		s.delivered(h, inst.life, msg)
	}
}

// delivered checks and records a message received by host h.
func (s *soaker) delivered(h, life int, msg *client.Message) {
	now := s.now()
	d := msg.Data
	bad := func(format string, a ...any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.nCorrupt++
		if len(s.corrupt) < 20 {
			s.corrupt = append(s.corrupt, fmt.Sprintf("%.1fs h%d from %v: ", float64(now)/1e9, h, msg.From)+fmt.Sprintf(format, a...))
		}
	}
	if len(d) < soakHeader || string(d[:4]) != "SoaK" {
		bad("%d bytes without the soak header", len(d))
		return
	}
	id := binary.LittleEndian.Uint64(d[4:])
	src, seq := int(id>>40), id&(1<<40-1)
	crc := crc64.Checksum(d[soakHeader:], crcTable)
	s.mu.Lock()
	var r *msgRec
	if src < len(s.msgs) && seq < uint64(len(s.msgs[src])) {
		r = &s.msgs[src][seq]
	}
	var why string
	switch {
	case r == nil:
		why = fmt.Sprintf("unknown message id %#x", id)
	case r.outcome == outSkipped:
		why = fmt.Sprintf("message %#x was never submitted", id)
	case int(r.dst) != h:
		why = fmt.Sprintf("message %#x for h%d", id, r.dst)
	case msg.From.Addr() != s.r.Addrs[src].Addr():
		why = fmt.Sprintf("message %#x of h%d", id, src)
	case len(d) != int(r.size):
		why = fmt.Sprintf("message %#x: %d bytes, sent %d", id, len(d), r.size)
	case crc != r.crc || binary.LittleEndian.Uint64(d[12:]) != r.crc:
		why = fmt.Sprintf("message %#x (%d bytes): content differs (CRC-64 %#x, sent %#x)", id, len(d), crc, r.crc)
	default:
		if r.deliveries == 0 {
			r.deliveredAt, r.life = now, uint8(life)
		}
		if r.deliveries < 255 {
			r.deliveries++
		}
	}
	s.mu.Unlock()
	if why != "" {
		bad("%s", why)
	}
}

// lostInCrash says whether a message reported sent and never delivered went down with the
// killed daemon: to the killed host, reported sent within crashWindow before the kill or
// between the kill and the restart (its last ACK left the old daemon before the kill; the
// message was then still queued to, or being read by, the application whose session the
// crash ended). s.mu must be held.
func (s *soaker) lostInCrash(r *msgRec) bool {
	return s.killAt >= 0 && int(r.dst) == s.killHost && r.outcome == outSent && r.deliveries == 0 &&
		r.outcomeAt >= s.killAt-int64(crashWindow) && (s.restAt == 0 || r.outcomeAt <= s.restAt)
}

// crashWindow is how long before the kill a message's Sent may have been reported and
// the message still be in the killed daemon's hands (acknowledged, not yet read by its
// application). A message acknowledged longer before and never delivered is a violation.
const crashWindow = 10 * time.Second

// settled reports whether every planned message has its outcome and every message
// reported sent its delivery (or went down with the killed daemon).
func (s *soaker) settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ms := range s.msgs {
		for i := range ms {
			r := &ms[i]
			if r.outcome == outNone || (r.outcome == outSent && r.deliveries == 0 && !s.lostInCrash(r)) {
				return false
			}
		}
	}
	return true
}

// memTrack keeps the memory samples' start, peak and end.
type memTrack struct {
	mu         sync.Mutex
	start, end MemSample
	peak       MemSample // per field, the largest seen
	n          int
}

func (m *memTrack) init(hosts int) {
	m.peak.RecvBuffered = make([]uint64, hosts)
}

// MemSample is the process's memory and the daemons' gauges at one time.
type MemSample struct {
	At           time.Duration `json:"at_ns"`
	HeapAlloc    uint64        `json:"heap_alloc"` // Go heap in use (live after a forced GC)
	HeapSys      uint64        `json:"heap_sys"`
	RSS          uint64        `json:"rss"` // VmRSS of the process
	Goroutines   int           `json:"goroutines"`
	RecvBuffered []uint64      `json:"recv_buffered"` // per host: the engine's gauge of message buffers held for peers
	Pending      []int         `json:"pending"`       // per host: messages the daemon sent without an outcome yet
	Conns        []int         `json:"conns"`         // per host: live connections
}

// sample reads the process's memory (after a forced GC if gc) and every daemon's gauges,
// and folds it into the peaks.
func (s *soaker) sample(gc bool) MemSample {
	if gc {
		runtime.GC()
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	x := MemSample{At: time.Since(s.start), HeapAlloc: ms.HeapAlloc, HeapSys: ms.HeapSys, RSS: vmRSS(),
		Goroutines: runtime.NumGoroutine()}
	for _, h := range s.hosts {
		var buffered uint64
		var pending, conns int
		if inst := h.current(); inst != nil {
			buffered = inst.d.Node.Stats().RecvBuffered
			pending = inst.d.Node.Pending()
			conns = len(inst.d.Node.Conns(nil))
		}
		x.RecvBuffered = append(x.RecvBuffered, buffered)
		x.Pending = append(x.Pending, pending)
		x.Conns = append(x.Conns, conns)
	}
	m := &s.mem
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	p := &m.peak
	p.HeapAlloc, p.HeapSys, p.RSS = max(p.HeapAlloc, x.HeapAlloc), max(p.HeapSys, x.HeapSys), max(p.RSS, x.RSS)
	p.Goroutines = max(p.Goroutines, x.Goroutines)
	for i, b := range x.RecvBuffered {
		p.RecvBuffered[i] = max(p.RecvBuffered[i], b)
	}
	return x
}

// vmRSS is the process's resident set size from /proc/self/status (0 if unreadable).
func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// monitor samples memory every memory.interval and prints progress every progress,
// until ctx ends.
func (s *soaker) monitor(ctx context.Context) {
	mt := time.NewTicker(time.Duration(s.c.Memory.Interval))
	defer mt.Stop()
	var pc <-chan time.Time
	if s.c.Progress > 0 && s.o.Progress != nil {
		pt := time.NewTicker(time.Duration(s.c.Progress))
		defer pt.Stop()
		pc = pt.C
	}
	last := s.mem.start
	for {
		select {
		case <-ctx.Done():
			return
		case <-mt.C:
			last = s.sample(false)
		case <-pc:
			t := s.tally()
			var buffered uint64
			for _, b := range last.RecvBuffered {
				buffered += b
			}
			s.logf("progress: %d submitted, %d sent, %d failed, %d delivered, %d without outcome | heap %s, RSS %s, %d goroutines, %s held for peers",
				t.Submitted, t.Sent, t.Failed, t.Delivered, t.NoOutcome, mib(last.HeapAlloc), mib(last.RSS), last.Goroutines, mib(buffered))
		}
	}
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
