package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

type benchOpts struct {
	socket   string
	to       string
	endpoint uint
	sizes    []int
	latIters int
	bwBytes  int64
	depth    int
	perSize  time.Duration
	format   string // text, json or csv
}

// maxMsg is the largest message: 1 GiB.
const maxMsg = 1 << 30

// parseSizes reads bench's --sizes: message sizes in 1..1GiB, comma-separated.
func parseSizes(list string) ([]int, error) {
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		n, err := cli.ParseSize(s)
		if err != nil {
			return nil, err
		}
		if n < 1 || n > maxMsg {
			return nil, fmt.Errorf("%q: a message size must be in 1..1GiB", strings.TrimSpace(s))
		}
		sizes = append(sizes, int(n))
	}
	return sizes, nil
}

// declareBench declares bench's flags on fs; sizes receives --sizes, unparsed.
func declareBench(fs *pflag.FlagSet, o *benchOpts, sizes *string, jsonOut *bool) {
	fs.StringVar(&o.socket, "socket", defaultSocket(), "the daemon's API socket (with --to)")
	fs.StringVar(&o.to, "to", "", "peer daemon HOST:PORT; empty: start two daemons in this process on 127.0.0.1 and 127.0.0.2")
	fs.UintVar(&o.endpoint, "endpoint", 1, "endpoint at the peer (need not be bound: the peer daemon acknowledges and drops)")
	fs.StringVar(sizes, "sizes", "64,1K,4K,16K,64K,256K,1M,4M", "message sizes, comma-separated (K, M, G and KiB, MiB, GiB are binary)")
	fs.IntVar(&o.latIters, "lat-iters", 200, "latency: messages sent one at a time per size (1..100000)")
	cli.SizeVar(fs, &o.bwBytes, "bw-bytes", 64<<20, 1<<10, 1<<30, "throughput: bytes sent per size (1K..1G)")
	fs.IntVar(&o.depth, "depth", 16, "throughput: messages outstanding at once (1..1024)")
	fs.DurationVar(&o.perSize, "max-time", 5*time.Second, "time limit of each measurement (100ms..1m)")
	fs.StringVar(&o.format, "format", "text", "output: text (a table), json (one object with a row per size) or csv")
	fs.BoolVar(jsonOut, "json", false, "same as --format json")
}

// checkBench checks bench's flags after parsing.
func checkBench(o *benchOpts, sizes string, jsonOut bool) error {
	if jsonOut {
		o.format = "json"
	}
	if o.format != "text" && o.format != "json" && o.format != "csv" {
		return cli.Usagef("--format = %q: want text, json or csv", o.format)
	}
	var err error
	if o.sizes, err = parseSizes(sizes); err != nil {
		return cli.Usagef("--sizes: %v", err)
	}
	switch {
	case o.latIters < 1 || o.latIters > 100000:
		return cli.Usagef("--lat-iters = %d: must be in 1..100000", o.latIters)
	case o.depth < 1 || o.depth > 1024:
		return cli.Usagef("--depth = %d: must be in 1..1024", o.depth)
	case o.perSize < 100*time.Millisecond || o.perSize > time.Minute:
		return cli.Usagef("--max-time = %v: must be in 100ms..1m", o.perSize)
	case o.endpoint < 1 || o.endpoint > 1<<32-1:
		return cli.Usagef("--endpoint = %d: must be in 1..4294967295", o.endpoint)
	}
	return nil
}

// benchRow is one line of the bench table.
type benchRow struct {
	size                 int
	latN, bwN            int
	gbps, mpps           float64
	min, p50, p99, maxUs float64
}

// benchJSON is the output of bench -format json.
type benchJSON struct {
	Peer  string        `json:"peer"`
	Depth int           `json:"depth"`
	Bytes int64         `json:"throughput_bytes_per_size"`
	Rows  []benchRowOut `json:"sizes"`
}

// benchRowOut is benchRow with exported fields, for encoding.
type benchRowOut struct {
	Bytes       int     `json:"bytes"`
	LatMessages int     `json:"latency_messages"`
	BWMessages  int     `json:"throughput_messages"`
	Gbps        float64 `json:"throughput_gbps"`
	Mpps        float64 `json:"message_rate_mpps"`
	MinUs       float64 `json:"latency_min_us"`
	P50Us       float64 `json:"latency_p50_us"`
	P99Us       float64 `json:"latency_p99_us"`
	MaxUs       float64 `json:"latency_max_us"`
}

// out returns r for encoding.
func (r benchRow) out() benchRowOut {
	return benchRowOut{r.size, r.latN, r.bwN, r.gbps, r.mpps, r.min, r.p50, r.p99, r.maxUs}
}

// benchCSVHeader is the first line of bench -format csv.
const benchCSVHeader = "bytes,latency_messages,throughput_messages,throughput_gbps,message_rate_mpps,latency_min_us,latency_p50_us,latency_p99_us,latency_max_us"

func runBench(o benchOpts, out io.Writer) error {
	var err error
	socket := o.socket
	var peer netip.AddrPort
	if o.to == "" {
		dir, err := os.MkdirTemp("", "smartt-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ds, err := smarttd.LocalPair(dir, smarttd.Options{Logger: log}, nil)
		if err != nil {
			return err
		}
		defer smarttd.StopAll(ds[:], 5*time.Second)
		socket, peer = ds[0].Config.API.Socket, ds[1].Config.Listen
		if o.format == "text" {
			fmt.Fprintf(out, "smartt bench: two daemons in this process, %v -> %v (loopback, real UDP)\n", ds[0].Config.Listen, peer)
		}
	} else if peer, err = resolveAddrPort(context.Background(), o.to); err != nil {
		return fmt.Errorf("-to %q: %v", o.to, err)
	} else if o.format == "text" {
		fmt.Fprintf(out, "smartt bench: daemon at %s -> %v endpoint %d\n", socket, peer, o.endpoint)
	}
	ctx := context.Background()
	s, err := client.New(socket).Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Bind(ctx, 0); err != nil {
		return err
	}
	switch o.format {
	case "text":
		fmt.Fprintf(out, "latency: one message at a time, from the client's send to the daemon's report that the peer acknowledged every byte\n")
		fmt.Fprintf(out, "throughput: %d messages outstanding, %d bytes per size\n\n", o.depth, o.bwBytes)
		fmt.Fprintf(out, " %-10s %-8s %-8s %-14s %-14s %-11s %-11s %-11s %-11s\n",
			"#bytes", "#lat", "#bw", "BW avg[Gb/s]", "MsgRate[Mpps]", "t_min[us]", "t_med[us]", "t_99%[us]", "t_max[us]")
	case "csv":
		fmt.Fprintln(out, benchCSVHeader)
	}
	res := benchJSON{Peer: peer.String(), Depth: o.depth, Bytes: o.bwBytes, Rows: []benchRowOut{}}
	buf := make([]byte, slices.Max(o.sizes))
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	ep := uint32(o.endpoint)
	for _, size := range o.sizes {
		r, err := benchSize(ctx, s, peer, ep, buf[:size], o)
		if err != nil {
			return fmt.Errorf("size %d: %w", size, err)
		}
		switch o.format {
		case "text":
			fmt.Fprintf(out, " %-10d %-8d %-8d %-14.3f %-14.4f %-11.1f %-11.1f %-11.1f %-11.1f\n",
				r.size, r.latN, r.bwN, r.gbps, r.mpps, r.min, r.p50, r.p99, r.maxUs)
		case "csv":
			fmt.Fprintf(out, "%d,%d,%d,%.3f,%.4f,%.1f,%.1f,%.1f,%.1f\n",
				r.size, r.latN, r.bwN, r.gbps, r.mpps, r.min, r.p50, r.p99, r.maxUs)
		}
		res.Rows = append(res.Rows, r.out())
	}
	if o.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return nil
}

func benchSize(ctx context.Context, s *client.Session, peer netip.AddrPort, ep uint32, msg []byte, o benchOpts) (benchRow, error) {
	r := benchRow{size: len(msg)}
	lat := make([]float64, 0, o.latIters)
	deadline := time.Now().Add(o.perSize)
	for i := 0; i < o.latIters && (i == 0 || time.Now().Before(deadline)); i++ {
		t0 := time.Now()
		if _, err := s.Send(ctx, peer, ep, msg); err != nil {
			return r, err
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	slices.Sort(lat)
	r.latN = len(lat)
	r.min, r.p50, r.p99, r.maxUs = lat[0], lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]

	n := int(max(int64(o.depth), o.bwBytes/int64(len(msg))))
	n = min(n, 200000)
	window := make(chan *client.Pending, o.depth)
	errc := make(chan error, 1)
	done := make(chan int)
	go func() {
		k := 0
		for p := range window {
			if _, err := p.Wait(ctx); err != nil {
				select {
				case errc <- err:
				default:
				}
			}
			k++
		}
		done <- k
	}()
	start := time.Now()
	deadline = start.Add(o.perSize)
	sent := 0
	for ; sent < n && (sent < o.depth || time.Now().Before(deadline)); sent++ {
		p, err := s.SendAsync(peer, ep, msg)
		if err != nil {
			close(window)
			<-done
			return r, err
		}
		window <- p
	}
	close(window)
	<-done
	el := time.Since(start).Seconds()
	select {
	case err := <-errc:
		return r, err
	default:
	}
	r.bwN = sent
	r.gbps = float64(sent*len(msg)) * 8 / el / 1e9
	r.mpps = float64(sent) / el / 1e6
	return r, nil
}

// newBenchCmd is "smartt bench".
func newBenchCmd() *cobra.Command {
	return leaf("bench", "throughput and latency over a message-size sweep (two in-process daemons, or --to a peer)", "", cobra.NoArgs,
		func(fs *pflag.FlagSet) cli.RunFunc {
			var o benchOpts
			var sizes string
			var jsonOut bool
			declareBench(fs, &o, &sizes, &jsonOut)
			return func(_ []string, out io.Writer) error {
				if err := checkBench(&o, sizes, jsonOut); err != nil {
					return err
				}
				return runBench(o, out)
			}
		})
}
