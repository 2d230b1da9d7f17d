package reps

import (
	"errors"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
)

// Config holds the parameters of REPS and of the baseline balancers. Zero durations are
// derived from the endpoint's base RTT, as each field says.
type Config struct {
	// Entries is the size of REPS's circular buffer of cached EVs, 1..MaxEntries.
	Entries int `yaml:"entries"`
	// FreezeDuration is how long freezing mode lasts after the last loss judged a failure.
	FreezeDuration config.Duration `yaml:"freeze_duration"`
	// ForceFreezeAt, when positive, forces freezing mode on at this engine time (the
	// simulator's clock: time since the run began) and keeps it on for the rest of the
	// connection's life, whatever the losses: the REPS paper's Appendix A experiment
	// (freezing entered by mistake costs little). 0: off. For experiments only.
	ForceFreezeAt config.Duration `yaml:"force_freeze_at"`
	// FreezeExtend makes a failure while frozen push the exit a FreezeDuration ahead
	// (this project's former rule). Off, as in the REPS paper and htsim, a
	// freeze ends FreezeDuration after it began, however many losses follow: with
	// failures that come one after another the cached EVs can all lead into dead links,
	// and only leaving freezing (forget them, explore) gets the connection out.
	FreezeExtend bool `yaml:"freeze_extend"`
	// NoFreeze disables freezing mode (REPS core logic only).
	NoFreeze bool `yaml:"no_freeze"`
	// FreezeExit is how REPS leaves freezing mode: "timer" (or empty, the default) after
	// FreezeDuration; "probe", the REPS paper's first option, also by probing the path
	// that failed: every ProbeInterval one packet goes on the EV whose loss froze the
	// buffer; its ACK ends the freeze at once. The timer exit stays: probing only ends a
	// freeze sooner (a lost probe does not prolong it).
	FreezeExit string `yaml:"freeze_exit"`
	// ProbeInterval is the time between probes while frozen with FreezeExit "probe"
	// (0: two base RTTs).
	ProbeInterval config.Duration `yaml:"probe_interval"`
	// TimeoutOnly lets only retransmission timeouts signal a failure. By default a
	// SACK-gap loss is judged like a timeout: the engine detects most losses on a dead
	// path by the gap before their timer fires.
	TimeoutOnly bool `yaml:"timeout_only"`
	// FailureRTT applies without trimming: a loss is judged a failure when the highest
	// RTT seen in the recent RTT window stayed below it (0: 3/2 base RTT).
	FailureRTT config.Duration `yaml:"failure_rtt"`
	// RTTWindow is the span over which that highest RTT is kept; a connection that got
	// no ACK for two windows counts as idle and explores again (0: 8 base RTTs).
	RTTWindow config.Duration `yaml:"rtt_window"`
	// CleanEVs recycles every unmarked EV a coalesced ACK reports (the receiver must
	// put them on the wire: ack.clean_evs), not only the triggering packet's.
	CleanEVs bool `yaml:"clean_evs"`
	// PLB configures the PLB baseline.
	PLB PLBConfig `yaml:"plb"`
	// FlowletGap is the idle gap after which the flowlet baseline picks a new EV (0: half the base RTT).
	FlowletGap config.Duration `yaml:"flowlet_gap"`
	// Subflows is the number of fixed EVs the MPTCP-like baseline rotates through, 1..64.
	Subflows int `yaml:"subflows"`

	// Run is the number of consecutive new data packets that share the EV the balancer
	// chose for the first of them, 1..MaxRun, or RunAuto: 1 is per-packet spraying; k > 1
	// asks the balancer once per run of k, so the datapath can send a run as one UDP GSO
	// send on that EV's socket. Every balancer is run this way (the engine applies it);
	// retransmissions ask the balancer each, and a loss on the run's EV ends the run.
	// RunAuto (the default) is resolved by the driver: the engine, and so the simulator,
	// takes 1 (RunLen.Len); smarttd a run that fills one GSO message on its sockets.
	Run RunLen `yaml:"run"`
}

// MaxRun is the longest EV run (reps.run): a Linux UDP GSO send carries at most 64 segments.
const MaxRun = 64

// RunLen is reps.run: a run length 1..MaxRun, or RunAuto. It reads and writes as the
// number or "auto".
type RunLen int

// RunAuto leaves the run length to the driver (reps.run: auto).
const RunAuto RunLen = 0

// Len is the run length the engine applies: RunAuto is 1 (per-packet spraying, as a NIC
// sprays in hardware); a driver that knows better resolves RunAuto before.
func (r RunLen) Len() int { return max(int(r), 1) }

// String is "auto" or the length.
func (r RunLen) String() string {
	if r == RunAuto {
		return "auto"
	}
	return strconv.Itoa(int(r))
}

// UnmarshalYAML reads a length 1..MaxRun or "auto".
func (r *RunLen) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*r = RunAuto
		return nil
	}
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v < 1 || v > MaxRun {
		return fmt.Errorf("must be in 1..%d or auto", MaxRun)
	}
	*r = RunLen(v)
	return nil
}

// MarshalYAML writes the length or "auto".
func (r RunLen) MarshalYAML() (any, error) {
	if r == RunAuto {
		return "auto", nil
	}
	return int(r), nil
}

// MarshalJSON writes the length or "auto".
func (r RunLen) MarshalJSON() ([]byte, error) {
	if r == RunAuto {
		return []byte(`"auto"`), nil
	}
	return []byte(strconv.Itoa(int(r))), nil
}

// UnmarshalJSON reads a length 1..MaxRun or "auto".
func (r *RunLen) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == `"auto"` {
		*r = RunAuto
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > MaxRun {
		return fmt.Errorf("reps.run = %s: must be in 1..%d or auto", s, MaxRun)
	}
	*r = RunLen(v)
	return nil
}

// PLBConfig configures PLB-style repathing (Qureshi et al., SIGCOMM 2022).
type PLBConfig struct {
	// CEPercent: a round in which at least this percentage of ACKs echo CE is congested, 1..100.
	CEPercent int `yaml:"ce_percent"`
	// Rounds: the flow repaths after this many consecutive congested rounds, 1..255.
	Rounds int `yaml:"rounds"`
	// Round is the length of a round (0: the base RTT).
	Round config.Duration `yaml:"round"`
}

// The values of Config.FreezeExit.
const (
	FreezeExitTimer = "timer" // leave freezing FreezeDuration after it began
	FreezeExitProbe = "probe" // leave it when a probe on the failed EV comes back
)

// MaxEntries is the largest REPS buffer the packed state holds.
const MaxEntries = 8

// DefaultConfig returns the defaults: 8 entries, 1 ms freezing, PLB with FlowBender-like
// aggressive parameters (repath after one round with >= 50 % CE, as the REPS paper
// configured it), 8 subflows, EV runs left to the driver (RunAuto).
func DefaultConfig() Config {
	return Config{
		Entries:        8,
		FreezeDuration: 1_000_000,
		PLB:            PLBConfig{CEPercent: 50, Rounds: 1},
		Subflows:       8,
		Run:            RunAuto,
	}
}

// Validate checks every field against an EV space of evs values; errors name the field
// (under "reps.") and its allowed range.
func (c *Config) Validate(evs int) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Entries < 1 || c.Entries > MaxEntries {
		bad("reps.entries = %d: must be in 1..%d", c.Entries, MaxEntries)
	}
	if c.FreezeDuration < 1_000 || c.FreezeDuration > maxSpan {
		bad("reps.freeze_duration = %v: must be in 1us..%v", c.FreezeDuration, config.Duration(maxSpan))
	}
	if c.ForceFreezeAt < 0 {
		bad("reps.force_freeze_at = %v: must be >= 0 (0: off)", c.ForceFreezeAt)
	} else if c.ForceFreezeAt > 0 && c.NoFreeze {
		bad("reps.force_freeze_at = %v: needs freezing (reps.no_freeze is set)", c.ForceFreezeAt)
	}
	switch c.FreezeExit {
	case "", FreezeExitTimer:
	case FreezeExitProbe:
		if c.NoFreeze {
			bad("reps.freeze_exit = %q: needs freezing (reps.no_freeze is set)", c.FreezeExit)
		}
	default:
		bad("reps.freeze_exit = %q: must be %q or %q", c.FreezeExit, FreezeExitTimer, FreezeExitProbe)
	}
	if c.ProbeInterval != 0 && (c.ProbeInterval < 1_000 || c.ProbeInterval > maxSpan) {
		bad("reps.probe_interval = %v: must be 0 (derived) or in 1us..%v", c.ProbeInterval, config.Duration(maxSpan))
	}
	if c.FailureRTT != 0 && (c.FailureRTT < 1<<rttShift || c.FailureRTT > maxRTT) {
		bad("reps.failure_rtt = %v: must be 0 (derived) or in %dns..%v", c.FailureRTT, 1<<rttShift, config.Duration(maxRTT))
	}
	if c.RTTWindow != 0 && (c.RTTWindow < 1_000 || c.RTTWindow > maxSpan) {
		bad("reps.rtt_window = %v: must be 0 (derived) or in 1us..%v", c.RTTWindow, config.Duration(maxSpan))
	}
	if c.PLB.CEPercent < 1 || c.PLB.CEPercent > 100 {
		bad("reps.plb.ce_percent = %d: must be in 1..100", c.PLB.CEPercent)
	}
	if c.PLB.Rounds < 1 || c.PLB.Rounds > 255 {
		bad("reps.plb.rounds = %d: must be in 1..255", c.PLB.Rounds)
	}
	if c.PLB.Round < 0 || c.PLB.Round > maxSpan {
		bad("reps.plb.round = %v: must be 0 (derived) or up to %v", c.PLB.Round, config.Duration(maxSpan))
	}
	if c.FlowletGap < 0 || c.FlowletGap > maxSpan {
		bad("reps.flowlet_gap = %v: must be 0 (derived) or up to %v", c.FlowletGap, config.Duration(maxSpan))
	}
	if c.Subflows < 1 || c.Subflows > 64 {
		bad("reps.subflows = %d: must be in 1..64", c.Subflows)
	}
	if c.Run < 0 || c.Run > MaxRun {
		bad("reps.run = %d: must be in 1..%d (1: a new EV per packet) or auto", int(c.Run), MaxRun)
	}
	return errors.Join(errs...)
}

// derive fills the zero durations from the base RTT.
func (c Config) derive(baseRTT int64) Config {
	if baseRTT <= 0 {
		baseRTT = 10_000
	}
	if c.FailureRTT == 0 {
		c.FailureRTT = config.Duration(min(baseRTT*3/2, maxRTT))
	}
	if c.RTTWindow == 0 {
		c.RTTWindow = config.Duration(min(8*baseRTT, maxSpan))
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = config.Duration(min(2*baseRTT, maxSpan))
	}
	if c.PLB.Round == 0 {
		c.PLB.Round = config.Duration(baseRTT)
	}
	if c.FlowletGap == 0 {
		c.FlowletGap = config.Duration(baseRTT / 2)
	}
	return c
}
