package client_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/client"
)

// Against a daemon that speaks only version 1 (it answers a list of versions with 426,
// as daemons before version 2 did), Open asks again for version 1 alone and gets a
// version-1 session, on which Cancel says ErrNoCancel without writing anything.
func TestOpenFallsBackToVersion1(t *testing.T) {
	path, ln := unixListener(t)
	var mu sync.Mutex
	var offers []string
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(conn)
			req, err := http.ReadRequest(br)
			if err != nil {
				conn.Close()
				return
			}
			up := req.Header.Get("Upgrade")
			mu.Lock()
			offers = append(offers, up)
			mu.Unlock()
			if up != apitypes.Protocol {
				io.WriteString(conn, "HTTP/1.1 426 Upgrade Required\r\nContent-Type: application/json\r\nContent-Length: 52\r\n\r\n"+
					`{"error": "messaging needs Upgrade: smartt-msg/1"}`+"\n\n")
				conn.Close()
				continue
			}
			io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+apitypes.Protocol+"\r\n\r\n")
			go func() {
				defer conn.Close()
				for {
					h, _, err := readFrame(br)
					if err != nil {
						return
					}
					if h.Type == apitypes.FrameSend {
						_, _, _ = readFrame(br) // its Data frame; no outcome: it stays pending
					}
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.New(path).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mu.Lock()
	got := offers
	mu.Unlock()
	if s.Version() != 1 || len(got) != 2 || got[0] != "smartt-msg/2, smartt-msg/1" || got[1] != "smartt-msg/1" {
		t.Fatalf("version %d after offers %q", s.Version(), got)
	}
	p, err := s.SendAsync(netip.MustParseAddrPort("10.0.0.2:23600"), 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cancel(ctx); !errors.Is(err, client.ErrNoCancel) {
		t.Fatalf("Cancel on a version-1 session: %v", err)
	}
}
