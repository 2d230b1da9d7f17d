// Package dgram holds the one datagram type from the socket to the engine's driver:
// transport/udp reads and writes batches of it, and transport/daemon hands the same
// values to the engine, so nothing is copied between the layers.
package dgram

import "net/netip"

// Packet is one datagram of a batch, in a caller-owned buffer.
type Packet struct {
	Buf      []byte         // storage; on read len(Buf) is the capacity offered; data is Buf[:N]
	N        int            // read: datagram length; write: bytes of Buf to send
	Addr     netip.AddrPort // read: source; write: destination
	EV       uint16         // write: entropy value -> source port EVPortBase + EV mod EVS (flowlabel carrier: label EV mod EVS + 1)
	ECN      uint8          // read: ECN bits of the IP header; write: codepoint to send (ECT(0)=2 for data, 0 control)
	DSCP     uint8          // read: DSCP of the IP header
	Control  bool           // write: a control packet (ACK/NACK/...): the socket layer's control DSCP
	RxTime   int64          // read: receive time, Unix ns (CLOCK_REALTIME): the kernel's if RxKernel, else the user clock; 0 if none
	RxKernel bool           // read: RxTime is a kernel software timestamp
	TTL      uint8          // read: IP TTL or IPv6 hop limit (0: unknown)
	// Payload (write, when the socket gathers payloads) follows Buf[:N] in the same
	// datagram: the kernel gathers both (iovecs, also inside a GSO message), so a header
	// built in Buf can go out in front of bytes that stay where they are (a data packet's
	// payload left in its message's buffer). Only read during the call.
	Payload []byte
}
