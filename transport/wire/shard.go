package wire

import "encoding/binary"

// Shard returns the engine shard (0..n-1) that owns datagram b on a host that runs n
// engine shards behind one listen port (docs/datapath.md, "Engine shards"): the low byte
// of DstConn modulo n when DstConn is set (each shard chooses its connection IDs so that
// it names the shard, transport.Hooks.IDShards), else the high byte of SrcConn modulo n
// (a peer's first packets, before it knows our ID: all of them reach the same shard,
// which accepts the connection), and 0 for datagrams shorter than the common header.
// A returned header (a DATA header of ours a switch sent back, FlagTrimmed|FlagReturned)
// carries our own ID in SrcConn: its low byte names the shard that sent it. The kernel's
// steering program (transport/udp SteeringProgram) makes the same choice.
func Shard(b []byte, n int) int {
	return shard(b, n)
}

// Returned reports whether datagram b starts with a returned header: a DATA header of the
// receiver's own that a return-to-sender switch sent back (FlagTrimmed|FlagReturned).
func Returned(b []byte) bool {
	return len(b) >= CommonLen && b[0] == Version<<4|byte(TypeData) &&
		Flags(b[1])&(FlagTrimmed|FlagReturned) == FlagTrimmed|FlagReturned
}

func shard(b []byte, n int) int {
	if n <= 1 || len(b) < CommonLen {
		return 0
	}
	if Returned(b) {
		return int(b[23]) % n
	}
	if binary.BigEndian.Uint64(b[8:]) != 0 {
		return int(b[15]) % n
	}
	return int(b[16]) % n
}
