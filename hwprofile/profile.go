package hwprofile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Profile is a NIC's budget for one connection's congestion control and load balancing.
type Profile struct {
	Name        string
	Description string
	StateBytes  int   // per-flow state, bytes, for the CC and the LB of one connection together
	GlobalBytes int   // shared memory for parameters and models, bytes
	Ops         int   // operations per decision
	DecisionNs  int64 // time from feedback to the updated rate/EV, ns
	IntegerOnly bool  // the cores have no floating point
	Source      string
}

// Profiles are the named profiles. Budgets the papers state are marked so in Source;
// the rest are our assumptions, documented in docs/hwprofile.md.
var Profiles = []Profile{
	{
		Name:        "cx6dx",
		Description: "NVIDIA ConnectX-6Dx programmable congestion control (RISC cores in the datapath)",
		StateBytes:  256,
		GlobalBytes: 64 << 10,
		Ops:         150,
		DecisionNs:  2000,
		IntegerOnly: true,
		Source:      "RL-CC on NICs paper (Fuhrer et al., CCGrid 2023): integer-only, per-flow memory of the order of hundreds of bytes (256 taken), < 150 ops, ~2 us per decision; global 64 KiB assumed",
	},
	{
		Name:        "fpga-reps",
		Description: "the REPS paper's FPGA NIC (256 connections, 8-entry REPS buffer of 2-byte ports each)",
		StateBytes:  64,
		GlobalBytes: 4 << 10,
		Ops:         64,
		DecisionNs:  160,
		IntegerOnly: true,
		Source:      "REPS paper (Bonato et al., EuroSys 2026, Table 1): 4 KB of REPS state for 256 connections (16 B each), 8 KB MTU at 400 Gbit/s = one packet per 164 ns; 64 B per flow (16 B LB + 48 B CC), 4 KiB global and 64 ops assumed",
	},
}

// Names lists the profile names.
func Names() []string {
	var n []string
	for _, p := range Profiles {
		n = append(n, p.Name)
	}
	return n
}

// Lookup returns the named profile.
func Lookup(name string) (Profile, error) {
	for _, p := range Profiles {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("profile = %q: must be one of %s", name, strings.Join(Names(), ", "))
}

// Check refuses a cost exceeding the profile's memory budgets or needing floating point
// on an integer-only profile; the error names the budget. Ops and decision time are not
// refused here (they are measured, see Fits and `smartt-lab hwprofile report`).
func (p Profile) Check(c Cost) error {
	var errs []error
	if c.StateBytes > p.StateBytes {
		errs = append(errs, fmt.Errorf("profile %s: %q needs %d B of per-flow state: exceeds the per-flow state budget of %d B", p.Name, c.Name, c.StateBytes, p.StateBytes))
	}
	if c.GlobalBytes > p.GlobalBytes {
		errs = append(errs, fmt.Errorf("profile %s: %q needs %d B of global memory: exceeds the global memory budget of %d B", p.Name, c.Name, c.GlobalBytes, p.GlobalBytes))
	}
	if p.IntegerOnly && !c.IntegerOnly {
		errs = append(errs, fmt.Errorf("profile %s: %q uses floating point in its decision path: the profile is integer-only", p.Name, c.Name))
	}
	return errors.Join(errs...)
}

// Fits reports whether a cost, with a measured decision time (ns; <= 0: not measured),
// fits every budget of the profile, and if not, why.
func (p Profile) Fits(c Cost, decisionNs float64) (bool, string) {
	var why []string
	if c.StateBytes > p.StateBytes {
		why = append(why, fmt.Sprintf("state %d>%d B", c.StateBytes, p.StateBytes))
	}
	if c.GlobalBytes > p.GlobalBytes {
		why = append(why, fmt.Sprintf("global %d>%d B", c.GlobalBytes, p.GlobalBytes))
	}
	if p.IntegerOnly && !c.IntegerOnly {
		why = append(why, "float")
	}
	if c.Ops > p.Ops {
		why = append(why, fmt.Sprintf("ops %d>%d", c.Ops, p.Ops))
	}
	if decisionNs > float64(p.DecisionNs) {
		why = append(why, fmt.Sprintf("%.0f>%d ns", decisionNs, p.DecisionNs))
	}
	return len(why) == 0, strings.Join(why, ", ")
}

// CostOf returns x's cost, or an error saying why an algorithm that does not report one
// cannot run under a profile.
func CostOf(kind, name string, x any) (Cost, error) {
	c, ok := x.(Coster)
	if !ok {
		return Cost{}, fmt.Errorf("%s %q (%T) does not implement hwprofile.Coster: its state size and operation count are unknown, so it cannot be checked against a hardware profile", kind, name, x)
	}
	cost := c.Cost()
	if cost.Name == "" {
		cost.Name = name
	}
	return cost, nil
}

// CheckPair checks one connection's congestion controller and load balancer against the
// profile: each must report its cost, and their per-flow state and global memory
// together must fit, with integer-only decision paths if the profile requires it.
func (p Profile) CheckPair(ccName string, ctl any, lbName string, lb any) error {
	cc, err1 := CostOf("cc", ccName, ctl)
	lbc, err2 := CostOf("lb", lbName, lb)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("profile %s: %w", p.Name, err)
	}
	var errs []error
	for _, c := range []Cost{cc, lbc} {
		if p.IntegerOnly && !c.IntegerOnly {
			errs = append(errs, fmt.Errorf("profile %s: %q uses floating point in its decision path: the profile is integer-only", p.Name, c.Name))
		}
	}
	if s := cc.StateBytes + lbc.StateBytes; s > p.StateBytes {
		errs = append(errs, fmt.Errorf("profile %s: per-flow state %d B (cc %q %d B + lb %q %d B) exceeds the per-flow state budget of %d B", p.Name, s, cc.Name, cc.StateBytes, lbc.Name, lbc.StateBytes, p.StateBytes))
	}
	if g := cc.GlobalBytes + lbc.GlobalBytes; g > p.GlobalBytes {
		errs = append(errs, fmt.Errorf("profile %s: global memory %d B (cc %q %d B + lb %q %d B) exceeds the global memory budget of %d B", p.Name, g, cc.Name, cc.GlobalBytes, lbc.Name, lbc.GlobalBytes, p.GlobalBytes))
	}
	return errors.Join(errs...)
}

// Sorted returns the profiles by name (for reports).
func Sorted() []Profile {
	ps := slices.Clone(Profiles)
	slices.SortFunc(ps, func(a, b Profile) int { return strings.Compare(a.Name, b.Name) })
	return ps
}
