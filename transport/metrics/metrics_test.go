package metrics

import (
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/version"
)

func scrape(m *Metrics) string {
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}

func TestSeriesFollowConnectionsAndCounters(t *testing.T) {
	var st transport.Stats
	conns := []transport.ConnInfo{
		{ID: 0xab, Peer: netip.MustParseAddrPort("10.0.0.2:23600"), Window: 262144, SRTT: 50_000},
		{ID: 0xcd, Peer: netip.MustParseAddrPort("10.0.0.3:23600"), Window: 131072},
	}
	m := New(Sources{Engine: func() transport.Stats { return st }, Conns: func() []transport.ConnInfo { return conns },
		API: func() api.Stats { return api.Stats{MsgsAccepted: 7, RecvQueued: 4096, RecvOverflowTotal: 2} }, CC: "fixed", LB: "ecmp", PerConn: true})
	st.RetxNack, st.CERecv = 3, 5
	st.RTTHist[1], st.RTTHist[5] = 2, 1 // 1-2 us and 16-32 us
	st.RTTSamples = 3
	st.Auth.Replayed, st.Auth.Sessions = 4, 2
	st.ECRebuilt, st.ReturnedBad = 6, 1
	m.ObserveMessage(2_000_000, 4096)
	m.ObserveBatch(64, 63)
	out := scrape(m)
	for _, want := range []string{
		`smartt_retransmissions_total{cause="nack"} 3`,
		`smartt_ce_marks_total{kind="received"} 5`,
		`smartt_conn_window_bytes{conn="ab",peer="10.0.0.2:23600"} 262144`,
		`smartt_conn_window_bytes{conn="cd",peer="10.0.0.3:23600"} 131072`,
		`smartt_rtt_seconds_bucket{le="2.048e-06"} 2`,
		`smartt_rtt_seconds_bucket{le="3.2768e-05"} 3`,
		`smartt_rtt_seconds_count 3`,
		`smartt_message_completion_seconds_count 1`,
		`smartt_rx_kernel_timestamps_total 63`,
		`smartt_api_events_total{event="message_accepted"} 7`,
		`smartt_api_events_total{event="recv_overflow_total"} 2`,
		`smartt_api_recv_queued_bytes 4096`,
		`smartt_connections 2`,
		`smartt_auth_dropped_total{reason="replayed"} 4`,
		`smartt_auth_sessions 2`,
		`smartt_recovery_events_total{event="ec_rebuilt"} 6`,
		`smartt_recovery_events_total{event="returned_bad"} 1`,
		`smartt_algorithm_info{cc="fixed",lb="ecmp"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	conns = conns[1:] // connection ab closed
	out = scrape(m)
	if strings.Contains(out, `conn="ab"`) || !strings.Contains(out, `conn="cd"`) {
		t.Fatal("a closed connection's series survived, or a live one vanished")
	}
}

// Per-connection series are opt-in: by default a scrape has none, whatever the number of
// connections.
func TestPerConnectionSeriesOffByDefault(t *testing.T) {
	conns := []transport.ConnInfo{{ID: 1, Peer: netip.MustParseAddrPort("10.0.0.2:23600"), QuickAdapts: 4}}
	out := scrape(New(Sources{Conns: func() []transport.ConnInfo { return conns }}))
	if strings.Contains(out, "smartt_conn_") || strings.Contains(out, `peer="`) {
		t.Fatalf("per-connection series without PerConn:\n%s", grepLines(out, "smartt_conn"))
	}
	if !strings.Contains(out, "smartt_cc_quick_adapt_total 4") {
		t.Fatalf("the total must still count the connection's firings:\n%s", grepLines(out, "quick"))
	}
}

// QuickAdapt firings and freezing episodes summed over connections never fall when a
// connection closes or its ID is reused.
func TestConnectionTotalsNeverFall(t *testing.T) {
	pa, pb := netip.MustParseAddrPort("10.0.0.2:23600"), netip.MustParseAddrPort("10.0.0.3:23600")
	var conns []transport.ConnInfo
	m := New(Sources{Conns: func() []transport.ConnInfo { return conns }})
	steps := []struct {
		conns         []transport.ConnInfo
		quick, freeze string
	}{
		{[]transport.ConnInfo{{ID: 1, Peer: pa, QuickAdapts: 3, FreezeEpisodes: 1}, {ID: 2, Peer: pb, QuickAdapts: 5}}, "8", "1"},
		{[]transport.ConnInfo{{ID: 2, Peer: pb, QuickAdapts: 6, FreezeEpisodes: 2}}, "9", "3"}, // 1 closed: its 3 and 1 stay
		{nil, "9", "3"}, // all closed
		{[]transport.ConnInfo{{ID: 2, Peer: pa, QuickAdapts: 1}}, "10", "3"},      // ID 2 reused by another peer
		{[]transport.ConnInfo{{ID: 2, Peer: pa, QuickAdapts: 0}}, "10", "3"},      // and reused again (counts restarted)
		{[]transport.ConnInfo{{ID: 2, Peer: pa, QuickAdapts: 2}}, "12", "3"},      // the new one counts on
		{[]transport.ConnInfo{{ID: 9, Peer: pb, FreezeEpisodes: 4}}, "12", "7"},   // ID 2 gone: its 2 stay
		{[]transport.ConnInfo{{ID: 9, Peer: pb, FreezeEpisodes: 4}}, "12", "7"},   // nothing new
		{[]transport.ConnInfo{{ID: 9, Peer: pb, FreezeEpisodes: 10}}, "12", "13"}, // counts on
	}
	for i, s := range steps {
		conns = s.conns
		out := scrape(m)
		for _, want := range []string{"smartt_cc_quick_adapt_total " + s.quick, "smartt_lb_freeze_episodes_total " + s.freeze} {
			if !strings.Contains(out, want+"\n") {
				t.Fatalf("step %d: scrape lacks %q:\n%s", i, want, grepLines(out, "quick_adapt|freeze_episodes"))
			}
		}
	}
	// Refresh between scrapes catches a connection's counts before it closes.
	conns = []transport.ConnInfo{{ID: 3, Peer: pa, QuickAdapts: 100}}
	m.Refresh()
	conns = nil
	if out := scrape(m); !strings.Contains(out, "smartt_cc_quick_adapt_total 112\n") {
		t.Fatalf("a connection seen only by Refresh is missing from the total:\n%s", grepLines(out, "quick_adapt"))
	}
}

// Every series of the daemon's registry (this package's, with per-connection series on,
// plus the Go and process collectors) passes client_golang's promlint, and the build
// info is there.
func TestPromlintClean(t *testing.T) {
	var st transport.Stats
	st.RTTHist[3] = 1
	conns := []transport.ConnInfo{{ID: 0xab, Peer: netip.MustParseAddrPort("10.0.0.2:23600"), QuickAdapts: 1}}
	for _, perConn := range []bool{false, true} {
		m := New(Sources{Engine: func() transport.Stats { return st }, Conns: func() []transport.ConnInfo { return conns },
			API: func() api.Stats { return api.Stats{} }, CC: "smartt", LB: "reps", PerConn: perConn})
		m.ObserveMessage(1000, 10)
		out := scrape(m)
		problems, err := promlint.New(strings.NewReader(out)).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("perConn=%v: promlint: %s: %s", perConn, p.Metric, p.Text)
		}
		v := version.Get()
		want := `smartt_build_info{goversion="` + v.GoVersion + `",revision="` + v.Revision + `",version="` + v.Version + `"} 1`
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s:\n%s", want, grepLines(out, "build_info"))
		}
		if perConn && (!strings.Contains(out, "smartt_conn_cc_quick_adapt_total{") || !strings.Contains(out, "smartt_conn_cc_cuts_total{")) {
			t.Error("per-connection series missing with PerConn")
		}
	}
}

func grepLines(s, re string) string {
	r := regexp.MustCompile(re)
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if r.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// BenchmarkObserveBatch is the per-batch cost on the receive path (no per-packet work).
func BenchmarkObserveBatch(b *testing.B) {
	m := New(Sources{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.ObserveBatch(64, 64)
	}
}
