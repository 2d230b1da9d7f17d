package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/smartt-transport/smartt/transport/client"
)

// Ctrl-C while send streams a message to smarttd: exit 130 on a terminated progress line
// that says nothing of the message was sent, and nothing was (the daemon drops a message
// it did not get whole).
func TestSendInterruptedMidStream(t *testing.T) {
	dir := t.TempDir()
	ds := quietPair(t, dir)
	file := filepath.Join(dir, "big")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(512 << 20) // sparse: streamed from the page cache's zeros
	f.Close()
	cmd := exec.Command(os.Args[0], "send", file, "--socket", ds[0].Config.API.Socket, "--to", ds[1].Config.Listen.String(), "--progress", "on")
	cmd.Env = append(os.Environ(), "SMARTT_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stderr)
	var seen bytes.Buffer
	for !strings.Contains(seen.String(), "handed to smarttd [") { // the first progress report
		b, err := r.ReadByte()
		if err != nil {
			t.Fatalf("send ended before streaming: %v\n%s", err, seen.String())
		}
		seen.WriteByte(b)
	}
	cmd.Process.Signal(syscall.SIGINT)
	rest, _ := bufio.NewReader(r).ReadString(0)
	seen.WriteString(rest)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, seen.String())
	}
	if !strings.Contains(seen.String(), "\nsmartt: interrupted while handing the message to smarttd: nothing of it is sent") {
		t.Fatalf("stderr lacks the interruption on its own line:\n%q", seen.String())
	}
	for _, d := range ds {
		st, err := client.New(d.Config.API.Socket).Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st.Connections != 0 || st.Pending != 0 { // no packet went: no connection opened
			t.Fatalf("after the interruption %v has %d connections, %d messages pending", d.Config.Listen, st.Connections, st.Pending)
		}
	}
}
