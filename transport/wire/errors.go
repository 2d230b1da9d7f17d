package wire

// Error is a decode or encode failure. Every error this package returns is one of the
// package-level *Error values below, so callers can count them by kind without allocating.
type Error struct {
	Code int    // stable small integer, usable as an array index for counters
	Msg  string // human-readable reason
}

// Error implements the error interface.
func (e *Error) Error() string { return "wire: " + e.Msg }

// Decode and encode errors.
var (
	ErrShort     = &Error{0, "packet shorter than its header"}
	ErrVersion   = &Error{1, "unsupported protocol version"}
	ErrType      = &Error{2, "unknown packet type"}
	ErrFlags     = &Error{3, "unknown flag bits set"}
	ErrConnID    = &Error{4, "missing connection ID"}
	ErrLength    = &Error{5, "inconsistent length or offset fields"}
	ErrSackWidth = &Error{6, "SACK bitmap width outside 1..4 words"}
	ErrCleanEVs  = &Error{7, "clean-EV list inconsistent with its flag or too long"}
	ErrBuffer    = &Error{8, "buffer too small"}
	ErrINT       = &Error{9, "INT block malformed or truncated"}
	ErrBundle    = &Error{10, "the packet bundled behind an ACK is not a DATA packet"}
)

// NumErrors is the number of distinct error codes (for counter arrays).
const NumErrors = 11
