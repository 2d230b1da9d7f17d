package uswitch

// Config configures a switch.
type Config struct {
	Ports    []string        // interface names in the current namespace, one port each
	Router   Router          // default: NewLearning()
	NewQueue func(int) Queue // queue of output port i; default NewFIFO(1024, 0)
	Batch    int             // frames per recvmmsg/sendmmsg, default 64
	MaxFrame int             // largest Ethernet frame, default 9216 (jumbo)
	Frames   int             // frames in the pool, default 4*Batch per port + 1024 per port
	// SoftwareChecksum completes offloaded checksums in the switch instead of passing the
	// offload request on to the next hop in the virtio-net header.
	SoftwareChecksum bool
	// Tick, if set, runs on the switch thread at the start of Run, after every batch of Do
	// functions, and whenever the time it last returned (switch clock, ns) has come; it
	// returns when to run next (-1: only after the next Do). Samplers go here.
	Tick func(now int64) int64
	// Lose, if set, is asked for every frame leaving port (after its queue, before the
	// socket): true loses it on the link (a flaky link), counted in PortStats.Lost.
	Lose func(port int, f *Frame) bool
	// Capture, if set, sees every frame received on a port (tx false, before routing) and
	// every frame the kernel accepted for sending (tx true), at now (switch clock). It runs
	// on the switch thread and must not keep f.
	Capture func(port int, f *Frame, now int64, tx bool)
}

// PortStats are the counters of one port.
type PortStats struct {
	RxFrames, RxBytes uint64 // received on the port
	TxFrames, TxBytes uint64 // sent out of the port
	Drops             uint64 // refused by the port's queue (or no frame buffer for a flood copy)
	TxErrors          uint64 // frames the kernel would not send
	Truncated         uint64 // received frames longer than MaxFrame (dropped)
	RxDropped         uint64 // frames the kernel dropped before the switch read them (socket buffer full)
	Lost              uint64 // frames Config.Lose lost on the link
}
