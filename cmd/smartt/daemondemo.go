package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/udp"
)

type daemonDemoOpts struct {
	cc, lb   string
	messages int
	maxSize  int
	seed     uint64
	verbose  bool
	timeout  time.Duration
}

// daemonOnly are the flags only the daemon demo has.
var daemonOnly = []string{"cc", "lb", "verbose", "timeout"}

// checkDaemonDemo checks the daemon demo's options.
func checkDaemonDemo(o daemonDemoOpts) error {
	switch {
	case o.messages < 1 || o.messages > 1000:
		return cli.Usagef("--messages = %d: must be in 1..1000", o.messages)
	case o.maxSize < 1 || o.maxSize > 1<<30:
		return cli.Usagef("--max-size = %d: must be in 1..%d", o.maxSize, 1<<30)
	case o.timeout < time.Second || o.timeout > 10*time.Minute:
		return cli.Usagef("--timeout = %v: must be in 1s..10m", o.timeout)
	case o.cc != "" && !slices.Contains(transport.CCNames(), o.cc):
		return cli.Usagef("--cc = %q: must be one of %v", o.cc, transport.CCNames())
	case o.lb != "" && !slices.Contains(transport.LBNames(), o.lb):
		return cli.Usagef("--lb = %q: must be one of %v", o.lb, transport.LBNames())
	}
	return nil
}

// bindDemo declares the demo's flags: the daemon demo's, the in-memory demo's (--inmem),
// and --messages, --max-size and --seed of both, whose defaults depend on the mode.
func bindDemo(fs *pflag.FlagSet) cli.RunFunc {
	var d daemonDemoOpts
	var m demoOpts
	var inmem bool
	var maxSize int64
	fs.BoolVar(&inmem, "inmem", false, "run the engines over the lossy, reordering in-memory test network instead (virtual time)")
	fs.StringVar(&d.cc, "cc", "", "congestion controller (default: the embedded config's; one of "+strings.Join(transport.CCNames(), ", ")+")")
	fs.StringVar(&d.lb, "lb", "", "load balancer (default: the embedded config's; one of "+strings.Join(transport.LBNames(), ", ")+")")
	fs.IntVar(&d.messages, "messages", 0, "messages to send (default 16, 1..1000; with --inmem 24, 1..10000)")
	cli.SizeVar(fs, &maxSize, "max-size", 0, 0, 1<<30, "largest message, e.g. 300000 or 4MiB (default 16MiB; with --inmem 4MiB; at most 1GiB)")
	fs.Uint64Var(&d.seed, "seed", 1, "random seed: the same seed gives the same message sizes and contents")
	fs.BoolVarP(&d.verbose, "verbose", "v", false, "show the daemons' logs")
	fs.DurationVar(&d.timeout, "timeout", 90*time.Second, "give up after this long (1s..10m)")
	declareInmem(fs, &m)
	return func(_ []string, out io.Writer) error {
		clash := daemonOnly
		if !inmem {
			clash = inmemOnly
		}
		for _, name := range clash {
			if fs.Changed(name) {
				return cli.Usagef("--%s is not a flag of the %s demo (see smartt demo -h)", name, map[bool]string{true: "in-memory", false: "daemon"}[inmem])
			}
		}
		pick := func(name string, v, def int) int {
			if fs.Changed(name) {
				return v
			}
			return def
		}
		if inmem {
			m.messages, m.maxSize, m.seed = pick("messages", d.messages, 24), pick("max-size", int(maxSize), 4<<20), d.seed
			return runDemo(m, out)
		}
		d.messages, d.maxSize = pick("messages", d.messages, 16), pick("max-size", int(maxSize), 16<<20)
		return runDaemonDemo(d, out)
	}
}

// runDaemonDemo starts two daemons on 127.0.0.1 and 127.0.0.2 with the embedded default
// config, moves messages between two clients through their APIs and real UDP sockets,
// prints what happened to each message, and stops them.
func runDaemonDemo(o daemonDemoOpts, out io.Writer) error {
	if err := checkDaemonDemo(o); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "smartt-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ds, err := smarttd.LocalPair(dir, smarttd.Options{Logger: log}, func(c *smarttd.Config) {
		if o.cc != "" {
			c.Transport.CC = o.cc
		}
		if o.lb != "" {
			c.Transport.LB = o.lb
		}
	})
	if err != nil {
		return err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		return smarttd.StopAll(ds[:], 5*time.Second)
	}
	defer stop()
	a, b := ds[0], ds[1]
	ca, cb := client.New(a.Config.API.Socket), client.New(b.Config.API.Socket)
	caps, err := ca.Capabilities(ctx)
	if err != nil {
		return err
	}
	ts := "?"
	if m, ok := caps.Socket.(map[string]any); ok {
		ts = fmt.Sprint(m["timestamp_source"])
	}
	if uc, ok := a.Socket.Caps().(udp.Caps); ok {
		ts = uc.TimestampSource
	}
	t := a.Config.Transport
	fmt.Fprintf(out, "smartt demo: two daemons in this process, %v and %v, over real UDP sockets (loopback)\n", a.Config.Listen, b.Config.Listen)
	cc := t.CC
	if cc == "fixed" {
		cc = fmt.Sprintf("fixed (window %d B)", t.InitialWindow)
	}
	fmt.Fprintf(out, "config:  embedded default; cc %s, lb %s, MTU %d B, %d EVs (source ports %d..), RTO floor %v\n",
		cc, t.LB, t.MTU, t.EVS, a.Config.Listen.Port()+1, t.MinRTO)
	fmt.Fprintf(out, "sockets: receive timestamps from the %s clock; API sockets %s, %s\n\n", ts, a.Config.API.Socket, b.Config.API.Socket)

	sa, err := ca.Open(ctx)
	if err != nil {
		return err
	}
	defer sa.Close()
	sb, err := cb.Open(ctx)
	if err != nil {
		return err
	}
	defer sb.Close()
	if _, err := sa.Bind(ctx, 1); err != nil {
		return err
	}
	if _, err := sb.Bind(ctx, 2); err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(o.seed, 3))
	type rec struct {
		size int
		hash [32]byte
		info api.SentInfo
	}
	recs := make([]rec, o.messages)
	recvErr := make(chan error, 1)
	go func() {
		for i := range recs {
			m, err := sb.Recv(ctx)
			if err != nil {
				recvErr <- fmt.Errorf("receiving message %d: %w", i, err)
				return
			}
			if sha256.Sum256(m.Data) != recs[i].hash {
				recvErr <- fmt.Errorf("message %d arrived corrupted", i)
				return
			}
		}
		recvErr <- nil
	}()
	start := time.Now()
	var total int
	for i := range recs {
		// Log-spread sizes: many small messages, a few large ones.
		size := 1 + int(float64(o.maxSize-1)*rng.Float64()*rng.Float64()*rng.Float64())
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		recs[i].size, recs[i].hash = size, sha256.Sum256(data)
		total += size
		info, err := sa.Send(ctx, b.Config.Listen, 2, data)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		recs[i].info = info
	}
	if err := <-recvErr; err != nil {
		return err
	}
	elapsed := time.Since(start)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "msg\tbytes\tcompletion us\tGbit/s\tsrtt us\twindow B\tretx\t")
	for i, r := range recs {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.2f\t%.1f\t%d\t%d\t\n", i, r.size, float64(r.info.Elapsed)/1e3,
			float64(r.size)*8/float64(max(r.info.Elapsed, 1)), float64(r.info.SRTT)/1e3, r.info.Window, r.info.Retransmit)
	}
	tw.Flush()
	cta, err := ca.Counters(ctx)
	if err != nil {
		return err
	}
	ctb, err := cb.Counters(ctx)
	if err != nil {
		return err
	}
	if err := stop(); err != nil {
		return fmt.Errorf("stopping the daemons: %w", err)
	}
	ea, eb := cta.Engine, ctb.Engine
	fmt.Fprintf(out, "\n%d of %d messages delivered intact (SHA-256 checked), %.1f MB in %v\n",
		len(recs), len(recs), float64(total)/1e6, elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "sender:   %d data packets, retransmitted %d after SACK gaps, %d after NACKs, %d after timeouts; %d ACKs received\n",
		ea.DataSent, ea.RetxSack, ea.RetxNack, ea.RetxTimeout, ea.AcksRecv)
	fmt.Fprintf(out, "receiver: %d data packets, %d duplicates, %d CE-marked; %d ACKs sent; %d messages delivered to its client\n",
		eb.DataRecv, eb.DupData, eb.CERecv, eb.AcksSent, ctb.API.MsgsDelivered)
	if note := retxNote(ea.RetxTimeout, ea.RetxSack+ea.RetxNack, eb.DupData, a.Config.Transport.MinRTO.String(), loadAvg()); note != "" {
		fmt.Fprintln(out, note)
	}
	fmt.Fprintln(out, "both daemons stopped")
	return nil
}

// retxNote explains timeout retransmissions on loopback, which loses nothing: when the
// receiver got as many duplicates, the originals had arrived and the ACKs came later than
// the RTO floor, because a busy host ran the daemons' goroutines late.
func retxNote(timeouts, other, dups uint64, floor, load string) string {
	if timeouts == 0 {
		return ""
	}
	if dups >= timeouts+other {
		return fmt.Sprintf("note:     the %d timeout retransmissions were spurious (the receiver got each packet twice: loopback lost "+
			"nothing); their ACKs came later than the %s RTO floor because the host was busy (load average %s): expected on a "+
			"loaded machine, not on an idle one", timeouts, floor, load)
	}
	return fmt.Sprintf("note:     %d of the %d timeout retransmissions replaced packets that never arrived (the receiver's socket "+
		"buffer overflowed: loopback drops only there); the rest were spurious (ACKs later than the %s RTO floor; load average %s)",
		timeouts+other-min(dups, timeouts+other), timeouts, floor, load)
}

// loadAvg is the 1-minute load average and the CPU count ("25.4 on 2 CPUs").
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%s on %d CPUs", f[0], runtime.NumCPU())
}

// newDemoCmd is "smartt demo".
func newDemoCmd() *cobra.Command {
	return leaf("demo", "start two daemons on 127.0.0.1 and 127.0.0.2, move messages, print what happened",
		"demo starts two daemons on 127.0.0.1 and 127.0.0.2 in this process, moves messages between two\n"+
			"clients through their APIs and real UDP sockets, and prints what happened to each message.\n"+
			"demo --inmem runs two engines over the lossy, reordering in-memory test network instead.",
		cobra.NoArgs, bindDemo)
}
