package wire

// PullLen is the length of a PULL packet: the common header and the 8-byte grant.
const PullLen = 32

// Pull is the PULL-specific part of a packet (EQDS, receiver-driven credit): the
// receiver's pacer grants the sender bytes of data to send. Granted is cumulative over
// the connection, so a lost or reordered PULL loses no credit: the next one carries it.
type Pull struct {
	Granted uint64 // payload bytes granted on this connection since it opened; > 0
}

func (p *Packet) decodePull(b []byte) error {
	if len(b) < PullLen {
		return ErrShort
	}
	p.Pull.Granted = be.Uint64(b[24:])
	if p.Pull.Granted == 0 {
		return ErrLength // a grant of nothing: no receiver sends one
	}
	return p.needDst()
}

func (p *Packet) encodePull(b []byte) error {
	if p.Pull.Granted == 0 {
		return ErrLength
	}
	if p.DstConn == 0 {
		return ErrConnID
	}
	h := (*[PullLen]byte)(b)
	p.putCommon((*[CommonLen]byte)(h[:CommonLen]))
	be.PutUint64(h[24:], p.Pull.Granted)
	return nil
}
