package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"smartt/transport/client"
)

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("udp:\n  batch_size: 5000\n"), 0o644)
	var out bytes.Buffer
	err := run([]string{"-config", bad}, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "udp.batch_size = 5000: must be in 1..1024") {
		t.Fatalf("err = %v", err)
	}
	err = run([]string{"-listen", "nope"}, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "-listen") {
		t.Fatalf("err = %v", err)
	}
	out.Reset()
	if err := run([]string{"-print-config"}, &out, nil); err != nil || !strings.Contains(out.String(), "transport:") {
		t.Fatalf("print-config: %v", err)
	}
}

func TestRunServesAndStops(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "d.yaml")
	os.WriteFile(cfgFile, []byte("listen: 127.0.0.1:34791\nmetrics: 127.0.0.1:0\nlog_level: warn\nshutdown_timeout: 1s\n"), 0o644)
	sock := filepath.Join(dir, "d.sock")
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-config", cfgFile, "-socket", sock, "-metrics", "127.0.0.1:39464"}, new(bytes.Buffer), stop)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client.New(sock)
	for {
		st, err := c.Status(ctx)
		if err == nil {
			if st.Listen != "127.0.0.1:34791" {
				t.Fatalf("status %+v", st)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get("http://127.0.0.1:39464/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"smartt_packets_total", "smartt_socket_capability", "smartt_timestamp_source"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	close(stop)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("daemon did not stop")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatal("socket left behind")
	}
}
