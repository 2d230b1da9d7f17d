package apitypes

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// Durations in the Go types keep the JSON of before: integer nanoseconds or float seconds.
func TestDurationsKeepTheirJSON(t *testing.T) {
	b, _ := json.Marshal(Conn{SRTT: 12 * time.Microsecond, RTO: time.Millisecond})
	if s := string(b); !strings.Contains(s, `"srtt_ns":12000`) || !strings.Contains(s, `"rto_ns":1000000`) {
		t.Fatalf("conn JSON %s", s)
	}
	var c Conn
	if err := json.Unmarshal([]byte(`{"srtt_ns": 5000, "rto_ns": 7}`), &c); err != nil || c.SRTT != 5*time.Microsecond || c.RTO != 7 {
		t.Fatalf("decoded %+v, %v", c, err)
	}
	if d := (Status{UptimeS: 1.5}).Uptime(); d != 1500*time.Millisecond {
		t.Fatalf("Uptime %v", d)
	}
	if d := (SessionInfo{IdleS: 0.25}).Idle(); d != 250*time.Millisecond {
		t.Fatalf("Idle %v", d)
	}
}
