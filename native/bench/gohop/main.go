// Command gohop is the Go side of scripts/hop-floor: a 100-byte UDP ping-pong on loopback
// between two goroutine-blocking processes (each read parks in Go's netpoller, as the
// daemon's do): gohop N prints the one-way time (half the mean round trip) in
// microseconds; it runs the echo side as a child of itself.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gohop:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 2 && args[0] == "echo" {
		return echo(args[1])
	}
	n, err := strconv.Atoi(args[0])
	if len(args) != 1 || err != nil || n < 2 || n > 10_000_000 {
		return fmt.Errorf("usage: gohop N (2..10000000)")
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer c.Close()
	child := exec.Command(os.Args[0], "echo", c.LocalAddr().String())
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	b := make([]byte, 2048)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	// The echo side sends first, so its address is known and it is running.
	_, peer, err := c.ReadFromUDP(b)
	if err != nil {
		return err
	}
	c.SetReadDeadline(time.Time{})
	t := time.Now()
	for range n {
		if _, err := c.WriteToUDP(b[:100], peer); err != nil {
			return err
		}
		if _, _, err := c.ReadFromUDP(b); err != nil {
			return err
		}
	}
	fmt.Printf("%.1f\n", float64(time.Since(t).Nanoseconds())/1e3/float64(n)/2)
	return nil
}

// echo sends one datagram to addr, then returns every datagram to its sender.
func echo(addr string) error {
	a, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	b := make([]byte, 2048)
	if _, err := c.WriteToUDP(b[:1], a); err != nil {
		return err
	}
	for {
		n, from, err := c.ReadFromUDP(b)
		if err != nil {
			return err
		}
		if _, err := c.WriteToUDP(b[:n], from); err != nil {
			return err
		}
	}
}
