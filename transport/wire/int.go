package wire

// In-band network telemetry (INT), HPCC's per-hop records (Li et al., "HPCC: High
// Precision Congestion Control", SIGCOMM 2019). A DATA packet with FlagINT reserves Cap
// fixed 16-byte slots between its header and its payload; every INT-capable switch port
// it leaves fills the next free slot (StampINT), and the receiver echoes the filled
// records in the ACK the packet triggers. Layout and rules: docs/wire.md, "INT".

// MaxINTHops bounds the records one packet carries (HPCC's 5: a 3-tier fat tree's
// longest path crosses 5 switches).
const MaxINTHops = 5

// INTHdrLen is the INT block's header; INTHopLen is one record.
const (
	INTHdrLen = 4
	INTHopLen = 16
)

// INTOverflow (INT.Flags): the packet crossed an INT switch with every slot filled.
const INTOverflow = 1 << 0

// INTHop is one switch port's record, written as the packet leaves the port.
type INTHop struct {
	TS      uint32 // the port's clock at the packet's service start, ns (low 32 bits: wraps)
	TxBytes uint32 // bytes the port had serialised before this packet (low 32 bits: wraps)
	QLen    uint32 // data-queue bytes waiting behind the packet at that moment
	Rate    uint32 // the port's line rate, Mbit/s
}

// INT is a packet's INT block.
type INT struct {
	N     uint8 // records filled (DATA) or echoed (ACK), 0..Cap
	Cap   uint8 // slots reserved: DATA 1..MaxINTHops; an ACK has Cap = N
	Flags uint8 // INTOverflow
	Hops  [MaxINTHops]INTHop
}

// INTLen is the size of an INT block of cap slots.
func INTLen(cap int) int { return INTHdrLen + INTHopLen*cap }

// check validates an INT block's counters for a packet of type t.
func (x *INT) check(t Type) error {
	if x.N > x.Cap || x.Cap > MaxINTHops || (t == TypeData && x.Cap == 0) || (t == TypeAck && x.Cap != x.N) ||
		x.Flags&^INTOverflow != 0 {
		return ErrINT
	}
	return nil
}

// decodeINT reads the INT block at the start of b; it returns the block's length.
func (x *INT) decode(b []byte, t Type) (int, error) {
	if len(b) < INTHdrLen {
		return 0, ErrINT
	}
	x.N, x.Cap, x.Flags = b[0], b[1], b[2]
	if err := x.check(t); err != nil {
		return 0, err
	}
	n := INTLen(int(x.Cap))
	if len(b) < n {
		return 0, ErrINT // truncated records
	}
	for i := 0; i < int(x.N); i++ {
		r := b[INTHdrLen+INTHopLen*i:]
		x.Hops[i] = INTHop{TS: be.Uint32(r), TxBytes: be.Uint32(r[4:]), QLen: be.Uint32(r[8:]), Rate: be.Uint32(r[12:])}
	}
	return n, nil
}

// encode writes the block (unfilled slots as zeros) and returns its length.
func (x *INT) encode(b []byte) int {
	b[0], b[1], b[2], b[3] = x.N, x.Cap, x.Flags, 0
	for i := 0; i < int(x.Cap); i++ {
		r := b[INTHdrLen+INTHopLen*i:]
		h := INTHop{}
		if i < int(x.N) {
			h = x.Hops[i]
		}
		be.PutUint32(r, h.TS)
		be.PutUint32(r[4:], h.TxBytes)
		be.PutUint32(r[8:], h.QLen)
		be.PutUint32(r[12:], h.Rate)
	}
	return INTLen(int(x.Cap))
}

// Stamp verdicts of StampINT.
const (
	StampNone     = iota // not a well-formed DATA packet with FlagINT: left alone
	StampDone            // the record was written into the next free slot
	StampOverflow        // every slot was full: INTOverflow set instead
)

// StampINT is a switch's INT action on a datagram b (the UDP payload) leaving a port:
// for a DATA packet with FlagINT and a well-formed INT block it writes h into the next
// free slot, or sets INTOverflow when none is left. Anything else (other types, no
// FlagINT, a malformed or cut block) is left untouched. It does not allocate.
func StampINT(b []byte, h INTHop) int {
	if len(b) < DataHdrLen+INTHdrLen || b[0]>>4 != Version || Type(b[0]&0x0f) != TypeData ||
		Flags(b[1])&FlagINT == 0 {
		return StampNone
	}
	x := b[DataHdrLen:]
	n, c := x[0], x[1]
	if c == 0 || c > MaxINTHops || n > c || len(x) < INTLen(int(c)) {
		return StampNone
	}
	if n == c {
		x[2] |= INTOverflow
		return StampOverflow
	}
	r := x[INTHdrLen+INTHopLen*int(n):]
	be.PutUint32(r, h.TS)
	be.PutUint32(r[4:], h.TxBytes)
	be.PutUint32(r[8:], h.QLen)
	be.PutUint32(r[12:], h.Rate)
	x[0] = n + 1
	return StampDone
}

// TrimmedLen is how many bytes of DATA datagram b a trimming switch keeps: the header,
// and the INT block when the packet carries one (so the receiver can still echo it).
func TrimmedLen(b []byte) int {
	if len(b) >= DataHdrLen+INTHdrLen && Flags(b[1])&FlagINT != 0 {
		if c := b[DataHdrLen+1]; c <= MaxINTHops && len(b) >= DataHdrLen+INTLen(int(c)) {
			return DataHdrLen + INTLen(int(c))
		}
	}
	return min(len(b), DataHdrLen)
}
