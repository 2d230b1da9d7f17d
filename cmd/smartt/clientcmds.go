package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/client"
)

func defaultSocket() string {
	if s := os.Getenv("SMARTT_SOCKET"); s != "" {
		return s
	}
	return api.DefaultSocket
}

// clientFlags are the flags every daemon-talking command has.
type clientFlags struct {
	socket  string
	timeout time.Duration
}

// declare declares --socket and --timeout (default timeout, described as usage) on fs.
func (cf *clientFlags) declare(fs *pflag.FlagSet, timeout time.Duration, usage string) {
	fs.StringVar(&cf.socket, "socket", defaultSocket(), "the daemon's API socket ($SMARTT_SOCKET)")
	fs.DurationVar(&cf.timeout, "timeout", timeout, usage)
}

// bindClient declares the client flags with a 30 s timeout and returns run with them.
func bindClient(run func(cf clientFlags, out io.Writer) error) func(fs *pflag.FlagSet) cli.RunFunc {
	return func(fs *pflag.FlagSet) cli.RunFunc {
		var cf clientFlags
		cf.declare(fs, 30*time.Second, "give up after this long")
		return func(_ []string, out io.Writer) error { return run(cf, out) }
	}
}

// socketCaps prints the daemon's socket capabilities (a JSON object) on one line:
// features it has, "no-" and those it lacks, then its settings, in name order.
func socketCaps(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprint(v)
	}
	var on, off, set []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch x := m[k].(type) {
		case bool:
			if x {
				on = append(on, k)
			} else {
				off = append(off, "no-"+k)
			}
		case float64:
			set = append(set, fmt.Sprintf("%s=%.0f", k, x))
		default:
			set = append(set, fmt.Sprintf("%s=%v", k, x))
		}
	}
	return strings.Join(slices.Concat(on, off, set), " ")
}

// daemonView is what status and check ask the daemon for.
type daemonView struct {
	st   apitypes.Status
	caps apitypes.Capabilities
	cnt  apitypes.Counters
}

// fetchView asks the daemon on cf.socket for its status, capabilities and counters
// within cf.timeout.
func fetchView(cf clientFlags) (v daemonView, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	c := client.New(cf.socket)
	if v.st, err = c.Status(ctx); err != nil {
		return v, err
	}
	if v.caps, err = c.Capabilities(ctx); err != nil {
		return v, err
	}
	v.cnt, err = c.Counters(ctx)
	return v, err
}

func runStatus(cf clientFlags, out io.Writer) error {
	v, err := fetchView(cf)
	if err != nil {
		return err
	}
	st, caps, cnt := v.st, v.caps, v.cnt
	e := cnt.Engine
	fmt.Fprintf(out, "smarttd %s (pid %d) listening on %s, up %.0f s%s\n", st.Version, st.PID, st.Listen, st.UptimeS,
		map[bool]string{true: ", SHUTTING DOWN"}[st.ShuttingDown])
	fmt.Fprintf(out, "connections %d, API sessions %d, messages in flight %d\n", st.Connections, st.Sessions, st.Pending)
	if st.MemoryBound > 0 {
		limit := "none"
		if st.MemoryLimit > 0 {
			limit = config.HumanSize(st.MemoryLimit)
		}
		fmt.Fprintf(out, "worst-case memory %s, limit %s\n", config.HumanSize(st.MemoryBound), limit)
	}
	a, l := cnt.API, caps.Limits
	fmt.Fprintf(out, "api: %d of %d sessions; %d of %d bytes outstanding, %d of %d bytes queued for clients; "+
		"%d received messages dropped, %d sends refused, %d sessions evicted idle, %d timed out mid-frame, %d stalled\n",
		a.Sessions, l.MaxClients, a.Outstanding, l.MaxOutstandingTotal, a.RecvQueued, l.MaxRecvQueueTotal,
		a.RecvOverflow+a.RecvOverflowTotal, a.MsgsRejected, a.SessionsEvicted, a.ReadTimeouts, a.ClientsStalled)
	fmt.Fprintf(out, "control: %d of %d connections open, %d refused at max_control_conns\n",
		a.ControlConns, l.MaxControlConns, a.ControlRefused)
	fmt.Fprintf(out, "sockets: %s\n", socketCaps(caps.Socket))
	fmt.Fprintf(out, "algorithms: cc %s, lb %s\n", strings.Join(caps.CC, " "), strings.Join(caps.LB, " "))
	fmt.Fprintf(out, "messages: %d sent, %d failed, %d delivered (%d bytes)\n", e.MsgsSent, e.MsgsFailed, e.MsgsDelivered, e.BytesDelivered)
	fmt.Fprintf(out, "packets: %d out, %d in; retransmissions %d sack, %d nack, %d timeout; CE %d; trimmed %d\n",
		e.PacketsSent, e.PacketsRecv, e.RetxSack, e.RetxNack, e.RetxTimeout, e.CERecv, e.Trimmed)
	return nil
}

func runConns(cf clientFlags, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	conns, err := client.New(cf.socket).Conns(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPEER\tDIR\tCC\tLB\tSRTT us\tRTO us\tWINDOW B\tRATE B/s\tIN FLIGHT B\tQUEUED\tCLOSING")
	for _, c := range conns {
		dir := "in"
		if c.Initiator {
			dir = "out"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%v\n", c.ID, c.Peer, dir, c.CC, c.LB,
			float64(c.SRTT)/1e3, float64(c.RTO)/1e3, c.Window, c.PacingRate, c.InFlight, c.QueuedMsgs, c.Closing)
	}
	return tw.Flush()
}

// isTerminal reports whether f is a character device (a terminal), where progress bars go.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar draws a bar with rate and ETA on w (a terminal: stderr) for a transfer of
// total bytes; what n counts is the label's to say.
func progressBar(w io.Writer, label string, total int64) func(n int64) {
	start, last := time.Now(), time.Time{}
	return func(n int64) {
		if time.Since(last) < 100*time.Millisecond && n < total {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "\r%s", progressLine(label, n, total, time.Since(start)))
		if n >= total {
			fmt.Fprintln(w)
		}
	}
}

// ackedTo returns the payload bytes the peer at addr has acknowledged on the daemon's
// connections to it (0 if there are none, or the daemon does not answer).
func ackedTo(ctx context.Context, cl *client.Client, addr netip.AddrPort) uint64 {
	conns, err := cl.Conns(ctx)
	if err != nil {
		return 0
	}
	var n uint64
	for _, c := range conns {
		if c.Peer == addr.String() {
			n += c.BytesAcked
		}
	}
	return n
}

// pollProgress draws a progress bar of total bytes from done(), polled every 200 ms, until
// the returned stop is called (with ok: the transfer completed, drawn as 100 %, ending the
// line). done may only grow: a value below the previous one (a connection closed and left
// the table) is ignored.
func pollProgress(w io.Writer, label string, total int64, done func() int64) (stop func(ok bool)) {
	bar := progressBar(w, label, total)
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		var last int64
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if n := min(done(), total); n > last {
					last = n
					bar(n)
				}
			}
		}
	}()
	return func(ok bool) {
		close(quit)
		<-finished
		if ok {
			bar(total) // every byte is acknowledged (ends the line)
		} else {
			fmt.Fprintln(w)
		}
	}
}

// watchIncoming prints, every 500 ms while the daemon holds part of a message from a
// peer, how much of it has arrived and at what rate (GET /v1/conns: recv_buffers and
// bytes_received), until the returned stop is called.
func watchIncoming(w io.Writer, cl *client.Client) (stop func()) {
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		prev := map[string]uint64{}
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conns, err := cl.Conns(ctx)
			cancel()
			if err != nil {
				continue
			}
			for _, c := range conns {
				rate := float64(c.BytesReceived-min(prev[c.ID], c.BytesReceived)) / 0.5
				prev[c.ID] = c.BytesReceived
				if c.RecvBuffers > 0 {
					fmt.Fprintf(w, "\r%s", incomingLine(c.Peer, c.RecvBuffers, rate))
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// incomingLine is one state of watchIncoming: held bytes of a message arriving from peer.
func incomingLine(peer string, held uint64, rate float64) string {
	return fmt.Sprintf("recv: arriving from %s: %s held so far, %s/s", peer, humanBytes(int64(held)), humanBytes(int64(rate)))
}

// progressLine is one state of a progress bar: n of total bytes after elapsed.
func progressLine(label string, n, total int64, elapsed time.Duration) string {
	const width = 30
	total = max(total, 1)
	k := int(int64(width) * min(n, total) / total)
	line := fmt.Sprintf("%s [%s%s] %5.1f%% %s/%s", label, strings.Repeat("=", k), strings.Repeat(" ", width-k),
		100*float64(n)/float64(total), humanBytes(n), humanBytes(total))
	if sec := elapsed.Seconds(); sec > 0 && n > 0 {
		rate := float64(n) / sec
		line += fmt.Sprintf(" %s/s", humanBytes(int64(rate)))
		if n < total {
			line += fmt.Sprintf(" ETA %v", time.Duration(float64(total-n)/rate*1e9).Round(time.Second))
		} else {
			line += fmt.Sprintf(" in %v", elapsed.Round(time.Millisecond))
		}
	}
	return line
}

// humanBytes formats n with a binary unit: 512 B, 1.5 KiB, 3.0 MiB, 1.2 GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, 0
	for v >= unit && u < 3 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[u])
}

// sendOpts are send's flags.
type sendOpts struct {
	cf       clientFlags
	to       string
	endpoint uint
	from     uint
	progress string
}

// bindSend declares send's flags.
func bindSend(stdin io.Reader) func(fs *pflag.FlagSet) cli.RunFunc {
	return func(fs *pflag.FlagSet) cli.RunFunc {
		o := &sendOpts{}
		o.cf.declare(fs, 30*time.Second, "give up after this long")
		fs.StringVar(&o.to, "to", "", "the peer daemon's HOST:PORT, HOST a name or an address (required)")
		fs.UintVar(&o.endpoint, "endpoint", 1, "the endpoint bound at the peer (1..4294967295)")
		fs.UintVar(&o.from, "from-endpoint", 0, "our endpoint (0: the daemon picks a free one)")
		fs.StringVar(&o.progress, "progress", "auto", "progress bar with rate and ETA on stderr: auto (a terminal, 1 MiB or more), on, off")
		return func(args []string, out io.Writer) error { return runSend(o, args[0], stdin, out) }
	}
}

func runSend(o *sendOpts, file string, stdin io.Reader, out io.Writer) error {
	cf, to, ep, from, progressFlag := o.cf, &o.to, &o.endpoint, &o.from, &o.progress
	if p := *progressFlag; p != "auto" && p != "on" && p != "off" {
		return cli.Usagef("--progress = %q: want auto, on or off", p)
	}
	if *to == "" {
		return cli.Usagef("--to is required: the peer daemon's HOST:PORT, e.g. --to 10.0.0.2:23600")
	}
	peer, err := resolveAddrPort(context.Background(), *to)
	if err != nil {
		return fmt.Errorf("-to %q: %v", *to, err)
	}
	if *ep < 1 || *ep > 1<<32-1 {
		return fmt.Errorf("-endpoint = %d: must be in 1..4294967295", *ep)
	}
	if *from > 1<<32-1 {
		return fmt.Errorf("-from-endpoint = %d: must be in 0..4294967295", *from)
	}
	var src io.Reader
	var size int64
	if name := file; name == "-" {
		b, err := io.ReadAll(stdin) // the size must be known before the first byte goes
		if err != nil {
			return err
		}
		src, size = strings.NewReader(string(b)), int64(len(b))
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		src, size = f, fi.Size()
	}
	if size == 0 {
		return fmt.Errorf("%s is empty: messages are 1 byte to 1 GiB", file)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	// Through the daemon, not a direct pair to a local receiver: a one-shot send gains
	// no latency from a pair, and the daemon's queue limit lets -timeout cancel it.
	sc := client.New(cf.socket)
	sc.SetDirect(false)
	s, err := sc.Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Bind(ctx, uint32(*from)); err != nil {
		return err
	}
	// Progress on stderr (a terminal): the bytes handed to smarttd. The API reports a
	// message's acknowledgement by the peer only when it completes, so the bar ends at 100 %
	// when the daemon has the whole message, then a line says it waits for the peer.
	var progress func(int64)
	showProgress := *progressFlag == "on" || (*progressFlag == "auto" && isTerminal(os.Stderr) && size >= 1<<20)
	cl := client.New(cf.socket)
	var acked0 uint64
	if showProgress {
		progress = progressBar(os.Stderr, "send: handed to smarttd", size)
		acked0 = ackedTo(ctx, cl, peer)
	}
	start := time.Now()
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, os.Interrupt)
	defer signal.Stop(intr)
	sending := make(chan struct{})
	go func() { // Ctrl-C while the message is streamed: end the progress line, then exit
		select {
		case <-intr:
			if showProgress {
				fmt.Fprintln(os.Stderr)
			}
			fmt.Fprintln(os.Stderr, "smartt: interrupted while handing the message to smarttd: nothing of it is sent (smarttd drops a message it did not get whole)")
			os.Exit(130)
		case <-sending:
		}
	}()
	p, err := s.SendFrom(peer, uint32(*ep), src, size, progress)
	close(sending)
	if err != nil {
		return err
	}
	stop := func(bool) {}
	if showProgress {
		// Network progress: the bytes the peer has acknowledged, from the daemon's
		// connection table (GET /v1/conns), until the completion arrives.
		stop = pollProgress(os.Stderr, "send: acknowledged by "+peer.String(), size,
			func() int64 { return int64(ackedTo(ctx, cl, peer) - acked0) })
	}
	info, err := waitOrCancel(ctx, p, intr, stop, peer)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sent %d bytes to %v endpoint %d in %v (%.2f Gbit/s; daemon completion %.1f us, srtt %.1f us, window %d B, %d retransmissions)\n",
		size, peer, *ep, time.Since(start).Round(time.Microsecond), float64(size)*8/time.Since(start).Seconds()/1e9,
		float64(info.Elapsed)/1e3, float64(info.SRTT)/1e3, info.Window, info.Retransmit)
	return nil
}

// recvOpts are recv's flags.
type recvOpts struct {
	cf       clientFlags
	out      string
	endpoint uint
	count    int
	progress string
	framing  string
}

// bindRecv declares recv's flags.
func bindRecv(fs *pflag.FlagSet) cli.RunFunc {
	o := &recvOpts{}
	o.cf.declare(fs, 0, "stop after this long: the planned end without --count, a failure before the last message with it (0: no limit)")
	fs.StringVar(&o.out, "out", "", "directory to write each message to (numbered after the files already there), or - for stdout (required)")
	fs.UintVar(&o.endpoint, "endpoint", 1, "the endpoint to bind (1..4294967295)")
	fs.IntVar(&o.count, "count", 0, "stop after this many messages (0: run until interrupted or --timeout)")
	fs.StringVar(&o.progress, "progress", "auto", "progress bar per message with rate and ETA on stderr: auto (a terminal, 1 MiB or more), on, off")
	fs.StringVar(&o.framing, "framing", "none", "with --out -: none (messages back to back), length (an 8-byte big-endian length before each) or netstring (LEN:DATA,)")
	return func(_ []string, out io.Writer) error { return runRecv(o, out) }
}

func runRecv(o *recvOpts, out io.Writer) error {
	if p := o.progress; p != "auto" && p != "on" && p != "off" {
		return cli.Usagef("--progress = %q: want auto, on or off", p)
	}
	if o.out == "" {
		return cli.Usagef("--out is required: a directory to write each message to, or - for stdout")
	}
	if !slices.Contains([]string{"none", "length", "netstring"}, o.framing) {
		return cli.Usagef("--framing = %q: want none, length or netstring", o.framing)
	}
	if o.framing != "none" && o.out != "-" {
		return cli.Usagef("--framing %s frames messages on stdout: it needs --out -", o.framing)
	}
	if o.endpoint < 1 || o.endpoint > 1<<32-1 {
		return cli.Usagef("--endpoint = %d: must be in 1..4294967295", o.endpoint)
	}
	if o.count < 0 {
		return cli.Usagef("--count = %d: must be >= 0", o.count)
	}
	ctx := context.Background()
	if o.cf.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.cf.timeout)
		defer cancel()
	}
	var sink *msgDir
	if o.out != "-" {
		var err error
		if sink, err = openMsgDir(o.out); err != nil {
			return err
		}
	}
	s, err := client.New(o.cf.socket).Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Bind(ctx, uint32(o.endpoint)); err != nil {
		return err
	}
	// Stream every message straight to its file (or stdout): nothing is held in memory.
	// The writer callback runs on the session's reader goroutine, possibly for the next
	// message before this loop has handled the previous one: files are kept per message.
	var mu sync.Mutex
	files := map[*client.Message]*os.File{}
	term := o.progress == "on" || (o.progress == "auto" && isTerminal(os.Stderr))
	var started atomic.Int64 // messages whose writing began: more than returned means one is cut
	s.SetRecvWriter(func(m *client.Message) io.Writer {
		started.Add(1)
		if sink == nil {
			return frame(out, o.framing, m.Size)
		}
		f, err := sink.create(m)
		if err != nil {
			return errWriter{err}
		}
		mu.Lock()
		files[m] = f
		mu.Unlock()
		var w io.Writer = f
		if term && (o.progress == "on" || m.Size >= 1<<20) {
			w = &progressWriter{w: f, report: progressBar(os.Stderr, "recv: received from "+m.From.String(), int64(m.Size))}
		}
		return w
	})
	if term {
		// Network progress: while a message is arriving (the daemon holds part of it) the
		// bytes received so far and the rate, from the daemon's connection table.
		stop := watchIncoming(os.Stderr, client.New(o.cf.socket))
		defer stop()
	}
	for i := 0; o.count == 0 || i < o.count; i++ {
		m, err := s.Recv(ctx)
		if m != nil {
			mu.Lock()
			f, ok := files[m]
			delete(files, m)
			mu.Unlock()
			if ok {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					fmt.Fprintf(os.Stderr, "received %d bytes from %v endpoint %d -> %s\n", m.Size, m.From, m.FromEndpoint, f.Name())
				}
			}
		}
		if err != nil {
			return recvEnd(ctx, err, o, i, started.Load() > int64(i))
		}
	}
	return nil
}

// recvEnd words recv's end by err after got messages: --timeout without --count, with no
// message cut short, is the planned end (exit 0); otherwise a failure saying how far it got.
func recvEnd(ctx context.Context, err error, o *recvOpts, got int, cut bool) error {
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil {
		return err
	}
	switch {
	case cut:
		return fmt.Errorf("timed out (--timeout %v) after %d messages, with the next one begun: it may be partial", o.cf.timeout, got)
	case o.count == 0:
		fmt.Fprintf(os.Stderr, "recv: --timeout %v ended it after %d messages\n", o.cf.timeout, got)
		return nil
	}
	return fmt.Errorf("timed out (--timeout %v) after %d of the %d messages of --count", o.cf.timeout, got, o.count)
}

// msgDir is recv --out DIR: each message goes to a new file NNNNNN-PEER-ENDPOINT.msg,
// numbered on after the highest number already in DIR, so that a second run never
// overwrites the first's files (a file that appears meanwhile is skipped, not replaced).
type msgDir struct {
	dir  string
	mu   sync.Mutex
	next int
}

// openMsgDir creates dir if needed and finds the next free number.
func openMsgDir(dir string) (*msgDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	d := &msgDir{dir: dir}
	for _, e := range ents {
		if n, ok := msgNumber(e.Name()); ok && n >= d.next {
			d.next = n + 1
		}
	}
	return d, nil
}

// msgNumber returns the number of a file recv wrote ("000042-10.0.0.1_23600-1.msg": 42).
func msgNumber(name string) (int, bool) {
	num, _, ok := strings.Cut(name, "-")
	if !ok || len(num) < 6 || !strings.HasSuffix(name, ".msg") {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}

// create makes the file of message m; it never truncates an existing file.
func (d *msgDir) create(m *client.Message) (*os.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	peer := strings.NewReplacer(":", "_", "[", "", "]", "").Replace(m.From.String())
	for {
		name := filepath.Join(d.dir, fmt.Sprintf("%06d-%s-%d.msg", d.next, peer, m.FromEndpoint))
		d.next++
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// frame writes the header of a message of size bytes on w in the given framing and
// returns the writer of its body (netstring: which ends it with ",").
func frame(w io.Writer, framing string, size uint64) io.Writer {
	switch framing {
	case "length":
		var h [8]byte
		binary.BigEndian.PutUint64(h[:], size)
		if _, err := w.Write(h[:]); err != nil {
			return errWriter{err}
		}
	case "netstring":
		if _, err := fmt.Fprintf(w, "%d:", size); err != nil {
			return errWriter{err}
		}
		if size == 0 {
			if _, err := w.Write([]byte{','}); err != nil {
				return errWriter{err}
			}
			return w
		}
		return &netstringBody{w: w, left: size}
	}
	return w
}

// netstringBody passes a message's bytes and writes the netstring's "," after the last.
type netstringBody struct {
	w    io.Writer
	left uint64
}

// Write implements io.Writer.
func (n *netstringBody) Write(b []byte) (int, error) {
	k, err := n.w.Write(b)
	n.left -= min(n.left, uint64(k))
	if err == nil && n.left == 0 && k > 0 {
		_, err = n.w.Write([]byte{','})
	}
	return k, err
}

// errWriter fails every write with err.
type errWriter struct{ err error }

// Write implements io.Writer.
func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

// progressWriter reports the bytes written so far.
type progressWriter struct {
	w      io.Writer
	n      int64
	report func(int64)
}

// Write implements io.Writer.
func (p *progressWriter) Write(b []byte) (int, error) {
	k, err := p.w.Write(b)
	p.n += int64(k)
	p.report(p.n)
	return k, err
}

// newClientCmds are the commands that talk to a running daemon: status, conns, send, recv.
func newClientCmds(stdin io.Reader) []*cobra.Command {
	return []*cobra.Command{
		leaf("status", "the daemon's status, version and capabilities", "", cobra.NoArgs, bindClient(runStatus)),
		leaf("conns", "the daemon's live connections with their congestion-control state", "", cobra.NoArgs, bindClient(runConns)),
		leaf("send --to HOST:PORT [--endpoint N] FILE|-", "send a file (or stdin) as one message", "", sendArgs, bindSend(stdin)),
		leaf("recv --out DIR|- [--endpoint N]", "receive messages into a directory (or stdout)",
			"recv writes each message to its own file in DIR, NNNNNN-PEER_PORT-ENDPOINT.msg, numbered on after\n"+
				"the highest number already in DIR: a later run never overwrites an earlier one's files.\n"+
				"With --out - the messages go to stdout: back to back (--framing none), each after its length\n"+
				"as 8 bytes big-endian (--framing length), or as netstrings LEN:DATA, (--framing netstring).\n"+
				"A failed recv may leave a partial last message; its exit status is then non-zero.",
			cobra.NoArgs, bindRecv),
	}
}

// sendArgs wants exactly one FILE.
func sendArgs(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("send needs exactly one FILE (or - for stdin), got %d arguments", len(args))
	}
	return nil
}

// pendingError is a send that timed out (or was interrupted) after smarttd had the
// message and could not cancel it: its outcome is not known to the command (exit status 3).
type pendingError struct{ error }

// ExitCode makes cli.Main exit with exitPending.
func (pendingError) ExitCode() int { return exitPending }

// exitPending is the exit status of a pendingError: neither success (0) nor failure (1).
const exitPending = 3

// waitOrCancel waits for p's outcome until ctx ends or the user interrupts; then it
// cancels the message if it has not started, or reports it handed over with its outcome
// pending (pendingError). stop ends the progress line.
func waitOrCancel(ctx context.Context, p *client.Pending, intr <-chan os.Signal, stop func(bool), peer netip.AddrPort) (client.SentInfo, error) {
	type outcome struct {
		info client.SentInfo
		err  error
	}
	res := make(chan outcome, 1)
	go func() {
		info, err := p.Wait(context.Background())
		res <- outcome{info, err}
	}()
	why := "timed out (-timeout)"
	select {
	case r := <-res:
		stop(r.err == nil)
		return r.info, r.err
	case <-ctx.Done():
	case <-intr:
		why = "interrupted"
	}
	stop(false)
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := p.Cancel(cctx)
	switch {
	case err == nil && st == client.Cancelled:
		return client.SentInfo{}, fmt.Errorf("%s: message cancelled before any byte of it was sent", why)
	case err == nil && st == client.Unknown: // it completed meanwhile: its outcome is here
		r := <-res
		return r.info, r.err
	}
	return client.SentInfo{}, pendingError{fmt.Errorf("%s: handed to smarttd, outcome pending: the daemon keeps sending it after this command exits; "+
		"watch bytes_acked to %v in `smartt conns` (the message is delivered when the connection's queued_msgs drops to 0), "+
		"or check for it at the receiver (`smartt recv`)", why, peer)}
}
