//go:build linux

package udp

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// GathersPayload reports whether WriteBatch takes Packet.Payload: on the socket
// datapath's port and flow-label carriers, not on the raw carrier (whose own header
// and IPv6 checksum are built over Buf) or AF_XDP (which copies one buffer into its umem).
func (c *Conn) GathersPayload() bool { return !c.raw && c.xdp == nil }

// Conn is the socket layer of one local address. ReadBatch may run concurrently with
// WriteBatch and TxStamps; concurrent calls of the same method are serialised.
type Conn struct {
	cfg   Config
	log   *slog.Logger
	v6    bool // sockets are AF_INET6
	caps  Caps
	local netip.AddrPort

	rx    *sock   // listen socket
	evs   []*sock // EV -> send socket (all the same socket for the flow-label carrier)
	socks []*sock // the distinct send sockets
	label bool    // flow-label carrier
	raw   bool    // raw (IP_HDRINCL) carrier
	rawT  []byte  // raw carrier: IP+UDP header template (from gopacket)

	rmu sync.Mutex
	rb  batch
	gro groState

	wmu   sync.Mutex
	wb    batch
	txSeq uint64 // packets offered to WriteBatch (for TX-stamp sampling)
	txID  uint32
	txRun []uint32 // sample IDs of the run being sent

	ringMu sync.Mutex // txRing, shared by WriteBatch and TxStamps
	txRing []txPending

	smu    sync.Mutex // TxStamps
	emsg   unix.Msghdr
	eiov   unix.Iovec
	errBuf [64]byte
	errOOB [512]byte
	eres   errResult
	errFn  func(fd uintptr)
	icmp   icmpState // WaitUnreachable

	nl         *netlink.Handle         // netlink in the sockets' namespace (MTU check, EMSGSIZE diagnosis); nil if unavailable
	tooBigSeen map[netip.Addr]struct{} // destinations whose EMSGSIZE was logged (under wmu)

	xdp *xdpPath // nil: the sockets carry every packet

	closed atomic.Bool
	gso    atomic.Bool // GSO in use (switched off at run time if the kernel refuses it)
	st     counters
}

type counters struct {
	rxPackets, rxBytes, txPackets, txBytes, rxBatches, txBatches   atomic.Uint64
	rxErrors, txErrors, rxTrunc, rxECT, rxCE, rxNoStamp, rxDropped atomic.Uint64
	rxDSCP                                                         [64]atomic.Uint64
	txSampled, txMatched, txLost, txGSOMsgs, txGSOSegs, rxGROBufs  atomic.Uint64
	txTooBig, rxMalformed, rxXDPDropped, rxBusyHits                atomic.Uint64
	rxWrongDst                                                     atomic.Uint64
	rxICMP, rxICMPDropped, rxICMPLost                              atomic.Uint64
	rxStrays, txStrayResets                                        atomic.Uint64
}

type txPending struct {
	id    uint32
	valid bool
	ev    uint16
	user  int64
}

// Open validates cfg, creates and configures the sockets, probes what the kernel allows and
// logs the result. Sockets are created in the network namespace of the calling OS thread.
func Open(cfg Config) (*Conn, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	c := &Conn{cfg: cfg, log: cfg.Logger, v6: cfg.Listen.Addr().Is6() && !cfg.Listen.Addr().Is4In6()}
	c.caps = Caps{ECN: !cfg.DisableECN, RxTimestamps: !cfg.DisableTimestamps,
		TxTimestamps: !cfg.DisableTimestamps && cfg.TxTimestampEvery > 0, Batch: !cfg.DisableBatch,
		GSO: !cfg.DisableGSO && cfg.Carrier != CarrierRaw, GRO: !cfg.DisableGRO,
		DF: !cfg.DisableDF}
	c.tooBigSeen = map[netip.Addr]struct{}{}
	if !cfg.probing {
		// Bound to the calling thread's namespace, like the sockets, so it answers for
		// their interfaces and routes from any goroutine later.
		if h, err := netlink.NewHandle(unix.NETLINK_ROUTE); err == nil {
			c.nl = h
		} else {
			c.log.Warn("udp: no netlink socket; no MTU check, MTU errors will not name the interface", "err", err)
		}
	}
	if err := c.openSockets(); err != nil {
		c.closeSockets()
		return nil, err
	}
	if err := c.checkMTU(); err != nil {
		c.closeSockets()
		return nil, err
	}
	verdict := c.probe()
	if c.caps.RxTimestamps {
		c.caps.TimestampSource = "kernel"
	} else {
		c.caps.TimestampSource = "user"
	}
	c.rb.init(cfg.BatchSize, false)
	if c.caps.GRO {
		c.gro.init(min(cfg.BatchSize, 16))
	}
	c.wb.init(cfg.BatchSize, true)
	c.rb.rawFn = c.rxRecv
	c.rb.spin, c.rb.spinHits, c.rb.closed = int64(min(max(cfg.BusyPoll, 0), MaxBusyPoll)), &c.st.rxBusyHits, &c.closed
	c.rb.busy = newBusyPolicy(c.rb.spin)
	c.wb.rawFn = c.txSend
	if c.caps.TxTimestamps {
		c.txRing = make([]txPending, txRingSize)
		c.txRun = make([]uint32, 0, cfg.BatchSize)
	}
	c.errFn = c.readErrQueue
	c.gso.Store(c.caps.GSO)
	c.caps.Datapath = DatapathSockets
	if cfg.probing {
		return c, nil
	}
	switch cfg.Datapath {
	case DatapathAFXDP:
		if err := c.openXDP(); err != nil {
			c.log.Warn("udp: AF_XDP datapath unavailable, using sockets", "listen", c.local.String(), "reason", err)
		} else {
			c.caps.Datapath, c.caps.XDPMode = DatapathAFXDP, c.xdp.prog.Mode
		}
	case DatapathAuto:
		// Not asked for by name, so not a warning when it does not fit or fails.
		if why := c.xdpFits(); why != "" {
			c.log.Info("udp: datapath auto: using sockets", "listen", c.local.String(), "reason", why)
		} else if err := c.openXDP(); err != nil {
			c.log.Info("udp: datapath auto: AF_XDP unavailable, using sockets", "listen", c.local.String(), "reason", err)
		} else {
			c.caps.Datapath, c.caps.XDPMode = DatapathAFXDP, c.xdp.prog.Mode
		}
	}
	c.log.Info("udp: socket layer open",
		"listen", c.local.String(), "carrier", cfg.Carrier, "evs", cfg.EVS,
		"ev_ports", c.evPortRange(), "ecn", c.caps.ECN, "rx_timestamps", c.caps.RxTimestamps,
		"tx_timestamps", c.caps.TxTimestamps, "timestamp_source", c.caps.TimestampSource,
		"datapath", c.caps.Datapath, "xdp_mode", c.caps.XDPMode, "batch", c.caps.Batch, "batch_size", cfg.BatchSize, "gso", c.caps.GSO, "gro", c.caps.GRO, "df", c.caps.DF, "link_mtu", c.caps.LinkMTU, "probe", verdict,
		"recv_buffer", c.caps.RecvBuffer, "send_buffer", c.caps.SendBuffer)
	return c, nil
}

func (c *Conn) evPortRange() string {
	if len(c.socks) == 0 {
		return ""
	}
	if c.raw {
		return fmt.Sprintf("%d..%d (raw)", c.EVPort(0), c.EVPort(uint16(c.cfg.EVS-1)))
	}
	return fmt.Sprintf("%d..%d", c.socks[0].port, c.socks[len(c.socks)-1].port)
}

// Caps reports what the kernel granted at Open.
func (c *Conn) Caps() Caps {
	caps := c.caps
	caps.GSO = c.gso.Load()
	return caps
}

// LocalAddr is the bound receive address (with the kernel-chosen port if Listen.Port() was 0).
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// EVPort is the UDP source port EV ev leaves from (one port for the flow-label carrier).
func (c *Conn) EVPort(ev uint16) uint16 {
	if c.raw {
		return c.cfg.EVPortBase + uint16(int(ev)%c.cfg.EVS)
	}
	return c.evs[int(ev)%len(c.evs)].port
}

// FlowLabel is the IPv6 flow label EV ev travels with (0 unless the flow-label carrier).
func (c *Conn) FlowLabel(ev uint16) uint32 {
	if !c.label {
		return 0
	}
	return uint32(int(ev)%len(c.evs)) + 1
}

// EVS is the size of the EV pool.
func (c *Conn) EVS() int { return len(c.evs) }

// SetReadDeadline makes a blocked or future ReadBatch return an error wrapping
// os.ErrDeadlineExceeded at t (zero t: no deadline).
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.xdp != nil {
		c.xdp.setDeadline(t)
	}
	return c.rx.uc.SetReadDeadline(t)
}

// Stats returns the cumulative counters.
func (c *Conn) Stats() Stats {
	s := Stats{
		RxPackets: c.st.rxPackets.Load(), RxBytes: c.st.rxBytes.Load(),
		TxPackets: c.st.txPackets.Load(), TxBytes: c.st.txBytes.Load(),
		RxBatches: c.st.rxBatches.Load(), TxBatches: c.st.txBatches.Load(),
		RxErrors: c.st.rxErrors.Load(), TxErrors: c.st.txErrors.Load(),
		RxTruncated: c.st.rxTrunc.Load(), RxDropped: c.st.rxDropped.Load(), RxECT: c.st.rxECT.Load(), RxCE: c.st.rxCE.Load(),
		RxNoKernelStamp: c.st.rxNoStamp.Load(),
		TxStampsSampled: c.st.txSampled.Load(), TxStampsMatched: c.st.txMatched.Load(),
		TxStampsLost: c.st.txLost.Load(), TxGSOMessages: c.st.txGSOMsgs.Load(), TxGSOSegments: c.st.txGSOSegs.Load(), RxGROBuffers: c.st.rxGROBufs.Load(), RxBusyPollHits: c.st.rxBusyHits.Load(),
		TxTooBig: c.st.txTooBig.Load(), RxMalformed: c.st.rxMalformed.Load(), RxXDPDropped: c.st.rxXDPDropped.Load(), RxWrongDst: c.st.rxWrongDst.Load(),
		RxICMPUnreachable: c.st.rxICMP.Load(), RxICMPDropped: c.st.rxICMPDropped.Load(), RxICMPLost: c.st.rxICMPLost.Load(),
		RxStrays: c.st.rxStrays.Load(), TxStrayResets: c.st.txStrayResets.Load(),
	}
	for i := range s.RxDSCP {
		s.RxDSCP[i] = c.st.rxDSCP[i].Load()
	}
	return s
}

// Close closes every socket; a blocked ReadBatch returns net.ErrClosed.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return net.ErrClosed
	}
	c.closeICMP()
	return c.closeSockets()
}

func (c *Conn) closeSockets() error {
	if c.nl != nil {
		c.nl.Close()
		c.nl = nil
	}
	var first error
	if c.xdp != nil {
		first = c.closeXDP()
	}
	if c.rx != nil {
		if err := c.rx.close(); err != nil && first == nil {
			first = err
		}
	}
	for _, s := range c.socks {
		if s == nil {
			continue
		}
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
