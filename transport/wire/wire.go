// Package wire defines smartt's on-the-wire packet format (version 1), carried in UDP.
//
// Every packet starts with a 24-byte common header; the packet type decides what follows.
// Encoding and decoding never allocate: Decode fills a caller-owned Packet whose Payload
// aliases the input buffer. The byte layout is documented in docs/wire.md.
package wire

import "encoding/binary"

// Version is the protocol version this package speaks.
const Version = 1

// Type is a packet type.
type Type uint8

// Packet types.
const (
	TypeData     Type = 1 // a segment of a message
	TypeAck      Type = 2 // cumulative + selective acknowledgement
	TypeNack     Type = 3 // a packet arrived trimmed (payload cut) and must be resent
	TypeProbe    Type = 4 // asks for an ACK (flow-control or liveness probe)
	TypeClose    Type = 5 // the sender has finished and releases the connection
	TypeCloseAck Type = 6 // confirms a Close
	TypeReset    Type = 7 // the receiver holds no state for the destination connection
	TypePull     Type = 8 // receiver-driven credit (EQDS): the receiver grants bytes to send (pull.go)
	typeMax      Type = 8
)

// String names the type for logs and errors.
func (t Type) String() string {
	switch t {
	case TypeData:
		return "DATA"
	case TypeAck:
		return "ACK"
	case TypeNack:
		return "NACK"
	case TypeProbe:
		return "PROBE"
	case TypeClose:
		return "CLOSE"
	case TypeCloseAck:
		return "CLOSE_ACK"
	case TypeReset:
		return "RESET"
	case TypePull:
		return "PULL"
	}
	return "UNKNOWN"
}

// Flags is the flag byte of the common header.
type Flags uint8

// Flag bits. Their meaning depends on the packet type as noted.
const (
	FlagRetx Flags = 1 << 0 // DATA: this is a retransmission
	// FlagGoBack (NACK): a go-back-N NACK (recovery "gobackn"): the receiver expected
	// Nack.PSN, dropped a later packet (sent at Nack.EchoTxTime) and asks for every PSN
	// from Nack.PSN on. Same bit as FlagRetx, which only DATA uses.
	FlagGoBack = FlagRetx
	// FlagBundle (ACK): a DATA packet follows the ACK in the same datagram (BundleSplit):
	// a held ACK riding in its answer's datagram. Same bit as FlagRetx.
	FlagBundle        = FlagRetx
	FlagLast    Flags = 1 << 1 // DATA: last packet (highest offset) of its message
	FlagAckReq  Flags = 1 << 2 // DATA: the sender asks for an immediate ACK
	FlagTrimmed Flags = 1 << 3 // DATA: a switch cut the payload off
	FlagCE      Flags = 1 << 4 // ACK/NACK: the triggering data packet arrived CE-marked
	FlagCleanEV Flags = 1 << 5 // ACK: the clean-EV extension list is present
	// FlagEC (DATA): an erasure-coding parity packet (recovery "ec"): Data.EC says which
	// of its block's parity packets it is; Data.PSN is the PSN of the block's first data
	// packet, Data.Offset the block's first byte and the payload one shard. Same bit as
	// FlagCleanEV, which only ACKs use.
	FlagEC = FlagCleanEV
	// FlagSealed (any type): a 36-byte authentication trailer follows the packet
	// (transport/seal, docs/security.md). Decode and Encode see the packet without it.
	FlagSealed = Flags(1 << 6)
	// FlagINT (DATA, ACK): an INT block follows the DATA header (before the payload) or
	// the ACK's clean-EV list (int.go, docs/wire.md "INT").
	FlagINT    = Flags(1 << 7)
	flagsKnown = FlagRetx | FlagLast | FlagAckReq | FlagTrimmed | FlagCE | FlagCleanEV | FlagSealed | FlagINT
)

// FlagRNR (NACK): receiver not ready. The receiver refused the first packet of a new
// message (Nack.PSN) because the message's destination cannot take it now; the sender
// resends that packet after a back-off, and the refusal counts neither as a loss nor
// towards max_retransmits (transport/rnr.go). Same bit as FlagLast, which only DATA uses.
const FlagRNR = FlagLast

// FlagReturned (DATA, with FlagTrimmed; the bit of FlagCE, which DATA does not use): a
// return-to-sender trimming switch sent the cut header back to its sender, addresses
// swapped. The sender reads it as a NACK of that PSN (transport/rts.go).
const FlagReturned = FlagCE

// Header and field sizes.
const (
	CommonLen   = 24 // common header
	DataHdrLen  = 64 // common header + DATA fields, payload follows
	AckFixedLen = 68 // common header + ACK fields, SACK bitmap and clean EVs follow
	NackLen     = 48
	ProbeLen    = 32
	CloseLen    = 28
	CloseAckLen = 24
	ResetLen    = 24

	MinSackWords = 1  // 64-bit SACK bitmap
	MaxSackWords = 4  // 256-bit SACK bitmap, as on the REPS FPGA NIC
	MaxCleanEVs  = 64 // clean EVs one ACK may report
	// MaxAckLen is the largest ACK on the wire (with a full INT echo).
	MaxAckLen = AckFixedLen + 8*MaxSackWords + 2*MaxCleanEVs + INTHdrLen + INTHopLen*MaxINTHops
	// MaxPayload bounds the payload of one DATA packet (16-bit length field).
	MaxPayload = 65535
)

// Header is the common header every packet starts with.
type Header struct {
	Type      Type
	Flags     Flags
	EV        uint16 // entropy value this packet travels with (its UDP source port offset)
	ReplyPort uint16 // UDP port replies go to; 0 means the packet's source port
	DstConn   uint64 // receiver's connection ID; 0 when the sender does not know it yet
	SrcConn   uint64 // sender's connection ID
}

// Data is the DATA-specific part of a packet.
type Data struct {
	PSN         uint32 // packet sequence number (wraps)
	AckFloor    uint32 // sender's lowest unacknowledged PSN: every PSN below it is done
	MsgID       uint32 // message number within the connection (wraps)
	MsgLen      uint32 // total message length in bytes
	Offset      uint32 // byte offset of this payload in the message
	PayloadLen  uint16 // payload length as sent; fewer bytes present means trimmed
	StreamStart uint64 // connection stream offset of the message's first byte (flow control)
	TxTime      int64  // sender's transmit timestamp, ns, echoed in ACK/NACK
	EC          EC     // with FlagEC: the parity packet's place in its block (bytes 46-47)
}

// EC describes a parity packet's block (DATA with FlagEC; recovery "ec"). The block's
// data packets are K consecutive PSNs from Data.PSN, each one shard (the payload length)
// of the message from Data.Offset on, the last possibly shorter (zero-padded for coding).
type EC struct {
	K     uint8 // data packets in the block, 1..255
	M     uint8 // parity packets of the block, 1..16
	Index uint8 // which parity packet this is, 0..M-1
}

// MaxECParity is the largest EC.M (a nibble on the wire).
const MaxECParity = 16

func (e EC) valid() bool { return e.K >= 1 && e.M >= 1 && e.M <= MaxECParity && e.Index < e.M }

// Ack is the ACK-specific part of a packet.
type Ack struct {
	CumPSN     uint32               // every PSN below it has been received
	SackBase   uint32               // PSN of bit 0 of the bitmap
	AckedPSN   uint32               // PSN of the data packet that triggered this ACK
	EchoEV     uint16               // EV of that packet
	SackWords  uint8                // bitmap width in 64-bit words (1..4)
	NumClean   uint8                // number of entries in CleanEVs (only with FlagCleanEV)
	EchoTxTime int64                // TxTime of the triggering packet
	HoldTime   uint32               // ns between that packet's arrival and this ACK's departure
	CECount    uint16               // CE-marked data packets since the previous ACK
	PktCount   uint16               // data packets since the previous ACK
	Delivered  uint64               // receiver's delivered stream offset (flow control)
	Window     uint32               // receiver's window in bytes beyond Delivered
	Sack       [MaxSackWords]uint64 // bit i of word i/64 (LSB first) = PSN SackBase+i received
	CleanEVs   [MaxCleanEVs]uint16  // EVs of unmarked data packets since the previous ACK
}

// Nack is the NACK-specific part: a data packet arrived trimmed.
type Nack struct {
	PSN        uint32 // the trimmed packet
	CumPSN     uint32 // receiver's cumulative PSN
	EchoEV     uint16 // EV of the trimmed packet
	HoldTime   uint32
	EchoTxTime int64
}

// Packet is a decoded (or to-be-encoded) packet: the common header plus the part its Type uses.
type Packet struct {
	Header
	Data    Data
	Ack     Ack
	Nack    Nack
	Probe   int64  // PROBE: sender's TxTime
	Reason  uint32 // CLOSE: reason code (0 = normal)
	Pull    Pull   // PULL: the receiver's cumulative grant
	Payload []byte // DATA: the payload bytes present (aliases the decoded buffer)
	INT     INT    // DATA, ACK with FlagINT: the INT block (N = 0 without the flag)
}

// Trimmed reports whether a DATA packet lost (part of) its payload on the way.
func (p *Packet) Trimmed() bool {
	return p.Type == TypeData && (p.Flags&FlagTrimmed != 0 || len(p.Payload) < int(p.Data.PayloadLen))
}

var be = binary.BigEndian

// Decode parses b into p. It never panics; on error it returns one of the *Error values
// of this package and p is left partially filled. p.Payload aliases b.
func (p *Packet) Decode(b []byte) error {
	if len(b) < CommonLen {
		return ErrShort
	}
	if b[0]>>4 != Version {
		return ErrVersion
	}
	t := Type(b[0] & 0x0f)
	if t == 0 || t > typeMax {
		return ErrType
	}
	p.Type = t
	p.Flags = Flags(b[1])
	if p.Flags&^flagsKnown != 0 || p.Flags&FlagINT != 0 && t != TypeData && t != TypeAck {
		return ErrFlags
	}
	p.EV = be.Uint16(b[2:])
	p.ReplyPort = be.Uint16(b[4:])
	p.DstConn = be.Uint64(b[8:])
	p.SrcConn = be.Uint64(b[16:])
	p.Payload = nil
	if p.SrcConn == 0 {
		return ErrConnID
	}
	switch t {
	case TypeData:
		return p.decodeData(b)
	case TypeAck:
		return p.decodeAck(b)
	case TypeNack:
		if len(b) < NackLen {
			return ErrShort
		}
		n := &p.Nack
		n.PSN = be.Uint32(b[24:])
		n.CumPSN = be.Uint32(b[28:])
		n.EchoEV = be.Uint16(b[32:])
		n.HoldTime = be.Uint32(b[36:])
		n.EchoTxTime = int64(be.Uint64(b[40:]))
		return p.needDst()
	case TypeProbe:
		if len(b) < ProbeLen {
			return ErrShort
		}
		p.Probe = int64(be.Uint64(b[24:]))
		return nil
	case TypeClose:
		if len(b) < CloseLen {
			return ErrShort
		}
		p.Reason = be.Uint32(b[24:])
		return nil
	case TypePull:
		return p.decodePull(b)
	default: // CloseAck, Reset
		return p.needDst()
	}
}

func (p *Packet) needDst() error {
	if p.DstConn == 0 {
		return ErrConnID
	}
	return nil
}

func (p *Packet) decodeData(b []byte) error {
	if len(b) < DataHdrLen {
		return ErrShort
	}
	d := &p.Data
	d.PSN = be.Uint32(b[24:])
	d.AckFloor = be.Uint32(b[28:])
	d.MsgID = be.Uint32(b[32:])
	d.MsgLen = be.Uint32(b[36:])
	d.Offset = be.Uint32(b[40:])
	d.PayloadLen = be.Uint16(b[44:])
	d.StreamStart = be.Uint64(b[48:])
	d.TxTime = int64(be.Uint64(b[56:]))
	d.EC = EC{}
	if p.Flags&FlagEC != 0 {
		d.EC = EC{K: b[46], M: b[47]>>4 + 1, Index: b[47] & 0x0f}
		if !d.EC.valid() {
			return ErrLength
		}
	}
	if d.MsgLen == 0 || d.PayloadLen == 0 {
		return ErrLength
	}
	if uint64(d.Offset)+uint64(d.PayloadLen) > uint64(d.MsgLen) {
		return ErrLength
	}
	hl := DataHdrLen
	p.INT.N, p.INT.Cap = 0, 0
	if p.Flags&FlagINT != 0 {
		n, err := p.INT.decode(b[DataHdrLen:], TypeData)
		if err != nil {
			return err
		}
		hl += n
	}
	pl := b[hl:]
	if len(pl) > int(d.PayloadLen) {
		return ErrLength // longer than declared: not something a switch does
	}
	p.Payload = pl
	return nil
}

func (p *Packet) decodeAck(b []byte) error {
	if len(b) < AckFixedLen {
		return ErrShort
	}
	a := &p.Ack
	a.CumPSN = be.Uint32(b[24:])
	a.SackBase = be.Uint32(b[28:])
	a.AckedPSN = be.Uint32(b[32:])
	a.EchoEV = be.Uint16(b[36:])
	a.SackWords = b[38]
	a.NumClean = b[39]
	a.EchoTxTime = int64(be.Uint64(b[40:]))
	a.HoldTime = be.Uint32(b[48:])
	a.CECount = be.Uint16(b[52:])
	a.PktCount = be.Uint16(b[54:])
	a.Delivered = be.Uint64(b[56:])
	a.Window = be.Uint32(b[64:])
	if a.SackWords < MinSackWords || a.SackWords > MaxSackWords {
		return ErrSackWidth
	}
	if (p.Flags&FlagCleanEV == 0) != (a.NumClean == 0) || a.NumClean > MaxCleanEVs {
		return ErrCleanEVs
	}
	need := AckFixedLen + 8*int(a.SackWords) + 2*int(a.NumClean)
	if len(b) < need {
		return ErrShort
	}
	p.INT.N, p.INT.Cap = 0, 0
	if p.Flags&FlagINT != 0 {
		n, err := p.INT.decode(b[need:], TypeAck)
		if err != nil {
			return err
		}
		need += n
	}
	if len(b) > need {
		return ErrLength
	}
	off := AckFixedLen + 8*int(a.SackWords)
	if a.SackWords == MaxSackWords { // the default: four loads, no loop
		w := (*[8 * MaxSackWords]byte)(b[AckFixedLen:])
		a.Sack = [MaxSackWords]uint64{be.Uint64(w[0:]), be.Uint64(w[8:]), be.Uint64(w[16:]), be.Uint64(w[24:])}
	} else {
		a.Sack = [MaxSackWords]uint64{}
		for i := range a.Sack[:a.SackWords] {
			a.Sack[i] = be.Uint64(b[AckFixedLen+8*i:])
		}
	}
	for i := 0; i < int(a.NumClean); i++ {
		a.CleanEVs[i] = be.Uint16(b[off:])
		off += 2
	}
	return p.needDst()
}

// putCommon writes the common header (h is at least CommonLen bytes: the callers' array
// pointers let the compiler drop the bounds checks of every store).
func (p *Packet) putCommon(h *[CommonLen]byte) {
	h[0] = Version<<4 | byte(p.Type)
	h[1] = byte(p.Flags)
	be.PutUint16(h[2:], p.EV)
	be.PutUint16(h[4:], p.ReplyPort)
	be.PutUint16(h[6:], 0)
	be.PutUint64(h[8:], p.DstConn)
	be.PutUint64(h[16:], p.SrcConn)
}

// EncodedLen returns the number of bytes Encode writes for p.
func (p *Packet) EncodedLen() int {
	switch p.Type {
	case TypeData:
		return DataHdrLen + p.intLen() + len(p.Payload)
	case TypeAck:
		return AckFixedLen + 8*int(p.Ack.SackWords) + 2*int(p.Ack.NumClean) + p.intLen()
	case TypeNack:
		return NackLen
	case TypeProbe:
		return ProbeLen
	case TypeClose:
		return CloseLen
	case TypeCloseAck:
		return CloseAckLen
	case TypeReset:
		return ResetLen
	case TypePull:
		return PullLen
	}
	return 0
}

// intLen is the length of p's INT block on the wire (0 without FlagINT).
func (p *Packet) intLen() int {
	if p.Flags&FlagINT == 0 || (p.Type != TypeData && p.Type != TypeAck) {
		return 0
	}
	return INTLen(int(p.INT.Cap))
}

// Encode writes p into b and returns the number of bytes written. For DATA, Payload is
// copied after the header and Data.PayloadLen must equal len(Payload). It fails with
// ErrBuffer when b is too small and with a validation error for inconsistent fields.
func (p *Packet) Encode(b []byte) (int, error) { return p.encode(b, true) }

// EncodeHeader is Encode without copying a DATA packet's payload: it writes everything
// before it (the header and any INT block) into b, checks Payload as Encode does, and
// returns the bytes written. On the wire Payload follows them: the caller sends both
// (as two iovecs) and so leaves the payload where it is. Other types encode whole.
func (p *Packet) EncodeHeader(b []byte) (int, error) { return p.encode(b, false) }

func (p *Packet) encode(b []byte, withPayload bool) (int, error) {
	if p.Type == 0 || p.Type > typeMax {
		return 0, ErrType
	}
	if p.Flags&^flagsKnown != 0 || p.Flags&FlagINT != 0 && p.Type != TypeData && p.Type != TypeAck {
		return 0, ErrFlags
	}
	var n int
	switch p.Type { // EncodedLen, the per-packet types without the call
	case TypeData:
		n = DataHdrLen + p.intLen()
		if withPayload {
			n += len(p.Payload)
		}
	case TypeAck:
		n = AckFixedLen + 8*int(p.Ack.SackWords) + 2*int(p.Ack.NumClean) + p.intLen()
	default:
		n = p.EncodedLen()
	}
	if len(b) < n {
		return 0, ErrBuffer
	}
	if p.SrcConn == 0 {
		return 0, ErrConnID
	}
	if p.Flags&FlagINT != 0 {
		if err := p.INT.check(p.Type); err != nil {
			return 0, err
		}
	}
	var err error
	switch p.Type {
	case TypeData:
		err = p.encodeData(b, withPayload)
	case TypeAck:
		err = p.encodeAck(b)
	case TypeNack:
		if p.DstConn == 0 {
			return 0, ErrConnID
		}
		h := (*[NackLen]byte)(b)
		p.putCommon((*[CommonLen]byte)(h[:CommonLen]))
		nk := &p.Nack
		be.PutUint32(h[24:], nk.PSN)
		be.PutUint32(h[28:], nk.CumPSN)
		be.PutUint16(h[32:], nk.EchoEV)
		be.PutUint16(h[34:], 0)
		be.PutUint32(h[36:], nk.HoldTime)
		be.PutUint64(h[40:], uint64(nk.EchoTxTime))
	case TypeProbe:
		h := (*[ProbeLen]byte)(b)
		p.putCommon((*[CommonLen]byte)(h[:CommonLen]))
		be.PutUint64(h[24:], uint64(p.Probe))
	case TypeClose:
		h := (*[CloseLen]byte)(b)
		p.putCommon((*[CommonLen]byte)(h[:CommonLen]))
		be.PutUint32(h[24:], p.Reason)
	case TypePull:
		err = p.encodePull(b)
	default:
		if p.DstConn == 0 {
			return 0, ErrConnID
		}
		p.putCommon((*[CommonLen]byte)(b))
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// encodeData writes a DATA packet's header, INT block and (withPayload) payload; b holds
// them (encode checked).
func (p *Packet) encodeData(b []byte, withPayload bool) error {
	d := &p.Data
	if len(p.Payload) != int(d.PayloadLen) || d.PayloadLen == 0 || d.MsgLen == 0 ||
		uint64(d.Offset)+uint64(d.PayloadLen) > uint64(d.MsgLen) {
		return ErrLength
	}
	var ec [2]byte
	if p.Flags&FlagEC != 0 {
		if !d.EC.valid() {
			return ErrLength
		}
		ec = [2]byte{d.EC.K, (d.EC.M-1)<<4 | d.EC.Index}
	}
	h := (*[DataHdrLen]byte)(b)
	p.putCommon((*[CommonLen]byte)(h[:CommonLen]))
	be.PutUint32(h[24:], d.PSN)
	be.PutUint32(h[28:], d.AckFloor)
	be.PutUint32(h[32:], d.MsgID)
	be.PutUint32(h[36:], d.MsgLen)
	be.PutUint32(h[40:], d.Offset)
	be.PutUint16(h[44:], d.PayloadLen)
	h[46], h[47] = ec[0], ec[1]
	be.PutUint64(h[48:], d.StreamStart)
	be.PutUint64(h[56:], uint64(d.TxTime))
	hl := DataHdrLen
	if p.Flags&FlagINT != 0 {
		hl += p.INT.encode(b[DataHdrLen:])
	}
	if withPayload {
		copy(b[hl:], p.Payload)
	}
	return nil
}

// encodeAck writes an ACK; b holds it (encode checked).
func (p *Packet) encodeAck(b []byte) error {
	a := &p.Ack
	if a.SackWords < MinSackWords || a.SackWords > MaxSackWords {
		return ErrSackWidth
	}
	if (p.Flags&FlagCleanEV == 0) != (a.NumClean == 0) || a.NumClean > MaxCleanEVs {
		return ErrCleanEVs
	}
	if p.DstConn == 0 {
		return ErrConnID
	}
	h := (*[AckFixedLen]byte)(b)
	p.putCommon((*[CommonLen]byte)(h[:CommonLen]))
	be.PutUint32(h[24:], a.CumPSN)
	be.PutUint32(h[28:], a.SackBase)
	be.PutUint32(h[32:], a.AckedPSN)
	be.PutUint16(h[36:], a.EchoEV)
	h[38] = a.SackWords
	h[39] = a.NumClean
	be.PutUint64(h[40:], uint64(a.EchoTxTime))
	be.PutUint32(h[48:], a.HoldTime)
	be.PutUint16(h[52:], a.CECount)
	be.PutUint16(h[54:], a.PktCount)
	be.PutUint64(h[56:], a.Delivered)
	be.PutUint32(h[64:], a.Window)
	off := AckFixedLen + 8*int(a.SackWords)
	if a.SackWords == MaxSackWords { // the default: four stores, no loop
		w := (*[8 * MaxSackWords]byte)(b[AckFixedLen:])
		be.PutUint64(w[0:], a.Sack[0])
		be.PutUint64(w[8:], a.Sack[1])
		be.PutUint64(w[16:], a.Sack[2])
		be.PutUint64(w[24:], a.Sack[3])
	} else {
		for i, w := range a.Sack[:a.SackWords] {
			be.PutUint64(b[AckFixedLen+8*i:], w)
		}
	}
	for _, ev := range a.CleanEVs[:a.NumClean] {
		be.PutUint16(b[off:], ev)
		off += 2
	}
	if p.Flags&FlagINT != 0 {
		p.INT.encode(b[off:])
	}
	return nil
}
