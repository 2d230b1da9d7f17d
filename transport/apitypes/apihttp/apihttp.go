// Package apihttp is the strict subset of HTTP/1.1 that smarttd's Unix-socket API speaks
// (docs/api.md, "Wire: the HTTP subset"): request and response heads of ASCII field
// lines ended by CRLF, bodies framed by Content-Length only, hard limits on every part a
// peer controls. The daemon's server and the Go client both use it, so that neither
// links net/http (and with it crypto/tls, HTTP/2 and MIME) for a handful of requests
// over a local socket.
package apihttp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Field is one header field as it arrived: the name's case kept, the value without the
// whitespace around it.
type Field struct{ Name, Value string }

// Header is a head's fields in order.
type Header []Field

// Get returns the value of the first field named name (case-insensitive), or "".
func (h Header) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// count returns how many fields are named name (case-insensitive).
func (h Header) count(name string) int {
	n := 0
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			n++
		}
	}
	return n
}

// HasToken reports whether the field name lists token (case-insensitive), as
// Connection: keep-alive, Upgrade does.
func (h Header) HasToken(name, token string) bool {
	for _, f := range h {
		if !strings.EqualFold(f.Name, name) {
			continue
		}
		for _, t := range strings.Split(f.Value, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Limits bound what a head and body may hold.
type Limits struct {
	Line   int   // the request or status line, bytes without its CRLF
	Header int   // all field lines together, bytes with their CRLFs
	Fields int   // field lines
	Body   int64 // Content-Length
}

// ServerLimits are the daemon's limits on requests. The API's requests are a request
// line, a few fields and no body; every client of it sends well under a tenth of these.
var ServerLimits = Limits{Line: 4096, Header: 16 << 10, Fields: 64, Body: 16 << 10}

// ClientLimits are the client's limits on responses: /v1/conns of a daemon with many
// connections is the largest body.
var ClientLimits = Limits{Line: 4096, Header: 64 << 10, Fields: 128, Body: 256 << 20}

// Error is a request refused: the status to answer with and why.
type Error struct {
	Status int
	Reason string
	// Unread is what remains of the body the request declared (a 413's): a server that
	// discards some of it before closing lets a client still sending read the answer
	// instead of a reset.
	Unread int64
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, StatusText(e.Status), e.Reason)
}

func bad(status int, format string, a ...any) error {
	return &Error{Status: status, Reason: fmt.Sprintf(format, a...)}
}

// ErrHead is wrapped by errors of a response head that is not of the subset.
var ErrHead = errors.New("malformed HTTP response")

// readLine reads one line ended by CRLF and returns it without the CRLF; a line longer
// than max bytes is refused with status, as is a bare CR or LF.
func readLine(br *bufio.Reader, max, status int, what string) (string, error) {
	var line []byte
	for {
		b, err := br.ReadSlice('\n')
		if len(line)+len(b) > max+2 {
			return "", bad(status, "%s longer than %d bytes", what, max)
		}
		line = append(line, b...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		break
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return "", bad(400, "%s not ended by CRLF", what)
	}
	return string(line[:len(line)-2]), nil
}

// isTchar reports whether c may appear in a token (RFC 9110, 5.6.2).
func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

// readFields reads field lines up to the empty line.
func readFields(br *bufio.Reader, lim Limits) (Header, error) {
	var h Header
	total := 0
	for {
		line, err := readLine(br, lim.Header, 431, "header")
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the head had begun
		}
		if err != nil {
			return nil, err
		}
		if line == "" {
			return h, nil
		}
		if total += len(line) + 2; total > lim.Header {
			return nil, bad(431, "header fields longer than %d bytes in all", lim.Header)
		}
		if len(h) == lim.Fields {
			return nil, bad(431, "more than %d header fields", lim.Fields)
		}
		f, err := parseField(line)
		if err != nil {
			return nil, err
		}
		h = append(h, f)
	}
}

// parseField parses "name: value" (ASCII only, no obs-fold).
func parseField(line string) (Field, error) {
	if line[0] == ' ' || line[0] == '\t' {
		return Field{}, bad(400, "folded header line (obs-fold) not allowed")
	}
	i := strings.IndexByte(line, ':')
	if i < 0 || !isToken(line[:i]) {
		return Field{}, bad(400, "malformed header line %.40q", line)
	}
	v := line[i+1:]
	for j := 0; j < len(v); j++ {
		if c := v[j]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return Field{}, bad(400, "header %s: byte 0x%02x not allowed (ASCII only)", line[:i], c)
		}
	}
	return Field{Name: line[:i], Value: strings.Trim(v, " \t")}, nil
}

// contentLength returns the body's length from h: 0 without Content-Length; refused when
// it is repeated, not a decimal number, or above max.
func contentLength(h Header, max int64) (int64, error) {
	switch h.count("Content-Length") {
	case 0:
		return 0, nil
	case 1:
	default:
		return 0, bad(400, "more than one Content-Length")
	}
	v := h.Get("Content-Length")
	if v == "" || len(v) > 19 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, bad(400, "Content-Length %.40q is not a decimal number", v)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, bad(400, "Content-Length %.40q is not a decimal number", v)
	}
	if n > max {
		return 0, &Error{Status: 413, Reason: fmt.Sprintf("body of %d bytes is above the limit of %d", n, max), Unread: n}
	}
	return n, nil
}
