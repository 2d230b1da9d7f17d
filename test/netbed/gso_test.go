package netbed

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestEmulatedGSO: a host sending with UDP GSO (one sendmsg of 15 segments of 4 KiB, as
// the daemon's socket layer does with consecutive packets of one EV) puts 15 wire-size
// frames on its link, so the userspace switch forwards all of them and truncates none.
// Without the host links' gso_max_segs of 1 the 60 KiB super-frame crossed the veth whole
// and the switch dropped it as longer than its largest frame.
func TestEmulatedGSO(t *testing.T) {
	const segs, seg = 15, 4096
	tb := upTestbed(t, Spec{Kind: KindStar, Mode: ModeEmulated, Hosts: 2})
	_, sws := runSwitches(t, tb, nil)
	rx := listen(t, tb, "h1", 9000)
	tx := dial(t, tb, "h0", 0, tb.Addr("h1"), 9000)
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = seg
	msg := make([]byte, segs*seg)
	// One send at a time, drained before the next, so the receiver's socket buffer (the
	// namespace's default size) never overflows.
	const sends = 4
	got := 0
	for i := 0; i < sends; i++ {
		if _, _, err := tx.WriteMsgUDP(msg, oob, nil); err != nil {
			t.Fatalf("GSO send: %v (the kernel must take UDP_SEGMENT for this test)", err)
		}
		got += drain(rx, segs, time.Second)
	}
	var trunc uint64
	for i := range tb.SwitchPorts(tb.Plan.NodeIndex("sw0")) {
		trunc += sws[0].Stats(i).Truncated
	}
	if got != sends*segs || trunc != 0 {
		t.Fatalf("%d of %d GSO segments arrived; the switch dropped %d frames as truncated", got, sends*segs, trunc)
	}
}
