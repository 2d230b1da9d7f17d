package mpifabric

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/smartt-transport/smartt/test/netbed"
)

// writeLaunch writes what mpirun needs to start one rank per host: "hosts" (a hostfile
// of the hosts' management addresses, one slot each) and "agent", the launch agent
// Open MPI runs in place of ssh ("agent HOST COMMAND..."): it enters HOST's namespace and
// runs the orted command there with the host's daemon socket (SMARTT_SOCKET, which the
// ranks inherit) and a session directory of its own. socks[i] is host i's API socket.
func writeLaunch(dir, testbed string, p *netbed.Plan, socks []string) error {
	hosts := p.Hosts()
	if len(socks) != len(hosts) {
		return fmt.Errorf("%d daemon sockets for %d hosts", len(socks), len(hosts))
	}
	var hf, cases strings.Builder
	for i, n := range hosts {
		a := MgmtAddr(i)
		fmt.Fprintf(&hf, "%s slots=1\n", a)
		if strings.ContainsAny(socks[i], "'\n") {
			return fmt.Errorf("socket path %q: no quotes or newlines", socks[i])
		}
		ns := filepath.Join(netbed.NsDir, netbed.NsName(testbed, p.Nodes[n].Name))
		fmt.Fprintf(&cases, "  %s) ns='%s' sock='%s' tmp='%s' ;;\n", a, ns, socks[i], filepath.Join(dir, "tmp", p.Nodes[n].Name))
	}
	agent := "#!/bin/sh\n" +
		"# Open MPI's launch agent for the testbed (test/mpifabric): agent HOST COMMAND...\n" +
		"h=$1; shift\n" +
		"case $h in\n" + cases.String() + "  *) echo \"agent: unknown host $h\" >&2; exit 1 ;;\nesac\n" +
		"mkdir -p \"$tmp\"\n" +
		"exec nsenter --net=\"$ns\" env SMARTT_SOCKET=\"$sock\" OMPI_MCA_orte_tmpdir_base=\"$tmp\" sh -c \"$*\"\n"
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hf.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "agent"), []byte(agent), 0o755)
}

// Fabric operations the failer needs (netbed.Testbed and netbed.Fabric have them).
type linkDowner interface {
	LinkDown(link string) error
	LinkUp(link string) error
}

type converger interface {
	Converge(link string, down bool) error
}

// failer fails a link during a job and restores it afterwards: down after a delay, the
// switches routed around it after another (as a routing protocol converging).
type failer struct {
	tb   linkDowner
	fab  converger
	link string
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	down bool // LinkDown done
	conv bool // Converge(down) done
	errs []error
}

// start fails the link after `after`, and converges the routing `conv` later, unless the
// job ended first. A second start is ignored.
func (f *failer) start(after, conv time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down || f.stop == nil {
		return
	}
	f.down = true // claimed: end restores it
	stop := f.stop
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if !sleep(stop, after) {
			f.mu.Lock()
			f.down = false
			f.mu.Unlock()
			return
		}
		if err := f.tb.LinkDown(f.link); err != nil {
			f.mu.Lock()
			f.down = false
			f.errs = append(f.errs, err)
			f.mu.Unlock()
			return
		}
		if !sleep(stop, conv) {
			return
		}
		err := f.fab.Converge(f.link, true)
		f.mu.Lock()
		f.conv = err == nil
		if err != nil {
			f.errs = append(f.errs, err)
		}
		f.mu.Unlock()
	}()
}

// sleep waits d; false if stop closed first.
func sleep(stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// end cancels what has not happened yet and restores the link (up, routed over again),
// so the next job starts on a healthy fabric.
func (f *failer) end() error {
	f.mu.Lock()
	if f.stop != nil {
		close(f.stop)
		f.stop = nil
	}
	f.mu.Unlock()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := f.errs
	if f.down {
		errs = append(errs, f.tb.LinkUp(f.link))
	}
	if f.conv {
		errs = append(errs, f.fab.Converge(f.link, false))
	}
	f.down, f.conv = false, false
	return errors.Join(errs...)
}
