package blast

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Runner runs a command somewhere; an *nstest.NS runs it inside its namespace.
type Runner interface {
	Exec(name string, args ...string) ([]byte, error)
}

// Iperf3 runs one iperf3 TCP test of secs seconds from client to a one-off iperf3 server it
// starts on server at addr:port, and returns the goodput the receiver measured, in Gbit/s.
// The server gives up after secs+20 seconds, so nothing outlives a failed run for long.
func Iperf3(server, client Runner, addr netip.Addr, port, secs int) (float64, error) {
	r, err := Iperf3Run(server, client, addr, port, secs)
	return r.Gbps, err
}

// Iperf3Result is one iperf3 TCP test as its receiver measured it, with the CPU both
// iperf3 processes used.
type Iperf3Result struct {
	Gbps    float64 // goodput, Gbit/s
	Bytes   float64 // bytes received
	Seconds float64 // test length
	CPU     float64 // CPU seconds of sender and receiver together
}

// CPUPerGB is the CPU seconds both ends spent per GB moved.
func (r Iperf3Result) CPUPerGB() float64 { return r.CPU / max(r.Bytes/1e9, 1e-9) }

// Iperf3Run is Iperf3 with the CPU both ends used.
func Iperf3Run(server, client Runner, addr netip.Addr, port, secs int) (Iperf3Result, error) {
	if secs < 1 {
		return Iperf3Result{}, fmt.Errorf("blast: Iperf3 secs %d: need at least 1", secs)
	}
	srvDone := make(chan error, 1)
	go func() {
		_, err := server.Exec("timeout", strconv.Itoa(secs+20), "iperf3", "-s", "-1", "-B", addr.String(), "-p", strconv.Itoa(port))
		srvDone <- err
	}()
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Bytes         float64 `json:"bytes"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum_received"`
			CPU struct {
				Host   float64 `json:"host_total"`
				Remote float64 `json:"remote_total"`
			} `json:"cpu_utilization_percent"`
		} `json:"end"`
	}
	for try := 0; ; try++ { // the server needs a moment to listen
		out, err := client.Exec("iperf3", "-c", addr.String(), "-p", strconv.Itoa(port), "-t", strconv.Itoa(secs), "-J")
		res.Error = ""
		if jerr := json.Unmarshal(out, &res); jerr != nil && err == nil {
			return Iperf3Result{}, fmt.Errorf("blast: iperf3 JSON: %w", jerr)
		}
		if strings.Contains(res.Error, "refused") && try < 100 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil || res.Error != "" {
			return Iperf3Result{}, fmt.Errorf("blast: iperf3 client: %v %s", err, res.Error)
		}
		break
	}
	if err := <-srvDone; err != nil {
		return Iperf3Result{}, fmt.Errorf("blast: iperf3 server: %w", err)
	}
	e := res.End
	return Iperf3Result{Gbps: e.SumReceived.BitsPerSecond / 1e9, Bytes: e.SumReceived.Bytes, Seconds: e.SumReceived.Seconds,
		CPU: (e.CPU.Host + e.CPU.Remote) / 100 * e.SumReceived.Seconds}, nil
}
