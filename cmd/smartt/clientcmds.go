package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/spf13/cobra"
	"io"
	"maps"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/api"
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

func newFlagSet(name string, out io.Writer, cf *clientFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cf.socket, "socket", defaultSocket(), "the daemon's API socket")
	fs.DurationVar(&cf.timeout, "timeout", 30*time.Second, "give up after this long")
	return fs
}

// parseNoArgs is in testbed.go.

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

func runStatus(args []string, out io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("status", out, &cf)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	c := client.New(cf.socket)
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	caps, err := c.Capabilities(ctx)
	if err != nil {
		return err
	}
	cnt, err := c.Counters(ctx)
	if err != nil {
		return err
	}
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
	fmt.Fprintf(out, "sockets: %s\n", socketCaps(caps.Socket))
	fmt.Fprintf(out, "algorithms: cc %s, lb %s\n", strings.Join(caps.CC, " "), strings.Join(caps.LB, " "))
	fmt.Fprintf(out, "messages: %d sent, %d failed, %d delivered (%d bytes)\n", e.MsgsSent, e.MsgsFailed, e.MsgsDelivered, e.BytesDelivered)
	fmt.Fprintf(out, "packets: %d out, %d in; retransmissions %d sack, %d nack, %d timeout; CE %d; trimmed %d\n",
		e.PacketsSent, e.PacketsRecv, e.RetxSack, e.RetxNack, e.RetxTimeout, e.CERecv, e.Trimmed)
	return nil
}

func runConns(args []string, out io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("conns", out, &cf)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
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

func runSend(args []string, stdin io.Reader, out io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("send", out, &cf)
	to := fs.String("to", "", "the peer daemon's HOST:PORT, HOST a name or an address (required)")
	ep := fs.Uint("endpoint", 1, "the endpoint bound at the peer (1..4294967295)")
	from := fs.Uint("from-endpoint", 0, "our endpoint (0: the daemon picks a free one)")
	progressFlag := fs.String("progress", "auto", "progress bar with rate and ETA on stderr: auto (a terminal, 1 MiB or more), on, off")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if p := *progressFlag; p != "auto" && p != "on" && p != "off" {
		return usageError{fmt.Errorf("-progress = %q: want auto, on or off", p)}
	}
	if *to == "" {
		return usageError{errors.New("-to is required: the peer daemon's HOST:PORT, e.g. -to 10.0.0.2:23600")}
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
	if fs.NArg() != 1 {
		return fmt.Errorf("send needs exactly one FILE (or - for stdin), got %d arguments", fs.NArg())
	}
	var src io.Reader
	var size int64
	if name := fs.Arg(0); name == "-" {
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
		return fmt.Errorf("%s is empty: messages are 1 byte to 1 GiB", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	s, err := client.New(cf.socket).Open(ctx)
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

func runRecv(args []string, out io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("recv", out, &cf)
	outDir := fs.String("out", "", "directory to write each message to, or - for stdout (required)")
	ep := fs.Uint("endpoint", 1, "the endpoint to bind (1..4294967295)")
	count := fs.Int("count", 0, "stop after this many messages (0: run until interrupted or -timeout)")
	progressFlag := fs.String("progress", "auto", "progress bar per message with rate and ETA on stderr: auto (a terminal, 1 MiB or more), on, off")
	fs.Lookup("timeout").DefValue = "0s"
	cf.timeout = 0
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if p := *progressFlag; p != "auto" && p != "on" && p != "off" {
		return usageError{fmt.Errorf("-progress = %q: want auto, on or off", p)}
	}
	if *outDir == "" {
		return usageError{errors.New("-out is required: a directory to write each message to, or - for stdout")}
	}
	if *ep < 1 || *ep > 1<<32-1 {
		return fmt.Errorf("-endpoint = %d: must be in 1..4294967295", *ep)
	}
	if *count < 0 {
		return fmt.Errorf("-count = %d: must be >= 0", *count)
	}
	ctx := context.Background()
	if cf.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cf.timeout)
		defer cancel()
	}
	s, err := client.New(cf.socket).Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Bind(ctx, uint32(*ep)); err != nil {
		return err
	}
	if *outDir != "-" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			return err
		}
	}
	// Stream every message straight to its file (or stdout): nothing is held in memory.
	// The writer callback runs on the session's reader goroutine, possibly for the next
	// message before this loop has handled the previous one: files are kept per message.
	type sinkFile struct {
		f    *os.File
		name string
	}
	var mu sync.Mutex
	files := map[*client.Message]sinkFile{}
	n := 0
	term := *progressFlag == "on" || (*progressFlag == "auto" && isTerminal(os.Stderr))
	s.SetRecvWriter(func(m *client.Message) io.Writer {
		if *outDir == "-" {
			return out
		}
		mu.Lock()
		defer mu.Unlock()
		name := filepath.Join(*outDir, fmt.Sprintf("%06d-%s-%d.msg", n, strings.NewReplacer(":", "_", "[", "", "]", "").Replace(m.From.String()), m.FromEndpoint))
		n++
		f, err := os.Create(name)
		if err != nil {
			return errWriter{err}
		}
		files[m] = sinkFile{f, name}
		var w io.Writer = f
		if term && (*progressFlag == "on" || m.Size >= 1<<20) {
			w = &progressWriter{w: f, report: progressBar(os.Stderr, "recv: received from "+m.From.String(), int64(m.Size))}
		}
		return w
	})
	if term {
		// Network progress: while a message is arriving (the daemon holds part of it) the
		// bytes received so far and the rate, from the daemon's connection table.
		stop := watchIncoming(os.Stderr, client.New(cf.socket))
		defer stop()
	}
	for i := 0; *count == 0 || i < *count; i++ {
		m, err := s.Recv(ctx)
		if m != nil {
			mu.Lock()
			sf, ok := files[m]
			delete(files, m)
			mu.Unlock()
			if ok {
				if cerr := sf.f.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					fmt.Fprintf(os.Stderr, "received %d bytes from %v endpoint %d -> %s\n", m.Size, m.From, m.FromEndpoint, sf.name)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
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
		leaf("status [flags]", "the daemon's status, version and capabilities", "", runStatus),
		leaf("conns [flags]", "the daemon's live connections with their congestion-control state", "", runConns),
		leaf("send -to HOST:PORT [-endpoint N] FILE|-", "send a file (or stdin) as one message", "",
			func(args []string, out io.Writer) error { return runSend(args, stdin, out) }),
		leaf("recv -out DIR|- [-endpoint N]", "receive messages into a directory (or stdout)", "", runRecv),
	}
}

// pendingError is a send that timed out (or was interrupted) after smarttd had the
// message and could not cancel it: its outcome is not known to the command (exit status 3).
type pendingError struct{ error }

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
