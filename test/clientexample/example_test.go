package clientexample_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// startTwo starts two daemons in this process on an in-memory network (a real deployment
// runs smarttd on each host; the client code is the same).
func startTwo() (a, b *smarttd.Daemon, stop func()) {
	dir, _ := os.MkdirTemp("", "example")
	mn := daemon.NewMemNet()
	quiet := slog.New(slog.DiscardHandler)
	var ds [2]*smarttd.Daemon
	for i, addr := range []string{"10.0.0.1:23600", "10.0.0.2:23600"} {
		cfg := smarttd.DefaultConfig()
		cfg.Listen = netip.MustParseAddrPort(addr)
		cfg.API.Socket = filepath.Join(dir, fmt.Sprintf("d%d.sock", i))
		d, err := smarttd.Start(cfg, smarttd.Options{OpenSocket: smarttd.MemSockets(mn), Logger: quiet})
		if err != nil {
			panic(err)
		}
		ds[i] = d
	}
	return ds[0], ds[1], func() { smarttd.StopAll(ds[:], time.Second); os.RemoveAll(dir) }
}

// Send a message to an endpoint at another daemon and receive it there.
func Example() {
	a, b, stop := startTwo()
	defer stop()
	ctx := context.Background()

	// The receiver binds endpoint 7 at daemon B.
	rx, err := client.New(b.Config.API.Socket).Open(ctx)
	if err != nil {
		panic(err)
	}
	defer rx.Close()
	rx.Bind(ctx, 7)

	// The sender binds endpoint 1 at daemon A and sends to (B's address, endpoint 7).
	tx, err := client.New(a.Config.API.Socket).Open(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Close()
	tx.Bind(ctx, 1)
	info, err := tx.Send(ctx, netip.MustParseAddrPort("10.0.0.2:23600"), 7, []byte("hello, smartt"))
	fmt.Println("delivered:", err == nil, "rtt measured:", info.SRTT > 0)

	m, err := rx.Recv(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q from %v endpoint %d\n", m.Data, m.From.Addr(), m.FromEndpoint)
	// Output:
	// delivered: true rtt measured: true
	// "hello, smartt" from 10.0.0.1 endpoint 1
}

// Query a daemon's status and connections, as `curl --unix-socket` or `smartt status` do.
func Example_status() {
	a, _, stop := startTwo()
	defer stop()
	ctx := context.Background()
	c := client.New(a.Config.API.Socket)
	s, _ := c.Open(ctx)
	defer s.Close()
	s.Bind(ctx, 0)
	s.Send(ctx, netip.MustParseAddrPort("10.0.0.2:23600"), 1, []byte("x"))

	st, _ := c.Status(ctx)
	conns, _ := c.Conns(ctx)
	fmt.Println(st.Listen, "connections:", st.Connections)
	fmt.Println("peer", conns[0].Peer, "cc", conns[0].CC, "lb", conns[0].LB)
	// Output:
	// 10.0.0.1:23600 connections: 1
	// peer 10.0.0.2:23600 cc smartt lb reps
}

// Pipeline several messages and collect their completions.
func Example_sendAsync() {
	a, _, stop := startTwo()
	defer stop()
	ctx := context.Background()
	s, _ := client.New(a.Config.API.Socket).Open(ctx)
	defer s.Close()
	s.Bind(ctx, 0)
	var pend []*client.Pending
	for i := 0; i < 3; i++ {
		p, err := s.SendAsync(netip.MustParseAddrPort("10.0.0.2:23600"), 1, make([]byte, 100_000))
		if err != nil {
			panic(err)
		}
		pend = append(pend, p)
	}
	for i, p := range pend {
		_, err := p.Wait(ctx)
		fmt.Println("message", i, "acknowledged:", err == nil)
	}
	// Output:
	// message 0 acknowledged: true
	// message 1 acknowledged: true
	// message 2 acknowledged: true
}

// Pass a large message as a sealed memfd: the daemon sends it from these pages, no copy.
func Example_sendFD() {
	a, b, stop := startTwo()
	defer stop()
	ctx := context.Background()
	rx, _ := client.New(b.Config.API.Socket).Open(ctx)
	defer rx.Close()
	rx.Bind(ctx, 7)
	tx, _ := client.New(a.Config.API.Socket).Open(ctx)
	defer tx.Close()
	tx.Bind(ctx, 1)

	m, err := client.NewMessageFD(8 << 20)
	if err != nil {
		panic(err)
	}
	for i := range m.Data {
		m.Data[i] = byte(i)
	}
	m.Seal()
	p, err := tx.SendFD(netip.MustParseAddrPort("10.0.0.2:23600"), 7, m)
	m.Close() // the daemon holds its own descriptor until the message completes
	if err != nil {
		panic(err)
	}
	_, err = p.Wait(ctx)
	got, _ := rx.Recv(ctx)
	fmt.Println("delivered:", err == nil, "bytes:", len(got.Data), "byte 1000:", got.Data[1000])
	// Output:
	// delivered: true bytes: 8388608 byte 1000: 232
}

// Send a message and wait for its completion separately (what docs/api.md calls a Send
// frame and its Sent reply), then receive it at the peer.
func Example_pendingWait() {
	a, b, stop := startTwo() // two daemons; normally: smarttd on each host
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	rx, err := client.New(b.Config.API.Socket).Open(ctx) // e.g. client.New("/run/smartt/smarttd.sock")
	if err != nil {
		panic(err)
	}
	defer rx.Close()
	if _, err := rx.Bind(ctx, 7); err != nil {
		panic(err)
	}

	tx, err := client.New(a.Config.API.Socket).Open(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Close()
	ep, _ := tx.Bind(ctx, 0) // the daemon picks a free endpoint
	p, err := tx.SendAsync(netip.MustParseAddrPort("10.0.0.2:23600"), 7, []byte("ping"))
	if err != nil {
		panic(err)
	}
	info, err := p.Wait(ctx)
	if err != nil {
		panic(err) // wraps client.ErrFailed with the daemon's reason
	}
	fmt.Println("delivered within the deadline:", info.Elapsed > 0 && info.Elapsed < 10*time.Second)

	m, err := rx.Recv(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s from endpoint %v\n", m.Data, m.FromEndpoint == ep)
	// Output:
	// delivered within the deadline: true
	// ping from endpoint true
}
