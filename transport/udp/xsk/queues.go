//go:build linux

package xsk

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels (linux/ethtool.h).
type ethtoolChannels struct {
	cmd                                     uint32
	maxRX, maxTX, maxOther, maxCombined     uint32
	rxCount, txCount, otherCount, combCount uint32
}

// ifreqData is struct ifreq with the ifr_data pointer of SIOCETHTOOL.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte // the rest of the union
}

// RxQueues returns how many receive queues the interface ifname uses (ethtool's channel
// counts: receive-only plus combined), in the calling thread's network namespace. An
// AF_XDP socket serves one queue: on an interface with more, what the NIC spreads to the
// others never reaches it.
func RxQueues(ifname string) (int, error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("xsk: interface name %q too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("xsk: socket for ethtool: %w", err)
	}
	defer unix.Close(fd)
	ch := &ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	ifr := &ifreqData{data: unsafe.Pointer(ch)}
	copy(ifr.name[:], ifname)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(ifr))); e != 0 {
		return 0, fmt.Errorf("xsk: ethtool channels of %s: %w", ifname, e)
	}
	return int(ch.rxCount + ch.combCount), nil
}
