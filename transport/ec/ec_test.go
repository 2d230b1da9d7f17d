package ec_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/ec"
)

// Importing the package links the code: an endpoint in recovery mode "ec" can be made.
func TestImportRegisters(t *testing.T) {
	cfg := transport.DefaultConfig()
	cfg.Recovery.Mode = transport.RecoveryEC
	if err := cfg.CheckLinked(); err != nil {
		t.Fatal(err)
	}
	if _, err := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
}

// The code rebuilds m lost data shards of a block from its parity, fed one data shard at
// a time as the sender codes them.
func TestRebuildsFromParity(t *testing.T) {
	const k, m, n = 4, 2, 64
	c, err := ec.New(k, m)
	if err != nil {
		t.Fatal(err)
	}
	data := make([][]byte, k)
	parity := [][]byte{make([]byte, n), make([]byte, n)}
	for i := range data {
		data[i] = bytes.Repeat([]byte{byte(i*37 + 1)}, n)
		if err := c.EncodeIdx(data[i], i, parity); err != nil {
			t.Fatal(err)
		}
	}
	shards := [][]byte{data[0], make([]byte, 0, n), data[2], make([]byte, 0, n), parity[0], parity[1]}
	if err := c.ReconstructData(shards); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		if !bytes.Equal(shards[i], data[i]) {
			t.Errorf("shard %d not rebuilt", i)
		}
	}
}
