package apitypes

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// The direct path between two sessions of one daemon: the daemon hands both clients the
// ends of a Unix socket pair, and they exchange messages over it without the daemon.

// DirectHeader, with the value "1" in the Upgrade request, offers the direct path (the
// client handles FrameDirectOK and FrameDirectPeer and takes descriptors with them); the
// daemon's 101 response carries it back when the session has it (version 2, a Unix socket).
const DirectHeader = "Smartt-Direct"

// Frames of the direct path (sessions that negotiated DirectHeader only).
const (
	// FrameDirect asks for the direct path to a destination: payload DirectReq. The
	// daemon answers with FrameDirectOK, same tag.
	FrameDirect = 0x09
	// FrameDirectOK answers FrameDirect: payload status u8 (Direct*), pair u64; with
	// DirectNew the pair's socket is passed with this frame (SCM_RIGHTS).
	FrameDirectOK = 0x8a
	// FrameDirectPeer (tag 0) tells the destination's session that a sender now writes
	// to it over a pair: payload DirectPeer; a pair new to this session comes with its
	// socket (SCM_RIGHTS). Messages of that sender over the pair come after every message
	// it sent through the daemon before.
	FrameDirectPeer = 0x8b
)

// Statuses of a FrameDirectOK.
const (
	DirectNew   = 0 // a new pair: its socket comes with this frame
	DirectKnown = 1 // the pair this session has already (from a FrameDirectPeer or FrameDirectOK)
	DirectRelay = 2 // no direct path to that destination: send through the daemon
)

// Payload lengths of the direct path's frames.
const (
	DirectReqLen  = 22 // address 16, port u16, endpoint u32
	DirectOKLen   = 9  // status u8, pair u64
	DirectPeerLen = 34 // pair u64, sender address 16, port u16, sender endpoint u32, our endpoint u32
	// DirectMsgLen is the header of a message on a pair: type u8 (DirectMsg), 7 zero
	// bytes, size u64 (1..MaxDirectMsg); the message's bytes follow.
	DirectMsgLen = 16
	DirectMsg    = 1
	MaxDirectMsg = 1 << 32
)

// AppendDirectReq appends a FrameDirect payload: the destination to and its endpoint ep.
func AppendDirectReq(b []byte, to netip.AddrPort, ep uint32) []byte {
	return binary.BigEndian.AppendUint32(appendAddr(b, to), ep)
}

// ParseDirectReq decodes a FrameDirect payload.
func ParseDirectReq(b []byte) (netip.AddrPort, uint32, error) {
	if len(b) != DirectReqLen {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: direct request of %d bytes", ErrPayload, len(b))
	}
	to, err := parseAddr(b)
	ep := binary.BigEndian.Uint32(b[18:])
	if err == nil && ep == 0 {
		err = fmt.Errorf("%w: endpoint 0", ErrPayload)
	}
	return to, ep, err
}

// AppendDirectOK appends a FrameDirectOK payload.
func AppendDirectOK(b []byte, status uint8, pair uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, status), pair)
}

// ParseDirectOK decodes a FrameDirectOK payload.
func ParseDirectOK(b []byte) (status uint8, pair uint64, err error) {
	if len(b) != DirectOKLen || b[0] > DirectRelay {
		return 0, 0, fmt.Errorf("%w: direct answer of %d bytes", ErrPayload, len(b))
	}
	return b[0], binary.BigEndian.Uint64(b[1:]), nil
}

// DirectPeer is the payload of a FrameDirectPeer: the pair, and who writes to this
// session over it (as a message from it through the daemon would say).
type DirectPeer struct {
	Pair         uint64
	From         netip.AddrPort
	FromEndpoint uint32
	Endpoint     uint32
}

// Append appends the encoded payload to b.
func (d DirectPeer) Append(b []byte) []byte {
	b = appendAddr(binary.BigEndian.AppendUint64(b, d.Pair), d.From)
	b = binary.BigEndian.AppendUint32(b, d.FromEndpoint)
	return binary.BigEndian.AppendUint32(b, d.Endpoint)
}

// ParseDirectPeer decodes a FrameDirectPeer payload.
func ParseDirectPeer(b []byte) (DirectPeer, error) {
	if len(b) != DirectPeerLen {
		return DirectPeer{}, fmt.Errorf("%w: direct peer of %d bytes", ErrPayload, len(b))
	}
	from, err := parseAddr(b[8:])
	return DirectPeer{Pair: binary.BigEndian.Uint64(b), From: from,
		FromEndpoint: binary.BigEndian.Uint32(b[26:]), Endpoint: binary.BigEndian.Uint32(b[30:])}, err
}

// AppendDirectMsg appends the header of a message of size bytes on a pair.
func AppendDirectMsg(b []byte, size uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, DirectMsg, 0, 0, 0, 0, 0, 0, 0), size)
}

// ParseDirectMsg decodes the header of a message on a pair.
func ParseDirectMsg(b []byte) (uint64, error) {
	n := binary.BigEndian.Uint64(b[8:])
	if b[0] != DirectMsg || binary.BigEndian.Uint64(b[:8])&^(0xff<<56) != 0 || n == 0 || n > MaxDirectMsg {
		return 0, fmt.Errorf("%w: direct message header % x", ErrPayload, b[:DirectMsgLen])
	}
	return n, nil
}
