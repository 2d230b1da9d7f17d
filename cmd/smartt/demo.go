package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// demoOpts are the demo's flags.
type demoOpts struct {
	messages int
	loss     float64
	dup      float64
	reorder  float64
	depth    int
	rateGbps float64
	delay    config.Duration
	trim     bool
	seed     uint64
	maxSize  int
}

// declareInmem declares the flags only the in-memory demo (--inmem) has.
func declareInmem(fs *pflag.FlagSet, o *demoOpts) {
	fs.Float64Var(&o.loss, "loss", 0.01, "--inmem: probability that a packet is lost (0..0.5)")
	fs.Float64Var(&o.dup, "dup", 0.05, "--inmem: probability that a packet is duplicated (0..1)")
	fs.Float64Var(&o.reorder, "reorder", 0.1, "--inmem: probability that a packet is held back (0..1)")
	fs.IntVar(&o.depth, "depth", 100, "--inmem: a held-back packet is overtaken by up to this many packets")
	fs.Float64Var(&o.rateGbps, "rate", 100, "--inmem: bottleneck port rate, Gbit/s (0.1..1000)")
	o.delay = 2000
	fs.TextVar(&o.delay, "delay", o.delay, "--inmem: one-way propagation delay with its unit, e.g. 2us (0..1s)")
	fs.BoolVar(&o.trim, "trim", true, "--inmem: switch trims packets that overflow its queue (else drops them)")
}

// inmemOnly are the flags declareInmem declares.
var inmemOnly = []string{"loss", "dup", "reorder", "depth", "rate", "delay", "trim"}

// checkDemo checks the in-memory demo's options.
func checkDemo(o demoOpts) error {
	switch {
	case o.messages < 1 || o.messages > 10000:
		return cli.Usagef("--messages = %d: must be in 1..10000", o.messages)
	case o.loss < 0 || o.loss > 0.5:
		return cli.Usagef("--loss = %v: must be in 0..0.5", o.loss)
	case o.dup < 0 || o.dup > 1:
		return cli.Usagef("--dup = %v: must be in 0..1", o.dup)
	case o.reorder < 0 || o.reorder > 1:
		return cli.Usagef("--reorder = %v: must be in 0..1", o.reorder)
	case o.depth < 0 || o.depth > 100000:
		return cli.Usagef("--depth = %d: must be in 0..100000", o.depth)
	case o.rateGbps < 0.1 || o.rateGbps > 1000:
		return cli.Usagef("--rate = %v: must be in 0.1..1000 Gbit/s", o.rateGbps)
	case o.delay < 0 || o.delay > 1e9:
		return cli.Usagef("--delay = %v: must be in 0..1s", o.delay)
	case o.maxSize < 1 || o.maxSize > 1<<30:
		return cli.Usagef("--max-size = %d: must be in 1..%d", o.maxSize, 1<<30)
	}
	return nil
}

// demoMsg is what the demo remembers of a message it sent.
type demoMsg struct {
	size      int
	hash      [32]byte
	submitted int64
	sentAt    int64 // MessageSent
	recvAt    int64 // MessageReceived
}

// runDemo sends messages of log-spread sizes from host A to host B through a switch port
// with a bottleneck rate, RED marking and trimming, plus loss, duplication and
// reordering, and prints what happened to each message and the counters.
func runDemo(o demoOpts, out io.Writer) error {
	if err := checkDemo(o); err != nil {
		return err
	}
	rate := int64(o.rateGbps * 1e9)
	baseRTT := 2*int64(o.delay) + 1000
	bdp := int(rate / 8 * baseRTT / 1e9)
	buffer := max(bdp, 8*4160)
	port := testnet.PortConfig{
		Rate: rate, BufferBytes: buffer, ControlBytes: buffer,
		KminBytes: buffer / 5, KmaxBytes: buffer * 4 / 5, Trim: o.trim, Latency: 500,
	}
	net := testnet.New(testnet.Config{
		Delay: int64(o.delay), Loss: o.loss, Dup: o.dup, ReorderProb: o.reorder, ReorderDepth: o.depth,
		TrimDSCP: 10,
	}, o.seed)
	cfg := transport.DefaultConfig()
	cfg.TrimDSCP = 10
	cfg.MinRTO = config.Duration(max(4*baseRTT, 20_000))
	cfg.InitialRTO = 2 * cfg.MinRTO
	cfg.InitialWindow = max(2*bdp, 2*cfg.MTU) // for -cc fixed
	// SMaRTT derives its constants from the path: tell it the demo network's.
	cfg.LinkRate, cfg.BaseRTT, cfg.Trimming = config.Rate(rate), config.Duration(baseRTT), o.trim
	cfg.SMaRTT.LearnBaseRTT = true
	addrA := netip.MustParseAddrPort("10.0.0.1:23600")
	addrB := netip.MustParseAddrPort("10.0.0.2:23600")
	a, err := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(o.seed, 1)))
	if err != nil {
		return err
	}
	b, err := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(o.seed, 2)))
	if err != nil {
		return err
	}
	net.Attach(addrA, a, testnet.HostConfig{NICRate: rate, Port: port})
	net.Attach(addrB, b, testnet.HostConfig{NICRate: rate, Port: port})

	fmt.Fprintf(out, "smartt demo: %d messages %v -> %v over the in-memory test network (virtual time)\n", o.messages, addrA, addrB)
	fmt.Fprintf(out, "network: %.0f Gbit/s links, switch port buffer %d B (RED %d..%d B, trimming %v), %v one-way delay,\n",
		o.rateGbps, buffer, port.KminBytes, port.KmaxBytes, o.trim, o.delay)
	fmt.Fprintf(out, "         %.1f %% loss, %.1f %% duplication, %.1f %% of packets held back up to %d packets; seed %d\n",
		100*o.loss, 100*o.dup, 100*o.reorder, o.depth, o.seed)
	fmt.Fprintf(out, "engine:  congestion control %s, MTU %d B, RTO floor %v\n\n", cfg.CC, cfg.MTU, cfg.MinRTO)

	rng := rand.New(rand.NewPCG(o.seed, 3))
	conn, err := a.Dial(0, addrB)
	if err != nil {
		return err
	}
	msgs := make(map[uint32]*demoMsg, o.messages)
	order := make([]uint32, 0, o.messages)
	gap := int64(20_000) // a new message every 20 us of virtual time
	delivered, acked, failed, corrupt := 0, 0, 0, 0
	var srtt int64
	collect := func() {
		for {
			ev, ok := a.PollEvent()
			if !ok {
				break
			}
			switch ev.Kind {
			case transport.MessageSent:
				msgs[ev.MsgID].sentAt = net.Now()
				acked++
			case transport.MessageFailed:
				failed++
				fmt.Fprintf(out, "message %d failed: %v\n", ev.MsgID, ev.Err)
			}
		}
		for {
			ev, ok := b.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == transport.MessageReceived {
				m := msgs[ev.MsgID]
				m.recvAt = net.Now()
				if sha256.Sum256(ev.Data) != m.hash {
					corrupt++
				}
				delivered++
			}
		}
		if cs := a.Conns(nil); len(cs) > 0 && cs[0].SRTT > 0 {
			srtt = cs[0].SRTT
		}
	}
	for k := 0; k < o.messages; k++ {
		at := int64(k) * gap
		net.RunUntil(at, func() bool { collect(); return false })
		size := 1 + int(float64(o.maxSize-1)*rng.Float64()*rng.Float64()*rng.Float64())
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		id, err := a.Send(net.Now(), conn, data)
		if err != nil {
			return err
		}
		msgs[id] = &demoMsg{size: size, hash: sha256.Sum256(data), submitted: net.Now()}
		order = append(order, id)
		net.Wake(addrA)
	}
	const limit = 60_000_000_000 // 60 s of virtual time
	if !net.RunUntil(limit, func() bool { collect(); return acked+failed == o.messages && delivered+failed >= o.messages }) {
		return fmt.Errorf("transfer stalled at %d ns: %d delivered, %d acknowledged, %d failed", net.Now(), delivered, acked, failed)
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "msg\tbytes\tsubmitted us\tdelivered us\tcompletion us\tGbit/s\t")
	var total int
	for _, id := range order {
		m := msgs[id]
		total += m.size
		fct := m.sentAt - m.submitted
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t\n", id, m.size, us(m.submitted), us(m.recvAt), us(fct),
			float64(m.size)*8/float64(max(fct, 1)))
	}
	tw.Flush()
	sa, sb, ns := a.Stats(), b.Stats(), net.Stats()
	ps := net.PortStats(addrB)
	fmt.Fprintf(out, "\n%d of %d messages delivered exactly once and intact (%d corrupted, %d failed), %.1f MB in %.1f us, smoothed RTT %.1f us\n",
		delivered-corrupt, o.messages, corrupt, failed, float64(total)/1e6, us(net.Now()), us(srtt))
	fmt.Fprintf(out, "sender:   %d data packets, retransmitted %d after SACK gaps, %d after NACKs, %d after timeouts; %d ACKs, %d NACKs received\n",
		sa.DataSent, sa.RetxSack, sa.RetxNack, sa.RetxTimeout, sa.AcksRecv, sa.NacksRecv)
	fmt.Fprintf(out, "receiver: %d data packets, %d duplicates, %d trimmed, %d CE-marked; %d ACKs, %d NACKs sent\n",
		sb.DataRecv, sb.DupData, sb.Trimmed, sb.CERecv, sb.AcksSent, sb.NacksSent)
	fmt.Fprintf(out, "network:  %d lost, %d duplicated, %d held back; port to B: %d trimmed, %d dropped, %d CE-marked, max queue %d B\n",
		ns.Lost, ns.Duplicated, ns.Reordered, ps.Trims, ps.Drops, ps.Marks, ps.MaxDataBytes)
	if corrupt > 0 || failed > 0 || delivered != o.messages {
		return fmt.Errorf("%d corrupted, %d failed, %d of %d delivered", corrupt, failed, delivered, o.messages)
	}
	return nil
}

func us(ns int64) float64 { return float64(ns) / 1000 }
