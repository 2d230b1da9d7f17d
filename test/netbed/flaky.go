//go:build linux

package netbed

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Flaky makes a link lose packets in bursts, in both directions: time is cut into slots of
// about burst (a power of two of nanoseconds, at least 1us) and a hash of the slot number
// drops every packet of a fraction lossPct/100 of the slots. lossPct 0 heals the link.
// The loss is a share of time, not of packets: a sender that is not held back while its
// packets are dropped (no queue builds) sends more in bad slots and loses more than lossPct.
//
// It is a tc BPF classifier on the clsact egress hook of both ends (this kernel has no
// netem), so it composes with the tbf that sets the link's rate.
func (t *Testbed) Flaky(link string, lossPct float64, burst time.Duration) error {
	if lossPct < 0 || lossPct > 100 {
		return fmt.Errorf("flaky: loss %g%% out of range [0, 100]", lossPct)
	}
	if lossPct > 0 && (burst < time.Microsecond || burst > time.Minute) {
		return fmt.Errorf("flaky: burst %v out of range [1us, 1m]", burst)
	}
	i, err := t.linkByName(link)
	if err != nil {
		return err
	}
	for end, b := range []bool{false, true} {
		node, lk, err := t.end(i, b)
		if err != nil {
			return err
		}
		clsact := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: lk.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
		if err := t.nl[node].QdiscDel(clsact); err != nil && err != unix.ENOENT && err != unix.EINVAL {
			return fmt.Errorf("link %s: remove clsact: %w", link, err)
		}
		if lossPct == 0 {
			continue
		}
		if err := t.nl[node].QdiscAdd(clsact); err != nil {
			return fmt.Errorf("link %s: clsact: %w", link, err)
		}
		shift := bits.Len64(uint64(burst)) - 1
		fd, err := loadDropProg(uint32(lossPct/100*float64(math.MaxInt32)), shift, uint32(i*2+end)*0x9e3779b1)
		if err != nil {
			return fmt.Errorf("link %s: %w", link, err)
		}
		f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: lk.Attrs().Index, Parent: netlink.HANDLE_MIN_EGRESS,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1}, Fd: fd, Name: "smartt_flaky", DirectAction: true}
		err = t.nl[node].FilterAdd(f)
		unix.Close(fd) // the filter holds the program now
		if err != nil {
			return fmt.Errorf("link %s: bpf filter: %w", link, err)
		}
	}
	return nil
}

// loadDropProg loads a tc program that returns TC_ACT_SHOT when hash(ktime>>shift + seed)
// (31 bits) is below threshold, else TC_ACT_OK.
func loadDropProg(threshold uint32, shift int, seed uint32) (int, error) {
	type insn struct {
		code uint8
		regs uint8 // dst | src<<4
		off  int16
		imm  int32
	}
	const (
		r0, r1 = 0, 1
		mix    = 0x45d9f3b
	)
	prog := []insn{
		{0x85, 0, 0, 5},                         // call bpf_ktime_get_ns
		{0x77, r0, 0, int32(shift)},             // r0 >>= shift (64-bit): slot number
		{0x04, r0, 0, int32(seed & 0x7fffffff)}, // w0 += seed
		{0xbc, r0<<4 | r1, 0, 0},                // w1 = w0
		{0x74, r1, 0, 16},                       // w1 >>= 16
		{0xac, r1<<4 | r0, 0, 0},                // w0 ^= w1
		{0x24, r0, 0, mix},                      // w0 *= mix
		{0xbc, r0<<4 | r1, 0, 0},
		{0x74, r1, 0, 16},
		{0xac, r1<<4 | r0, 0, 0},
		{0x24, r0, 0, mix},
		{0xbc, r0<<4 | r1, 0, 0},
		{0x74, r1, 0, 16},
		{0xac, r1<<4 | r0, 0, 0},
		{0x54, r0, 0, 0x7fffffff},                    // w0 &= 0x7fffffff
		{0x35, r0, 2, int32(threshold & 0x7fffffff)}, // if r0 >= threshold goto pass
		{0xb7, r0, 0, 2},                             // r0 = TC_ACT_SHOT
		{0x95, 0, 0, 0},                              // exit
		{0xb7, r0, 0, 0},                             // pass: r0 = TC_ACT_OK
		{0x95, 0, 0, 0},
	}
	code := make([]byte, 8*len(prog))
	for i, in := range prog {
		code[8*i], code[8*i+1] = in.code, in.regs
		binary.LittleEndian.PutUint16(code[8*i+2:], uint16(in.off))
		binary.LittleEndian.PutUint32(code[8*i+4:], uint32(in.imm))
	}
	license := []byte("GPL\x00")
	logBuf := make([]byte, 4096)
	attr := struct {
		progType, insnCnt uint32
		insns, license    uint64
		logLevel, logSize uint32
		logBuf            uint64
		kernVersion, _    uint32
	}{progType: unix.BPF_PROG_TYPE_SCHED_CLS, insnCnt: uint32(len(prog)),
		insns: uint64(uintptr(unsafe.Pointer(&code[0]))), license: uint64(uintptr(unsafe.Pointer(&license[0]))),
		logLevel: 1, logSize: uint32(len(logBuf)), logBuf: uint64(uintptr(unsafe.Pointer(&logBuf[0])))}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		n := 0
		for n < len(logBuf) && logBuf[n] != 0 {
			n++
		}
		return -1, fmt.Errorf("load bpf drop program: %w: %s", errno, logBuf[:n])
	}
	return int(fd), nil
}
