package smarttd_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/metrics"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/version"
)

// TestMetricsEndpointPromlintClean scrapes the /metrics endpoint of two real daemons (one
// with per-connection series, one without) after a message, and runs client_golang's
// promlint over each scrape: no problems allowed.
func TestMetricsEndpointPromlintClean(t *testing.T) {
	ds, err := smarttd.LocalPair(t.TempDir(), smarttd.Options{Metrics: metrics.ForDaemon}, func(c *smarttd.Config) {
		c.LogLevel, c.Metrics = "error", "127.0.0.1:0"
		c.MetricsPerConnection = c.Listen.Addr().As4()[3] == 1 // on for the first daemon only
	})
	if err != nil {
		t.Fatal(err)
	}
	defer smarttd.StopAll(ds[:], 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rx, err := client.New(ds[1].Config.API.Socket).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if _, err := rx.Bind(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := client.New(ds[0].Config.API.Socket).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if _, err := tx.Bind(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Send(ctx, ds[1].Config.Listen, 1, make([]byte, 100_000)); err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		resp, err := http.Get("http://" + d.MetricsAddr.String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out := string(b)
		problems, err := promlint.New(strings.NewReader(out)).Lint()
		if err != nil {
			t.Fatalf("daemon %d: promlint: %v", i, err)
		}
		for _, p := range problems {
			t.Errorf("daemon %d: promlint: %s: %s", i, p.Metric, p.Text)
		}
		for _, want := range []string{`smartt_build_info{goversion="`, `version="` + version.String() + `"} 1`,
			"smartt_cc_quick_adapt_total ", "smartt_lb_freeze_episodes_total ", "smartt_socket_capability{cap=\"df\"} 1",
			`smartt_algorithm_info{cc="smartt",lb="reps"} 1`} {
			if !strings.Contains(out, want) {
				t.Errorf("daemon %d: /metrics lacks %q", i, want)
			}
		}
		if perConn := strings.Contains(out, "smartt_conn_window_bytes{"); perConn != (i == 0) {
			t.Errorf("daemon %d: per-connection series present = %v, want %v (metrics_per_connection)", i, perConn, i == 0)
		}
	}
}
