// Package multipath runs one long transfer between two engines over the test network's
// parallel paths, for comparing load balancers (REPS against OPS, ECMP and the other
// baselines) on a slow path and a dead path. Everything runs in virtual time and is
// deterministic for a seed. docs/reps.md has the results.
package multipath

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// Scenario is one run: a fabric of Paths parallel paths from A to B, one transfer.
type Scenario struct {
	LB       string // load balancer (transport.LBNames)
	CC       string // congestion controller ("": the engine default)
	Trimming bool   // switches trim (else drop-tail); also the engine's Config.Trimming
	Paths    int    // parallel paths toward B
	PathRate int64  // bits/s of each path
	Slow     int    // >= 0: this path runs at SlowRate
	SlowRate int64
	Dead     int   // >= 0: this path drops everything from FailAt on
	FailAt   int64 // ns
	Bytes    int   // transfer size
	EVS      int   // 0: the engine default
	Seed     uint64
	Limit    int64 // virtual-time limit, ns (0: 1 s)
	// Tune, if set, adjusts the engine configuration last.
	Tune func(*transport.Config)
	// Hooks, if set, returns the engines' hooks for the tuned configuration.
	Hooks func(transport.Config) transport.Hooks
}

// Result is what a run measured.
type Result struct {
	Done           bool     // B received the whole message
	FCT            int64    // ns from the send to B's delivery
	PathPackets    []uint64 // data and control packets the hash put on each path
	SlowPackets    uint64   // of which on the slow path
	DeadAfterFail  uint64   // packets sent into the dead path at or after FailAt
	FreezeEpisodes uint64   // the sender's balancer, if it freezes
	Sender         transport.Stats
	Net            testnet.Stats
}

// Default returns the base scenario: 4 paths of 25 Gbit/s behind a 100 Gbit/s NIC,
// 16 MiB with trimming, no slow or dead path.
func Default(lb string) Scenario {
	return Scenario{LB: lb, Trimming: true, Paths: 4, PathRate: 25e9, Slow: -1, Dead: -1,
		Bytes: 16 << 20, Seed: 1}
}

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:23600")
	addrB = netip.MustParseAddrPort("10.0.0.2:23600")
)

// Port and path parameters: 4 KiB MTU, 1 us propagation, 500 ns per switch; a path
// queue of 64 KiB with RED from 20 % to 80 %.
const (
	delay     = 1_000
	latency   = 500
	pathBuf   = 64 << 10
	egressBuf = 512 << 10
	ctrlBuf   = 64 << 10
)

// Config returns the engine configuration a scenario runs with.
func (s Scenario) Config() transport.Config {
	cfg := transport.DefaultConfig()
	cfg.LB = s.LB
	if s.CC != "" {
		cfg.CC = s.CC
	}
	cfg.Trimming = s.Trimming
	cfg.LinkRate = 100e9
	cfg.BaseRTT = 8_000
	cfg.InitialWindow = 256 << 10 // ~2.5 BDP: the fixed window keeps every path busy
	cfg.MinRTO = 50_000
	cfg.InitialRTO = 200_000
	cfg.IdleTimeout = 1_000_000_000
	cfg.MaxRetransmits = 255 // a fixed window on one 25 Gbit/s path gets packets trimmed many times
	if s.EVS > 0 {
		cfg.EVS = s.EVS
	}
	if s.Tune != nil {
		s.Tune(&cfg)
	}
	return cfg
}

// Run runs the scenario.
func Run(s Scenario) (Result, error) {
	cfg := s.Config()
	var hooks transport.Hooks
	if s.Hooks != nil {
		hooks = s.Hooks(cfg)
	}
	var ep [2]*transport.Endpoint
	for i := range ep {
		var err error
		if ep[i], err = transport.NewEndpoint(cfg, rand.New(rand.NewPCG(s.Seed, uint64(i))), hooks); err != nil {
			return Result{}, err
		}
	}
	port := func(rate int64, buf int) testnet.PortConfig {
		return testnet.PortConfig{Rate: rate, BufferBytes: buf, ControlBytes: ctrlBuf,
			KminBytes: buf / 5, KmaxBytes: buf * 4 / 5, Trim: s.Trimming, Latency: latency}
	}
	paths := make([]testnet.PathConfig, s.Paths)
	for i := range paths {
		rate := s.PathRate
		if i == s.Slow {
			rate = s.SlowRate
		}
		paths[i].Port = port(rate, pathBuf)
		if i == s.Dead {
			paths[i].FailAt = s.FailAt
		}
	}
	net := testnet.New(testnet.Config{Delay: delay}, s.Seed)
	net.Attach(addrA, ep[0], testnet.HostConfig{NICRate: 100e9, Port: port(100e9, egressBuf)})
	net.Attach(addrB, ep[1], testnet.HostConfig{NICRate: 100e9, Port: port(100e9, egressBuf), Paths: paths})

	id, err := ep[0].Dial(0, addrB)
	if err != nil {
		return Result{}, err
	}
	if _, err := ep[0].Send(0, id, make([]byte, s.Bytes)); err != nil {
		return Result{}, err
	}
	net.Wake(addrA)
	var res Result
	done := func() bool {
		for {
			ev, ok := ep[1].PollEvent()
			if !ok {
				break
			}
			if ev.Kind == transport.MessageReceived {
				res.Done, res.FCT = true, net.Now()
			}
		}
		for {
			ev, ok := ep[0].PollEvent()
			if !ok {
				break
			}
			if ev.Kind == transport.MessageFailed || ev.Kind == transport.ConnClosed {
				return true
			}
		}
		return res.Done
	}
	limit := s.Limit
	if limit == 0 {
		limit = 1_000_000_000
	}
	var before uint64
	if s.Dead >= 0 {
		if net.RunUntil(s.FailAt, done) {
			return res, fmt.Errorf("transfer ended before the failure at %d ns", s.FailAt)
		}
		before = net.PathStats(addrB, s.Dead).Packets
	}
	net.RunUntil(limit, done)
	for i := range s.Paths {
		res.PathPackets = append(res.PathPackets, net.PathStats(addrB, i).Packets)
	}
	if s.Slow >= 0 {
		res.SlowPackets = res.PathPackets[s.Slow]
	}
	if s.Dead >= 0 {
		res.DeadAfterFail = res.PathPackets[s.Dead] - before
	}
	for _, ci := range ep[0].Conns(nil) {
		res.FreezeEpisodes += ci.FreezeEpisodes
	}
	res.Sender, res.Net = ep[0].Stats(), net.Stats()
	return res, nil
}
