package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/transport/client"
)

// execute runs smartt with args and returns its output and error.
func execute(args ...string) (string, error) {
	var out bytes.Buffer
	root := newRootCmd(strings.NewReader(""), &out, &out)
	root.SetArgs(cli.NormalizeArgs(root, args))
	err := root.Execute()
	return out.String(), err
}

// isUsageError tells a usage error (exit status 2).
func isUsageError(err error) bool { return cli.IsUsageError(err) }

// Every command's -h exits 0 and names each of its subcommands; no printf escapes leak.
func TestHelpEveryCommand(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		out, err := execute(append(path, "-h")...)
		if err != nil {
			t.Errorf("smartt %v -h: %v", path, err)
		}
		if strings.Contains(out, "%%") || strings.Contains(out, "%!") {
			t.Errorf("smartt %v -h prints a printf escape:\n%s", path, out)
		}
		for _, s := range c.Commands() {
			if s.Hidden {
				continue
			}
			if !strings.Contains(out, "\n  "+s.Name()+" ") {
				t.Errorf("smartt %v -h does not list %q:\n%s", path, s.Name(), out)
			}
			walk(s)
		}
		n++
	}
	walk(newRootCmd(nil, nil, nil))
	if n < 8 {
		t.Fatalf("walked %d commands", n)
	}
	if out, _ := execute("demo", "-inmem", "-h"); !strings.Contains(out, "--reorder") {
		t.Errorf("demo -inmem -h does not list the in-memory demo's flags:\n%s", out)
	}
	out, _ := execute("send", "-h")
	if !strings.Contains(out, "--to") || !strings.Contains(out, "--socket") || strings.Contains(out, "Usage of") ||
		strings.Count(out, "Usage:") != 1 {
		t.Errorf("send -h:\n%s", out)
	}
}

// "smartt help CMD" and "smartt CMD -h" print the same text, listing every flag, for
// every command.
func TestHelpSameBothWays(t *testing.T) {
	problems, n := cli.HelpMismatches(func(out *bytes.Buffer) *cobra.Command { return newRootCmd(nil, out, out) })
	for _, p := range problems {
		t.Error(p)
	}
	if n < 8 {
		t.Fatalf("walked %d commands", n)
	}
}

func TestMissingRequiredFlag(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, []byte("x"), 0o644)
	_, err := execute("send", f)
	if err == nil || !strings.Contains(err.Error(), "-to is required") || !isUsageError(err) {
		t.Fatalf("send without -to: %v", err)
	}
	_, err = execute("recv", "-endpoint", "3")
	if err == nil || !strings.Contains(err.Error(), "-out is required") || !isUsageError(err) {
		t.Fatalf("recv without -out: %v", err)
	}
	if _, err := execute("send", "-bogus", f); err == nil || !isUsageError(err) {
		t.Fatalf("unknown flag: %v", err)
	}
	if _, err := execute("nosuch"); err == nil || !isUsageError(err) {
		t.Fatalf("unknown command: %v", err)
	}
}

func TestNoDaemonSaysWhatToDo(t *testing.T) {
	_, err := execute("status", "-socket", filepath.Join(t.TempDir(), "none.sock"))
	if err == nil || !strings.Contains(err.Error(), "start one") || !strings.Contains(err.Error(), "--socket") {
		t.Fatalf("status without a daemon: %v", err)
	}
}

func TestResolveAddrPort(t *testing.T) {
	ap, err := resolveAddrPort(context.Background(), "localhost:23600")
	if err != nil || !ap.Addr().IsLoopback() || ap.Port() != 23600 {
		t.Fatalf("localhost:23600 -> %v, %v", ap, err)
	}
	if ap, err := resolveAddrPort(context.Background(), "[::1]:5"); err != nil || ap.String() != "[::1]:5" {
		t.Fatalf("[::1]:5 -> %v, %v", ap, err)
	}
	for _, bad := range []string{"localhost", "localhost:0", "localhost:x", "no-such-host.invalid:1"} {
		if _, err := resolveAddrPort(context.Background(), bad); err == nil {
			t.Errorf("%q resolved", bad)
		}
	}
}

// A flag after the positional argument, and a host name in -to, against two daemons.
func TestSendHostnameFlagAfterFile(t *testing.T) {
	dir := t.TempDir()
	ds := quietPair(t, dir)
	a := ds[0] // listens on 127.0.0.1, which "localhost" resolves to
	if !a.Config.Listen.Addr().Is4() || a.Config.Listen.Addr().String() != "127.0.0.1" {
		t.Skipf("daemon A listens on %v", a.Config.Listen)
	}
	outDir := filepath.Join(dir, "in")
	done := make(chan error, 1)
	go func() {
		_, err := execute("recv", "-out", outDir, "-socket", a.Config.API.Socket, "-endpoint", "9", "-count", "1", "-timeout", "20s", "-progress", "on")
		done <- err
	}()
	waitBound(t, a.Config.API.Socket)
	file := filepath.Join(dir, "msg")
	os.WriteFile(file, []byte("over a host name"), 0o644)
	to := "localhost:" + strings.TrimPrefix(a.Config.Listen.String(), "127.0.0.1:")
	// -progress on runs the network-progress pollers against the daemons' /v1/conns too.
	if out, err := execute("send", file, "-socket", ds[1].Config.API.Socket, "-to", to, "-endpoint", "9", "-progress", "on"); err != nil {
		t.Fatalf("send FILE -to %s: %v\n%s", to, err, out)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ := filepath.Glob(filepath.Join(outDir, "*"))
	if len(got) != 1 {
		t.Fatalf("received files %v", got)
	}
	if b, _ := os.ReadFile(got[0]); string(b) != "over a host name" {
		t.Fatalf("received %q", b)
	}
}

func TestManAndCompletion(t *testing.T) {
	dir := t.TempDir()
	if _, err := execute("man", dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"smartt.1", "smartt-send.1", "smartt-recv.1", "smartt-demo.1"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || !bytes.Contains(b, []byte(".TH")) {
			t.Errorf("man page %s: %v", p, err)
		}
		if p == "smartt-send.1" && (!bytes.Contains(b, []byte(`\fB\-\-from\-endpoint\fP`)) || !bytes.Contains(b, []byte(`\fB\-\-to\fP`)) ||
			!bytes.Contains(b, []byte(`\fB\-\-timeout\fP`)) || !bytes.Contains(b, []byte(".SH OPTIONS"))) {
			t.Errorf("man page %s does not describe the flags:\n%s", p, b)
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, err := execute("completion", sh)
		if err != nil || !strings.Contains(out, "smartt") || len(out) < 500 {
			t.Errorf("completion %s: %v (%d bytes)", sh, err, len(out))
		}
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine("send", 25<<20, 100<<20, 5*time.Second)
	for _, want := range []string{"25.0%", "25.0 MiB/100.0 MiB", "5.0 MiB/s", "ETA 15s", "[=======       "} {
		if !strings.Contains(got, want) {
			t.Errorf("progress line %q lacks %q", got, want)
		}
	}
	if got := progressLine("recv", 100, 100, 2*time.Second); !strings.Contains(got, "100.0%") || !strings.Contains(got, "in 2s") || strings.Contains(got, "ETA") {
		t.Errorf("finished progress line %q", got)
	}
	if got := humanBytes(1536); got != "1.5 KiB" {
		t.Errorf("humanBytes(1536) = %q", got)
	}
}

// bench -json and -format csv print machine-readable rows, one per size.
func TestBenchJSONAndCSV(t *testing.T) {
	dir := t.TempDir()
	ds := quietPair(t, dir)
	args := []string{"bench", "-socket", ds[0].Config.API.Socket, "-to", ds[1].Config.Listen.String(), "-sizes", "64,4K",
		"-lat-iters", "5", "-bw-bytes", "64K", "-max-time", "1s"}
	out, err := execute(append(args, "-json")...)
	if err != nil {
		t.Fatalf("bench -json: %v\n%s", err, out)
	}
	var res benchJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench -json is not JSON: %v\n%s", err, out)
	}
	if len(res.Rows) != 2 || res.Rows[1].Bytes != 4096 || res.Rows[0].LatMessages < 1 || res.Rows[1].Gbps <= 0 || res.Rows[0].P50Us <= 0 {
		t.Fatalf("bench -json rows %+v", res.Rows)
	}
	out, err = execute(append(args, "-format", "csv")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || lines[0] != benchCSVHeader || !strings.HasPrefix(lines[2], "4096,") {
		t.Fatalf("bench -format csv: %v\n%s", err, out)
	}
	if _, err := execute(append(args, "-format", "xml")...); err == nil {
		t.Fatal("bench -format xml accepted")
	}
}

// The single-dash spellings of before cobra still work.
func TestOldSpellings(t *testing.T) {
	for _, args := range [][]string{{"-version", "-socket", "/nonexistent"}, {"--version"}, {"send", "-help"}, {"help", "send"}} {
		out, err := execute(args...)
		if err != nil || out == "" {
			t.Errorf("smartt %v: %v\n%s", args, err, out)
		}
	}
}

// Shell completion completes a command's flags and the commands.
func TestCompleteFlags(t *testing.T) {
	out, err := execute("__complete", "send", "--t")
	if err != nil || !strings.Contains(out, "--to\t") || !strings.Contains(out, "--timeout\t") || strings.Contains(out, "--socket") {
		t.Fatalf("completing send --t: %v\n%s", err, out)
	}
	out, err = execute("__complete", "")
	if err != nil || !strings.Contains(out, "recv") || !strings.Contains(out, "bench") {
		t.Fatalf("completing commands: %v\n%s", err, out)
	}
}

// pollProgress draws the network progress it polls and stops cleanly; incomingLine says
// who is sending and how much has arrived.
func TestPollProgress(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(b) })
	var n atomic.Int64
	stop := pollProgress(w, "send: acknowledged by 10.0.0.2:23600", 100<<20, n.Load)
	n.Store(50 << 20)
	time.Sleep(700 * time.Millisecond)
	stop(false)
	mu.Lock()
	got := buf.String()
	mu.Unlock()
	if !strings.Contains(got, "acknowledged by 10.0.0.2:23600") || !strings.Contains(got, "50.0%") {
		t.Fatalf("progress output %q", got)
	}
	if l := incomingLine("10.0.0.1:23600", 3<<20, 2<<20); !strings.Contains(l, "10.0.0.1:23600") || !strings.Contains(l, "3.0 MiB") || !strings.Contains(l, "2.0 MiB/s") {
		t.Fatalf("incoming line %q", l)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// recv --out DIR numbers after the highest number already there and never replaces a
// file; other files do not count.
func TestMsgDirNumbersOn(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"000000-a-1.msg", "000007-10.0.0.1_23600-1.msg", "999999.msg", "notes-000050.msg", "000100-x.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644)
	}
	d, err := openMsgDir(dir)
	if err != nil || d.next != 8 {
		t.Fatalf("next %d, %v", d.next, err)
	}
	// A file that appeared meanwhile under the next number is skipped.
	os.WriteFile(filepath.Join(dir, "000008-127.0.0.1_1-1.msg"), []byte("old"), 0o644)
	m := &client.Message{From: netip.MustParseAddrPort("127.0.0.1:1"), FromEndpoint: 1}
	f, err := d.create(m)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if filepath.Base(f.Name()) != "000009-127.0.0.1_1-1.msg" {
		t.Fatalf("created %s", f.Name())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "000008-127.0.0.1_1-1.msg")); string(b) != "old" {
		t.Fatal("an existing file was truncated")
	}
	if d, _ := openMsgDir(filepath.Join(dir, "new")); d.next != 0 {
		t.Fatalf("empty directory starts at %d", d.next)
	}
}

// frame writes the length and netstring framings, split writes included.
func TestFrame(t *testing.T) {
	var b bytes.Buffer
	w := frame(&b, "netstring", 5)
	w.Write([]byte("ab"))
	w.Write([]byte("cde"))
	frame(&b, "netstring", 0)
	frame(&b, "length", 2).Write([]byte("xy"))
	frame(&b, "none", 1).Write([]byte("z"))
	if got := b.String(); got != "5:abcde,0:,\x00\x00\x00\x00\x00\x00\x00\x02xyz" {
		t.Fatalf("framed %q", got)
	}
	for _, bad := range [][]string{{"-out", "-", "-framing", "xml"}, {"-out", t.TempDir(), "-framing", "length"}} {
		if _, err := execute(append([]string{"recv"}, bad...)...); err == nil || !isUsageError(err) {
			t.Errorf("recv %v: %v", bad, err)
		}
	}
}

// bench takes the sizes the config files take: 1G for --bw-bytes, 4k and 1MiB in --sizes.
func TestBenchSizes(t *testing.T) {
	var o benchOpts
	var sizes string
	var jsonOut bool
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	declareBench(fs, &o, &sizes, &jsonOut)
	if err := fs.Parse([]string{"--bw-bytes", "1G", "--sizes", "64, 4k,1MiB,1G"}); err != nil {
		t.Fatal(err)
	}
	if err := checkBench(&o, sizes, jsonOut); err != nil || o.bwBytes != 1<<30 || !slices.Equal(o.sizes, []int{64, 4096, 1 << 20, 1 << 30}) {
		t.Fatalf("bw %d sizes %v: %v", o.bwBytes, o.sizes, err)
	}
	for _, bad := range [][]string{{"-bw-bytes", "2G"}, {"-bw-bytes", "1000"}, {"-sizes", "0"}, {"-sizes", "2GiB"}, {"-sizes", "4x"}} {
		_, err := execute(append([]string{"bench"}, bad...)...)
		if err == nil || !isUsageError(err) || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "-")) {
			t.Errorf("bench %v: %v", bad, err)
		}
	}
}

// The operator binary links no simulator, testbed, training or plotting, and none of what
// only smarttd or smartt-lab needs: the Prometheus exporter (with protobuf), gopacket,
// cobra/doc's Markdown renderer, the erasure code (transport/ec, klauspost/reedsolomon),
// net/http and crypto/tls (the API's HTTP subset is transport/apitypes/apihttp's).
func TestOperatorBinaryIsLean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	bad := regexp.MustCompile(`(?m)^.*(gonum|plot|sim|testbed|netbed|bedrun|/test/sweep|/rlcc/train|/rlcc/rlccnet|codeberg\.org|go-latex|go-pdf|freetype|svgo|golang\.org/x/image|prometheus|protobuf|gopacket|/transport/metrics|cobra/doc|blackfriday|md2man|klauspost|/transport/ec$|net/http|crypto/tls).*$`)
	if m := bad.FindAllString(string(out), -1); len(m) > 0 {
		t.Fatalf("cmd/smartt links %v", m)
	}
	if !strings.Contains(string(out), "github.com/smartt-transport/smartt/transport/smarttd") {
		t.Fatalf("go list output lacks the daemon package (the demo's):\n%s", out)
	}
}
