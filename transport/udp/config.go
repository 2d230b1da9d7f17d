// Package udp is smartt's Linux socket layer: one receive socket per local address, a pool
// of send sockets whose UDP source ports carry the entropy value (EV) of every packet,
// ECN and DSCP on send and receive, kernel receive and (sampled) transmit timestamps, and
// batched I/O with recvmmsg/sendmmsg. The read and write paths allocate nothing per packet.
//
// See docs/datapath.md for the design and the kernel interfaces it uses.
package udp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/smartt-transport/smartt/transport/dgram"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Carrier names accepted in Config.Carrier.
const (
	CarrierPort      = "port"      // EV i leaves from UDP source port EVPortBase+i
	CarrierFlowLabel = "flowlabel" // IPv6 only: one send socket, EV i travels as flow label i+1
	CarrierRaw       = "raw"       // one raw socket (IP_HDRINCL, CAP_NET_RAW): any source port per packet, EVS up to 65535
)

// Defaults for zero-valued Config fields.
const (
	DefaultEVS = 256
	// maxEVPorts bounds EVS on the port and raw carriers: each EV is a UDP source port.
	maxEVPorts       = 65535
	DefaultBatchSize = 64
	MaxBatchSize     = 1024
	// MaxBusyPoll bounds Config.BusyPoll.
	MaxBusyPoll = time.Millisecond
)

// ECN codepoints of the two low bits of the IP TOS / traffic-class byte (RFC 3168).
const (
	NotECT = 0
	ECT1   = 1
	ECT0   = 2
	CE     = 3
)

// Config configures the socket layer of one local address.
type Config struct {
	Listen      netip.AddrPort // receive address:port of the daemon (IPv4 or IPv6); peers send here
	EVPortBase  uint16         // first UDP source port of the EV pool (0: Listen.Port()+1; ephemeral ports if Listen.Port() is 0 too)
	EVS         int            // EV pool size; EV i leaves from source port EVPortBase+i (default 256)
	Carrier     string         // "port" (default), "raw" (IP_HDRINCL, CAP_NET_RAW, EVS up to 65535), "flowlabel" (IPv6, EVS up to 4096)
	DataDSCP    uint8          // DSCP for data packets (0..63)
	ControlDSCP uint8          // DSCP for control packets (ACK/NACK/...), so switches can prioritise (0..63)

	// Off switches; each also falls back automatically when the kernel refuses.
	DisableECN, DisableTimestamps, DisableBatch bool
	DisableGSO                                  bool // no UDP GSO (UDP_SEGMENT) on send (port and flowlabel carriers)
	DisableGRO                                  bool // no UDP GRO on receive (and no copy out of the socket's own buffers)
	// GROInPlace: with GRO, ReadBatch points each Packet's Buf at its datagram in the
	// socket's own buffer (valid until the next ReadBatch) instead of copying it into the
	// caller's Buf; the caller gives its buffers anew for every call.
	GROInPlace bool

	DisableDF bool // let the kernel fragment datagrams larger than the path MTU (no IP_PMTUDISC_DO / IPV6_DONTFRAG)

	TxTimestampEvery int // sample a kernel TX timestamp on 1 in N sent packets (0: off)

	// Datapath is "sockets" (default) or "afxdp": IPv4 packets to and from the listen
	// port through an AF_XDP socket and XDP program on the listen address's interface
	// (see afxdp.go), probed at Open with a fallback to sockets and a log line saying why;
	// or "auto": afxdp where it fits (DatapathAuto), else sockets.
	Datapath string

	// MaxDatagram is the largest datagram the caller sends (bytes of UDP payload): Open
	// checks it against the MTU of the interfaces the listen address uses (0: no check).
	MaxDatagram int
	// HeaderBytes is how much of MaxDatagram is not message payload (the smartt header
	// and trailer), so MTU errors can name the largest payload that fits.
	HeaderBytes int

	RecvBuffer, SendBuffer int // socket buffer bytes (SO_*BUFFORCE when allowed, else warn with the sysctl); 0: kernel default
	BatchSize              int // recvmmsg/sendmmsg batch (default 64, at most 1024)
	Logger                 *slog.Logger

	// BusyPoll makes a read that finds the socket empty poll it again, yielding the
	// processor between polls (runtime.Gosched), for up to this long before the goroutine
	// sleeps in the netpoller: a datagram that arrives meanwhile costs no wake-up. 0 (the
	// default) is off; at most MaxBusyPoll. It burns a core while it polls, so it polls
	// only while polling pays (busyPolicy: at most a wake-up's cost per datagram plus one
	// BusyPoll): for hosts with cores to spare (docs/datapath.md, "Busy polling"). A read
	// deadline may pass by up to BusyPoll before the read returns.
	BusyPoll time.Duration

	// ReusePort sets SO_REUSEPORT on the listen socket and the EV sockets, so that several
	// Conns (engine shards, OpenShards) share the listen port and the EV ports.
	ReusePort bool

	probing     bool // a probe's own socket pair: do not probe again
	ephemeralEV bool // OpenShards with Listen port 0: EV ports stay ephemeral for every shard
}

// Packet is one datagram of a batch, in a caller-owned buffer (the type daemon.Packet
// is too, so the daemon passes its batches through unchanged).
type Packet = dgram.Packet

// Caps is what the kernel granted at Open (after probing and fallback).
type Caps struct {
	ECN, RxTimestamps, TxTimestamps, Batch bool
	GSO                                    bool   // UDP_SEGMENT on send (switched off for good if the kernel refuses a GSO send)
	GRO                                    bool   // UDP_GRO on receive
	TimestampSource                        string // "kernel" or "user"
	RecvBuffer, SendBuffer                 int    // effective sizes: what the kernel granted (half what getsockopt reports)
	DF                                     bool   // datagrams leave with Don't Fragment (IP_PMTUDISC_DO / IPV6_DONTFRAG, or the raw carrier's header)
	LinkMTU                                int    // smallest MTU of the interfaces the MTU check looked at (0: not checked)
	TTL                                    bool   // received packets carry their IP TTL / hop limit (IP_RECVTTL / IPV6_RECVHOPLIMIT)
	Datapath                               string // "sockets" or "afxdp" (what Open chose)
	XDPMode                                string // afxdp: how the XDP program is attached ("native" or "generic")
}

// Stats are cumulative counters of a Conn.
type Stats struct {
	RxPackets, RxBytes   uint64
	TxPackets, TxBytes   uint64
	RxBatches, TxBatches uint64 // recvmmsg / sendmmsg calls that moved at least one packet
	RxErrors, TxErrors   uint64
	RxTruncated          uint64 // datagrams longer than the buffer offered (MSG_TRUNC)
	RxDropped            uint64 // datagrams the kernel dropped for a full receive buffer (SO_RXQ_OVFL), as of the last one read
	RxECT, RxCE          uint64 // packets that arrived ECT(0)/ECT(1), and CE
	RxNoKernelStamp      uint64 // packets without a kernel timestamp (RxTime from the user clock)
	RxDSCP               [64]uint64
	TxStampsSampled      uint64 // packets sent with a TX timestamp request
	TxStampsMatched      uint64 // TX timestamps read back from the error queue and matched
	TxStampsLost         uint64 // requests whose timestamp never came back before its slot was reused
	RxGROBuffers         uint64 // received buffers that held several datagrams (UDP GRO)
	TxGSOMessages        uint64 // sends that carried several packets as UDP GSO segments
	TxGSOSegments        uint64 // packets sent inside those
	TxTooBig             uint64 // datagrams the kernel refused as larger than the path MTU (EMSGSIZE; DF set)
	RxMalformed          uint64 // afxdp: frames refused as malformed (lengths, IP checksum, fragments)
	RxXDPDropped         uint64 // afxdp: packets the kernel dropped for a full RX ring or an empty fill ring, as of the last look (every 256 read batches)
	RxWrongDst           uint64 // afxdp: datagrams to another address or port than ours, dropped
	RxBusyPollHits       uint64 // reads that found datagrams while busy-polling (Config.BusyPoll): wake-ups saved
	// ICMP destination-unreachable reports for our datagrams (IP_RECVERR): handed to
	// WaitUnreachable, dropped for a full dst, and read by TxStamps first (not reported).
	RxICMPUnreachable, RxICMPDropped, RxICMPLost uint64
	// RxStrays: datagrams that arrived on an EV port (sent to the wrong port);
	// TxStrayResets: the EV-port RESETs that answered smartt first contacts among them.
	RxStrays, TxStrayResets uint64
}

// TxStamp pairs a sampled packet's user-space send time with the kernel's transmit time.
type TxStamp struct {
	ID       uint32 // sample number
	EV       uint16 // the EV (send socket) it left on
	UserTime int64  // Unix ns just before sendmmsg
	KernTime int64  // Unix ns when the kernel handed it to the device (software timestamp)
}

func (cfg *Config) normalize() error {
	if !cfg.Listen.IsValid() {
		return errors.New("udp: Config.Listen: need an IPv4 or IPv6 address:port")
	}
	if cfg.Listen.Addr().Zone() != "" {
		return fmt.Errorf("udp: Config.Listen %v: zoned addresses are not supported", cfg.Listen)
	}
	if cfg.Carrier == "" {
		cfg.Carrier = CarrierPort
	}
	switch cfg.Carrier {
	case CarrierPort:
	case CarrierFlowLabel:
		if !cfg.Listen.Addr().Is6() || cfg.Listen.Addr().Is4In6() {
			return fmt.Errorf("udp: Config.Carrier %q needs an IPv6 Config.Listen, not %v", cfg.Carrier, cfg.Listen)
		}
	case CarrierRaw:
		if cfg.Listen.Addr().IsUnspecified() {
			return fmt.Errorf("udp: Config.Carrier %q builds its own IP headers and needs a specific Config.Listen address, not %v", cfg.Carrier, cfg.Listen)
		}
	default:
		return fmt.Errorf("udp: Config.Carrier %q: allowed values are %q, %q, %q", cfg.Carrier, CarrierPort, CarrierRaw, CarrierFlowLabel)
	}
	switch cfg.Datapath {
	case "":
		cfg.Datapath = DatapathSockets
	case DatapathSockets, DatapathAFXDP, DatapathAuto:
	default:
		return fmt.Errorf("udp: Config.Datapath %q: allowed values are %q, %q, %q", cfg.Datapath, DatapathSockets, DatapathAFXDP, DatapathAuto)
	}
	if cfg.EVS == 0 {
		cfg.EVS = DefaultEVS
	}
	if err := wire.CheckEVS(cfg.EVS); err != nil {
		return fmt.Errorf("udp: Config.EVS: %w", err)
	}
	if cfg.Carrier != CarrierFlowLabel && cfg.EVS > maxEVPorts {
		return fmt.Errorf("udp: Config.EVS %d: allowed range is 1..%d for the %s carrier (one source port per EV)", cfg.EVS, maxEVPorts, cfg.Carrier)
	}
	if cfg.Carrier == CarrierFlowLabel && cfg.EVS > maxFlowLabels {
		return fmt.Errorf("udp: Config.EVS %d: allowed range is 1..%d for the flowlabel carrier (the kernel's flow-label table)", cfg.EVS, maxFlowLabels)
	}
	if cfg.EVPortBase == 0 && cfg.Listen.Port() != 0 && !cfg.ephemeralEV {
		cfg.EVPortBase = cfg.Listen.Port() + 1
	}
	ports := cfg.EVS
	if cfg.Carrier == CarrierFlowLabel {
		ports = 1
	}
	if cfg.EVPortBase != 0 && int(cfg.EVPortBase)+ports-1 > 65535 {
		return fmt.Errorf("udp: Config.EVPortBase %d + EVS %d exceeds port 65535: allowed EVPortBase is 1..%d",
			cfg.EVPortBase, cfg.EVS, 65536-cfg.EVS)
	}
	if cfg.EVPortBase != 0 && cfg.Listen.Port() >= cfg.EVPortBase && int(cfg.Listen.Port()) < int(cfg.EVPortBase)+ports {
		return fmt.Errorf("udp: Config.Listen port %d lies inside the EV port range %d..%d",
			cfg.Listen.Port(), cfg.EVPortBase, int(cfg.EVPortBase)+ports-1)
	}
	if cfg.MaxDatagram < 0 || cfg.MaxDatagram > 65535 || cfg.HeaderBytes < 0 || cfg.HeaderBytes > 65535 || (cfg.MaxDatagram > 0 && cfg.HeaderBytes > cfg.MaxDatagram) {
		return fmt.Errorf("udp: Config.MaxDatagram %d / HeaderBytes %d: allowed are MaxDatagram 0 (no check) or up to 65535, HeaderBytes 0..MaxDatagram", cfg.MaxDatagram, cfg.HeaderBytes)
	}
	if cfg.DataDSCP > 63 {
		return fmt.Errorf("udp: Config.DataDSCP %d: allowed range is 0..63", cfg.DataDSCP)
	}
	if cfg.ControlDSCP > 63 {
		return fmt.Errorf("udp: Config.ControlDSCP %d: allowed range is 0..63", cfg.ControlDSCP)
	}
	if cfg.TxTimestampEvery < 0 {
		return fmt.Errorf("udp: Config.TxTimestampEvery %d: allowed is 0 (off) or N >= 1", cfg.TxTimestampEvery)
	}
	if cfg.RecvBuffer < 0 || cfg.SendBuffer < 0 {
		return fmt.Errorf("udp: Config.RecvBuffer %d / SendBuffer %d: allowed is 0 (kernel default) or a positive byte count", cfg.RecvBuffer, cfg.SendBuffer)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > MaxBatchSize {
		return fmt.Errorf("udp: Config.BatchSize %d: allowed range is 1..%d", cfg.BatchSize, MaxBatchSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return nil
}

// Datapath names accepted in Config.Datapath.
const (
	DatapathSockets = "sockets" // UDP sockets only (the default)
	DatapathAFXDP   = "afxdp"   // AF_XDP socket on the listen interface's queue 0, sockets as fallback
	// DatapathAuto is afxdp where it can carry all of the listen port's traffic (a
	// specific IPv4 listen address on an Ethernet interface with one receive queue) and the
	// probe succeeds, else sockets, with a log line saying why; for traffic that sprays a
	// new EV per packet (the daemon resolves its udp.datapath auto to sockets otherwise).
	DatapathAuto = "auto"
)

// Unreachable is one ICMP destination-unreachable report for a datagram we sent.
type Unreachable struct {
	Dst  netip.AddrPort // destination of the datagram that drew it (the peer)
	Port bool           // port unreachable (nothing listening there); else host, network or administratively unreachable
}

const (
	gsoMaxSegs  = 64    // UDP_MAX_SEGMENTS of older kernels
	gsoMaxBytes = 65000 // payload bytes of one GSO message, under the 64 KiB IP length
)

// GSORun is how many datagrams of maxDatagram bytes one UDP GSO send carries (1..64):
// the EV run that fills one GSO message.
func GSORun(maxDatagram int) int {
	if maxDatagram <= 0 {
		return 1
	}
	return min(max(gsoMaxBytes/maxDatagram, 1), gsoMaxSegs)
}
