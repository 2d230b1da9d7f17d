package api_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// wireConn is a raw connection to the API socket with a reader for its responses.
type wireConn struct {
	net.Conn
	br *bufio.Reader
}

func dialWire(t *testing.T, sock string) *wireConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &wireConn{c, bufio.NewReader(c)}
}

// exchange writes req and reads one response.
func (w *wireConn) exchange(t *testing.T, req string) *apihttp.Response {
	t.Helper()
	if _, err := io.WriteString(w, req); err != nil {
		t.Fatal(err)
	}
	resp, err := apihttp.ReadResponse(w.br, apihttp.ClientLimits)
	if err != nil {
		t.Fatalf("%.60q: %v", req, err)
	}
	return resp
}

// closed reports whether the daemon closed the connection (nothing more arrives). A
// refusal before the body was read closes with that body unread: the reset after the
// response is a close too.
func (w *wireConn) closed() bool {
	w.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := w.br.ReadByte()
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
}

func errorText(r *apihttp.Response) string {
	var e struct{ Error string }
	json.Unmarshal(r.Body, &e)
	return e.Error
}

// Requests outside the subset, and each limit one beyond it, are refused on the socket
// with their 4xx, a JSON error naming the subset, Connection: close and the connection
// closed, and counted in protocol_errors; at each limit the request is served.
func TestWireRefusalsAndLimits(t *testing.T) {
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), nil)
	sock, lim := a.Config.API.Socket, apihttp.ServerLimits
	target := func(n int) string { return "/v1/version?" + strings.Repeat("q", n-len("GET /v1/version? HTTP/1.1")) }
	filler := func(fields, bytes int) string { // Host and fields-1 more, bytes in all with CRLFs
		s := "Host: x\r\n"
		for i := 1; i < fields; i++ {
			s += fmt.Sprintf("X%03d: v\r\n", i)
		}
		if pad := bytes - len(s); pad > 0 {
			s = s[:len(s)-2] + strings.Repeat("v", pad) + "\r\n"
		}
		return s
	}
	body := func(n int64) string {
		return fmt.Sprintf("GET /v1/version HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", n, strings.Repeat("b", int(n)))
	}
	refusals := 0
	for _, c := range []struct {
		name, req string
		want      int
	}{
		{"line at limit", "GET " + target(lim.Line) + " HTTP/1.1\r\nHost: x\r\n\r\n", 200},
		{"line beyond", "GET " + target(lim.Line+1) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
		{"header bytes at limit", "GET /v1/version HTTP/1.1\r\n" + filler(2, lim.Header) + "\r\n", 200},
		{"header bytes beyond", "GET /v1/version HTTP/1.1\r\n" + filler(2, lim.Header+1) + "\r\n", 431},
		{"fields at limit", "GET /v1/version HTTP/1.1\r\n" + filler(lim.Fields, 0) + "\r\n", 200},
		{"fields beyond", "GET /v1/version HTTP/1.1\r\n" + filler(lim.Fields+1, 0) + "\r\n", 431},
		{"body at limit", body(lim.Body), 200},
		{"body beyond", body(lim.Body + 1), 413},
		{"chunked", "POST /v1/session HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"HTTP/1.0 without Host", "GET /v1/version HTTP/1.0\r\n\r\n", 400},
		{"bad Content-Length", "GET /v1/version HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400},
		{"duplicate Content-Length", "GET /v1/version HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nb", 400},
		{"obs-fold", "GET /v1/version HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400},
		{"NUL", "GET /v1/version HTTP/1.1\r\nHost: x\x00\r\n\r\n", 400},
		{"bare LF", "GET /v1/version HTTP/1.1\nHost: x\n\n", 400},
		{"HTTP/2", "GET /v1/version HTTP/2.0\r\nHost: x\r\n\r\n", 505},
	} {
		w := dialWire(t, sock)
		r := w.exchange(t, c.req)
		if r.Status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.want)
			continue
		}
		if c.want == 200 {
			continue
		}
		refusals++
		if !strings.Contains(errorText(r), "docs/api.md") || r.Header.Get("Content-Type") != "application/json" ||
			!r.Close || !w.closed() {
			t.Errorf("%s: %d %q %v, want a JSON error naming docs/api.md, then the connection closed", c.name, r.Status, r.Body, r.Header)
		}
	}
	if got := a.API.Stats().ProtocolErrors; got != uint64(refusals) {
		t.Fatalf("protocol_errors %d, want %d", got, refusals)
	}
}

// Slowloris: a head trickled a byte at a time does not extend api.header_timeout; it is
// answered 408 and counted in read_timeouts. A connection that sends nothing is closed
// at the same deadline without an answer.
func TestWireHeadDeadline(t *testing.T) {
	const ht = 300 * time.Millisecond
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), func(c *smarttd.Config) { c.API.HeaderTimeout = config.Duration(ht) })
	start := time.Now() // before the dial: the daemon may accept before Dial returns
	w := dialWire(t, a.Config.API.Socket)
	go func() {
		for _, b := range []byte("GET /v1/version HTTP/1.1\r\nHost: x\r\nX-Slow: ") {
			if _, err := w.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(ht / 10)
		}
	}()
	r, err := apihttp.ReadResponse(w.br, apihttp.ClientLimits)
	el := time.Since(start)
	if err != nil || r.Status != 408 || !strings.Contains(errorText(r), "api.header_timeout") || el < ht-50*time.Millisecond || el > 3*ht+2*time.Second {
		t.Fatalf("trickled head: %+v %v after %v", r, err, el)
	}
	start = time.Now()
	silent := dialWire(t, a.Config.API.Socket)
	b, err := io.ReadAll(silent)
	if el := time.Since(start); err != nil || len(b) != 0 || el < ht-50*time.Millisecond {
		t.Fatalf("silent connection: %q %v after %v", b, err, el)
	}
	if st := a.API.Stats(); st.ReadTimeouts != 1 || st.ProtocolErrors != 0 {
		t.Fatalf("read_timeouts %d, protocol_errors %d; want 1, 0", st.ReadTimeouts, st.ProtocolErrors)
	}
}

// Keep-alive: HTTP/1.1 requests share a connection, pipelined ones too, HEAD has no
// body; Connection: close and HTTP/1.0 end it after the response; an idle connection is
// closed after api.idle_timeout, and at shutdown.
func TestWireKeepAlive(t *testing.T) {
	const idle = 300 * time.Millisecond
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), func(c *smarttd.Config) { c.API.IdleTimeout = config.Duration(idle) })
	sock := a.Config.API.Socket
	w := dialWire(t, sock)
	for _, p := range []string{"/v1/version", "/v1/status", "/v1/counters"} {
		if r := w.exchange(t, "GET "+p+" HTTP/1.1\r\nHost: x\r\n\r\n"); r.Status != 200 || r.Close || len(r.Body) == 0 {
			t.Fatalf("%s: %d close %v", p, r.Status, r.Close)
		}
	}
	io.WriteString(w, "GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\nHEAD /v1/version HTTP/1.1\r\nHost: x\r\n\r\n")
	r1, err1 := apihttp.ReadResponse(w.br, apihttp.ClientLimits)
	// HEAD: the head says the body's length, no body follows.
	line, _ := w.br.ReadString('\n')
	if err1 != nil || r1.Status != 200 || line != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("pipelined: %v %v, then %q", r1, err1, line)
	}
	for line != "\r\n" {
		line, _ = w.br.ReadString('\n')
	}
	if r := w.exchange(t, "GET /v1/nosuch HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); r.Status != 404 || !r.Close || !w.closed() {
		t.Fatalf("Connection: close: %d close %v", r.Status, r.Close)
	}
	w = dialWire(t, sock)
	if r := w.exchange(t, "GET /v1/version HTTP/1.0\r\nHost: x\r\n\r\n"); r.Status != 200 || !r.Close || !w.closed() {
		t.Fatalf("HTTP/1.0: %d close %v", r.Status, r.Close)
	}
	w = dialWire(t, sock)
	start := time.Now() // before the response: the idle time starts after it
	w.exchange(t, "GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n")
	if !w.closed() || time.Since(start) < idle-50*time.Millisecond {
		t.Fatalf("idle connection: closed %v after %v", w.closed(), time.Since(start))
	}
	b := startDaemon(t, daemon.NewMemNet(), addrB, shortDir(t), nil) // idle_timeout 30 s
	w = dialWire(t, b.Config.API.Socket)
	w.exchange(t, "GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n")
	start = time.Now()
	b.API.BeginShutdown()
	if !w.closed() || time.Since(start) > 4*time.Second {
		t.Fatalf("idle connection at shutdown: closed after %v", time.Since(start))
	}
}

// Go's net/http client: GET and POST with a Content-Length body are served on kept
// connections; a body of unknown length (sent chunked) is refused with 400.
func TestWireGoHTTPClient(t *testing.T) {
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), nil)
	hc := &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) {
		return net.Dial("unix", a.Config.API.Socket)
	}}}
	for i := range 3 {
		resp, err := hc.Get("http://smarttd/v1/version")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"protocol"`) {
			t.Fatalf("GET %d: %d %s", i, resp.StatusCode, b)
		}
	}
	resp, err := hc.Post("http://smarttd/v1/status", "text/plain", strings.NewReader("x"))
	if err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST with a body: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = hc.Post("http://smarttd/v1/status", "text/plain", io.MultiReader(strings.NewReader("x")))
	if err != nil || resp.StatusCode != 400 {
		t.Fatalf("chunked POST: %v %v", resp, err)
	}
	resp.Body.Close()
}

// curl --unix-socket, as docs/api.md shows it: GETs on one connection, HTTP/1.0, the
// JSON 405, and a chunked upload refused.
func TestWireCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: the curl compatibility check needs it")
	}
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), nil)
	run := func(args ...string) string {
		out, err := exec.Command(curl, append([]string{"-sS", "--unix-socket", a.Config.API.Socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("http://x/v1/version", "http://x/v1/status"); strings.Count(out, `"version"`) != 2 || !strings.Contains(out, `"uptime_s"`) {
		t.Fatalf("two GETs: %s", out)
	}
	if out := run("--http1.0", "http://x/v1/version"); !strings.Contains(out, `"protocol"`) {
		t.Fatalf("HTTP/1.0: %s", out)
	}
	if out := run("-X", "DELETE", "-w", " %{http_code}", "http://x/v1/session"); !strings.HasSuffix(out, " 405") || !strings.Contains(out, "use POST") {
		t.Fatalf("DELETE: %s", out)
	}
	if out := run("-H", "Transfer-Encoding: chunked", "-d", "x", "-w", " %{http_code}", "http://x/v1/status"); !strings.HasSuffix(out, " 400") {
		t.Fatalf("chunked upload: %s", out)
	}
}
