// Command gobench is one benchmark round of the Go client, the baseline of
// scripts/bench-clients: gobench rtt|bw SOCK_A SOCK_B ADDR_B N prints the mean 64 B
// round trip in microseconds, or the goodput of N 1 MiB messages (depth 8) in MB/s.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/smartt-transport/smartt/transport/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("usage: gobench rtt|bw SOCK_A SOCK_B ADDR_B N")
	}
	bw := args[0] == "bw"
	n, err := strconv.Atoi(args[4])
	if err != nil {
		return err
	}
	to, err := netip.ParseAddrPort(args[3])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := client.New(args[1]).Open(ctx)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := client.New(args[2]).Open(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := a.Bind(ctx, 0); err != nil {
		return err
	}
	if os.Getenv("BENCH_NORING") != "" {
		b.SetAutoRecvRing(0) // the socket path, as the C and Python receivers
	}
	eb, err := b.Bind(ctx, 0)
	if err != nil {
		return err
	}
	done := make(chan time.Time, 1)
	go peer(ctx, b, n, bw, done)
	size := 64
	if bw {
		size = 1 << 20
	}
	buf := make([]byte, size)
	t0 := time.Now()
	if err := drive(ctx, a, to, eb, buf, n, bw); err != nil {
		return err
	}
	last := <-done
	if bw {
		fmt.Printf("%.1f\n", float64(n*size)/last.Sub(t0).Seconds()/1e6)
	} else {
		fmt.Printf("%.1f\n", float64(time.Since(t0).Microseconds())/float64(n))
	}
	return nil
}

// drive sends n messages: one at a time awaiting the echo (rtt), or 8 outstanding (bw).
func drive(ctx context.Context, a *client.Session, to netip.AddrPort, ep uint32, buf []byte, n int, bw bool) error {
	var pend []*client.Pending
	for i := 0; i < n; i++ {
		if bw && len(pend) >= 8 {
			if _, err := pend[0].Wait(ctx); err != nil {
				return err
			}
			pend = pend[1:]
		}
		p, err := a.SendAsync(to, ep, buf)
		if err != nil {
			return err
		}
		if bw {
			pend = append(pend, p)
			continue
		}
		m, err := a.Recv(ctx)
		if err != nil {
			return err
		}
		m.Release()
	}
	return nil
}

// peer echoes (rtt) or takes (bw) n messages and reports when the last one came.
func peer(ctx context.Context, b *client.Session, n int, bw bool, done chan<- time.Time) {
	for i := 0; i < n; i++ {
		m, err := b.Recv(ctx)
		if err != nil {
			break
		}
		if !bw {
			b.SendAsync(m.From, m.FromEndpoint, m.Data)
		}
		m.Release()
	}
	done <- time.Now()
}
