package client_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
	"github.com/smartt-transport/smartt/transport/client"
)

// fakeControl serves control requests on a Unix socket with answer (given the request's
// index on its connection; it returns the raw response, "" to close, or "hang" to wait),
// counting connections and requests.
func fakeControl(t *testing.T, answer func(i int) string) (path string, conns, reqs *atomic.Int64) {
	t.Helper()
	path, ln := unixListener(t)
	conns, reqs = new(atomic.Int64), new(atomic.Int64)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for i := 0; ; i++ {
					if _, err := apihttp.ReadRequest(br, apihttp.ServerLimits); err != nil {
						return
					}
					reqs.Add(1)
					switch a := answer(i); a {
					case "":
						return
					case "hang":
						time.Sleep(5 * time.Second)
						return
					default:
						io.WriteString(conn, a)
					}
				}
			}()
		}
	}()
	return path, conns, reqs
}

const versionBody = `{"version": "v9", "protocol": "smartt-msg/2"}`

func okVersion(int) string {
	return string(apihttp.AppendResponse(nil, 200, apihttp.Header{{Name: "Content-Type", Value: "application/json"}}, []byte(versionBody)))
}

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Control requests of one Client share a kept-alive connection.
func TestControlKeepAlive(t *testing.T) {
	path, conns, reqs := fakeControl(t, okVersion)
	c := client.New(path)
	for range 3 {
		if v, err := c.Version(tctx(t, 10*time.Second)); err != nil || v.Version != "v9" {
			t.Fatalf("version %+v %v", v, err)
		}
	}
	if conns.Load() != 1 || reqs.Load() != 3 {
		t.Fatalf("%d connections for %d requests, want 1 for 3", conns.Load(), reqs.Load())
	}
}

// A kept connection the daemon closed meanwhile (its idle_timeout) costs a retry on a
// new connection, not an error.
func TestControlRetryAfterDaemonClosedKeptConnection(t *testing.T) {
	path, conns, _ := fakeControl(t, func(i int) string {
		if i > 0 {
			return "" // closes instead of answering a second request
		}
		return okVersion(i)
	})
	c := client.New(path)
	for i := range 2 {
		if _, err := c.Version(tctx(t, 10*time.Second)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if conns.Load() != 2 {
		t.Fatalf("%d connections, want 2", conns.Load())
	}
}

// A daemon of an earlier version answered large bodies chunked (net/http did): read.
func TestControlChunkedFromEarlierDaemon(t *testing.T) {
	path, _, _ := fakeControl(t, func(int) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"10\r\n" + versionBody[:16] + "\r\n" + "1d\r\n" + versionBody[16:] + "\r\n0\r\n\r\n"
	})
	if v, err := client.New(path).Version(tctx(t, 10*time.Second)); err != nil || v.Version != "v9" || v.Protocol != "smartt-msg/2" {
		t.Fatalf("version %+v %v", v, err)
	}
}

// An error status comes back as *Error with the daemon's JSON text; a daemon that does not
// answer is given up at the context's deadline, with the context's error.
func TestControlErrorsAndDeadline(t *testing.T) {
	path, _, _ := fakeControl(t, func(int) string {
		return string(apihttp.AppendResponse(nil, 503, nil, []byte(`{"error": "daemon is shutting down"}`)))
	})
	_, err := client.New(path).Status(tctx(t, 10*time.Second))
	var e *client.Error
	if !errors.As(err, &e) || e.HTTP != 503 || e.Text != "daemon is shutting down" {
		t.Fatalf("503: %v", err)
	}
	path, _, _ = fakeControl(t, func(int) string { return "hang" })
	start := time.Now()
	_, err = client.New(path).Status(tctx(t, 200*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("silent daemon: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err = client.New(path).Status(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
