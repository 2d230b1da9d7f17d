//go:build linux

package netbed

import (
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/config"
)

func (t *Testbed) linkByName(name string) (int, error) {
	i := t.Plan.LinkIndex(name)
	if i < 0 {
		return -1, fmt.Errorf("testbed %s has no link %q", t.Name, name)
	}
	return i, nil
}

// end returns the node and its netlink link for one end of link i.
func (t *Testbed) end(i int, bEnd bool) (int, netlink.Link, error) {
	l := t.Plan.Links[i]
	node, ifn := l.A, l.AIf
	if bEnd {
		node, ifn = l.B, l.BIf
	}
	lk, err := t.nl[node].LinkByName(ifn)
	if err != nil {
		return node, nil, fmt.Errorf("link %s: %s: %w", l.Name, t.Plan.Nodes[node].Name, err)
	}
	return node, lk, nil
}

// frameBytes is the largest frame a link carries (Ethernet header included).
func (t *Testbed) frameBytes() uint32 { return uint32(t.Plan.Spec.MTU) + 14 }

// tbfFor sizes a token bucket: a burst of at least two full frames or 1 ms at the rate, and
// a queue of 16 full frames or 1 ms at the rate beyond the burst. In emulated mode the
// queue is 4 MiB: the tbf there is only the host NIC's rate (the switches' port model
// does the queueing, marking and trimming), and a NIC does not drop what its host hands
// it; a full qdisc holds the sender back through its socket buffer instead of losing a
// burst of a window silently.
func (t *Testbed) tbfFor(idx int, rate config.Rate) *netlink.Tbf {
	bps := uint64(rate) / 8
	burst := max(2*t.frameBytes(), uint32(min(bps/1000, 1<<30)))
	if t.Plan.Spec.Mode == ModeEmulated {
		return &netlink.Tbf{
			QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate:       bps,
			Buffer:     netlink.Xmittime(bps, burst),
			Limit:      burst + 4<<20,
		}
	}
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       bps,
		Buffer:     netlink.Xmittime(bps, burst),
		Limit:      burst + max(16*t.frameBytes(), uint32(min(bps/1000, 1<<30))),
	}
}

// setRate shapes both directions of link i to rate with tbf (0 removes the shaping).
func (t *Testbed) setRate(i int, rate config.Rate) error {
	if rate < 0 {
		return fmt.Errorf("rate %d must not be negative", rate)
	}
	for _, b := range []bool{false, true} {
		node, lk, err := t.end(i, b)
		if err != nil {
			return err
		}
		idx := lk.Attrs().Index
		if rate == 0 {
			err = t.nl[node].QdiscDel(&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT}})
			if err != nil && err != unix.ENOENT && err != unix.EINVAL {
				return fmt.Errorf("link %s: remove tbf: %w", t.Plan.Links[i].Name, err)
			}
			continue
		}
		if err := t.nl[node].QdiscReplace(t.tbfFor(idx, rate)); err != nil {
			return fmt.Errorf("link %s: tbf %s: %w", t.Plan.Links[i].Name, rate, err)
		}
	}
	t.Plan.Links[i].Rate = rate
	return nil
}

// SetRate changes the rate of a link in both directions (a degraded link); 0 unshapes it.
func (t *Testbed) SetRate(link string, rate config.Rate) error {
	i, err := t.linkByName(link)
	if err != nil {
		return err
	}
	return t.setRate(i, rate)
}

// LinkDown fails a link at its upper end (the spine side of a leaf-spine link, the leaf side
// of a host link): that end is set administratively down, so the lower end loses carrier.
// The lower node's multipath routes skip the link (ignore_routes_with_linkdown); nodes
// further away are not told, as there is no routing protocol.
func (t *Testbed) LinkDown(link string) error {
	i, err := t.linkByName(link)
	if err != nil {
		return err
	}
	node, lk, err := t.end(i, true)
	if err != nil {
		return err
	}
	if err := t.nl[node].LinkSetDown(lk); err != nil {
		return fmt.Errorf("link %s down: %w", link, err)
	}
	return t.awaitCarrier(i, false)
}

// awaitCarrier waits until the lower end of link i has seen its carrier go (or come back)
// and its routes through the link say so: the kernel applies carrier changes from a work
// queue, so without waiting the first packets after a failure may still take the dead link.
func (t *Testbed) awaitCarrier(i int, up bool) error {
	node, lk, err := t.end(i, false)
	if err != nil {
		return err
	}
	idx := lk.Attrs().Index
	deadline := time.Now().Add(5 * time.Second)
	for {
		done := false
		if l, err := t.nl[node].LinkByIndex(idx); err == nil && (l.Attrs().OperState == netlink.OperUp) == up {
			done = true
			rs, err := t.nl[node].RouteList(nil, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r.LinkIndex == idx && (r.Flags&unix.RTNH_F_LINKDOWN == 0) != up {
					done = false
				}
				for _, nh := range r.MultiPath {
					if nh.LinkIndex == idx && (nh.Flags&unix.RTNH_F_LINKDOWN == 0) != up {
						done = false
					}
				}
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s: carrier still %v after 5s", t.Plan.Links[i].Name, !up)
		}
		time.Sleep(time.Millisecond)
	}
}

// LinkUp restores a failed link: both ends up, then the neighbours and routes the kernel
// dropped with the interface are installed again on both nodes.
func (t *Testbed) LinkUp(link string) error {
	i, err := t.linkByName(link)
	if err != nil {
		return err
	}
	l := t.Plan.Links[i]
	for _, b := range []bool{false, true} {
		node, lk, err := t.end(i, b)
		if err != nil {
			return err
		}
		if err := t.nl[node].LinkSetUp(lk); err != nil {
			return fmt.Errorf("link %s up: %w", link, err)
		}
	}
	for _, n := range []int{l.A, l.B} {
		if err := t.neighbours(n); err != nil {
			return err
		}
		if err := t.routes(n); err != nil {
			return err
		}
	}
	return t.awaitCarrier(i, true)
}

// Stats reads the counters of every interface (lo excepted) of node, in name order.
func (t *Testbed) Stats(node string) ([]IfStats, error) {
	n := t.Plan.NodeIndex(node)
	if n < 0 {
		return nil, fmt.Errorf("testbed %s has no node %q", t.Name, node)
	}
	lks, err := t.nl[n].LinkList()
	if err != nil {
		return nil, err
	}
	var out []IfStats
	for _, lk := range lks {
		a := lk.Attrs()
		if a.Name == "lo" || a.Statistics == nil {
			continue
		}
		s := a.Statistics
		out = append(out, IfStats{Node: node, If: a.Name, Up: a.Flags&net.FlagUp != 0, Carrier: a.OperState == netlink.OperUp,
			RxPackets: s.RxPackets, TxPackets: s.TxPackets, RxBytes: s.RxBytes, TxBytes: s.TxBytes,
			RxDropped: s.RxDropped, TxDropped: s.TxDropped, Errors: s.RxErrors + s.TxErrors})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].If < out[j].If })
	return out, nil
}

// RxPackets is the number of packets node received on all its interfaces: for a spine, the
// packets that took a path through it.
func (t *Testbed) RxPackets(node string) (uint64, error) {
	st, err := t.Stats(node)
	var sum uint64
	for _, s := range st {
		sum += s.RxPackets
	}
	return sum, err
}
