package main

import (
	"os"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

func TestMain(m *testing.M) {
	if os.Getenv("SMARTT_TEST_MAIN") == "1" {
		main() // the test binary runs as the smartt command (see TestSendInterruptedMidStream)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// quietPair starts two daemons on loopback under dir (logging errors only), stopped when
// the test ends.
func quietPair(t *testing.T, dir string) [2]*smarttd.Daemon {
	t.Helper()
	ds, err := smarttd.LocalPair(dir, smarttd.Options{}, func(c *smarttd.Config) { c.LogLevel = "error" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smarttd.StopAll(ds[:], 2*time.Second) })
	return ds
}
