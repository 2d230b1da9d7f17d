package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// newCheckCmd is "smartt check": a config file (smarttd -check-config's code) and/or a
// running daemon's health.
func newCheckCmd() *cobra.Command {
	return leaf("check [--config FILE] [--socket PATH]", "check a config file and/or a running daemon's health",
		"check --config FILE reads and validates FILE as smarttd would start with it (the same code as\n"+
			"smarttd -check-config): it prints the effective config and its worst-case memory, or every error.\n"+
			"Without --config, or with --socket, it asks the daemon on the socket for its status, limits,\n"+
			"capabilities and counters and prints one line per check (ok, warn, FAIL). It exits 1 if the\n"+
			"config is invalid, the daemon does not answer, or a check failed; warnings do not fail it.",
		cobra.NoArgs, bindCheck)
}

func bindCheck(fs *pflag.FlagSet) cli.RunFunc {
	var cf clientFlags
	var file string
	cf.declare(fs, 10*time.Second, "give up on the daemon after this long")
	fs.StringVar(&file, "config", "", "a smarttd config file to check")
	return func(_ []string, out io.Writer) error {
		if file != "" {
			if err := smarttd.CheckFile(out, file, smarttd.HostCgroup); err != nil {
				return err
			}
			if !fs.Changed("socket") {
				return nil
			}
		}
		return checkDaemon(cf, out)
	}
}

// health collects the daemon checks' verdicts.
type health struct {
	out        io.Writer
	warns, bad int
}

func (h *health) ok(format string, a ...any) { fmt.Fprintf(h.out, "ok    "+format+"\n", a...) }

func (h *health) warn(format string, a ...any) {
	h.warns++
	fmt.Fprintf(h.out, "warn  "+format+"\n", a...)
}

func (h *health) fail(format string, a ...any) {
	h.bad++
	fmt.Fprintf(h.out, "FAIL  "+format+"\n", a...)
}

// near is whether used is at least 90 % of a positive limit.
func near(used, limit int64) bool { return limit > 0 && used*10 >= limit*9 }

// checkDaemon checks the daemon on cf.socket: it answers, is not shutting down, fits its
// memory limit, has room in its API limits, and its sockets have what the engine needs.
func checkDaemon(cf clientFlags, out io.Writer) error {
	v, err := fetchView(cf)
	if err != nil {
		return err
	}
	st, caps, cnt := v.st, v.caps, v.cnt
	h := &health{out: out}
	line := fmt.Sprintf("smarttd %s (pid %d) answers on %s, listening on %s, up %.0f s", st.Version, st.PID, cf.socket, st.Listen, st.UptimeS)
	if st.ShuttingDown {
		h.fail("%s, but is shutting down", line)
	} else {
		h.ok("%s", line)
	}
	limit := "no limit"
	if st.MemoryLimit > 0 {
		limit = "limit " + config.HumanSize(st.MemoryLimit)
	}
	if st.MemoryLimit > 0 && st.MemoryBound > st.MemoryLimit {
		h.fail("memory: worst case %s exceeds %s", config.HumanSize(st.MemoryBound), limit)
	} else {
		h.ok("memory: worst case %s, %s", config.HumanSize(st.MemoryBound), limit)
	}
	a, l := cnt.API, caps.Limits
	api := fmt.Sprintf("api: %d of %d sessions, %s of %s outstanding, %s of %s queued for clients", a.Sessions, l.MaxClients,
		config.HumanSize(a.Outstanding), config.HumanSize(l.MaxOutstandingTotal), config.HumanSize(a.RecvQueued), config.HumanSize(l.MaxRecvQueueTotal))
	if near(a.Sessions, int64(l.MaxClients)) || near(a.Outstanding, l.MaxOutstandingTotal) || near(a.RecvQueued, l.MaxRecvQueueTotal) {
		h.warn("%s: at 90 %% or more of a limit (api.max_clients, api.max_outstanding_total, api.max_recv_queue_total)", api)
	} else {
		h.ok("%s", api)
	}
	checkSockets(h, caps.Socket)
	if e := cnt.Engine; e.Auth["failed"] > 0 || e.Auth["no_key"] > 0 {
		h.warn("auth: %d packets failed authentication (a peer with another key?), %d not sent for want of a key covering their destination (docs/security.md)", e.Auth["failed"], e.Auth["no_key"])
	}
	if h.bad > 0 {
		return fmt.Errorf("%d checks failed", h.bad)
	}
	fmt.Fprintf(out, "healthy (%d warnings)\n", h.warns)
	return nil
}

// checkSockets warns about socket capabilities the engine works without but worse.
func checkSockets(h *health, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		h.ok("sockets: %s", socketCaps(v))
		return
	}
	missing := ""
	if m["rx_timestamps"] == false {
		missing += "; no kernel receive timestamps: RTT samples include the daemon's scheduling delay"
	}
	if m["ecn"] == false {
		missing += "; no ECN: the congestion controllers that use CE marks see none"
	}
	if missing != "" {
		h.warn("sockets: %s%s", socketCaps(v), missing)
		return
	}
	h.ok("sockets: %s", socketCaps(v))
}
