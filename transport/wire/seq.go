package wire

// PSNs and message IDs are 32-bit serial numbers (RFC 1982 style): they wrap, and two of
// them compare correctly as long as they are less than 2^31 apart.

// SeqLess reports whether serial number a comes before b.
func SeqLess(a, b uint32) bool { return int32(a-b) < 0 }

// SeqLEQ reports whether a comes before b or equals it.
func SeqLEQ(a, b uint32) bool { return int32(a-b) <= 0 }

// SeqDiff returns a-b as a signed distance.
func SeqDiff(a, b uint32) int32 { return int32(a - b) }
