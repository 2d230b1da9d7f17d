//go:build linux

package xsk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"unsafe"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// eBPF instruction encoding (linux/bpf.h, bpf_common.h).
type insn struct {
	code uint8
	regs uint8 // dst | src<<4
	off  int16
	imm  int32
}

const (
	ldxW   = 0x61 // BPF_LDX|BPF_MEM|BPF_W
	ldxH   = 0x69 // BPF_LDX|BPF_MEM|BPF_H
	ldxB   = 0x71 // BPF_LDX|BPF_MEM|BPF_B
	movX   = 0xbf // BPF_ALU64|BPF_MOV|BPF_X
	movK   = 0xb7 // BPF_ALU64|BPF_MOV|BPF_K
	addK   = 0x07 // BPF_ALU64|BPF_ADD|BPF_K
	andK   = 0x57 // BPF_ALU64|BPF_AND|BPF_K
	toBE   = 0xdc // BPF_ALU|BPF_END|BPF_TO_BE
	jgtX   = 0x2d // BPF_JMP|BPF_JGT|BPF_X
	jgtK   = 0x25
	jltK   = 0xa5
	jneK   = 0x55
	jneX   = 0x5d // BPF_JMP|BPF_JNE|BPF_X
	ldDW   = 0x18 // BPF_LD|BPF_IMM|BPF_DW: a 64-bit immediate in two instructions
	call   = 0x85
	exit   = 0x95
	mapFD  = 1  // BPF_PSEUDO_MAP_FD: ldDW's immediate is a map descriptor
	xdpAct = 2  // XDP_PASS
	redir  = 51 // bpf_redirect_map
)

func r(dst, src uint8) uint8 { return dst | src<<4 }

// program is the XDP program: UDP over IPv4 (no IP options, not a fragment) to a
// destination port in [lo, hi] (and, when dst is valid, to the IPv4 address dst) goes to
// the AF_XDP socket of its RX queue in the XSKMAP (or on to the kernel if that queue has
// none); everything else (ARP, ICMP, IPv6, other ports, other addresses such as another
// of the interface's or the subnet broadcast) goes on to the kernel. R1 is the xdp_md
// context: data at 0, data_end at 4, rx_queue_index at 16.
func program(lo, hi uint16, dst netip.Addr, mapfd int) []insn {
	var p []insn
	var toPass []int // instructions that jump to "pass"
	j := func(code, reg uint8, imm int32) {
		toPass = append(toPass, len(p))
		p = append(p, insn{code: code, regs: r(reg, 0), imm: imm})
	}
	p = append(p,
		insn{code: movX, regs: r(6, 1)},          // r6 = ctx
		insn{code: ldxW, regs: r(2, 1), off: 0},  // r2 = data
		insn{code: ldxW, regs: r(3, 1), off: 4},  // r3 = data_end
		insn{code: movX, regs: r(4, 2)},          // r4 = data
		insn{code: addK, regs: r(4, 0), imm: 42}) // r4 += Ethernet+IPv4+UDP
	toPass = append(toPass, len(p))
	p = append(p, insn{code: jgtX, regs: r(4, 3)}, // shorter: pass (verifier: bounds r2+42)
		insn{code: ldxH, regs: r(5, 2), off: 12}) // r5 = EtherType (network order)
	j(jneK, 5, 0x0008)                                      // not 0x0800: pass
	p = append(p, insn{code: ldxB, regs: r(5, 2), off: 14}) // r5 = version/IHL
	j(jneK, 5, 0x45)                                        // not IPv4 without options: pass
	p = append(p, insn{code: ldxB, regs: r(5, 2), off: 23}) // r5 = protocol
	j(jneK, 5, 17)                                          // not UDP: pass
	p = append(p, insn{code: ldxH, regs: r(5, 2), off: 20}, // r5 = flags/fragment offset
		insn{code: andK, regs: r(5, 0), imm: 0xff3f}) // MF | offset (byte-swapped 0x3fff)
	j(jneK, 5, 0) // a fragment: pass
	if dst.Is4() {
		a := dst.As4()
		p = append(p, insn{code: ldxW, regs: r(5, 2), off: 30}, // r5 = IPv4 destination (memory order)
			insn{code: ldDW, regs: r(7, 0), imm: int32(binary.NativeEndian.Uint32(a[:]))}, insn{}) // r7 = ours
		toPass = append(toPass, len(p))
		p = append(p, insn{code: jneX, regs: r(5, 7)}) // another address: pass
	}
	p = append(p, insn{code: ldxH, regs: r(5, 2), off: 36}, // r5 = UDP destination port
		insn{code: toBE, regs: r(5, 0), imm: 16}) // to host order
	j(jltK, 5, int32(lo))                                   // below the range: pass
	j(jgtK, 5, int32(hi))                                   // above: pass
	p = append(p, insn{code: ldxW, regs: r(2, 6), off: 16}, // r2 = key = rx_queue_index
		insn{code: ldDW, regs: r(1, mapFD), imm: int32(mapfd)}, insn{}, // r1 = &xskmap
		insn{code: movK, regs: r(3, 0), imm: xdpAct}, // r3 = action if the queue has no socket: pass
		insn{code: call, imm: redir},                 // r0 = bpf_redirect_map(r1, r2, r3)
		insn{code: exit})
	pass := len(p)
	p = append(p, insn{code: movK, regs: r(0, 0), imm: xdpAct}, // pass: r0 = XDP_PASS
		insn{code: exit})
	for _, i := range toPass {
		p[i].off = int16(pass - i - 1)
	}
	return p
}

// Program is the loaded XDP program with its XSKMAP, attached to one interface.
type Program struct {
	prog, xsks int
	nls        *nl.SocketHandle // netlink socket of the interface's namespace, for detaching
	ifindex    int
	flags      int
	Mode       string // "native" or "generic": how the program is attached
}

// Attach modes for AttachMode.
const (
	ModeAuto    = ""        // native where the driver has it, else generic
	ModeNative  = "native"  // XDP_FLAGS_DRV_MODE only
	ModeGeneric = "generic" // XDP_FLAGS_SKB_MODE only (any driver, slower)
)

// Attach loads the program for UDP destination ports lo..hi with an XSKMAP of queues
// entries and attaches it to the interface ifindex of the calling thread's network
// namespace: native XDP where the driver has it, else generic (skb) XDP. It refuses to
// replace a program already attached. Close detaches it (from any thread).
func Attach(ifindex int, lo, hi uint16, queues int) (*Program, error) {
	return AttachMode(ifindex, lo, hi, queues, ModeAuto)
}

// AttachMode is Attach in one mode (ModeNative, ModeGeneric) or ModeAuto.
func AttachMode(ifindex int, lo, hi uint16, queues int, mode string) (*Program, error) {
	return AttachTo(ifindex, netip.Addr{}, lo, hi, queues, mode)
}

// AttachTo is AttachMode for datagrams to the IPv4 address dst only (if valid): those to
// another address (another of the interface's, the subnet broadcast) go on to the kernel.
func AttachTo(ifindex int, dst netip.Addr, lo, hi uint16, queues int, mode string) (*Program, error) {
	if mode != ModeAuto && mode != ModeNative && mode != ModeGeneric {
		return nil, fmt.Errorf("xsk: attach mode %q: allowed %q, %q or %q (auto)", mode, ModeNative, ModeGeneric, ModeAuto)
	}
	if lo > hi || queues < 1 {
		return nil, fmt.Errorf("xsk: Attach ports %d..%d, %d queues: need lo <= hi and queues >= 1", lo, hi, queues)
	}
	p := &Program{prog: -1, xsks: -1, ifindex: ifindex}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	// Bound to this thread's namespace, so Close detaches there whichever thread runs it.
	sock, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("xsk: netlink: %w", err)
	}
	p.nls = &nl.SocketHandle{Socket: sock}
	if p.xsks, err = mapCreate(queues); err != nil {
		return nil, explain("bpf", err)
	}
	if p.prog, err = progLoad(program(lo, hi, dst, p.xsks)); err != nil {
		return nil, err
	}
	var errs []error
	for _, m := range []struct {
		flags int
		name  string
	}{{unix.XDP_FLAGS_DRV_MODE, ModeNative}, {unix.XDP_FLAGS_SKB_MODE, ModeGeneric}} {
		if mode != ModeAuto && mode != m.name {
			continue
		}
		f := m.flags | unix.XDP_FLAGS_UPDATE_IF_NOEXIST
		if err := p.setXDP(p.prog, f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
			continue
		}
		p.flags, p.Mode = f, m.name
		ok = true
		return p, nil
	}
	e := explain("attach", errors.Join(errs...))
	if errors.Is(errs[len(errs)-1], unix.EBUSY) || errors.Is(errs[len(errs)-1], unix.EEXIST) {
		e.Reason = "the interface already has an XDP program"
	}
	return nil, e
}

// setXDP is netlink's LinkSetXdpFdWithFlags on our own socket (IFLA_XDP in RTM_SETLINK).
func (p *Program) setXDP(fd, flags int) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: p.nls}
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(p.ifindex)
	req.AddData(msg)
	attrs := nl.NewRtAttr(unix.IFLA_XDP|unix.NLA_F_NESTED, nil)
	attrs.AddRtAttr(nl.IFLA_XDP_FD, nl.Uint32Attr(uint32(int32(fd))))
	attrs.AddRtAttr(nl.IFLA_XDP_FLAGS, nl.Uint32Attr(uint32(flags)))
	req.AddData(attrs)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// Register makes the program send queue's packets to s.
func (p *Program) Register(queue int, s *Socket) error {
	k, v := uint32(queue), uint32(s.FD())
	attr := struct {
		fd         uint32
		_          uint32
		key, value uint64
		flags      uint64
	}{fd: uint32(p.xsks), key: uint64(uintptr(unsafe.Pointer(&k))), value: uint64(uintptr(unsafe.Pointer(&v)))}
	_, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_UPDATE_ELEM, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(&k)
	runtime.KeepAlive(&v)
	if e != 0 {
		return explain("bpf", fmt.Errorf("XSKMAP update queue %d: %w", queue, e))
	}
	return nil
}

// Close detaches the program from the interface (only in the mode it was attached) and
// frees it and its map.
func (p *Program) Close() error {
	var first error
	if p.Mode != "" {
		first = p.setXDP(-1, p.flags&^unix.XDP_FLAGS_UPDATE_IF_NOEXIST)
		p.Mode = ""
	}
	for _, fd := range []*int{&p.prog, &p.xsks} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	if p.nls != nil {
		p.nls.Socket.Close()
		p.nls = nil
	}
	return first
}

func mapCreate(entries int) (int, error) {
	attr := struct{ typ, keySize, valueSize, maxEntries, flags uint32 }{
		typ: unix.BPF_MAP_TYPE_XSKMAP, keySize: 4, valueSize: 4, maxEntries: uint32(entries)}
	fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// progLoad loads an XDP program that may see multi-buffer frames (the verifier log comes
// back in the error).
func progLoad(prog []insn) (int, error) {
	license := []byte("GPL\x00")
	logBuf := make([]byte, 1<<16)
	attr := struct {
		progType, insnCnt uint32
		insns, license    uint64
		logLevel, logSize uint32
		logBuf            uint64
		kernVersion       uint32
		progFlags         uint32
	}{progType: unix.BPF_PROG_TYPE_XDP, insnCnt: uint32(len(prog)),
		insns: uint64(uintptr(unsafe.Pointer(&prog[0]))), license: uint64(uintptr(unsafe.Pointer(&license[0]))),
		logLevel: 1, logSize: uint32(len(logBuf)), logBuf: uint64(uintptr(unsafe.Pointer(&logBuf[0]))),
		progFlags: unix.BPF_F_XDP_HAS_FRAGS}
	fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(prog)
	runtime.KeepAlive(license)
	runtime.KeepAlive(logBuf)
	if e != 0 {
		log := string(logBuf[:clen(logBuf)])
		return -1, explain("bpf", fmt.Errorf("BPF_PROG_LOAD: %w; verifier: %s", e, log))
	}
	return int(fd), nil
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
