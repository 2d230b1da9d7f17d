package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/hwprofile/timing"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

const hwprofileUsage = `Prints every registered congestion controller and load balancer against every hardware
profile: packed per-flow state, global memory, operations per decision, integer-only,
the measured time per decision on this host, and whether it fits each profile. -md
prints the static columns only (no timing, so the same on every host) as a markdown table.`

// bindHWProfile declares the flags of "smartt-lab hwprofile report" on fs.
func bindHWProfile(fs *pflag.FlagSet) cli.RunFunc {
	n := fs.IntP("n", "n", 200_000, "decisions timed per algorithm")
	md := fs.Bool("md", false, "a markdown table of the static columns: state, memory, ops, integer-only, fits (no timing)")
	return func(_ []string, w io.Writer) error {
		if *md {
			return hwprofileMarkdown(w)
		}
		if *n < 1 || *n > 100_000_000 {
			return fmt.Errorf("-n = %d: must be in 1..100000000", *n)
		}
		profiles := hwprofile.Sorted()
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "kind\tname\tstate B\tglobal B\tops\tint-only\tns/decision")
		for _, p := range profiles {
			fmt.Fprintf(tw, "\t%s", p.Name)
		}
		fmt.Fprintln(tw)
		row := func(kind, name string, x any, ns float64) {
			cost, err := hwprofile.CostOf(kind, name, x)
			if err != nil {
				fmt.Fprintf(tw, "%s\t%s\t?\t?\t?\t?\t%.0f", kind, name, ns)
				for range profiles {
					fmt.Fprint(tw, "\tno: reports no cost")
				}
				fmt.Fprintln(tw)
				return
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%v\t%.1f", kind, name, cost.StateBytes, cost.GlobalBytes, cost.Ops, cost.IntegerOnly, ns)
			for _, v := range verdicts(profiles, cost, ns) {
				fmt.Fprint(tw, "\t"+v)
			}
			fmt.Fprintln(tw)
		}
		err := eachAlgorithm(func(kind, name string, x any, cfg transport.Config) {
			if ctl, ok := x.(cc.Controller); ok && kind == "cc" {
				row(kind, name, x, timeCC(ctl, cfg, *n))
			} else {
				row(kind, name, x, timeLB(x.(reps.Balancer), *n))
			}
		})
		if err != nil {
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nops: worst case per decision as each algorithm reports it; ns/decision: lowest mean of 10 batches of %d decisions on this host (one goroutine, monotonic clock).\n", max(*n/10, 1))
		for _, p := range profiles {
			fmt.Fprintf(w, "%s: state %d B/flow, global %d B, %d ops, %d ns, integer-only %v (%s)\n",
				p.Name, p.StateBytes, p.GlobalBytes, p.Ops, p.DecisionNs, p.IntegerOnly, p.Source)
		}
		return nil
	}
}

// hwprofileMarkdown writes the deterministic part of the report: every algorithm's cost
// and whether it fits each profile's static budgets (decision time is not measured).
func hwprofileMarkdown(w io.Writer) error {
	profiles := hwprofile.Sorted()
	head := "| kind | name | state B | global B | ops | integer-only |"
	for _, p := range profiles {
		head += " " + p.Name + " |"
	}
	fmt.Fprintf(w, "%s\n|%s\n", head, strings.Repeat("---|", 6+len(profiles)))
	row := func(kind, name string, x any) {
		cost, err := hwprofile.CostOf(kind, name, x)
		if err != nil {
			fmt.Fprintf(w, "| %s | %s | ? | ? | ? | ? |%s\n", kind, name, strings.Repeat(" no: reports no cost |", len(profiles)))
			return
		}
		intOnly := "no"
		if cost.IntegerOnly {
			intOnly = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s |", kind, name, cost.StateBytes, cost.GlobalBytes, cost.Ops, intOnly)
		for _, v := range verdicts(profiles, cost, 0) {
			fmt.Fprint(w, " "+v+" |")
		}
		fmt.Fprintln(w)
	}
	return eachAlgorithm(func(kind, name string, x any, _ transport.Config) { row(kind, name, x) })
}

// verdicts says for each profile whether cost (and ns per decision, 0: not timed) fits
// it: "fits" or "no: " and why.
func verdicts(profiles []hwprofile.Profile, cost hwprofile.Cost, ns float64) []string {
	out := make([]string, len(profiles))
	for i, p := range profiles {
		out[i] = "fits"
		if ok, why := p.Fits(cost, ns); !ok {
			out[i] = "no: " + why
		}
	}
	return out
}

// eachAlgorithm builds every registered controller ("cc", configured as on INT switches
// where it needs them) and balancer ("lb") from the default config, and hands each to f
// with the config it was built with.
func eachAlgorithm(f func(kind, name string, x any, cfg transport.Config)) error {
	base := transport.DefaultConfig()
	for _, name := range transport.CCNames() {
		cfg := base
		if r, _ := transport.LookupCC(name); r.Needs.INT {
			cfg.INT = true
		}
		ctl, err := transport.NewCC(name, cfg)
		if err != nil {
			return fmt.Errorf("cc %q: %w", name, err)
		}
		f("cc", name, ctl, cfg)
	}
	for _, name := range transport.LBNames() {
		lb, err := transport.NewLB(name, base, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			return fmt.Errorf("lb %q: %w", name, err)
		}
		f("lb", name, lb, base)
	}
	return nil
}

// timeCC feeds a controller n ACKs (a credit-driven one, n packets and PULLs), each an RTT sample of a packet sent after the
// previous one arrived (so rate-based controllers decide on every one), with RTTs
// between 1 and 3 base RTTs, a CE mark on every fourth and INT records of 5 hops (the
// most an INT controller reads), and returns ns per ACK (best batch).
func timeCC(c cc.Controller, cfg transport.Config, n int) float64 {
	if g, ok := c.(creditSender); ok {
		return timeCredit(g, cfg, n)
	}
	brtt := int64(cfg.BaseRTT)
	now := int64(1_000_000)
	acks := make([]cc.Ack, 64)
	hops := make([]wire.INTHop, wire.MaxINTHops)
	for i := range acks {
		rtt := brtt + brtt*int64(i%16)/8
		acks[i] = cc.Ack{Bytes: cfg.MTU, Packets: 1, RTT: rtt, CE: i%4 == 0, InFlight: 8 * cfg.MTU, INT: hops}
	}
	mbps := uint32(cfg.LinkRate / 1_000_000)
	return bestOfBatches(n, func(i int) {
		a := acks[i&63]
		now += 3 * brtt
		a.Now = now
		for j := range hops {
			// Each hop busy at 90 % of its rate with a queue that varies with i.
			hops[j].TS = uint32(now)
			hops[j].TxBytes += uint32(int64(cfg.LinkRate) / 8 * 3 * brtt / 1_000_000_000 * 9 / 10)
			hops[j].QLen = uint32(i%7) * uint32(cfg.MTU)
			hops[j].Rate = mbps
		}
		c.OnAck(a)
		_ = c.Window()
	})
}

// creditSender is a receiver-driven controller's sender half (cc/eqds): its decisions
// are per packet sent and per PULL taken, not per ACK.
type creditSender interface {
	OnSend(size int, retx bool)
	OnPull(granted uint64) eqds.PullVerdict
}

// timeCredit times a credit-driven sender's per-packet work: spend credit on a packet,
// take the PULL that grants it back (the receiver's pacer is not included).
func timeCredit(g creditSender, cfg transport.Config, n int) float64 {
	granted := uint64(0)
	return bestOfBatches(n, func(int) {
		g.OnSend(cfg.MTU, false)
		granted += uint64(cfg.MTU)
		g.OnPull(granted)
	})
}

// bestOfBatches runs f n times in 10 batches and returns the lowest batch mean, ns: on
// a shared host the fastest batch is the one least disturbed by other work.
func bestOfBatches(n int, f func(i int)) float64 {
	const batches = 10
	per := max(n/batches, 1)
	best := -1.0
	for b := range batches {
		start := timing.Now()
		for i := range per {
			f(b*per + i)
		}
		m := float64(timing.Now()-start) / float64(per)
		if best < 0 || m < best {
			best = m
		}
	}
	return best
}

// timeLB asks a balancer for n EVs and feeds each back (every eighth CE-marked), and
// returns ns per packet (best batch).
func timeLB(lb reps.Balancer, n int) float64 {
	now := int64(0)
	return bestOfBatches(n, func(i int) {
		now += 40
		ev := lb.NextEV(now, 4096, false)
		lb.OnAck(now, ev, i%8 == 0, 12_000)
	})
}

// newHWProfileCmd is "smartt-lab hwprofile".
func newHWProfileCmd() *cobra.Command {
	return cli.Group("hwprofile", "NIC hardware profiles (docs/hwprofile.md)", "hwprofile report: "+hwprofileUsage,
		cli.Leaf("report [-n decisions] [--md]", "every CC and LB against every hardware profile (state, ops, decision time)",
			hwprofileUsage, cobra.NoArgs, bindHWProfile))
}
