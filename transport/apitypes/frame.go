// Package apitypes holds the types of smarttd's local API that clients see: the frames of
// the messaging protocol ("smartt-msg/1" and "smartt-msg/2") with their encoding, and the JSON bodies of the
// control endpoints (docs/api.md). It has no engine behind it, so a client that imports
// it (or transport/client) does not link the transport engine.
package apitypes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Protocol is the HTTP Upgrade token of the messaging protocol's first version.
const Protocol = "smartt-msg/1"

// ProtocolV2 is the Upgrade token of version 2: version 1 plus Cancel, CancelResult and
// Accepted frames.
const ProtocolV2 = "smartt-msg/2"

// ProtocolPrefix starts every Upgrade token of the messaging protocol; the version
// number follows it.
const ProtocolPrefix = "smartt-msg/"

// MaxVersion is the highest protocol version this package speaks.
const MaxVersion = 2

// VersionHeader, in the daemon's 101 response, names the negotiated protocol version
// (decimal).
const VersionHeader = "Smartt-Version"

// Frame types. Client to daemon: Bind, Send, Data, SendFD, RecvRing, Release, WantSent,
// Cancel (version 2). Daemon to client: Bound, Sent, Failed, Recv, Data, Error, RingOK,
// RecvAt, Accepted and CancelResult (version 2).
const (
	FrameBind   = 0x01 // payload: endpoint u32 (0: the daemon picks one)
	FrameSend   = 0x02 // payload: SendHeader; then Data frames with the same tag
	FrameData   = 0x03 // payload: the next bytes of the message named by tag
	FrameSendFD = 0x04 // payload: SendHeader; the message is in a sealed memfd passed with this frame (SCM_RIGHTS)
	// FrameRecvRing asks for the shared-memory receive ring: payload ring size u64 and,
	// to a daemon that says RecvRingHeader, optionally the smallest message for the ring
	// u64 (smaller ones come over the socket); the memfd (sealed against shrinking and
	// growing) is passed with this frame (SCM_RIGHTS).
	FrameRecvRing = 0x05
	// FrameRelease gives ring messages back: payload 1..MaxReleaseTags tags u32 of
	// RecvAt frames; tag 0.
	FrameRelease = 0x06
	// FrameWantSent says the client waits for the outcome of its message tag: with lazy
	// Sent frames (LazySentHeader) the daemon writes the Sent frames it holds at once, and
	// that message's when it completes. No payload.
	FrameWantSent = 0x07
	// FrameCancel (version 2) asks the daemon to cancel the message named by tag; empty
	// payload. The daemon answers with FrameCancelResult.
	FrameCancel = 0x08
	FrameBound  = 0x81 // payload: endpoint u32
	FrameSent   = 0x82 // payload: SentInfo
	FrameFailed = 0x83 // payload: UTF-8 reason
	FrameRecv   = 0x84 // payload: RecvHeader; then Data frames with the same tag
	FrameError  = 0x85 // payload: code u16, UTF-8 text; tag names the request
	FrameRingOK = 0x86 // payload: ring size u64; the reply to RecvRing
	FrameRecvAt = 0x87 // payload: RecvAt; the message is in the receive ring (no Data frames)
	// FrameAccepted (version 2): the daemon holds the bytes of the message named by tag;
	// the client may reuse its buffer. Empty payload; Sent or Failed follows.
	FrameAccepted = 0x88
	// FrameCancelResult (version 2) answers FrameCancel: payload one status byte
	// (CancelCancelled, CancelInFlight, CancelUnknown).
	FrameCancelResult = 0x89
)

// Statuses of a CancelResult frame.
const (
	CancelCancelled = 0 // the message had not started; its Failed frame ("cancelled") follows
	CancelInFlight  = 1 // too late: its Sent or Failed follows as usual
	CancelUnknown   = 2 // no message with that tag is outstanding (unknown or already completed)
)

// CancelledReason is the text of the Failed frame of a cancelled message.
const CancelledReason = "cancelled"

// LazySentHeader, with the value "1" in the session's Upgrade request, asks the daemon to
// hold Sent frames until it writes something else to the client, the client waits for
// one (FrameWantSent) or a millisecond passed; the daemon's 101 response carries it back
// when it does so.
const LazySentHeader = "Smartt-Lazy-Sent"

// SendFDHeader, with the value "1" in the daemon's 101 response, says the session takes
// SendFD frames (it is on a Unix socket): a client may then pass large messages as sealed
// memfds instead of streaming them.
const SendFDHeader = "Smartt-SendFD"

// RecvRingHeader, in the daemon's 101 response, says the session takes RecvRing frames
// and the largest ring it maps (api.max_recv_ring, decimal bytes): a client may then set
// up a receive ring unasked (the Go client does when large messages arrive), and that it
// takes a RecvRing payload with the smallest message for the ring. Absent when rings are
// off or the session cannot pass descriptors (and from daemons before it).
const RecvRingHeader = "Smartt-Recv-Ring"

// HeaderLen is the length of a frame header: type u8, flags u8, reserved u16, tag u32,
// payload length u32, big-endian.
const HeaderLen = 12

// MaxPayload is the largest frame payload; messages travel in Data frames of at most
// this many bytes.
const MaxPayload = 1 << 20

// Tags: a client numbers its Bind and Send requests from 1; the daemon's replies carry
// the request's tag; Recv frames carry the daemon's own sequence number; an Error frame
// with tag 0 is not a reply (dropped received messages, or a protocol error, a timeout or
// an eviction before the daemon closes the session).

// Header is a frame header.
type Header struct {
	Type uint8
	Tag  uint32 // request / message token chosen by the sender of the first frame
	Len  uint32 // payload bytes that follow
}

// Framing errors.
var (
	ErrFrameType     = errors.New("api: unknown frame type")
	ErrFrameReserved = errors.New("api: reserved header bits set")
	ErrFrameLen      = errors.New("api: frame payload too long")
	ErrPayload       = errors.New("api: malformed frame payload")
	// ErrDestination is a well-formed Send frame whose destination cannot be sent to: the
	// daemon refuses that message only (code 10), the session goes on.
	ErrDestination = errors.New("bad destination")
)

// AppendHeader appends h to b.
func AppendHeader(b []byte, h Header) []byte {
	b = append(b, h.Type, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, h.Tag)
	return binary.BigEndian.AppendUint32(b, h.Len)
}

// ParseHeader decodes and checks a frame header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, io.ErrUnexpectedEOF
	}
	h := Header{Type: b[0], Tag: binary.BigEndian.Uint32(b[4:]), Len: binary.BigEndian.Uint32(b[8:])}
	switch h.Type {
	case FrameBind, FrameSend, FrameData, FrameSendFD, FrameRecvRing, FrameRelease, FrameWantSent, FrameCancel,
		FrameBound, FrameSent, FrameFailed, FrameRecv, FrameError, FrameRingOK, FrameRecvAt, FrameAccepted, FrameCancelResult,
		FrameDirect, FrameDirectOK, FrameDirectPeer:
	default:
		return h, fmt.Errorf("%w 0x%02x", ErrFrameType, h.Type)
	}
	if b[1] != 0 || b[2] != 0 || b[3] != 0 {
		return h, ErrFrameReserved
	}
	if h.Len > MaxPayload {
		return h, fmt.Errorf("%w: %d > %d bytes", ErrFrameLen, h.Len, MaxPayload)
	}
	return h, nil
}

// SendHeaderLen is the payload length of a Send frame.
const SendHeaderLen = 30

// SendHeader starts a message: where it goes and how long it is.
type SendHeader struct {
	To       netip.AddrPort // the peer daemon's address and port
	Endpoint uint32         // the endpoint bound at the peer
	Size     uint64         // message bytes, sent in Data frames after this one
}

// RecvHeaderLen is the payload length of a Recv frame.
const RecvHeaderLen = 34

// RecvHeader starts a received message.
type RecvHeader struct {
	From         netip.AddrPort // the sending daemon
	FromEndpoint uint32         // the sender's endpoint
	Endpoint     uint32         // our endpoint it was sent to
	Size         uint64
}

// RecvAtLen is the payload length of a RecvAt frame.
const RecvAtLen = RecvHeaderLen + 8

// MaxReleaseTags is the most tags one Release frame may carry.
const MaxReleaseTags = 64

// RecvAt announces a received message the daemon copied into the session's receive ring:
// its Size bytes start at Offset in the ring. The client gives the space back with a
// Release frame naming the RecvAt frame's tag.
type RecvAt struct {
	RecvHeader
	Offset uint64
}

// Append appends the encoded descriptor to b.
func (r RecvAt) Append(b []byte) []byte {
	return binary.BigEndian.AppendUint64(r.RecvHeader.Append(b), r.Offset)
}

// ParseRecvAt decodes a RecvAt payload.
func ParseRecvAt(b []byte) (RecvAt, error) {
	if len(b) != RecvAtLen {
		return RecvAt{}, fmt.Errorf("%w: recv-at descriptor of %d bytes, want %d", ErrPayload, len(b), RecvAtLen)
	}
	h, err := ParseRecvHeader(b[:RecvHeaderLen])
	if err != nil {
		return RecvAt{}, err
	}
	return RecvAt{RecvHeader: h, Offset: binary.BigEndian.Uint64(b[RecvHeaderLen:])}, nil
}

// AppendSize encodes the payload of a RecvRing or RingOK frame.
func AppendSize(b []byte, size uint64) []byte { return binary.BigEndian.AppendUint64(b, size) }

// AppendRecvRing appends a RecvRing payload: the ring's size and, when min > 0, the
// smallest message the daemon is to put in the ring (smaller ones come over the socket).
// Send a min only to a daemon that said RecvRingHeader: older daemons take 8 bytes.
func AppendRecvRing(b []byte, size, min uint64) []byte {
	b = AppendSize(b, size)
	if min > 0 {
		b = AppendSize(b, min)
	}
	return b
}

// ParseRecvRing decodes a RecvRing payload: the ring's size, and the smallest message
// for the ring (0 when the payload has only the size).
func ParseRecvRing(b []byte) (size, min uint64, err error) {
	switch len(b) {
	case 8:
		return binary.BigEndian.Uint64(b), 0, nil
	case 16:
		return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), nil
	}
	return 0, 0, fmt.Errorf("%w: RecvRing payload of %d bytes, want 8 (size) or 16 (size, smallest message)", ErrPayload, len(b))
}

// ParseSize decodes the payload of a RingOK frame.
func ParseSize(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: size of %d bytes, want 8", ErrPayload, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// AppendRelease appends a Release payload naming tags to b.
func AppendRelease(b []byte, tags ...uint32) []byte {
	for _, t := range tags {
		b = binary.BigEndian.AppendUint32(b, t)
	}
	return b
}

// ParseRelease checks a Release payload (1..MaxReleaseTags tags) and returns how many
// tags it holds; ReleaseTag reads the i-th.
func ParseRelease(b []byte) (int, error) {
	if len(b) == 0 || len(b)%4 != 0 || len(b) > 4*MaxReleaseTags {
		return 0, fmt.Errorf("%w: release of %d bytes, want 4..%d in steps of 4", ErrPayload, len(b), 4*MaxReleaseTags)
	}
	return len(b) / 4, nil
}

// ReleaseTag returns the i-th tag of a Release payload.
func ReleaseTag(b []byte, i int) uint32 { return binary.BigEndian.Uint32(b[4*i:]) }

// SentInfoLen is the payload length of a Sent frame.
const SentInfoLen = 32

// SentInfo reports a delivered message.
type SentInfo struct {
	Elapsed    time.Duration // from the daemon accepting the message to its last acknowledgement (on the wire: u64 ns)
	SRTT       time.Duration // smoothed RTT of the connection at completion (on the wire: u64 ns)
	Window     int64         // congestion window at completion, bytes
	Retransmit uint64        // retransmissions of the daemon while the message was outstanding
}

func appendAddr(b []byte, a netip.AddrPort) []byte {
	ip := a.Addr().As16()
	b = append(b, ip[:]...)
	return binary.BigEndian.AppendUint16(b, a.Port())
}

func parseAddr(b []byte) (netip.AddrPort, error) {
	ip := netip.AddrFrom16([16]byte(b[:16])).Unmap()
	port := binary.BigEndian.Uint16(b[16:])
	if ip.IsUnspecified() || port == 0 {
		return netip.AddrPort{}, fmt.Errorf("%w: address %v port %d", ErrPayload, ip, port)
	}
	return netip.AddrPortFrom(ip, port), nil
}

// Append appends the encoded header to b.
func (s SendHeader) Append(b []byte) []byte {
	b = appendAddr(b, s.To)
	b = binary.BigEndian.AppendUint32(b, s.Endpoint)
	return binary.BigEndian.AppendUint64(b, s.Size)
}

// ParseSendHeader decodes a Send payload. A payload of the wrong length is malformed
// (ErrPayload); a destination nobody can be reached at (unspecified, multicast or
// broadcast address, port 0, endpoint 0) is an error wrapping ErrDestination, returned
// with the decoded header so that the message alone can be refused and skipped.
func ParseSendHeader(b []byte) (SendHeader, error) {
	if len(b) != SendHeaderLen {
		return SendHeader{}, fmt.Errorf("%w: send header of %d bytes, want %d", ErrPayload, len(b), SendHeaderLen)
	}
	ip := netip.AddrFrom16([16]byte(b[:16])).Unmap()
	s := SendHeader{To: netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[16:])),
		Endpoint: binary.BigEndian.Uint32(b[18:]), Size: binary.BigEndian.Uint64(b[22:])}
	var why string
	switch {
	case ip.IsUnspecified():
		why = "unspecified address"
	case ip.IsMulticast():
		why = "multicast address"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		why = "broadcast address"
	case s.To.Port() == 0:
		why = "port 0"
	case s.Endpoint == 0:
		why = "endpoint 0"
	default:
		return s, nil
	}
	return s, fmt.Errorf("%w %v endpoint %d: %s", ErrDestination, s.To, s.Endpoint, why)
}

// Append appends the encoded header to b.
func (r RecvHeader) Append(b []byte) []byte {
	b = appendAddr(b, r.From)
	b = binary.BigEndian.AppendUint32(b, r.FromEndpoint)
	b = binary.BigEndian.AppendUint32(b, r.Endpoint)
	return binary.BigEndian.AppendUint64(b, r.Size)
}

// ParseRecvHeader decodes a Recv payload.
func ParseRecvHeader(b []byte) (RecvHeader, error) {
	if len(b) != RecvHeaderLen {
		return RecvHeader{}, fmt.Errorf("%w: recv header of %d bytes, want %d", ErrPayload, len(b), RecvHeaderLen)
	}
	from, err := parseAddr(b)
	if err != nil {
		return RecvHeader{}, err
	}
	return RecvHeader{From: from, FromEndpoint: binary.BigEndian.Uint32(b[18:]),
		Endpoint: binary.BigEndian.Uint32(b[22:]), Size: binary.BigEndian.Uint64(b[26:])}, nil
}

// Append appends the encoded info to b.
func (s SentInfo) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(s.Elapsed))
	b = binary.BigEndian.AppendUint64(b, uint64(s.SRTT))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Window))
	return binary.BigEndian.AppendUint64(b, s.Retransmit)
}

// ParseSentInfo decodes a Sent payload.
func ParseSentInfo(b []byte) (SentInfo, error) {
	if len(b) != SentInfoLen {
		return SentInfo{}, fmt.Errorf("%w: sent info of %d bytes, want %d", ErrPayload, len(b), SentInfoLen)
	}
	return SentInfo{Elapsed: time.Duration(binary.BigEndian.Uint64(b)), SRTT: time.Duration(binary.BigEndian.Uint64(b[8:])),
		Window: int64(binary.BigEndian.Uint64(b[16:])), Retransmit: binary.BigEndian.Uint64(b[24:])}, nil
}

// ParseEndpoint decodes a Bind or Bound payload.
func ParseEndpoint(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("%w: endpoint of %d bytes, want 4", ErrPayload, len(b))
	}
	return binary.BigEndian.Uint32(b), nil
}

// Error codes of Error frames.
const (
	CodeProtocol     = 1  // malformed or unexpected frame; the daemon closes the session
	CodeNotBound     = 2  // Send before Bind
	CodeBound        = 3  // endpoint already bound (by this or another client)
	CodeTooLarge     = 4  // message size 0 or above the limit
	CodeOutstanding  = 5  // the client's outstanding bytes would exceed the limit
	CodeShuttingDown = 6  // the daemon is shutting down
	CodeRecvOverflow = 7  // a received message was dropped: the client's receive queue was full
	CodeSend         = 8  // the engine refused the message (text says why)
	CodeFD           = 9  // a SendFD descriptor is not a sealed memfd of the announced size
	CodeDestination  = 10 // the Send's destination cannot be sent to (unspecified, multicast, port or endpoint 0)
	CodeClosed       = 11 // (tag 0) the daemon closes the session: a frame stalled past api.read_timeout, or idle and evicted
	CodeRing         = 12 // a RecvRing request refused: rings off, size beyond api.max_recv_ring, a bad memfd, or a ring already set
)

// EnvelopeLen is the length of the header the daemon puts in front of every message it
// sends to a peer daemon: magic "sM", version 1, reserved, destination endpoint, source
// endpoint.
const EnvelopeLen = 12

// FDHeadroom is the space a SendFD memfd keeps free before the message: the daemon writes
// its envelope there (into a private copy of the first page), so the message itself is
// sent from the client's pages without a copy.
const FDHeadroom = EnvelopeLen

// AppendEndpointPayload encodes the payload of a Bind or Bound frame.
func AppendEndpointPayload(ep uint32) []byte {
	return binary.BigEndian.AppendUint32(nil, ep)
}

// AppendError appends an Error payload to b.
func AppendError(b []byte, code uint16, text string) []byte {
	b = binary.BigEndian.AppendUint16(b, code)
	return append(b, text...)
}

// ParseError decodes an Error payload.
func ParseError(b []byte) (uint16, string, error) {
	if len(b) < 2 {
		return 0, "", fmt.Errorf("%w: error payload of %d bytes", ErrPayload, len(b))
	}
	return binary.BigEndian.Uint16(b), string(b[2:]), nil
}

// ParseVersions reads the Upgrade header of a session request: the messaging protocol
// versions it lists (comma-separated tokens "smartt-msg/N"), in the order given. Other
// tokens are skipped.
func ParseVersions(upgrade string) []int {
	var vs []int
	for _, tok := range strings.Split(upgrade, ",") {
		tok = strings.TrimSpace(tok)
		if !strings.HasPrefix(tok, ProtocolPrefix) {
			continue
		}
		v, err := strconv.Atoi(tok[len(ProtocolPrefix):])
		if err != nil || v < 1 || v > 1<<16 {
			continue
		}
		vs = append(vs, v)
	}
	return vs
}

// VersionToken is the Upgrade token of protocol version v.
func VersionToken(v int) string { return ProtocolPrefix + strconv.Itoa(v) }
