package udp

// busyPolicy decides how long a read that found the socket empty polls before it sleeps
// (Config.BusyPoll). Polling pays only when the next datagram comes sooner than a wake-up
// would cost; a trickle (say 1,000 datagrams a second from anyone) would otherwise keep a
// core polling almost all the time. So polling draws on a credit, in ns of CPU: each poll
// spends the time it polled, each poll that found a datagram earns the wake-up it saved
// (busyWakeup), and a read that slept earns what polling would have saved had it been on
// (busyWakeup less the wait, when the datagram came within one wake-up's cost). A poll
// never lasts longer than the credit; the credit never exceeds BusyPoll. Polling therefore
// never costs more than one wake-up per datagram plus one BusyPoll: a trickle pays one
// BusyPoll once, then sleeps; traffic dense enough to pay for it keeps it on.
// (TestBusyPolicy; BenchmarkBusyPollTrickle measures the CPU.)
type busyPolicy struct {
	max    int64 // Config.BusyPoll, ns
	credit int64 // ns of polling allowed now
}

// busyWakeup is what a read that sleeps and is woken costs (ns of CPU and latency: the
// wake-up of 5-7 us docs/datapath.md "Busy polling" measured).
const busyWakeup = 6_000

func newBusyPolicy(max int64) busyPolicy { return busyPolicy{max: max, credit: max} }

// budget is how long to poll now (0: sleep at once).
func (p *busyPolicy) budget() int64 { return max(min(p.max, p.credit), 0) }

// polled records a poll of spun ns that found a datagram (hit) or gave up.
func (p *busyPolicy) polled(spun int64, hit bool) {
	p.credit -= spun
	if hit {
		p.credit += busyWakeup
	}
	p.credit = min(max(p.credit, 0), p.max)
}

// slept records a read that slept wait ns for its datagram.
func (p *busyPolicy) slept(wait int64) {
	if wait < busyWakeup {
		p.credit = min(p.credit+busyWakeup-wait, p.max)
	}
}
