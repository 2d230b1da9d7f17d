package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/version"
)

func TestDaemonDemoMovesEverything(t *testing.T) {
	var out bytes.Buffer
	if err := runDemoCmd([]string{"-messages", "6", "-max-size", "2000000"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"6 of 6 messages delivered intact", "srtt us", "window B", "retx", "both daemons stopped"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDaemonDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-messages", "0"}, {"-max-size", "0"}, {"-cc", "nope"}, {"-lb", "nope"}, {"-timeout", "0s"}, {"stray"}} {
		var out bytes.Buffer
		err := runDemoCmd(args, &out)
		if err == nil {
			t.Errorf("%v accepted", args)
			continue
		}
		if args[0] != "stray" && !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%v: error %q does not name the flag", args, err)
		}
	}
}

func TestDemoInmemStillReachable(t *testing.T) {
	var out bytes.Buffer
	if err := runDemoCmd([]string{"-inmem", "-messages", "3", "-max-size", "100000"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "3 of 3 messages delivered exactly once and intact") {
		t.Fatalf("unexpected output:\n%s", out.String())
	}
}

// TestCLIAgainstDaemons drives status, conns, send, recv and bench against two daemons.
func TestCLIAgainstDaemons(t *testing.T) {
	dir := t.TempDir()
	ds, err := smarttd.LocalPair(dir, nil, func(c *smarttd.Config) { c.LogLevel = "error" })
	if err != nil {
		t.Fatal(err)
	}
	defer smarttd.StopAll(ds[:], 2*time.Second)
	sockA, sockB := ds[0].Config.API.Socket, ds[1].Config.API.Socket
	peer := ds[1].Config.Listen.String()

	outDir := filepath.Join(dir, "in")
	recvDone := make(chan error, 1)
	var recvOut bytes.Buffer
	go func() {
		recvDone <- runRecv([]string{"-socket", sockB, "-endpoint", "5", "-out", outDir, "-count", "2", "-timeout", "20s"}, &recvOut)
	}()
	waitBound(t, sockB)

	file := filepath.Join(dir, "payload")
	payload := bytes.Repeat([]byte("smartt "), 100000)
	os.WriteFile(file, payload, 0o644)
	var out bytes.Buffer
	if err := runSend([]string{"-socket", sockA, "-to", peer, "-endpoint", "5", file}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sent 700000 bytes") {
		t.Fatalf("send: %s", out.String())
	}
	if err := runSend([]string{"-socket", sockA, "-to", peer, "-endpoint", "5", "-"}, strings.NewReader("from stdin"), &out); err != nil {
		t.Fatal(err)
	}
	if err := <-recvDone; err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(outDir, "*.msg"))
	if len(files) != 2 {
		t.Fatalf("received files %v", files)
	}
	b0, _ := os.ReadFile(files[0])
	b1, _ := os.ReadFile(files[1])
	if !bytes.Equal(b0, payload) || string(b1) != "from stdin" {
		t.Fatalf("received %d and %q", len(b0), b1)
	}

	// recv -out - writes the message bytes to stdout.
	var stdout bytes.Buffer
	go func() {
		recvDone <- runRecv([]string{"-socket", sockB, "-endpoint", "6", "-out", "-", "-count", "1", "-timeout", "20s"}, &stdout)
	}()
	waitBound(t, sockB)
	if err := runSend([]string{"-socket", sockA, "-to", peer, "-endpoint", "6", "-"}, strings.NewReader("to stdout"), &out); err != nil {
		t.Fatal(err)
	}
	if err := <-recvDone; err != nil || stdout.String() != "to stdout" {
		t.Fatalf("recv -out -: %q, %v", stdout.String(), err)
	}

	out.Reset()
	if err := runStatus([]string{"-socket", sockA}, &out); err != nil || !strings.Contains(out.String(), "messages: 3 sent, 0 failed") ||
		!strings.Contains(out.String(), "of 512 sessions; 0 of 4294967296 bytes outstanding") ||
		!strings.Contains(out.String(), "worst-case memory 15.9 GiB") {
		t.Fatalf("status: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runConns([]string{"-socket", sockA}, &out); err != nil || !strings.Contains(out.String(), peer) {
		t.Fatalf("conns: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runVersion([]string{"-socket", sockA}, &out); err != nil ||
		!strings.Contains(out.String(), "smartt "+version.String()+" (revision ") ||
		!strings.Contains(out.String(), "smarttd "+version.String()+" (") || !strings.Contains(out.String(), "wire v1") {
		t.Fatalf("version: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runBench([]string{"-socket", sockA, "-to", peer, "-sizes", "64,64K", "-lat-iters", "20", "-bw-bytes", "4M", "-max-time", "1s"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 || !strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "65536") {
		t.Fatalf("bench:\n%s", out.String())
	}
	for _, bad := range [][]string{{"-to", "nowhere", file}, {"-to", peer}, {"-to", peer, "-endpoint", "0", file}} {
		if err := runSend(append([]string{"-socket", sockA}, bad...), nil, &out); err == nil {
			t.Errorf("send %v accepted", bad)
		}
	}
}

func waitBound(t *testing.T, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var sess []api.SessionInfo
		if client.New(sock).Get(ctx, "/v1/sessions", &sess) == nil && len(sess) == 1 && sess[0].Endpoint != 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("receiver never bound")
}

func TestVersionWithoutDaemon(t *testing.T) {
	var out bytes.Buffer
	sock := filepath.Join(t.TempDir(), "none.sock")
	if err := runVersion([]string{"-socket", sock}, &out); err != nil {
		t.Fatal(err)
	}
	want := version.Long("smartt") + "\nsmarttd: no daemon answered on " + sock + "\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	if err := runVersion([]string{"stray"}, &out); err == nil {
		t.Fatal("stray argument accepted")
	}
}

// Timeout retransmissions on loopback are explained: spurious when the receiver got as
// many duplicates (a busy host answered later than the RTO floor), else socket drops.
func TestDemoRetxNote(t *testing.T) {
	if n := retxNote(0, 0, 0, "5ms", "0.1 on 2 CPUs"); n != "" {
		t.Errorf("no retransmissions: %q", n)
	}
	n := retxNote(54, 0, 54, "5ms", "25.4 on 2 CPUs")
	for _, w := range []string{"54 timeout retransmissions were spurious", "5ms RTO floor", "load average 25.4 on 2 CPUs", "loopback lost nothing"} {
		if !strings.Contains(n, w) {
			t.Errorf("note lacks %q: %s", w, n)
		}
	}
	if n := retxNote(10, 2, 4, "5ms", "1"); !strings.Contains(n, "8 of the 10 timeout retransmissions replaced packets that never arrived") {
		t.Errorf("drops: %s", n)
	}
}
