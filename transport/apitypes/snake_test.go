package apitypes

import (
	"encoding/json"
	"testing"
)

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"RTTHist": "rtt_hist", "TimestampSource": "timestamp_source", "CERecv": "ce_recv",
		"MsgsSent": "msgs_sent", "NoKey": "no_key", "GSO": "gso", "RecvBufferedMax": "recv_buffered_max", "already_snake": "already_snake"} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
	type inner struct{ TrimHints uint64 }
	v := SnakeJSON(struct {
		PacketsSent uint64
		Auth        inner
		List        []inner
	}{1 << 63, inner{2}, []inner{{3}}})
	b, _ := json.Marshal(v)
	if got := string(b); got != `{"auth":{"trim_hints":2},"list":[{"trim_hints":3}],"packets_sent":9223372036854775808}` {
		t.Errorf("SnakeJSON: %s", got)
	}
	if SnakeJSON(nil) != nil {
		t.Error("SnakeJSON(nil) is not nil")
	}
}
