package metrics

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"smartt/transport"
	"smartt/transport/api"
)

func TestSeriesFollowConnectionsAndCounters(t *testing.T) {
	var st transport.Stats
	conns := []transport.ConnInfo{
		{ID: 0xab, Peer: netip.MustParseAddrPort("10.0.0.2:23600"), Window: 262144, SRTT: 50_000},
		{ID: 0xcd, Peer: netip.MustParseAddrPort("10.0.0.3:23600"), Window: 131072},
	}
	m := New(Sources{Engine: func() transport.Stats { return st }, Conns: func() []transport.ConnInfo { return conns },
		API: func() api.Stats { return api.Stats{MsgsAccepted: 7} }, CC: "fixed", LB: "ecmp"})
	st.RetxNack, st.CERecv = 3, 5
	st.RTTHist[1], st.RTTHist[5] = 2, 1 // 1-2 us and 16-32 us
	st.RTTSamples = 3
	m.ObserveMessage(2_000_000, 4096)
	m.ObserveBatch(64, 63)
	scrape := func() string {
		w := httptest.NewRecorder()
		m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	out := scrape()
	for _, want := range []string{
		`smartt_retransmissions_total{cause="nack"} 3`,
		`smartt_ce_marks_total{kind="received"} 5`,
		`smartt_conn_window_bytes{cc="fixed",conn="ab",lb="ecmp",peer="10.0.0.2:23600"} 262144`,
		`smartt_conn_window_bytes{cc="fixed",conn="cd",lb="ecmp",peer="10.0.0.3:23600"} 131072`,
		`smartt_rtt_seconds_bucket{le="2.048e-06"} 2`,
		`smartt_rtt_seconds_bucket{le="3.2768e-05"} 3`,
		`smartt_rtt_seconds_count 3`,
		`smartt_message_completion_seconds_count 1`,
		`smartt_rx_kernel_timestamps_total 63`,
		`smartt_api_events_total{event="message_accepted"} 7`,
		`smartt_connections 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	conns = conns[1:] // connection ab closed
	out = scrape()
	if strings.Contains(out, `conn="ab"`) || !strings.Contains(out, `conn="cd"`) {
		t.Fatal("a closed connection's series survived, or a live one vanished")
	}
}

// BenchmarkObserveBatch is the per-batch cost on the receive path (no per-packet work).
func BenchmarkObserveBatch(b *testing.B) {
	m := New(Sources{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.ObserveBatch(64, 64)
	}
}
