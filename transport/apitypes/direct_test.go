package apitypes

import (
	"errors"
	"net/netip"
	"testing"
)

// The direct path's payloads round-trip, and every bound is checked at and beyond it:
// a message on a pair of 1 and 2^32 bytes passes, 0 and 2^32+1 do not, nor a header of
// another type or with a reserved byte set; a request of any other length, or naming
// endpoint 0 or an unspecified address, is malformed; an answer's status beyond 2 is.
func TestDirectPayloads(t *testing.T) {
	to := netip.MustParseAddrPort("10.0.0.1:23600")
	b := AppendDirectReq(nil, to, 7)
	if got, ep, err := ParseDirectReq(b); err != nil || got != to || ep != 7 || len(b) != DirectReqLen {
		t.Fatalf("request: %v %d %v", got, ep, err)
	}
	for _, bad := range [][]byte{b[:DirectReqLen-1], append(b, 0), AppendDirectReq(nil, to, 0),
		AppendDirectReq(nil, netip.MustParseAddrPort("0.0.0.0:1"), 7)} {
		if _, _, err := ParseDirectReq(bad); !errors.Is(err, ErrPayload) {
			t.Fatalf("request % x: %v", bad, err)
		}
	}
	for st := range uint8(4) {
		_, _, err := ParseDirectOK(AppendDirectOK(nil, st, 9))
		if (err == nil) != (st <= DirectRelay) {
			t.Fatalf("answer status %d: %v", st, err)
		}
	}
	if _, _, err := ParseDirectOK(AppendDirectOK(nil, 0, 9)[:DirectOKLen-1]); err == nil {
		t.Fatal("short answer taken")
	}
	dp := DirectPeer{Pair: 3, From: to, FromEndpoint: 1, Endpoint: 2}
	if got, err := ParseDirectPeer(dp.Append(nil)); err != nil || got != dp {
		t.Fatalf("peer: %+v %v", got, err)
	}
	if _, err := ParseDirectPeer(dp.Append(nil)[1:]); err == nil {
		t.Fatal("short peer frame taken")
	}
	for _, c := range []struct {
		n  uint64
		ok bool
	}{{0, false}, {1, true}, {MaxDirectMsg, true}, {MaxDirectMsg + 1, false}} {
		if n, err := ParseDirectMsg(AppendDirectMsg(nil, c.n)); (err == nil) != c.ok || c.ok && n != c.n {
			t.Fatalf("message of %d bytes: %d %v", c.n, n, err)
		}
	}
	for i := range 8 {
		h := AppendDirectMsg(nil, 5)
		h[i] ^= 0x40
		if _, err := ParseDirectMsg(h); err == nil {
			t.Fatalf("header with byte %d changed taken", i)
		}
	}
}
