package bedrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/sim"
)

// Fault is a change to one link of a running testbed.
//
// Kinds and where they act:
//   - down: the link's upper end goes administratively down (Testbed.LinkDown; the switch
//     next to it gets refused sends); after the scenario's routing_convergence the switches
//     route around it (Fabric.Converge). up: the reverse, the same way.
//   - degrade: the port model's rate of both switch ports of the link (Fabric.SetRate):
//     the model serialises and queues at the lower rate, which is where the simulator
//     degrades a link too (its port's SetRate). restore: back to the link rate.
//   - flaky: Poisson loss bursts on the link's switch ports (Fabric.Flaky: mean gap, mean
//     burst, the simulator's process; frames leaving in a burst are lost). heal: no more.
type Fault struct {
	Kind       string      // down, up, degrade, restore, flaky, heal
	Link       string      // testbed link ("leaf0-spine1", either order; tor<i> is leaf<i>)
	Rate       config.Rate // degrade
	Gap, Burst time.Duration
}

// undo is the fault that ends f (a scenario failure's until).
func (f Fault) undo() Fault {
	u := Fault{Link: f.Link}
	switch f.Kind {
	case "down":
		u.Kind = "up"
	case "degrade":
		u.Kind = "restore"
	case "flaky":
		u.Kind = "heal"
	}
	return u
}

// linkName resolves a link given as "a-b" or by its two ends (simulator names accepted).
func (r *Run) linkName(a, b string) (string, error) {
	name := func(n string) string {
		if strings.HasPrefix(n, "tor") {
			return "leaf" + n[3:]
		}
		return n
	}
	if b == "" {
		var ok bool
		if a, b, ok = strings.Cut(a, "-"); !ok {
			return "", fmt.Errorf("link %q: want <node>-<node>, e.g. leaf0-spine1", a)
		}
	}
	p := r.TB.Plan
	if i := p.LinkIndex(name(a) + "-" + name(b)); i >= 0 {
		return p.Links[i].Name, nil
	}
	return "", fmt.Errorf("no link between %s and %s on the testbed", a, b)
}

// hostLink reports whether link has a host end.
func (r *Run) hostLink(link string) bool {
	p := r.TB.Plan
	l := p.Links[p.LinkIndex(link)]
	return !p.Nodes[l.A].Switch || !p.Nodes[l.B].Switch
}

// faultOf checks a scenario failure as the simulator does and maps it to a Fault.
func (r *Run) faultOf(i int, fc sim.FailureConfig) (Fault, error) {
	bad := func(format string, a ...any) (Fault, error) {
		return Fault{}, fmt.Errorf("failures[%d]: %s", i, fmt.Sprintf(format, a...))
	}
	link, err := r.linkName(fc.A, fc.B)
	if err != nil {
		return bad("%v", err)
	}
	f := Fault{Kind: fc.Kind, Link: link, Rate: fc.Rate, Gap: time.Duration(fc.Gap), Burst: time.Duration(fc.Burst)}
	if err := fc.Check(r.Mapped.Spec.LinkRate, r.hostLink(link)); err != nil {
		return bad("%v", err)
	}
	return f, nil
}

// faults is a run's link-failure bookkeeping.
type faults struct {
	mu      sync.Mutex
	ctx     context.Context // the workload's: convergence waits end with it
	conv    time.Duration   // routing convergence
	wg      sync.WaitGroup
	downAt  map[string]uint64 // per down link: DATA frames sent into it when it failed
	refused map[string]uint64
	errs    []error
}

// Apply makes a fault happen now. down and up return once the link changed; routing
// converges routing_convergence later, in the background.
func (r *Run) Apply(f Fault) error {
	fs := &r.faults
	link, err := r.linkName(f.Link, "")
	if err != nil {
		return err
	}
	switch f.Kind {
	case "down", "up":
		down := f.Kind == "down"
		fs.mu.Lock()
		_, isDown := fs.downAt[link]
		fs.mu.Unlock()
		if isDown == down {
			return fmt.Errorf("link %s is %s already", link, f.Kind)
		}
		_, data := r.Fabric.LinkTx(link)
		if down {
			err = r.TB.LinkDown(link)
		} else {
			err = r.TB.LinkUp(link)
		}
		if err != nil {
			return err
		}
		fs.mu.Lock()
		if down {
			fs.downAt[link] = data
		} else {
			fs.refused[link] += data - fs.downAt[link]
			delete(fs.downAt, link)
		}
		fs.mu.Unlock()
		fs.wg.Add(1)
		go func() {
			defer fs.wg.Done()
			if fs.conv > 0 {
				select {
				case <-fs.ctx.Done():
					return
				case <-time.After(fs.conv):
				}
			}
			if err := r.Fabric.Converge(link, down); err != nil {
				fs.fail(err)
			}
		}()
		return nil
	case "degrade":
		if f.Rate <= 0 {
			return errors.New("degrade needs a rate > 0")
		}
		return r.Fabric.SetRate(link, int64(f.Rate))
	case "restore":
		return r.Fabric.SetRate(link, 0)
	case "flaky":
		if f.Gap <= 0 || f.Burst <= 0 {
			return errors.New("flaky needs gap > 0 and burst > 0")
		}
		return r.Fabric.Flaky(link, f.Gap, f.Burst, r.Scenario.Seed)
	case "heal":
		return r.Fabric.Flaky(link, 0, 0, 0)
	}
	return fmt.Errorf("fault kind %q: want down, up, degrade, restore, flaky or heal", f.Kind)
}

func (fs *faults) fail(err error) {
	fs.mu.Lock()
	fs.errs = append(fs.errs, err)
	fs.mu.Unlock()
}

// scheduleFailures applies the scenario's failures at their times after start (and ends
// them at until), until ctx ends.
func (r *Run) scheduleFailures(ctx context.Context, start time.Time, sc *sim.Scenario) error {
	fs := &r.faults
	fs.ctx, fs.conv = ctx, time.Duration(sc.RoutingConvergence)
	fs.downAt, fs.refused = map[string]uint64{}, map[string]uint64{}
	type ev struct {
		at time.Duration
		f  Fault
	}
	var evs []ev
	for i, fc := range sc.Failures {
		f, err := r.faultOf(i, fc)
		if err != nil {
			return err
		}
		evs = append(evs, ev{time.Duration(fc.At), f})
		if fc.Until > 0 {
			evs = append(evs, ev{time.Duration(fc.Until), f.undo()})
		}
	}
	// One goroutine applies them in time order: with a timer each, a loaded host (or a
	// start already past) could run a link's "up" before its "down".
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	fs.wg.Add(1)
	go func() {
		defer fs.wg.Done()
		for _, e := range evs {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(e.at))):
			}
			if err := r.Apply(e.f); err != nil {
				fs.fail(fmt.Errorf("%s %s at %v: %w", e.f.Kind, e.f.Link, e.at, err))
			}
		}
	}()
	return nil
}

// endFailures waits for the failure goroutines (ctx must be done) and returns the DATA
// frames sent into each link while it was down, and what went wrong.
func (r *Run) endFailures() (map[string]uint64, error) {
	fs := &r.faults
	fs.wg.Wait()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for link, before := range fs.downAt {
		_, after := r.Fabric.LinkTx(link)
		fs.refused[link] += after - before
	}
	return fs.refused, errors.Join(fs.errs...)
}

// ParseFault reads a fault from its command-line words: down LINK, up LINK,
// degrade RATE LINK, restore LINK, flaky GAP BURST LINK, heal LINK.
func ParseFault(words []string) (Fault, error) {
	usage := errors.New("want down|up|restore|heal LINK, degrade RATE LINK or flaky GAP BURST LINK")
	if len(words) < 2 {
		return Fault{}, usage
	}
	f := Fault{Kind: words[0], Link: words[len(words)-1]}
	args := words[1 : len(words)-1]
	var err error
	switch f.Kind {
	case "down", "up", "restore", "heal":
		if len(args) != 0 {
			return f, usage
		}
	case "degrade":
		if len(args) != 1 {
			return f, usage
		}
		err = f.Rate.UnmarshalText([]byte(args[0]))
	case "flaky":
		if len(args) != 2 {
			return f, usage
		}
		var g, b config.Duration
		err = errors.Join(g.UnmarshalText([]byte(args[0])), b.UnmarshalText([]byte(args[1])))
		f.Gap, f.Burst = time.Duration(g), time.Duration(b)
	default:
		return f, usage
	}
	return f, err
}

// ControlPath is where a run named name listens for faults (smartt-lab testbed fail).
func ControlPath(dir, name string) string { return dir + "/testbed-" + name + ".ctl" }

// serveControl accepts faults on a unix socket while the workload runs: one line per
// connection, the words of ParseFault; the answer is "ok" or "error: ...".
func (r *Run) serveControl(path string) (stop func(), err error) {
	os.Remove(path) // a crashed run's socket
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil {
				var f Fault
				if f, err = ParseFault(strings.Fields(line)); err == nil {
					err = r.Apply(f)
				}
			}
			if err != nil {
				fmt.Fprintf(c, "error: %v\n", err)
			} else {
				fmt.Fprintln(c, "ok")
			}
			c.Close()
		}
	}()
	return func() { ln.Close(); wg.Wait(); os.Remove(path) }, nil
}

// Control sends a fault (ParseFault's words) to the run listening at path.
func Control(path string, words []string) error {
	if _, err := ParseFault(words); err != nil {
		return err
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return fmt.Errorf("no testbed run listening at %s: %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := fmt.Fprintln(c, strings.Join(words, " ")); err != nil {
		return err
	}
	ans, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if ans = strings.TrimSpace(ans); ans != "ok" {
		return errors.New(strings.TrimPrefix(ans, "error: "))
	}
	return nil
}
