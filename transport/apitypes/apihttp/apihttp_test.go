package apihttp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

func read(s string, lim Limits) (*Request, error) {
	return ReadRequest(bufio.NewReaderSize(strings.NewReader(s), 4096), lim)
}

// status is the refusal's status, 0 for a request read, -1 for another error.
func status(err error) int {
	var e *Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Status
	}
	return -1
}

// fields returns Host and n-1 field lines "Xnnn: v", the last one's value widened so
// that all total bytes bytes with their CRLFs (when bytes is above their length).
func fields(n, bytes int) string {
	s := "Host: x\r\n"
	for i := 1; i < n; i++ {
		s += fmt.Sprintf("X%03d: v\r\n", i)
	}
	if pad := bytes - len(s); pad > 0 {
		s = s[:len(s)-2] + strings.Repeat("v", pad) + "\r\n"
	}
	return s
}

// Every limit at its value is taken, one beyond it refused with its status.
func TestLimitsAtAndBeyond(t *testing.T) {
	lim := ServerLimits
	line := func(n int) string { // a request line of n bytes
		p := "GET /" + strings.Repeat("a", n-len("GET / HTTP/1.1")) + " HTTP/1.1"
		return p + "\r\nHost: x\r\n\r\n"
	}
	body := func(n int64) string {
		return "POST /v1/session HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.FormatInt(n, 10) + "\r\n\r\n" + strings.Repeat("b", int(n))
	}
	for _, c := range []struct {
		name string
		req  string
		want int
	}{
		{"line at limit", line(lim.Line), 0},
		{"line beyond", line(lim.Line + 1), 414},
		{"fields at limit", "GET / HTTP/1.1\r\n" + fields(lim.Fields, 0) + "\r\n", 0},
		{"fields beyond", "GET / HTTP/1.1\r\n" + fields(lim.Fields+1, 0) + "\r\n", 431},
		{"header bytes at limit", "GET / HTTP/1.1\r\n" + fields(2, lim.Header) + "\r\n", 0},
		{"header bytes beyond", "GET / HTTP/1.1\r\n" + fields(2, lim.Header+1) + "\r\n", 431},
		{"one header line beyond", "GET / HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("v", lim.Header) + "\r\n\r\n", 431},
		{"body at limit", body(lim.Body), 0},
		{"body beyond", body(lim.Body + 1), 413},
	} {
		r, err := read(c.req, lim)
		if got := status(err); got != c.want {
			t.Errorf("%s: status %d (%v), want %d", c.name, got, err, c.want)
		}
		if c.want == 0 && err == nil && len(c.req) != len(r.Append(nil)) {
			t.Errorf("%s: re-serialised to %d bytes, read %d", c.name, len(r.Append(nil)), len(c.req))
		}
	}
	if len(fields(2, lim.Header)) != lim.Header || len(fields(lim.Fields, 0)) > lim.Header {
		t.Fatal("test helper: header sizes off")
	}
}

// Everything outside the subset is refused with a 4xx (505 for another HTTP version).
func TestRefusals(t *testing.T) {
	const ok = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, c := range []struct {
		name string
		req  string
		want int
	}{
		{"plain", ok, 0},
		{"query", "GET /v1/status?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"HTTP/1.0 with Host", "GET /v1/status HTTP/1.0\r\nHost: x\r\n\r\n", 0},
		{"whitespace around a value", "GET / HTTP/1.1\r\nHost: \t x \t\r\n\r\n", 0},
		{"empty value", "GET / HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n\r\n", 0},
		{"Content-Length 0", "POST /v1/session HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 0},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"Transfer-Encoding identity", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", 400},
		{"HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", 400},
		{"HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n", 400},
		{"Content-Length letters", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1a\r\n\r\n", 400},
		{"Content-Length negative", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
		{"Content-Length plus", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n", 400},
		{"Content-Length empty", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400},
		{"Content-Length list", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\nb", 400},
		{"Content-Length huge", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
		{"Content-Length twice, same", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nb", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400},
		{"tab fold", "GET / HTTP/1.1\r\nHost: x\r\n\tb\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
		{"no colon", "GET / HTTP/1.1\r\nHost x\r\n\r\n", 400},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: x\x00\r\n\r\n", 400},
		{"DEL in value", "GET / HTTP/1.1\r\nHost: x\x7f\r\n\r\n", 400},
		{"non-ASCII value", "GET / HTTP/1.1\r\nHost: h\xc3\xa9\r\n\r\n", 400},
		{"CR in value", "GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n", 400},
		{"bare LF line", "GET / HTTP/1.1\nHost: x\n\n", 400},
		{"bare LF field", "GET / HTTP/1.1\r\nHost: x\n\r\n", 400},
		{"two spaces", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"tab separator", "GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"absolute target", "GET http://x/v1/status HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"asterisk target", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"control in target", "GET /a\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"fragment in target", "GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"method not a token", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"lower-case version", "GET / http/1.1\r\nHost: x\r\n\r\n", 400},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"HTTP/0.9 line", "GET /\r\n\r\n", 400},
	} {
		_, err := read(c.req, ServerLimits)
		if got := status(err); got != c.want {
			t.Errorf("%s: status %d (%v), want %d", c.name, got, err, c.want)
		}
		if got := status(err); got != 0 && got/100 != 4 && got != 505 {
			t.Errorf("%s: status %d is not a refusal", c.name, got)
		}
	}
}

// A connection that ends before or inside a request is not a refusal.
func TestTruncated(t *testing.T) {
	if _, err := read("", ServerLimits); err != io.EOF {
		t.Fatalf("empty: %v, want io.EOF", err)
	}
	for _, s := range []string{"GET / HT", "GET / HTTP/1.1\r\nHost: x\r\n", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nab"} {
		if _, err := read(s, ServerLimits); err != io.ErrUnexpectedEOF {
			t.Errorf("%q: %v, want io.ErrUnexpectedEOF", s, err)
		}
	}
}

// Parsed fields, keep-alive and the target's path.
func TestRequestFields(t *testing.T) {
	r, err := read("POST /v1/session?v=2 HTTP/1.1\r\nHost: smarttd\r\nconnection: Upgrade, close\r\nUPGRADE:  smartt-msg/2 \r\n"+
		"Content-Length: 2\r\n\r\nhi", ServerLimits)
	if err != nil {
		t.Fatal(err)
	}
	if r.Path() != "/v1/session" || r.Header.Get("upgrade") != "smartt-msg/2" || string(r.Body) != "hi" ||
		!r.Header.HasToken("Connection", "upgrade") || r.KeepAlive() {
		t.Fatalf("parsed %+v", r)
	}
	r, _ = read("GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", ServerLimits)
	if r.KeepAlive() {
		t.Fatal("an HTTP/1.0 request kept the connection")
	}
	r, _ = read("GET / HTTP/1.1\r\nHost: x\r\n\r\n", ServerLimits)
	if !r.KeepAlive() {
		t.Fatal("an HTTP/1.1 request without Connection: close did not keep the connection")
	}
}

func readResp(s string) (*Response, *bufio.Reader, error) {
	br := bufio.NewReader(strings.NewReader(s))
	r, err := ReadResponse(br, ClientLimits)
	return r, br, err
}

// Responses: Content-Length bodies, chunked and close-delimited ones of earlier daemons,
// a 101 whose following bytes stay unread, and heads outside the subset refused.
func TestReadResponse(t *testing.T) {
	r, _, err := readResp(string(AppendResponse(nil, 503, Header{{"Content-Type", "application/json"}}, []byte(`{"error":"x"}`))))
	if err != nil || r.Status != 503 || string(r.Body) != `{"error":"x"}` || r.Close {
		t.Fatalf("content-length: %+v %v", r, err)
	}
	r, _, err = readResp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n")
	if err != nil || string(r.Body) != "abcde" {
		t.Fatalf("chunked: %+v %v", r, err)
	}
	r, _, err = readResp("HTTP/1.0 200 OK\r\n\r\nall of it")
	if err != nil || string(r.Body) != "all of it" || !r.Close {
		t.Fatalf("close-delimited: %+v %v", r, err)
	}
	r, br, err := readResp("HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/2\r\n\r\nFRAMES")
	if rest, _ := io.ReadAll(br); err != nil || r.Status != 101 || r.Body != nil || string(rest) != "FRAMES" {
		t.Fatalf("101: %+v %v, rest %q", r, err, rest)
	}
	for _, s := range []string{"HTTP/1.1 2000 OK\r\n\r\n", "SMTP 200 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 200 OK\r\nX y\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n"} {
		if _, _, err := readResp(s); !errors.Is(err, ErrHead) {
			t.Errorf("%q: %v, want ErrHead", s, err)
		}
	}
}

// fuzzLimits are small, so that the fuzzer reaches every limit.
var fuzzLimits = Limits{Line: 64, Header: 256, Fields: 8, Body: 64}

// FuzzReadRequest: any input is either refused cleanly (an *Error, or the input ended)
// or read as a request whose wire form reads back as the same request.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/session HTTP/1.1\r\nHost: smarttd\r\nConnection: Upgrade\r\nUpgrade: smartt-msg/2, smartt-msg/1\r\nContent-Length: 0\r\n\r\n",
		"GET /v1/status HTTP/1.0\r\nHost:x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ReadRequest(bufio.NewReaderSize(strings.NewReader(string(in)), 16), fuzzLimits)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) && err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("%q: unclean error %T %v", in, err, err)
			}
			if e != nil && (e.Status < 400 || e.Status > 505 || e.Reason == "") {
				t.Fatalf("%q: refusal %d %q", in, e.Status, e.Reason)
			}
			return
		}
		// Re-serialising writes "Name: value": at most a byte more per field.
		relaxed := fuzzLimits
		relaxed.Header += fuzzLimits.Fields
		out := r.Append(nil)
		r2, err := ReadRequest(bufio.NewReader(strings.NewReader(string(out))), relaxed)
		if err != nil || !r.Equal(r2) {
			t.Fatalf("%q read as %+v, written as %q, read back as %+v (%v)", in, r, out, r2, err)
		}
	})
}

// A body above the limit is refused with what it declared left unread, so that a server
// can discard it before closing; other refusals declare none.
func TestBodyRefusalUnread(t *testing.T) {
	head := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: "
	_, err := read(head+"20480\r\n\r\nbbbb", ServerLimits)
	var e *Error
	if !errors.As(err, &e) || e.Status != 413 || e.Unread != 20480 {
		t.Fatalf("20 KiB body: %v, want 413 with 20480 unread", err)
	}
	_, err = read(head+"1x\r\n\r\n", ServerLimits)
	if !errors.As(err, &e) || e.Status != 400 || e.Unread != 0 {
		t.Fatalf("bad Content-Length: %v, want 400 with nothing unread", err)
	}
}
