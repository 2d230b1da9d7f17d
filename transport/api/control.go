package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
)

// The API's HTTP side: control requests and the upgrade to a messaging session, in the
// subset of HTTP/1.1 that package apihttp parses (docs/api.md, "Wire: the HTTP subset").

// ctlConn is a connection carrying control requests until it closes or is upgraded.
type ctlConn struct {
	s       *Server
	conn    net.Conn
	cr      countReader
	br      *bufio.Reader
	cred    PeerCred
	hasCred bool
	idle    bool // waiting for the next request; guarded by s.ctlMu
}

// countReader counts the bytes read from a connection: a head deadline that passes
// after some of them is a stalled request, not an idle connection.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ctlReq is one request and the response its handler left to write.
type ctlReq struct {
	*apihttp.Request
	c        *ctlConn
	code     int
	hdr      apihttp.Header
	body     []byte
	hijacked bool // the handler took the connection (a session)
}

// json sets the response: v as indented JSON with status code.
func (r *ctlReq) json(code int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	r.code, r.body = code, b.Bytes()
	r.hdr = append(r.hdr, apihttp.Field{Name: "Content-Type", Value: "application/json"})
}

// errorf sets a JSON error response, {"error": "..."}, like every error of the API.
func (r *ctlReq) errorf(code int, format string, a ...any) {
	r.json(code, map[string]string{"error": fmt.Sprintf(format, a...)})
}

// route is a path's handler and the method it takes.
type route struct {
	method string
	h      func(*ctlReq)
}

func (s *Server) routes() map[string]route {
	return map[string]route{
		"/v1/status": {"GET", s.handleStatus}, "/v1/version": {"GET", s.handleVersion},
		"/v1/capabilities": {"GET", s.handleCaps}, "/v1/conns": {"GET", s.handleConns},
		"/v1/config": {"GET", s.handleConfig}, "/v1/counters": {"GET", s.handleCounters},
		"/v1/sessions": {"GET", s.handleSessions}, "/v1/session": {"POST", s.handleSession},
	}
}

// dispatch runs the request's handler, or answers 404 or 405 (with Allow) naming what
// to do. HEAD is answered as GET without the body.
func (s *Server) dispatch(r *ctlReq) {
	rt, ok := s.mux[r.Path()]
	if !ok {
		r.errorf(404, "no such path %s: the API's paths are /v1/status, /v1/version, /v1/capabilities, "+
			"/v1/conns, /v1/config, /v1/counters, /v1/sessions and POST /v1/session (docs/api.md)", r.Path())
		return
	}
	if r.Method != rt.method && !(r.Method == "HEAD" && rt.method == "GET") {
		allow := rt.method
		if allow == "GET" {
			allow = "GET, HEAD"
		}
		r.hdr = append(r.hdr, apihttp.Field{Name: "Allow", Value: allow})
		r.errorf(405, "method %s not allowed on %s: use %s (docs/api.md)", r.Method, r.Path(), allow)
		return
	}
	rt.h(r)
}

// serveControl accepts connections on ln until it is closed.
func (s *Server) serveControl(ln net.Listener) {
	defer s.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Error("api accept", "err", err) // out of descriptors, say: wait, as net/http does
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c := &ctlConn{s: s, conn: conn, cr: countReader{r: conn}}
		switch s.track(c) {
		case trackClosing:
			conn.Close()
			continue
		case trackFull:
			s.refuseFull(conn)
			continue
		}
		c.br = bufio.NewReaderSize(&c.cr, 4096)
		s.wg.Add(1)
		go c.serve()
	}
}

// track results.
const (
	trackOK      = iota
	trackClosing // the server is shutting down
	trackFull    // max_control_conns are open
)

// track adds c to the open control connections unless the server is closing or
// max_control_conns are open.
func (s *Server) track(c *ctlConn) int {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	switch {
	case s.closing.Load():
		return trackClosing
	case len(s.ctl) >= s.cfg.MaxControlConns:
		return trackFull
	}
	s.ctl[c] = struct{}{}
	return trackOK
}

// controlConns is the number of open control connections.
func (s *Server) controlConns() int64 {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	return int64(len(s.ctl))
}

// ctlCap is the state of the refusals at max_control_conns.
type ctlCap struct {
	refused   atomic.Uint64
	lingering atomic.Int32 // refused connections still being read from (refuseFull)
}

const (
	// maxLingering bounds the refused connections read from at once.
	maxLingering = 16
	// lingerBytes bounds how much of a refused connection is read.
	lingerBytes = 64 << 10
)

// lingerMax bounds how long a refused connection is read from (a variable for tests).
var lingerMax = time.Second

// refuseFull answers a connection beyond max_control_conns with a JSON 503 and closes
// it. The answer follows the client's request (an HTTP client may take bytes that come
// before its request for a broken connection): the request is read within lingerMax,
// answered, and what else the client sends is read and discarded until it closes (at
// most lingerBytes, within lingerMax), so that it meets the answer rather than a reset.
// At most maxLingering connections are read from at once; beyond them the answer is
// written at once (a few hundred bytes to an empty socket buffer: it does not hold up
// the accept loop) and the connection closed.
func (s *Server) refuseFull(conn net.Conn) {
	s.ctlCap.refused.Add(1)
	r := &ctlReq{Request: &apihttp.Request{}}
	r.errorf(503, "api.max_control_conns (%d) control connections open; close idle ones or try again later (docs/api.md)",
		s.cfg.MaxControlConns)
	r.hdr = append(r.hdr, apihttp.Field{Name: "Connection", Value: "close"})
	resp := apihttp.AppendResponse(nil, r.code, r.hdr, r.body)
	if s.ctlCap.lingering.Add(1) > maxLingering {
		s.ctlCap.lingering.Add(-1)
		conn.SetWriteDeadline(time.Now().Add(min(time.Duration(s.cfg.WriteTimeout), lingerMax)))
		conn.Write(resp)
		conn.Close()
		return
	}
	s.wg.Add(1)
	go s.lingerRefused(conn, resp)
}

// lingerRefused reads a refused connection's request, answers it with resp and reads
// what else comes until the client closes, within lingerMax (and header_timeout).
func (s *Server) lingerRefused(conn net.Conn, resp []byte) {
	defer s.wg.Done()
	defer s.ctlCap.lingering.Add(-1)
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(min(time.Duration(s.cfg.HeaderTimeout), lingerMax)))
	br := bufio.NewReaderSize(conn, 4096)
	apihttp.ReadRequest(br, apihttp.ServerLimits) // whatever came, or nothing, the answer is the same
	conn.SetWriteDeadline(time.Now().Add(min(time.Duration(s.cfg.WriteTimeout), lingerMax)))
	if _, err := conn.Write(resp); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() // the client's read ends after the answer
	}
	io.CopyN(io.Discard, br, lingerBytes)
}

func (s *Server) untrack(c *ctlConn) {
	s.ctlMu.Lock()
	delete(s.ctl, c)
	s.ctlMu.Unlock()
}

// setIdle marks c idle (between requests) or busy; it reports false when c should close
// instead: the server is shutting down.
func (s *Server) setIdle(c *ctlConn, idle bool) bool {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	c.idle = idle
	return !(idle && s.closing.Load())
}

// closeControl closes the control connections: only the idle ones when idleOnly (busy
// ones close after their response, as the server is closing).
func (s *Server) closeControl(idleOnly bool) {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	for c := range s.ctl {
		if c.idle || !idleOnly {
			c.conn.Close()
		}
	}
}

// serve reads requests from c and answers them until the connection closes or a
// handler takes it for a session.
func (c *ctlConn) serve() {
	s := c.s
	defer s.wg.Done()
	hijacked := false
	defer func() {
		if !hijacked {
			s.untrack(c)
			c.conn.Close()
		}
	}()
	c.cred, c.hasCred = peerCred(c.conn)
	for first := true; ; first = false {
		if !first {
			if !s.setIdle(c, true) {
				return
			}
			c.conn.SetReadDeadline(time.Now().Add(time.Duration(s.cfg.IdleTimeout)))
			if _, err := c.br.Peek(1); err != nil {
				return
			}
			if !s.setIdle(c, false) {
				return
			}
		}
		start := c.cr.n - int64(c.br.Buffered())
		c.conn.SetReadDeadline(time.Now().Add(time.Duration(s.cfg.HeaderTimeout)))
		req, err := apihttp.ReadRequest(c.br, apihttp.ServerLimits)
		if err != nil {
			c.refuse(err, c.cr.n > start)
			return
		}
		c.conn.SetReadDeadline(time.Time{})
		r := &ctlReq{Request: req, c: c}
		s.dispatch(r)
		if r.hijacked {
			hijacked = true
			return
		}
		keep := req.KeepAlive() && !s.closing.Load()
		if !keep {
			r.hdr = append(r.hdr, apihttp.Field{Name: "Connection", Value: "close"})
		}
		if !c.write(r) || !keep {
			return
		}
	}
}

// write writes r's response within write_timeout.
func (c *ctlConn) write(r *ctlReq) bool {
	b := apihttp.AppendResponse(nil, r.code, r.hdr, r.body)
	if r.Method == "HEAD" {
		b = b[:len(b)-len(r.body)]
	}
	c.conn.SetWriteDeadline(time.Now().Add(time.Duration(c.s.cfg.WriteTimeout)))
	_, err := c.conn.Write(b)
	return err == nil
}

// refuse answers a request that could not be read: one outside the subset with its 4xx
// and why (counted in protocol_errors), one whose head stalled past header_timeout with
// 408 (counted in read_timeouts); a connection that ended or stayed silent is closed.
// A 413's body is drained, up to maxDrain, after the answer.
func (c *ctlConn) refuse(err error, began bool) {
	r := &ctlReq{Request: &apihttp.Request{}, c: c}
	var he *apihttp.Error
	var ne net.Error
	switch {
	case errors.As(err, &he):
		c.s.protocolErrors.Add(1)
		r.errorf(he.Status, "request refused: %s (the API speaks a subset of HTTP/1.1: docs/api.md)", he.Reason)
	case errors.As(err, &ne) && ne.Timeout() && began:
		c.s.readTimeouts.Add(1)
		r.errorf(408, "request head not complete within api.header_timeout (%v)", c.s.cfg.HeaderTimeout)
	default:
		if began && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.s.log.Debug("api request", "err", err)
		}
		return
	}
	r.hdr = append(r.hdr, apihttp.Field{Name: "Connection", Value: "close"})
	if c.write(r) && he != nil && he.Unread > 0 {
		// Closed with its body unread, a client still sending that body would meet a
		// reset or a broken pipe rather than the 413: take up to maxDrain of it, within
		// the request's header_timeout, before closing.
		io.CopyN(io.Discard, c.br, min(he.Unread, maxDrain))
	}
}

// maxDrain bounds the body of a refused request (413) read and discarded before the
// connection closes.
const maxDrain = 64 << 10
