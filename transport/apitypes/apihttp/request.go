package apihttp

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// Request is a request of the subset.
type Request struct {
	Method string
	Target string // origin-form: an absolute path and an optional query
	Proto  string // "HTTP/1.1" or "HTTP/1.0"
	Header Header // Host and Content-Length included, as they arrived
	Body   []byte // Content-Length bytes; nil when there are none
}

// Path is the target without its query.
func (r *Request) Path() string {
	if i := strings.IndexByte(r.Target, '?'); i >= 0 {
		return r.Target[:i]
	}
	return r.Target
}

// KeepAlive reports whether the connection may carry another request after this one's
// response: HTTP/1.1 without Connection: close. HTTP/1.0 requests are answered once.
func (r *Request) KeepAlive() bool {
	return r.Proto == "HTTP/1.1" && !r.Header.HasToken("Connection", "close")
}

// Append appends the request's wire form to b: the fields as they are (a Content-Length
// among them for a body), then the body.
func (r *Request) Append(b []byte) []byte {
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, r.Target...)
	b = append(b, ' ')
	b = append(b, r.Proto...)
	b = append(b, "\r\n"...)
	b = appendFields(b, r.Header)
	return append(append(b, "\r\n"...), r.Body...)
}

func appendFields(b []byte, h Header) []byte {
	for _, f := range h {
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = append(b, f.Value...)
		b = append(b, "\r\n"...)
	}
	return b
}

// ReadRequest reads one request within lim. A request outside the subset is refused with
// an *Error naming the status to answer; other errors are the connection's (io.EOF when
// it ended before the request's first byte).
func ReadRequest(br *bufio.Reader, lim Limits) (*Request, error) {
	line, err := readLine(br, lim.Line, 414, "request line")
	if err != nil {
		return nil, err
	}
	r, err := parseRequestLine(line)
	if err != nil {
		return nil, err
	}
	if r.Header, err = readFields(br, lim); err != nil {
		return nil, err
	}
	if r.Header.count("Transfer-Encoding") > 0 {
		return nil, bad(400, "Transfer-Encoding is not supported: send a body with Content-Length")
	}
	if n := r.Header.count("Host"); n != 1 {
		return nil, bad(400, "a request needs exactly one Host field, this one has %d", n)
	}
	n, err := contentLength(r.Header, lim.Body)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		r.Body = make([]byte, n)
		if _, err := io.ReadFull(br, r.Body); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return r, nil
}

// parseRequestLine parses "METHOD SP TARGET SP HTTP/1.x".
func parseRequestLine(line string) (*Request, error) {
	parts := strings.Split(line, " ")
	if len(parts) != 3 {
		return nil, bad(400, "malformed request line %.60q: want METHOD /path HTTP/1.1", line)
	}
	r := &Request{Method: parts[0], Target: parts[1], Proto: parts[2]}
	if !isToken(r.Method) {
		return nil, bad(400, "malformed method %.20q", r.Method)
	}
	if r.Target == "" || r.Target[0] != '/' {
		return nil, bad(400, "request target %.60q is not an absolute path", r.Target)
	}
	for i := 0; i < len(r.Target); i++ {
		if c := r.Target[i]; c <= 0x20 || c >= 0x7f || c == '#' {
			return nil, bad(400, "request target: byte 0x%02x not allowed", c)
		}
	}
	switch r.Proto {
	case "HTTP/1.1", "HTTP/1.0":
	default:
		if strings.HasPrefix(r.Proto, "HTTP/") {
			return nil, bad(505, "%.20s is not spoken here: use HTTP/1.1", r.Proto)
		}
		return nil, bad(400, "malformed request line %.60q: want METHOD /path HTTP/1.1", line)
	}
	return r, nil
}

// equalHeader reports whether a and b hold the same fields in the same order.
func equalHeader(a, b Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Equal reports whether r and o are the same request.
func (r *Request) Equal(o *Request) bool {
	return r.Method == o.Method && r.Target == o.Target && r.Proto == o.Proto &&
		equalHeader(r.Header, o.Header) && bytes.Equal(r.Body, o.Body)
}
