package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/version"
)

func TestDaemonDemoMovesEverything(t *testing.T) {
	out, err := execute("demo", "-messages", "6", "-max-size", "2000000")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"6 of 6 messages delivered intact", "srtt us", "window B", "retx", "both daemons stopped"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDaemonDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-messages", "0"}, {"-max-size", "0"}, {"-cc", "nope"}, {"-lb", "nope"}, {"-timeout", "0s"}, {"stray"}, {"-loss", "0.1"}} {
		_, err := execute(append([]string{"demo"}, args...)...)
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
	out, err := execute("demo", "-inmem", "-messages", "3", "-max-size", "100000")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "3 of 3 messages delivered exactly once and intact") {
		t.Fatalf("unexpected output:\n%s", out)
	}
}

// TestCLIAgainstDaemons drives status, conns, send, recv and bench against two daemons.
func TestCLIAgainstDaemons(t *testing.T) {
	dir := t.TempDir()
	ds := quietPair(t, dir)
	sockA, sockB := ds[0].Config.API.Socket, ds[1].Config.API.Socket
	peer := ds[1].Config.Listen.String()

	outDir := filepath.Join(dir, "in")
	recvDone := make(chan error, 1)
	var recvOut bytes.Buffer
	go func() {
		recvDone <- runCLI(nil, &recvOut, "recv", "-socket", sockB, "-endpoint", "5", "-out", outDir, "-count", "2", "-timeout", "20s")
	}()
	waitBound(t, sockB)

	file := filepath.Join(dir, "payload")
	payload := bytes.Repeat([]byte("smartt "), 100000)
	os.WriteFile(file, payload, 0o644)
	var out bytes.Buffer
	if err := runCLI(nil, &out, "send", "-socket", sockA, "-to", peer, "-endpoint", "5", file); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sent 700000 bytes") {
		t.Fatalf("send: %s", out.String())
	}
	if err := runCLI(strings.NewReader("from stdin"), &out, "send", "-socket", sockA, "-to", peer, "-endpoint", "5", "-"); err != nil {
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
		recvDone <- runCLI(nil, &stdout, "recv", "-socket", sockB, "-endpoint", "6", "-out", "-", "-count", "1", "-timeout", "20s")
	}()
	waitBound(t, sockB)
	if err := runCLI(strings.NewReader("to stdout"), &out, "send", "-socket", sockA, "-to", peer, "-endpoint", "6", "-"); err != nil {
		t.Fatal(err)
	}
	if err := <-recvDone; err != nil || stdout.String() != "to stdout" {
		t.Fatalf("recv -out -: %q, %v", stdout.String(), err)
	}

	// A second recv into the same directory numbers on: the first run's files stay.
	go func() {
		recvDone <- runCLI(nil, &recvOut, "recv", "-socket", sockB, "-endpoint", "7", "-out", outDir, "-count", "1", "-timeout", "20s")
	}()
	waitEndpoint(t, sockB, 7)
	if err := runCLI(strings.NewReader("second run"), &out, "send", "-socket", sockA, "-to", peer, "-endpoint", "7", "-"); err != nil {
		t.Fatal(err)
	}
	if err := <-recvDone; err != nil {
		t.Fatal(err)
	}
	files, _ = filepath.Glob(filepath.Join(outDir, "*.msg"))
	b0, _ = os.ReadFile(files[0])
	b1, _ = os.ReadFile(files[1])
	b2, _ := os.ReadFile(files[len(files)-1])
	if len(files) != 3 || !bytes.Equal(b0, payload) || string(b1) != "from stdin" || string(b2) != "second run" ||
		!strings.HasPrefix(filepath.Base(files[2]), "000002-") {
		t.Fatalf("after a second recv: files %v, last %q", files, b2)
	}

	// --framing length and netstring delimit each message on stdout.
	for i, framing := range []string{"length", "netstring"} {
		stdout.Reset()
		ep := fmt.Sprint(8 + i)
		go func() {
			recvDone <- runCLI(nil, &stdout, "recv", "-socket", sockB, "-endpoint", ep, "-out", "-", "-framing", framing, "-count", "2", "-timeout", "20s")
		}()
		waitEndpoint(t, sockB, uint32(8+i))
		for _, m := range []string{"one", "second"} {
			if err := runCLI(strings.NewReader(m), &out, "send", "-socket", sockA, "-to", peer, "-endpoint", ep, "-"); err != nil {
				t.Fatal(err)
			}
		}
		want := "\x00\x00\x00\x00\x00\x00\x00\x03one\x00\x00\x00\x00\x00\x00\x00\x06second"
		if framing == "netstring" {
			want = "3:one,6:second,"
		}
		if err := <-recvDone; err != nil || stdout.String() != want {
			t.Fatalf("recv -out - --framing %s: %q, %v", framing, stdout.String(), err)
		}
	}

	out.Reset()
	if err := runCLI(nil, &out, "status", "-socket", sockA); err != nil || !strings.Contains(out.String(), "messages: 8 sent, 0 failed") ||
		!strings.Contains(out.String(), "of 512 sessions; 0 of 4294967296 bytes outstanding") ||
		!strings.Contains(out.String(), "worst-case memory 15.9 GiB") ||
		!strings.Contains(out.String(), "of 256 connections open, 0 refused at max_control_conns") {
		t.Fatalf("status: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runCLI(nil, &out, "conns", "-socket", sockA); err != nil || !strings.Contains(out.String(), peer) {
		t.Fatalf("conns: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runCLI(nil, &out, "version", "-socket", sockA); err != nil ||
		!strings.Contains(out.String(), "smartt "+version.String()+" (revision ") ||
		!strings.Contains(out.String(), "smarttd "+version.String()+" (") || !strings.Contains(out.String(), "wire v1") {
		t.Fatalf("version: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runCLI(nil, &out, "bench", "-socket", sockA, "-to", peer, "-sizes", "64,64K", "-lat-iters", "20", "-bw-bytes", "4M", "-max-time", "1s"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 || !strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "65536") {
		t.Fatalf("bench:\n%s", out.String())
	}
	for _, bad := range [][]string{{"-to", "nowhere", file}, {"-to", peer}, {"-to", peer, "-endpoint", "0", file}} {
		if err := runCLI(nil, &out, append([]string{"send", "-socket", sockA}, bad...)...); err == nil {
			t.Errorf("send %v accepted", bad)
		}
	}
}

// waitEndpoint waits until a session of the daemon at sock has bound endpoint ep.
func waitEndpoint(t *testing.T, sock string, ep uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var sess []api.SessionInfo
		if client.New(sock).Get(ctx, "/v1/sessions", &sess) == nil && slices.ContainsFunc(sess, func(s api.SessionInfo) bool { return s.Endpoint == ep }) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("endpoint %d never bound", ep)
}

// runCLI runs smartt with args, stdin and stdout (and stderr) out.
func runCLI(stdin io.Reader, out *bytes.Buffer, args ...string) error {
	root := newRootCmd(stdin, out, out)
	root.SetArgs(cli.NormalizeArgs(root, args))
	return root.Execute()
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
	sock := filepath.Join(t.TempDir(), "none.sock")
	out, err := execute("version", "-socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	want := version.Long("smartt") + "\nsmarttd: no daemon answered on " + sock + "\n"
	if out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	if _, err := execute("version", "stray"); err == nil || !isUsageError(err) {
		t.Fatalf("stray argument: %v", err)
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
