package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
)

// admitSession admits a session of user (bound: it binds an endpoint) as handleSession
// does, or reports the refusal.
func admitSession(t *testing.T, s *Server, user int64, bound bool) (*session, string) {
	t.Helper()
	s.mu.Lock()
	if why := s.admitLocked(user); why != "" {
		s.mu.Unlock()
		return nil, why
	}
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	s.next++
	x := newSession(s, s.next, a, bufio.NewReader(a))
	x.user = user
	if user >= 0 {
		x.cred = &PeerCred{PID: int32(1000 + s.next), UID: uint32(user), GID: uint32(user)}
	}
	s.sess[x.id] = x
	s.perUser[user]++
	s.mu.Unlock()
	if bound {
		if _, err := s.bind(x, 0); err != nil {
			t.Fatal(err)
		}
	}
	return x, ""
}

// Per-user limits at and beyond them: one uid that keeps its sessions busy (the
// keep-alive of the 503 lock-out: a frame every few seconds) takes at most
// max_clients_per_user slots, so other users still get in up to max_clients; bound
// sessions are never evicted however long they wait; an unbound one idle for
// idle_timeout is, first among its own user's when the user is at its limit.
func TestAdmissionPerUserLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxClients, cfg.MaxClientsPerUser, cfg.IdleTimeout = 8, 3, config.Duration(20*time.Millisecond)
	s := limitServer(t, cfg)
	const hog, other, third = 1000, 1001, 0 // root counts like any user
	for i := range 3 {
		if _, why := admitSession(t, s, hog, true); why != "" {
			t.Fatalf("hog session %d refused below its limit: %s", i, why)
		}
	}
	if _, why := admitSession(t, s, hog, true); !strings.Contains(why, "api.max_clients_per_user (3)") {
		t.Fatalf("hog's 4th session: refusal %q, want max_clients_per_user", why)
	}
	time.Sleep(40 * time.Millisecond) // every session idle beyond idle_timeout; bound ones stay
	if _, why := admitSession(t, s, hog, true); why == "" || s.evicted.Load() != 0 {
		t.Fatalf("a bound waiting session was evicted for its own user (evicted %d)", s.evicted.Load())
	}
	for i := range 3 {
		if _, why := admitSession(t, s, other, true); why != "" {
			t.Fatalf("other user's session %d locked out by the hog: %s", i, why)
		}
	}
	if _, why := admitSession(t, s, third, true); why != "" {
		t.Fatalf("root's first session: %s", why)
	}
	var idle *session
	var why string
	if idle, why = admitSession(t, s, third, false); why != "" { // 8 of 8: at max_clients
		t.Fatalf("root's second session: %s", why)
	}
	if _, why := admitSession(t, s, other, true); !strings.Contains(why, "api.max_clients (8)") {
		t.Fatalf("beyond max_clients: refusal %q", why)
	}
	if got := s.refusedUser.Load(); got != 2 {
		t.Fatalf("per-user refusals counted %d, want 2", got)
	}
	time.Sleep(40 * time.Millisecond)
	idle.touch() // a keep-alive keeps an unbound session; only idle_timeout of silence frees it
	if _, why := admitSession(t, s, 1002, true); why == "" {
		t.Fatal("an unbound session with a fresh keep-alive was evicted")
	}
	time.Sleep(40 * time.Millisecond)
	if _, why := admitSession(t, s, 1002, true); why != "" || s.evicted.Load() != 1 {
		t.Fatalf("the unbound idle session was not evicted for a new client: %q, evicted %d", why, s.evicted.Load())
	}
	if s.perUser[third] != 1 || s.perUser[other] != 3 || s.perUser[1002] != 1 || len(s.sess) != 8 {
		t.Fatalf("per-user counts %v, sessions %d", s.perUser, len(s.sess))
	}
}

// GET /v1/sessions shows a session's peer credentials only to root and to the session's
// own user; a requester without credentials sees none.
func TestSessionsCredentialsOnlyForOwnerOrRoot(t *testing.T) {
	cfg := DefaultConfig()
	s := limitServer(t, cfg)
	admitSession(t, s, 1000, true)
	admitSession(t, s, 1001, true)
	get := func(asker *PeerCred) []SessionInfo {
		r := &ctlReq{Request: &apihttp.Request{Method: "GET", Target: "/v1/sessions", Proto: "HTTP/1.1"}, c: &ctlConn{}}
		if asker != nil {
			r.c.cred, r.c.hasCred = *asker, true
		}
		s.handleSessions(r)
		var out []SessionInfo
		if err := json.Unmarshal(r.body, &out); err != nil || len(out) != 2 || r.code != 200 {
			t.Fatalf("sessions %d %q: %v", r.code, r.body, err)
		}
		return out
	}
	seen := func(out []SessionInfo) (uids []uint32) {
		for _, si := range out {
			if si.Cred != nil {
				uids = append(uids, si.Cred.UID)
			}
		}
		return uids
	}
	for _, c := range []struct {
		asker *PeerCred
		want  string
	}{{&PeerCred{UID: 0}, "[1000 1001]"}, {&PeerCred{UID: 1000, GID: 1001}, "[1000]"},
		{&PeerCred{UID: 1002, GID: 1000}, "[]"}, {nil, "[]"}} {
		if got := fmt.Sprint(seen(get(c.asker))); got != c.want {
			t.Fatalf("asker %+v sees credentials of uids %s, want %s", c.asker, got, c.want)
		}
	}
}

// Daemon-chosen endpoints stay in 65536..2^32-1: past the top they wrap to 65536, and
// bound ones are skipped.
func TestChosenEndpointRange(t *testing.T) {
	s := limitServer(t, DefaultConfig())
	x, _ := admitSession(t, s, 1, true)
	if x.endpoint != minChosenEP {
		t.Fatalf("first chosen endpoint %d, want %d", x.endpoint, minChosenEP)
	}
	s.nextEP = 1<<32 - 1
	y, _ := admitSession(t, s, 1, true)
	z, _ := admitSession(t, s, 1, true)
	if y.endpoint != 1<<32-1 || z.endpoint != minChosenEP+1 {
		t.Fatalf("chosen endpoints at the top: %d, %d; want %d, %d", y.endpoint, z.endpoint, uint32(1<<32-1), minChosenEP+1)
	}
}
