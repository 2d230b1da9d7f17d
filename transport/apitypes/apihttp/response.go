package apihttp

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// StatusText is the reason phrase of the statuses the API answers with.
func StatusText(code int) string {
	switch code {
	case 101:
		return "Switching Protocols"
	case 200:
		return "OK"
	case 400:
		return "Bad Request"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 426:
		return "Upgrade Required"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 503:
		return "Service Unavailable"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Status"
}

// AppendResponse appends a response to b: the status line, h, a Content-Length for body
// (except for a 101, which has none), the empty line and body.
func AppendResponse(b []byte, code int, h Header, body []byte) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, StatusText(code)...)
	b = append(b, "\r\n"...)
	b = appendFields(b, h)
	if code != 101 {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	return append(append(b, "\r\n"...), body...)
}

// Response is a response read by a client.
type Response struct {
	Status int
	Proto  string
	Header Header
	Body   []byte // nil for a 101: what follows its head is the upgraded protocol's
	Close  bool   // the server ends the connection after it
}

// ReadResponse reads a response to a GET or POST within lim. Bodies framed by
// Content-Length are the subset's; chunked ones and ones ended by the connection's end are
// read too, as a daemon of an earlier version sent them.
func ReadResponse(br *bufio.Reader, lim Limits) (*Response, error) {
	line, err := readLine(br, lim.Line, 502, "status line")
	if err != nil {
		return nil, headErr(err)
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	r := &Response{Proto: proto}
	if r.Status, err = strconv.Atoi(code); err != nil || len(code) != 3 || !strings.HasPrefix(proto, "HTTP/1.") {
		return nil, fmt.Errorf("%w: status line %.60q", ErrHead, line)
	}
	if r.Header, err = readFields(br, lim); err != nil {
		return nil, headErr(err)
	}
	r.Close = r.Header.HasToken("Connection", "close") ||
		(proto == "HTTP/1.0" && !r.Header.HasToken("Connection", "keep-alive"))
	if r.Status < 200 || r.Status == 204 || r.Status == 304 {
		return r, nil
	}
	if r.Header.HasToken("Transfer-Encoding", "chunked") {
		r.Body, err = readChunked(br, lim.Body)
		return r, err
	}
	if r.Header.count("Content-Length") == 0 {
		r.Close = true
		r.Body, err = readAll(br, lim.Body)
		return r, err
	}
	n, err := contentLength(r.Header, lim.Body)
	if err != nil {
		return nil, headErr(err)
	}
	r.Body = make([]byte, n)
	if _, err := io.ReadFull(br, r.Body); err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrHead, err)
	}
	return r, nil
}

// headErr wraps a refusal of the parser (an *Error) in ErrHead; connection errors stay.
func headErr(err error) error {
	if e, ok := err.(*Error); ok {
		return fmt.Errorf("%w: %s", ErrHead, e.Reason)
	}
	return err
}

// readAll reads up to the connection's end, at most max bytes.
func readAll(br *bufio.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(br, max+1))
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: body above %d bytes", ErrHead, max)
	}
	return b, err
}

// readChunked reads a chunked body of at most max bytes.
func readChunked(br *bufio.Reader, max int64) ([]byte, error) {
	var body []byte
	for {
		line, err := readLine(br, 1024, 502, "chunk size")
		if err != nil {
			return nil, headErr(err)
		}
		size, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		if err != nil || n < 0 || int64(len(body))+n > max {
			return nil, fmt.Errorf("%w: chunk size %.40q (limit %d bytes)", ErrHead, line, max)
		}
		if n == 0 {
			if _, err := readFields(br, ClientLimits); err != nil { // trailers
				return nil, headErr(err)
			}
			return body, nil
		}
		start := len(body)
		body = append(body, make([]byte, n)...)
		if _, err := io.ReadFull(br, body[start:]); err != nil {
			return nil, err
		}
		if crlf, err := readLine(br, 0, 502, "chunk end"); err != nil || crlf != "" {
			return nil, fmt.Errorf("%w: chunk not ended by CRLF", ErrHead)
		}
	}
}
