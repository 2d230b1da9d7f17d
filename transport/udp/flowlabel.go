package udp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The IPv6 flow-label carrier: one send socket with IPV6_FLOWINFO_SEND on, so the flow
// label in each destination sockaddr (sin6_flowinfo) goes into the packet. Linux only
// sends labels the socket has leased through IPV6_FLOWLABEL_MGR, so Open leases labels
// 1..EVS (shareable, so several Conns in one namespace can use the same labels).

// maxFlowLabels is the kernel's flow-label table size (FL_MAX_SIZE).
const maxFlowLabels = 4096

// in6FlowlabelReq is struct in6_flowlabel_req of linux/in6.h.
type in6FlowlabelReq struct {
	Dst     [16]byte
	Label   uint32 // network byte order
	Action  uint8
	Share   uint8
	Flags   uint16
	Expires uint16
	Linger  uint16
	_       uint32
}

const (
	ipv6FlowlabelMgr = 32 // IPV6_FLOWLABEL_MGR
	ipv6FlowinfoSend = 33 // IPV6_FLOWINFO_SEND
	ipv6FlAGet       = 0  // IPV6_FL_A_GET
	ipv6FlFCreate    = 1  // IPV6_FL_F_CREATE
	ipv6FlSAny       = 255
)

func leaseFlowLabels(fd, n int) error {
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, ipv6FlowinfoSend, 1); err != nil {
		return fmt.Errorf("IPV6_FLOWINFO_SEND: %w", err)
	}
	for l := 1; l <= n; l++ {
		// The kernel wants a destination (not ::) and shares a label only between leases
		// of the same destination; sending does not check it, so every Conn uses ::1.
		req := in6FlowlabelReq{Dst: netip.IPv6Loopback().As16(), Action: ipv6FlAGet, Share: ipv6FlSAny, Flags: ipv6FlFCreate}
		binary.BigEndian.PutUint32((*[4]byte)(unsafe.Pointer(&req.Label))[:], uint32(l))
		_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_IPV6, ipv6FlowlabelMgr,
			uintptr(unsafe.Pointer(&req)), unsafe.Sizeof(req), 0)
		if e == unix.ENOBUFS && l > 32 {
			return fmt.Errorf("lease flow label %d of %d (IPV6_FLOWLABEL_MGR): %w: without CAP_NET_ADMIN the kernel leases at most 32 labels per socket; grant CAP_NET_ADMIN or set transport.evs <= 32", l, n, e)
		}
		if e != 0 {
			return fmt.Errorf("lease flow label %d of %d (IPV6_FLOWLABEL_MGR): %w", l, n, e)
		}
	}
	return nil
}
