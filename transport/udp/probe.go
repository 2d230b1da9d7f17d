//go:build linux

package udp

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probe checks what setsockopt alone cannot tell, and switches off what does not work:
// whether recvmmsg/sendmmsg exist, and (by sending three packets over loopback between
// two throwaway sockets configured like the real ones) whether the TOS byte and the
// kernel timestamps really come back. It returns a one-line verdict for the log.
func (c *Conn) probe() string {
	if c.caps.Batch {
		fam := unix.AF_INET
		if c.v6 {
			fam = unix.AF_INET6
		}
		if fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err == nil {
			var h [1]unix.Mmsghdr
			_, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&h[0])), 1, unix.MSG_DONTWAIT, 0, 0)
			unix.Close(fd)
			if e == unix.ENOSYS {
				c.log.Warn("udp: kernel has no recvmmsg/sendmmsg; one datagram per system call")
				c.caps.Batch = false
			}
		}
	}
	if c.cfg.probing || !(c.caps.ECN || c.caps.RxTimestamps || c.caps.TxTimestamps) {
		return "skipped"
	}
	verdict, err := c.probeLoopback()
	if err != nil {
		// Without a working loopback the setsockopt results stand.
		c.log.Warn("udp: capability probe inconclusive; trusting setsockopt", "err", err)
		return "inconclusive"
	}
	return verdict
}

func (c *Conn) probeLoopback() (string, error) {
	lo := netip.MustParseAddr("127.0.0.1")
	if c.v6 {
		lo = netip.IPv6Loopback()
	}
	base := Config{Listen: netip.AddrPortFrom(lo, 0), EVS: 1, DataDSCP: c.cfg.DataDSCP, BatchSize: 4,
		DisableECN: !c.caps.ECN, DisableTimestamps: !c.caps.RxTimestamps && !c.caps.TxTimestamps,
		DisableBatch: !c.caps.Batch, DisableGSO: true, DisableGRO: true, Logger: c.log, probing: true}
	rxCfg, txCfg := base, base
	if c.caps.TxTimestamps {
		txCfg.TxTimestampEvery = 1
	}
	rx, err := Open(rxCfg)
	if err != nil {
		return "", err
	}
	defer rx.Close()
	tx, err := Open(txCfg)
	if err != nil {
		return "", err
	}
	defer tx.Close()

	const n = 3
	var bufs [n][16]byte
	pk := make([]Packet, n)
	for i := range pk {
		pk[i] = Packet{Buf: bufs[i][:], N: len(bufs[i]), Addr: rx.LocalAddr(), ECN: ECT0}
	}
	if k, err := tx.WriteBatch(pk); err != nil {
		if k == 0 && c.caps.TxTimestamps && errors.Is(err, unix.EINVAL) {
			// SCM_TS_OPT_ID needs Linux 6.13; without it the sampled send fails.
			c.log.Warn("udp: kernel refused per-packet TX timestamp IDs (SCM_TS_OPT_ID, Linux >= 6.13); no TX timestamps", "err", err)
			c.caps.TxTimestamps = false
			txCfg.TxTimestampEvery = 0
			tx.Close()
			if tx, err = Open(txCfg); err != nil {
				return "", err
			}
			defer tx.Close()
			if _, err := tx.WriteBatch(pk); err != nil {
				return "", fmt.Errorf("send over loopback: %w", err)
			}
		} else {
			return "", fmt.Errorf("send over loopback: %w", err)
		}
	}
	in := make([]Packet, n)
	for i := range in {
		in[i].Buf = make([]byte, 64)
	}
	var ect, stamped int
	// Enabling receive timestamps flips a kernel static key from a work queue, so the
	// first packets after it may carry none: give it up to 300 ms (a loaded host's work
	// queue can take that long; 10 rounds of 2 ms were not always enough).
	giveUp := time.Now().Add(300 * time.Millisecond)
	for round := 0; ; round++ {
		rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for got := 0; got < n; {
			k, err := rx.ReadBatch(in)
			if err != nil {
				return "", fmt.Errorf("receive over loopback: %w", err)
			}
			for _, p := range in[:k] {
				if p.ECN == ECT0 && p.DSCP == c.cfg.DataDSCP {
					ect++
				}
				if p.RxKernel {
					stamped++
				}
			}
			got += k
		}
		if stamped > 0 || !c.caps.RxTimestamps || time.Now().After(giveUp) {
			break
		}
		time.Sleep(2 * time.Millisecond)
		if _, err := tx.WriteBatch(pk); err != nil {
			return "", fmt.Errorf("send over loopback: %w", err)
		}
	}
	if c.caps.ECN && ect == 0 {
		c.log.Warn("udp: TOS byte does not survive loopback (IP_TOS/IPV6_TCLASS ignored); ECN off")
		c.caps.ECN = false
	}
	if c.caps.RxTimestamps && stamped == 0 {
		c.log.Warn("udp: no kernel receive timestamps arrived; receive times come from the user clock")
		c.caps.RxTimestamps = false
	}
	if c.caps.TxTimestamps {
		var st [n]TxStamp
		k := 0
		for deadline := time.Now().Add(200 * time.Millisecond); k == 0 && time.Now().Before(deadline); {
			k = tx.TxStamps(st[:])
			if k == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if k == 0 {
			c.log.Warn("udp: no kernel transmit timestamps came back from the error queue; TX timestamps off")
			c.caps.TxTimestamps = false
		}
	}
	return fmt.Sprintf("ok (ECN %d, RX stamps %d)", ect, stamped), nil
}
