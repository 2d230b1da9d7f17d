package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goTool returns the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	g := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(g); err != nil {
		t.Skipf("no go command at %s", g)
	}
	return g
}

// offlineEnv is the environment of a go command that must not touch the network.
func offlineEnv() []string {
	return append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOTOOLCHAIN=local")
}

// Importing the client must not link the transport engine (nor the daemon, nor the API
// server): a program that only talks to smarttd stays small.
func TestClientDoesNotImportEngine(t *testing.T) {
	out, err := exec.Command(goTool(t), "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		switch p {
		case "github.com/smartt-transport/smartt/transport", "github.com/smartt-transport/smartt/transport/daemon",
			"github.com/smartt-transport/smartt/transport/api":
			t.Errorf("transport/client depends on %s", p)
		}
	}
}

// A module outside this repository at go 1.24 imports the client (as `go get` users do,
// here through replace directives to this checkout) and builds a program with it; its go
// line stays 1.24 (the client is its own module at go 1.24: it used to need 1.26).
func TestGoGettable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not in -short")
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/smarttuser\n\ngo 1.24.0\n\n" +
		"require github.com/smartt-transport/smartt/transport/client v0.0.0\n\n" +
		"replace github.com/smartt-transport/smartt/transport/client => " + here + "\n" +
		"replace github.com/smartt-transport/smartt/transport/apitypes => " + filepath.Join(here, "../apitypes") + "\n" +
		"replace github.com/smartt-transport/smartt/transport/bufpool => " + filepath.Join(here, "../bufpool") + "\n"
	prog := `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/smartt-transport/smartt/transport/client"
)

func main() {
	_, err := client.New("/nonexistent/smarttd.sock").Status(context.Background())
	fmt.Println(err != nil)
	var info client.SentInfo
	fmt.Println(info.Elapsed.String())
	os.Exit(0)
}
`
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"go.mod": gomod, "main.go": prog, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "smarttuser")
	cmd := exec.Command(goTool(t), "build", "-o", bin, ".")
	cmd.Dir, cmd.Env = dir, offlineEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a module that imports transport/client: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || string(out) != "true\n0s\n" {
		t.Fatalf("program said %q, %v", out, err)
	}
	after, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.Contains(string(after), "\ngo 1.24.0\n") {
		t.Fatalf("the importer's go line changed:\n%s", after)
	}
}

// The client's module and the modules it requires stay at go 1.24: nothing they need may
// raise an importer's go line.
func TestGoLine(t *testing.T) {
	for _, f := range []string{"go.mod", "../apitypes/go.mod", "../bufpool/go.mod"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\ngo 1.24.0\n") {
			t.Errorf("%s: go line is not 1.24.0:\n%s", f, b)
		}
	}
	out, err := exec.Command(goTool(t), "list", "-m", "-f", "{{.Path}} {{.GoVersion}}", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[1] > "1.24.0" && len(f[1]) >= len("1.24.0") {
			t.Errorf("module %s needs go %s", f[0], f[1])
		}
	}
}
