//go:build linux

package udp

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Steering modes of OpenShards.
const (
	// SteerCBPF attaches SteeringProgram to the shards' listen sockets
	// (SO_ATTACH_REUSEPORT_CBPF): the kernel hands each datagram to the socket of the shard
	// its connection ID names.
	SteerCBPF = "cbpf"
	// SteerHash leaves the choice to the kernel's SO_REUSEPORT hash of the 4-tuple: the
	// shards forward what is not theirs (kernels without reuseport BPF; tests).
	SteerHash = "hash"
)

// MaxShards bounds OpenShards: the steering program names a shard by one byte of the
// connection ID.
const MaxShards = 256

// Offsets of the connection IDs in the wire's common header (docs/wire.md), as
// wire.Shard reads them.
const (
	offDstConn = 8  // DstConn, 8 bytes big-endian: its last byte is the low byte
	offSrcConn = 16 // SrcConn, 8 bytes big-endian: its first byte is the high byte
)

// SteerShard is wire.Shard: the shard that owns datagram b among n.
func SteerShard(b []byte, n int) int { return wire.Shard(b, n) }

// SteeringProgram is the classic BPF program that makes SteerShard's choice in the
// kernel for a SO_REUSEPORT group of n listen sockets. It runs with the UDP payload at
// offset 0 and returns the socket's index in the group (the order they were bound).
func SteeringProgram(n int) []bpf.Instruction {
	returned := uint32(wire.FlagTrimmed | wire.FlagReturned)
	return []bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtLen},                                         // 0: A = payload length
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: wire.CommonLen, SkipTrue: 1}, // 1
		bpf.RetConstant{Val: 0},                                                    // 2: short: shard 0
		bpf.LoadAbsolute{Off: 0, Size: 1},                                          // 3: version and type
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.Version<<4 | uint32(wire.TypeData), SkipTrue: 5}, // 4: -> 10
		bpf.LoadAbsolute{Off: 1, Size: 1},                              // 5: flags
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: returned},             // 6
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: returned, SkipTrue: 2}, // 7: -> 10
		bpf.LoadAbsolute{Off: offSrcConn + 7, Size: 1},                 // 8: returned: our ID's low byte
		bpf.Jump{Skip: 7},                                       // 9: -> 17
		bpf.LoadAbsolute{Off: offDstConn, Size: 4},              // 10: DstConn high half
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 4}, // 11: -> 16
		bpf.LoadAbsolute{Off: offDstConn + 4, Size: 4},          // 12: DstConn low half
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 2}, // 13: -> 16
		bpf.LoadAbsolute{Off: offSrcConn, Size: 1},              // 14: DstConn 0: SrcConn high byte
		bpf.Jump{Skip: 1},                                       // 15: -> 17
		bpf.LoadAbsolute{Off: offDstConn + 7, Size: 1},          // 16: DstConn low byte
		bpf.ALUOpConstant{Op: bpf.ALUOpMod, Val: uint32(n)},     // 17
		bpf.RetA{}, // 18
	}
}

// attachSteering attaches SteeringProgram(n) to c's listen socket, and so to its
// SO_REUSEPORT group.
func (c *Conn) attachSteering(n int) error {
	raw, err := bpf.Assemble(SteeringProgram(n))
	if err != nil {
		return fmt.Errorf("assemble steering program: %w", err)
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	var serr error
	if err := c.rx.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_ATTACH_REUSEPORT_CBPF: %w", serr)
	}
	return nil
}

// OpenShards opens n socket layers of cfg, one per engine shard, sharing the listen port
// and the EV ports (SO_REUSEPORT), each with its own sockets. With steering SteerCBPF the
// kernel gives each datagram to the shard SteerShard names (shard i is the i-th Conn);
// with SteerHash it spreads them by its 4-tuple hash. n = 1 is Open(cfg). The AF_XDP
// datapath has one XDP socket per queue and no such group: it is refused with n > 1.
func OpenShards(cfg Config, n int, steering string) ([]*Conn, error) {
	if n < 1 || n > MaxShards {
		return nil, fmt.Errorf("udp: OpenShards: %d shards: allowed range is 1..%d", n, MaxShards)
	}
	if n == 1 {
		c, err := Open(cfg)
		if err != nil {
			return nil, err
		}
		return []*Conn{c}, nil
	}
	switch steering {
	case SteerCBPF, SteerHash:
	default:
		return nil, fmt.Errorf("udp: OpenShards: steering %q: allowed values are %q, %q", steering, SteerCBPF, SteerHash)
	}
	if cfg.Datapath == DatapathAFXDP {
		return nil, errors.New("udp: OpenShards: the afxdp datapath takes one shard (Config.Datapath)")
	}
	if cfg.Datapath == DatapathAuto {
		cfg.Datapath = DatapathSockets // AF_XDP serves one shard
	}
	cfg.ReusePort = true
	if cfg.Listen.Port() == 0 && cfg.EVPortBase == 0 {
		cfg.ephemeralEV = true
	}
	conns := make([]*Conn, 0, n)
	fail := func(err error) ([]*Conn, error) {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	for i := 0; i < n; i++ {
		c, err := Open(cfg)
		if err != nil {
			return fail(fmt.Errorf("udp: shard %d of %d: %w", i, n, err))
		}
		conns = append(conns, c)
		if i == 0 {
			// Every shard binds the port the first one got (Listen port 0: ephemeral).
			cfg.Listen = netip.AddrPortFrom(cfg.Listen.Addr(), c.LocalAddr().Port())
		}
	}
	if steering == SteerCBPF {
		if err := conns[0].attachSteering(n); err != nil {
			return fail(fmt.Errorf("udp: shard steering (udp.shard_steering %q): %w; %q works without it", steering, err, SteerHash))
		}
	}
	return conns, nil
}
