package mpifabric

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/nsenter"
)

// MgmtNode is the node name of the management namespace: smartt-<testbed>-mgmt, so the
// testbed's Down (and the next Up of the same name) removes it with the rest.
const MgmtNode = "mgmt"

// MgmtPrefix is the management network: host i is .(i+1), mpirun's namespace .254.
var MgmtPrefix = netip.MustParsePrefix("192.168.77.0/24")

// MgmtAddr is the management address of host i (0-based), or of mpirun's namespace for -1.
func MgmtAddr(i int) netip.Addr {
	b := MgmtPrefix.Addr().As4()
	if i < 0 {
		b[3] = 254
	} else {
		b[3] = byte(i + 1)
	}
	return netip.AddrFrom4(b)
}

// addMgmt builds the management network beside the fabric: a namespace with a bridge and
// one veth to every host ("mgmt0" there). Open MPI's launcher (mpirun and its orted
// daemons, ORTE's out-of-band TCP) talks over it, so a failed fabric link never cuts
// the job's control path, only its data. The fabric stays the only path between the
// hosts' eth0 addresses, which is where both providers send.
func addMgmt(tb *netbed.Testbed) error {
	if len(tb.Plan.Hosts()) > 250 {
		return fmt.Errorf("management network: %d hosts, at most 250", len(tb.Plan.Hosts()))
	}
	mh, err := nsenter.New(tb.Ns(MgmtNode))
	if err != nil {
		return err
	}
	defer mh.Close()
	m, err := netlink.NewHandleAt(mh)
	if err != nil {
		return err
	}
	defer m.Close()
	if lo, err := m.LinkByName("lo"); err != nil || m.LinkSetUp(lo) != nil {
		return fmt.Errorf("management namespace: lo up failed")
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := m.LinkAdd(br); err != nil {
		return fmt.Errorf("management bridge: %w", err)
	}
	if err := addrUp(m, "br0", MgmtAddr(-1)); err != nil {
		return err
	}
	bl, err := m.LinkByName("br0")
	if err != nil {
		return err
	}
	for i, n := range tb.Plan.Hosts() {
		port := fmt.Sprintf("m%d", i)
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: bl.Attrs().Index},
			PeerName: "mgmt0", PeerNamespace: netlink.NsFd(tb.NsHandle(n))}
		if err := m.LinkAdd(v); err != nil {
			return fmt.Errorf("management link of %s: %w", tb.Plan.Nodes[n].Name, err)
		}
		if err := addrUp(m, port, netip.Addr{}); err != nil {
			return err
		}
		h, err := netlink.NewHandleAt(tb.NsHandle(n))
		if err != nil {
			return err
		}
		err = addrUp(h, "mgmt0", MgmtAddr(i))
		h.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", tb.Plan.Nodes[n].Name, err)
		}
	}
	return nil
}

// addrUp gives interface name the address a in MgmtPrefix (none if a is not valid) and
// sets it up.
func addrUp(h *netlink.Handle, name string, a netip.Addr) error {
	lk, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if a.IsValid() {
		ipn := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(MgmtPrefix.Bits(), 32)}
		if err := h.AddrAdd(lk, &netlink.Addr{IPNet: ipn}); err != nil {
			return fmt.Errorf("%s: address %s: %w", name, a, err)
		}
	}
	if err := h.LinkSetUp(lk); err != nil {
		return fmt.Errorf("%s up: %w", name, err)
	}
	return nil
}
