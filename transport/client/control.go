package client

import (
	"bufio"
	"context"
	"net"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
)

// ctlConn is a control connection to the daemon, kept open between requests (HTTP/1.1
// keep-alive) so that a program polling the daemon does not dial for every request.
type ctlConn struct {
	conn net.Conn
	br   *bufio.Reader
}

// roundTrip sends GET path and reads the response, on the kept connection if there is
// one. A kept connection the daemon closed meanwhile (api.idle_timeout) fails the
// request before its response; it is retried once on a new connection, as GET may be.
func (c *Client) roundTrip(ctx context.Context, path string) (*apihttp.Response, error) {
	c.mu.Lock()
	k := c.idle
	c.idle = nil
	c.mu.Unlock()
	if k != nil {
		if resp, err := c.do(ctx, k, path); err == nil || ctxErr(ctx, nil) != nil {
			return resp, err
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, &ctlConn{conn: conn, br: bufio.NewReaderSize(conn, 16<<10)}, path)
}

// do sends GET path on k and reads the response; k is kept for the next request when
// the daemon keeps it open, else closed.
func (c *Client) do(ctx context.Context, k *ctlConn, path string) (*apihttp.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		k.conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { k.conn.SetDeadline(time.Unix(1, 0)) }) // unblock on cancel
	req := apihttp.Request{Method: "GET", Target: path, Proto: "HTTP/1.1",
		Header: apihttp.Header{{Name: "Host", Value: "smarttd"}}}
	_, err := k.conn.Write(req.Append(nil))
	var resp *apihttp.Response
	if err == nil {
		resp, err = apihttp.ReadResponse(k.br, apihttp.ClientLimits)
	}
	poked := !stop() // the deadline was set in the past: the connection cannot be kept
	if err != nil {
		err = ctxErr(ctx, err)
	}
	if err != nil || resp.Close || poked {
		k.conn.Close()
		return resp, err
	}
	k.conn.SetDeadline(time.Time{})
	c.mu.Lock()
	if c.idle == nil {
		c.idle, k = k, nil
	}
	c.mu.Unlock()
	if k != nil {
		k.conn.Close()
	}
	return resp, nil
}

// ctxErr is the context's error when ctx ended (its deadline may pass on the connection
// a moment before the context's own timer fires), else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return err
}
