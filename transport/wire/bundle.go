package wire

// BundleSplit splits a datagram that carries an ACK with FlagBundle and a DATA packet
// behind it (docs/wire.md, "Bundles") into the two packets; any other datagram comes back
// whole as lead, with rest nil. It reads only the ACK's length fields: lead still has to
// decode (Decode checks it in full), and rest is whatever follows, which the caller must
// check is one DATA packet (BundledData). A sealed ACK is never split (a bundle is never
// sealed: the seal covers the whole datagram as one packet). A malformed length leaves
// the datagram whole, so Decode reports it.
func BundleSplit(b []byte) (lead, rest []byte) {
	if len(b) < AckFixedLen || b[0] != Version<<4|byte(TypeAck) {
		return b, nil
	}
	f := Flags(b[1])
	if f&FlagBundle == 0 || f&FlagSealed != 0 {
		return b, nil
	}
	words, clean := b[38], b[39]
	if words < MinSackWords || words > MaxSackWords || clean > MaxCleanEVs {
		return b, nil
	}
	n := AckFixedLen + 8*int(words) + 2*int(clean)
	if f&FlagINT != 0 {
		if len(b) < n+INTHdrLen || b[n+1] > MaxINTHops {
			return b, nil
		}
		n += INTLen(int(b[n+1]))
	}
	if n >= len(b) {
		return b, nil
	}
	return b[:n], b[n:]
}

// BundledData reports whether b, the rest of a bundle (BundleSplit), may be processed: a
// version-1 DATA packet (only an ACK leads a bundle, so one follower per datagram bounds
// the work a datagram can cause), unsealed like the ACK ahead of it.
func BundledData(b []byte) bool {
	return len(b) >= DataHdrLen && b[0] == Version<<4|byte(TypeData) && Flags(b[1])&FlagSealed == 0
}
