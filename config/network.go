// Package config holds the typed parameters derived from the network a transport runs
// on (link rate, base RTT and MTU give the bandwidth-delay product congestion control
// scales its constants by), size/duration/rate units and strict YAML decoding.
package config

import (
	"errors"
	"fmt"
)

// ReferenceBDP is the bandwidth-delay product SMaRTT's constants were tuned for:
// 100 Gbit/s times 12 us, in bytes.
const ReferenceBDP = 150_000

// Network describes the path a connection runs over.
type Network struct {
	LinkRate int64 // bits per second
	BaseRTT  int64 // ns, RTT of an empty network
	MTU      int   // payload bytes per packet
}

// Validate checks the ranges.
func (n Network) Validate() error {
	var errs []error
	if n.LinkRate < 1_000_000 || n.LinkRate > 10_000_000_000_000 {
		errs = append(errs, fmt.Errorf("link_rate = %d bit/s: must be in 1e6..1e13", n.LinkRate))
	}
	if n.BaseRTT < 100 || n.BaseRTT > 1_000_000_000 {
		errs = append(errs, fmt.Errorf("base_rtt = %d ns: must be in 100..1e9", n.BaseRTT))
	}
	if n.MTU < 64 || n.MTU > 65535 {
		errs = append(errs, fmt.Errorf("mtu = %d bytes: must be in 64..65535", n.MTU))
	}
	return errors.Join(errs...)
}

// BDP returns the bandwidth-delay product in bytes.
func (n Network) BDP() int64 { return n.LinkRate / 8 * n.BaseRTT / 1_000_000_000 }

// SerializationTime returns how long bytes take to leave at the link rate, ns.
func (n Network) SerializationTime(bytes int) int64 {
	return int64(bytes) * 8 * 1_000_000_000 / n.LinkRate
}
