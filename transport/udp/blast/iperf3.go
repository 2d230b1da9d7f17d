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
	if secs < 1 {
		return 0, fmt.Errorf("blast: Iperf3 secs %d: need at least 1", secs)
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
			} `json:"sum_received"`
		} `json:"end"`
	}
	for try := 0; ; try++ { // the server needs a moment to listen
		out, err := client.Exec("iperf3", "-c", addr.String(), "-p", strconv.Itoa(port), "-t", strconv.Itoa(secs), "-J")
		res.Error = ""
		if jerr := json.Unmarshal(out, &res); jerr != nil && err == nil {
			return 0, fmt.Errorf("blast: iperf3 JSON: %w", jerr)
		}
		if strings.Contains(res.Error, "refused") && try < 100 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil || res.Error != "" {
			return 0, fmt.Errorf("blast: iperf3 client: %v %s", err, res.Error)
		}
		break
	}
	if err := <-srvDone; err != nil {
		return 0, fmt.Errorf("blast: iperf3 server: %w", err)
	}
	return res.End.SumReceived.BitsPerSecond / 1e9, nil
}
