package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/version"
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
	if err := run([]string{"-version"}, &out, nil); err != nil || out.String() != version.Long("smarttd")+"\n" {
		t.Fatalf("-version: %v, %q", err, out.String())
	}
	out.Reset()
	if err := run([]string{"-print-config"}, &out, nil); err != nil || !strings.Contains(out.String(), "transport:") {
		t.Fatalf("print-config: %v", err)
	}
}

// loopback is a loopback address of this test process's own (127.0.0.0/8 is all
// loopback), so that concurrent runs of these tests with fixed ports do not collide.
var loopback = fmt.Sprintf("127.%d.%d.1", os.Getpid()>>8&255, os.Getpid()&255)

func TestRunServesAndStops(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "d.yaml")
	os.WriteFile(cfgFile, []byte("listen: "+loopback+":23600\nmetrics: 127.0.0.1:0\nlog_level: warn\nshutdown_timeout: 1s\n"), 0o644)
	sock := filepath.Join(dir, "d.sock")
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-config", cfgFile, "-socket", sock, "-metrics", loopback + ":39464"}, new(bytes.Buffer), stop)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client.New(sock)
	for {
		st, err := c.Status(ctx)
		if err == nil {
			if st.Listen != loopback+":23600" {
				t.Fatalf("status %+v", st)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A failure below must not leave the daemon holding its ports for the next tests.
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			close(stop)
			<-done
		}
	})
	// The metrics listener may come up a moment after the API answers.
	var resp *http.Response
	for {
		var err error
		if resp, err = http.Get("http://" + loopback + ":39464/metrics"); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
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
	stopped = true
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

func TestMain(m *testing.M) {
	if os.Getenv("SMARTTD_TEST_MAIN") == "1" {
		main() // the test binary runs as the daemon (see TestSIGTERM)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSIGTERM runs the daemon as a process, leaves a message outstanding, sends SIGTERM
// and checks that the daemon exits within its shutdown deadline and the client heard
// that its message failed.
func TestSIGTERM(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	cfgFile := filepath.Join(dir, "d.yaml")
	os.WriteFile(cfgFile, []byte("listen: "+loopback+":23601\nlog_level: warn\nshutdown_timeout: 300ms\n"), 0o644)
	cmd := exec.Command(os.Args[0], "-config", cfgFile, "-socket", sock)
	cmd.Env = append(os.Environ(), "SMARTTD_TEST_MAIN=1")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client.New(sock)
	for {
		if _, err := c.Status(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Bind(ctx, 1)
	// Nobody listens at 127.0.0.9:9: the message stays outstanding.
	p, err := s.SendAsync(netip.MustParseAddrPort("127.0.0.9:9"), 1, []byte("in flight at shutdown"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	if _, err := p.Wait(ctx); !errors.Is(err, client.ErrFailed) {
		t.Fatalf("outstanding message: %v, want a failure notification", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v with a 300ms deadline", d)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatal("socket left behind")
	}
}

// TestSystemdNotify runs the daemon as systemd would with Type=notify and WatchdogSec:
// NOTIFY_SOCKET and WATCHDOG_USEC set. It must report READY=1 once the API answers,
// WATCHDOG=1 while running, and STOPPING=1 on SIGTERM.
func TestSystemdNotify(t *testing.T) {
	dir := t.TempDir()
	nsock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	sock := filepath.Join(dir, "d.sock")
	cfgFile := filepath.Join(dir, "d.yaml")
	os.WriteFile(cfgFile, []byte("listen: "+loopback+":23602\nlog_level: warn\nshutdown_timeout: 300ms\n"), 0o644)
	cmd := exec.Command(os.Args[0], "-config", cfgFile, "-socket", sock)
	cmd.Env = append(os.Environ(), "SMARTTD_TEST_MAIN=1", "NOTIFY_SOCKET="+nsock, "WATCHDOG_USEC=200000")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	next := func(want string) string {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case m := <-msgs:
				if strings.Contains(m, want) {
					return m
				}
			case <-timeout:
				t.Fatalf("no %q from the daemon within 10 s", want)
			}
		}
	}
	ready := next("READY=1")
	if !strings.Contains(ready, "STATUS=listening on "+loopback+":23602") {
		t.Errorf("READY message %q lacks the status", ready)
	}
	// READY=1 comes after the API is up: it answers at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := client.New(sock).Status(ctx); err != nil {
		t.Fatalf("API not answering after READY=1: %v", err)
	}
	next("WATCHDOG=1")
	next("WATCHDOG=1")
	cmd.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
}
