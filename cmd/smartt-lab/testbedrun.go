package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/test/bedrun"
	"github.com/smartt-transport/smartt/test/netbed"
)

// bindTestbedRun: "testbed run" runs a simulator scenario on a fresh emulated testbed (test/bedrun) and
// writes the simulator's outputs plus the switch counters (ports.csv).
func bindTestbedRun(fs *pflag.FlagSet) cli.RunFunc {
	name := fs.String("name", "run", "testbed name: namespaces are smartt-<name>-<node> (removed afterwards)")
	seed := fs.Uint64("seed", 0, "random seed (0: the scenario's)")
	lb := fs.String("lb", "", "load balancer (transport lb): ecmp, ops, reps, ...")
	cc := fs.String("cc", "", "congestion controller (transport cc)")
	size := fs.String("size", "", "message size, e.g. 2MiB (empty: the scenario's)")
	timeout := fs.Duration("timeout", 60*time.Second, "wall-time bound of the workload")
	dir := fs.String("out", "", "directory for result.json, flows.csv, ports.csv and plots (empty: none)")
	plots := fs.String("plots", "png", "plot formats written to -out: png, svg, both or none")
	jsonOut := fs.Bool("json", false, "print the JSON summary instead of text")
	pcap := fs.String("pcap", "", "directory for one pcap file per link (frames as the switch end saw them)")
	pcapLinks := fs.String("pcap-links", "", "links to capture, comma-separated (empty: all)")
	var pcapMax int64
	cli.SizeVar(fs, &pcapMax, "pcap-max", 4<<20, 0, 1<<40, "capture bytes per link, e.g. 4MiB; later frames are counted, not kept")
	pcapSnap := fs.Int("pcap-snap", 128, "bytes kept of each frame (128: all headers and ours)")
	return func(args []string, out io.Writer) error {
		sc, err := loadScenario(args[0])
		if err != nil {
			return err
		}
		if err := applySimFlags(sc, *seed, *lb, *cc, 0, 0, *size); err != nil {
			return err
		}
		o := bedrun.Options{Name: *name, Timeout: *timeout, Pcap: *pcap, PcapMax: int(pcapMax), PcapSnap: *pcapSnap,
			Control: bedrun.ControlPath(netbed.StateDir, *name)}
		if *pcapLinks != "" {
			o.PcapLinks = strings.Split(*pcapLinks, ",")
		}
		if *pcap != "" {
			if err := os.MkdirAll(*pcap, 0o755); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(netbed.StateDir, 0o755); err != nil {
			return err
		}
		rep, err := bedrun.Execute(sc, o)
		if err != nil {
			return err
		}
		r := rep.Result
		if *jsonOut {
			if err := r.WriteJSON(out); err != nil {
				return err
			}
		} else {
			fmt.Fprintln(out, r.Summary())
			fmt.Fprintf(out, "testbed: base_rtt %v, %d QuickAdapt firings\n", time.Duration(rep.Base), rep.Quick)
			for l, n := range rep.Refused {
				fmt.Fprintf(out, "failed link %s: %d DATA frames sent into it after the failure\n", l, n)
			}
			if len(r.Samples) > 0 {
				fmt.Fprintf(out, "queue samples: %d ports x %d, latest sample %v behind its time\n", len(r.Samples), len(r.Samples[0].Times), rep.SampleLate)
			}
			for _, c := range rep.Pcaps {
				fmt.Fprintf(out, "pcap %s: %d frames (%d beyond the size bound not kept)\n", c.File, c.Frames, c.Skipped)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			writePorts(w, rep, "\t")
			w.Flush()
		}
		if *dir != "" {
			if err := writeSimOutputs(*dir, *plots, "", r); err != nil {
				return err
			}
			f, err := os.Create(filepath.Join(*dir, "ports.csv"))
			if err != nil {
				return err
			}
			writePorts(f, rep, ",")
			if err := f.Close(); err != nil {
				return err
			}
		}
		return unfinished(r)
	}
}

// writePorts writes every switch port's counters, one line per port.
func writePorts(w io.Writer, rep *bedrun.Report, sep string) {
	fmt.Fprintln(w, strings.Join([]string{"switch", "port", "link", "rx_frames", "rx_dropped", "rx_truncated",
		"tx_frames", "data_in", "marks", "trims", "drops", "tx_errors", "lost", "max_queue_bytes"}, sep))
	for _, p := range rep.Ports {
		fields := []string{p.Switch, p.If, p.Link}
		for _, n := range []uint64{p.RxFrames, p.RxDropped, p.Truncated, p.TxFrames, p.DataIn, p.Model.Marks,
			p.Model.Trims, p.Model.Drops, p.TxErrors, p.Lost, uint64(p.Model.MaxDataBytes)} {
			fields = append(fields, strconv.FormatUint(n, 10))
		}
		fmt.Fprintln(w, strings.Join(fields, sep))
	}
}
