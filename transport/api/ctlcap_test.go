package api_test

import (
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

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

const getVersion = "GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n"

// wantCapRefusal checks that w's request is refused at max_control_conns: a JSON 503
// naming the key, Connection: close, and a clean end of the connection after it.
func wantCapRefusal(t *testing.T, w *wireConn, limit int) {
	t.Helper()
	r := w.exchange(t, getVersion)
	want := fmt.Sprintf("api.max_control_conns (%d)", limit)
	if r.Status != 503 || !strings.Contains(errorText(r), want) || r.Header.Get("Content-Type") != "application/json" || !r.Close {
		t.Fatalf("beyond the cap: %d %v %s, want a JSON 503 naming %s with Connection: close", r.Status, r.Header, r.Body, want)
	}
	if _, err := w.br.ReadByte(); err != io.EOF {
		t.Fatalf("after the 503: %v, want the connection closed cleanly (EOF)", err)
	}
}

// At api.max_control_conns open control connections the last one is served and the next
// refused with a JSON 503 and counted; the open ones go on; closing one, or upgrading one
// to a session (sessions are bounded by max_clients), makes room for a new one.
func TestControlConnsCap(t *testing.T) {
	const limit = 4
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), func(c *smarttd.Config) { c.API.MaxControlConns = limit })
	sock := a.Config.API.Socket
	var open []*wireConn
	for i := range limit {
		w := dialWire(t, sock)
		if r := w.exchange(t, getVersion); r.Status != 200 {
			t.Fatalf("connection %d of %d: %d %s", i+1, limit, r.Status, r.Body)
		}
		open = append(open, w)
	}
	if st := a.API.Stats(); st.ControlConns != limit || st.ControlRefused != 0 {
		t.Fatalf("at the cap: control_conns %d, control_refused %d", st.ControlConns, st.ControlRefused)
	}
	wantCapRefusal(t, dialWire(t, sock), limit)
	// A client that connects and sends nothing is answered as well.
	silent := dialWire(t, sock)
	if r, err := readResponse(silent); err != nil || r.Status != 503 {
		t.Fatalf("a silent client beyond the cap: %v %v", r, err)
	}
	// The Go client reports the daemon's reason.
	_, err := client.New(sock).Status(ctx(t))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.HTTP != 503 || !strings.Contains(ce.Text, "api.max_control_conns") {
		t.Fatalf("client beyond the cap: %v, want a 503 naming api.max_control_conns", err)
	}
	if st := a.API.Stats(); st.ControlRefused != 3 || st.ControlConns != limit {
		t.Fatalf("after three refusals: control_refused %d, control_conns %d", st.ControlRefused, st.ControlConns)
	}
	for i, w := range open {
		if r := w.exchange(t, getVersion); r.Status != 200 {
			t.Fatalf("open connection %d after the refusals: %d %s", i, r.Status, r.Body)
		}
	}
	open[0].Close()
	waitFor(t, func() bool { return a.API.Stats().ControlConns == limit-1 })
	open[0] = dialWire(t, sock)
	if r := open[0].exchange(t, getVersion); r.Status != 200 {
		t.Fatalf("after one closed: %d %s", r.Status, r.Body)
	}
	// Upgrading takes a connection out of the control connections.
	r := open[1].exchange(t, "POST /v1/session HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: "+api.Protocol+"\r\n\r\n")
	if r.Status != 101 {
		t.Fatalf("upgrade at the cap: %d %s", r.Status, r.Body)
	}
	if st := a.API.Stats(); st.ControlConns != limit-1 || st.Sessions != 1 {
		t.Fatalf("after the upgrade: control_conns %d, sessions %d", st.ControlConns, st.Sessions)
	}
	if r := dialWire(t, sock).exchange(t, getVersion); r.Status != 200 {
		t.Fatalf("after an upgrade: %d %s", r.Status, r.Body)
	}
	wantCapRefusal(t, dialWire(t, sock), limit)
	if got := a.API.Stats().ControlRefused; got != 4 {
		t.Fatalf("control_refused %d, want 4", got)
	}
}

// readResponse reads one response from w without writing.
func readResponse(w *wireConn) (*apihttp.Response, error) {
	return apihttp.ReadResponse(w.br, apihttp.ClientLimits)
}

// A connection refused at the cap is read from until its client closes (so a client
// still writing its request meets the 503, not a broken pipe), at most MaxLingering at a
// time: beyond them the 503 is written and the connection closed at once.
func TestControlCapLingerBound(t *testing.T) {
	t.Cleanup(api.SetRefuseLinger(time.Minute))
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), func(c *smarttd.Config) { c.API.MaxControlConns = 1 })
	sock := a.Config.API.Socket
	if r := dialWire(t, sock).exchange(t, getVersion); r.Status != 200 {
		t.Fatalf("the one connection: %d", r.Status)
	}
	// lingered sends a request on a refused connection and reads its 503, then sends
	// another: it reports whether the daemon took that (it lingered) or had closed (a
	// broken pipe or a reset).
	lingered := func(w *wireConn) bool {
		t.Helper()
		io.WriteString(w, getVersion) // may meet a closed socket beyond the bound
		if r, err := readResponse(w); err != nil || r.Status != 503 {
			t.Fatalf("refused connection: %v %v", r, err)
		}
		_, werr := io.WriteString(w, getVersion)
		_, rerr := w.br.ReadByte()
		switch {
		case werr == nil && rerr == io.EOF:
			return true
		case werr != nil || errors.Is(rerr, syscall.ECONNRESET):
			return false
		}
		t.Fatalf("refused connection: write %v, read %v", werr, rerr)
		return false
	}
	var held []*wireConn
	for i := range api.MaxLingering {
		w := dialWire(t, sock)
		if !lingered(w) {
			t.Fatalf("refused connection %d of %d: closed at once, want it read from", i+1, api.MaxLingering)
		}
		held = append(held, w)
	}
	if n := a.API.Lingering(); n != api.MaxLingering {
		t.Fatalf("lingering %d, want %d", n, api.MaxLingering)
	}
	if lingered(dialWire(t, sock)) {
		t.Fatalf("refused connection %d: read from beyond the bound of %d", api.MaxLingering+1, api.MaxLingering)
	}
	if got := a.API.Stats().ControlRefused; got != api.MaxLingering+1 {
		t.Fatalf("control_refused %d, want %d", got, api.MaxLingering+1)
	}
	held[0].Close()
	waitFor(t, func() bool { return a.API.Lingering() == api.MaxLingering-1 })
	if !lingered(dialWire(t, sock)) {
		t.Fatal("after one lingering client closed: the next refused connection closed at once")
	}
}

// curl and Go's net/http client beyond the cap get the 503 and its JSON error.
func TestControlConnsCapHTTPClients(t *testing.T) {
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), func(c *smarttd.Config) { c.API.MaxControlConns = 1 })
	sock := a.Config.API.Socket
	if r := dialWire(t, sock).exchange(t, getVersion); r.Status != 200 {
		t.Fatalf("the one connection: %d", r.Status)
	}
	hc := &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) {
		return net.Dial("unix", sock)
	}}}
	resp, err := hc.Get("http://smarttd/v1/version")
	if err != nil {
		t.Fatalf("net/http beyond the cap: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "api.max_control_conns (1)") {
		t.Fatalf("net/http beyond the cap: %d %s", resp.StatusCode, b)
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	out, err := exec.Command(curl, "-sS", "-w", " %{http_code}", "--unix-socket", sock, "http://x/v1/status").CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), " 503") || !strings.Contains(string(out), "api.max_control_conns") {
		t.Fatalf("curl beyond the cap: %v %s", err, out)
	}
}

// A request whose body is above the 16 KiB limit gets its 413 even while its client is
// still sending the body: the daemon answers, then reads up to 64 KiB of the body before
// closing, so the client neither meets a broken pipe nor a reset. Beyond 64 KiB it
// stops reading.
func TestOversizedBodyDrainedBefore413(t *testing.T) {
	a := startDaemon(t, daemon.NewMemNet(), addrA, shortDir(t), nil)
	sock := a.Config.API.Socket
	head := func(n int) string {
		return fmt.Sprintf("POST /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n)
	}
	want413 := func(w *wireConn, what string) {
		t.Helper()
		r, err := readResponse(w)
		if err != nil || r.Status != 413 || !strings.Contains(errorText(r), "above the limit") {
			t.Fatalf("%s: %v %v, want 413", what, r, err)
		}
	}
	// The head first, the 413 read, then the 20 KiB body: the daemon still takes it.
	w := dialWire(t, sock)
	io.WriteString(w, head(20<<10))
	want413(w, "head alone")
	if _, err := w.Write(make([]byte, 20<<10)); err != nil {
		t.Fatalf("writing the body after the 413: %v, want it taken", err)
	}
	if _, err := w.br.ReadByte(); err != io.EOF {
		t.Fatalf("after the 413 and the body: %v, want a clean close", err)
	}
	// Head and body at once, then the answer: a clean close, not a reset; up to 64 KiB.
	for _, n := range []int{20 << 10, 64 << 10} {
		w := dialWire(t, sock)
		if _, err := io.WriteString(w, head(n)+strings.Repeat("b", n)); err != nil {
			t.Fatal(err)
		}
		want413(w, fmt.Sprintf("%d bytes", n))
		if _, err := w.br.ReadByte(); err != io.EOF {
			t.Fatalf("%d-byte body: after the 413 %v, want a clean close", n, err)
		}
	}
	// Far beyond 64 KiB the daemon stops reading: the rest is refused (a reset, or a
	// broken pipe for the writer).
	const beyond = 64<<10 + 32<<10
	w = dialWire(t, sock)
	werr := make(chan error, 1)
	go func() { _, err := io.WriteString(w, head(beyond)+strings.Repeat("b", beyond)); werr <- err }()
	want413(w, "beyond the drain")
	_, rerr := io.Copy(io.Discard, w.br)
	if err := <-werr; err == nil && !errors.Is(rerr, syscall.ECONNRESET) {
		t.Fatalf("%d-byte body: all written and a clean close (%v): the daemon read beyond 64 KiB", beyond, rerr)
	}
	if st := a.API.Stats(); st.ProtocolErrors != 4 {
		t.Errorf("protocol_errors %d, want 4 (one per 413)", st.ProtocolErrors)
	}
}
