// Package api is smarttd's local API over a Unix socket: HTTP/JSON for control (status,
// version, capabilities, connections, config, counters) and, after an HTTP Upgrade to
// "smartt-msg/2" (or "smartt-msg/1"), a framed binary protocol for messaging
// (docs/api.md). The types a client sees live in transport/apitypes (no engine behind
// them); this package re-exports them for the server's code.
package api

import (
	"encoding/binary"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// Protocol is the HTTP Upgrade token of the messaging protocol.
const Protocol = apitypes.Protocol

// Frame types (apitypes.Frame*).
const (
	FrameBind   = apitypes.FrameBind
	FrameSend   = apitypes.FrameSend
	FrameData   = apitypes.FrameData
	FrameSendFD = apitypes.FrameSendFD
	FrameBound  = apitypes.FrameBound
	FrameSent   = apitypes.FrameSent
	FrameFailed = apitypes.FrameFailed
	FrameRecv   = apitypes.FrameRecv
	FrameError  = apitypes.FrameError
	// FrameRecvRing and the rest: the shared-memory receive ring (ring.go).
	FrameRecvRing = apitypes.FrameRecvRing
	FrameRelease  = apitypes.FrameRelease
	FrameRingOK   = apitypes.FrameRingOK
	FrameRecvAt   = apitypes.FrameRecvAt
	FrameWantSent = apitypes.FrameWantSent
)

// Frame sizes (apitypes).
const (
	HeaderLen     = apitypes.HeaderLen
	MaxPayload    = apitypes.MaxPayload
	SendHeaderLen = apitypes.SendHeaderLen
	RecvHeaderLen = apitypes.RecvHeaderLen
	SentInfoLen   = apitypes.SentInfoLen
	FDHeadroom    = apitypes.FDHeadroom
	RecvAtLen     = apitypes.RecvAtLen
)

// RecvAt announces a message in the receive ring (apitypes.RecvAt).
type RecvAt = apitypes.RecvAt

// Error codes of Error frames (apitypes.Code*).
const (
	CodeProtocol     = apitypes.CodeProtocol
	CodeNotBound     = apitypes.CodeNotBound
	CodeBound        = apitypes.CodeBound
	CodeTooLarge     = apitypes.CodeTooLarge
	CodeOutstanding  = apitypes.CodeOutstanding
	CodeShuttingDown = apitypes.CodeShuttingDown
	CodeRecvOverflow = apitypes.CodeRecvOverflow
	CodeSend         = apitypes.CodeSend
	CodeFD           = apitypes.CodeFD
	CodeDestination  = apitypes.CodeDestination
	CodeClosed       = apitypes.CodeClosed
	CodeRing         = apitypes.CodeRing
)

// Header is a frame header.
type Header = apitypes.Header

// SendHeader starts a message.
type SendHeader = apitypes.SendHeader

// RecvHeader starts a received message.
type RecvHeader = apitypes.RecvHeader

// SentInfo reports a delivered message.
type SentInfo = apitypes.SentInfo

// Framing errors (apitypes).
var (
	ErrFrameType     = apitypes.ErrFrameType
	ErrFrameReserved = apitypes.ErrFrameReserved
	ErrFrameLen      = apitypes.ErrFrameLen
	ErrPayload       = apitypes.ErrPayload
	ErrDestination   = apitypes.ErrDestination
)

// AppendHeader appends h to b.
func AppendHeader(b []byte, h Header) []byte { return apitypes.AppendHeader(b, h) }

// ParseHeader decodes and checks a frame header.
func ParseHeader(b []byte) (Header, error) { return apitypes.ParseHeader(b) }

// ParseSendHeader decodes a Send payload (apitypes.ParseSendHeader).
func ParseSendHeader(b []byte) (SendHeader, error) { return apitypes.ParseSendHeader(b) }

// ParseRecvHeader decodes a Recv payload.
func ParseRecvHeader(b []byte) (RecvHeader, error) { return apitypes.ParseRecvHeader(b) }

// ParseSentInfo decodes a Sent payload.
func ParseSentInfo(b []byte) (SentInfo, error) { return apitypes.ParseSentInfo(b) }

// ParseEndpoint decodes a Bind or Bound payload.
func ParseEndpoint(b []byte) (uint32, error) { return apitypes.ParseEndpoint(b) }

// AppendEndpointPayload encodes a Bind or Bound payload.
func AppendEndpointPayload(ep uint32) []byte { return apitypes.AppendEndpointPayload(ep) }

// AppendError appends an Error payload to b.
func AppendError(b []byte, code uint16, text string) []byte {
	return apitypes.AppendError(b, code, text)
}

// ParseError decodes an Error payload.
func ParseError(b []byte) (uint16, string, error) { return apitypes.ParseError(b) }

const envelopeLen = apitypes.EnvelopeLen

func putEnvelope(b []byte, dst, src uint32) {
	b[0], b[1], b[2], b[3] = 's', 'M', 1, 0
	binary.BigEndian.PutUint32(b[4:], dst)
	binary.BigEndian.PutUint32(b[8:], src)
}

func parseEnvelope(b []byte) (dst, src uint32, ok bool) {
	if len(b) < envelopeLen || b[0] != 's' || b[1] != 'M' || b[2] != 1 || b[3] != 0 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:]), true
}
