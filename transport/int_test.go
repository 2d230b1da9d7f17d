package transport

import (
	"bytes"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// intProbe is a fixed window that records the INT records of every ACK.
type intProbe struct {
	cc.Fixed
	acks, withINT int
	last          []wire.INTHop
}

func (p *intProbe) OnAck(a cc.Ack) {
	p.acks++
	if a.INT != nil {
		p.withINT++
		p.last = append(p.last[:0], a.INT...)
	}
}

// TestINTEchoed: with int = true data packets carry an INT block of int_hops slots; the
// records a switch stamps into them come back in ACKs and reach the sender's
// controller, hop by hop in order; without INT nothing changes on the wire.
func TestINTEchoed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.INT, cfg.INTHops = true, 3
	probe := &intProbe{Fixed: cc.Fixed{Bytes: 1 << 20}}
	p := newPair(t, cfg, 3000, Hooks{NewCC: func() cc.Controller { return probe }})
	var pk wire.Packet
	stamped, acksINT := 0, 0
	p.drop = func(from *Endpoint, b []byte) bool {
		if pk.Decode(b) != nil {
			t.Fatalf("engine sent an undecodable packet")
		}
		switch {
		case from == p.a && pk.Type == wire.TypeData:
			if pk.Flags&wire.FlagINT == 0 || pk.INT.Cap != 3 || pk.INT.N != 0 || len(b) != wire.DataHdrLen+wire.INTLen(3)+len(pk.Payload) {
				t.Fatalf("data packet INT block %+v, %d bytes", pk.INT, len(b))
			}
			// Two switches on the way.
			for i := range 2 {
				if wire.StampINT(b, wire.INTHop{TS: uint32(stamped), TxBytes: 7, QLen: uint32(100 * (i + 1)), Rate: 100_000}) != wire.StampDone {
					t.Fatal("stamp refused")
				}
			}
			stamped++
		case from == p.b && pk.Type == wire.TypeAck && pk.Flags&wire.FlagINT != 0:
			acksINT++
		}
		return false
	}
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte{7}, 200_000)
	if _, err := p.a.Send(0, id, msg); err != nil {
		t.Fatal(err)
	}
	var l msgLog
	p.runUntil(t, 1e9, func() bool {
		l.poll(t, p)
		return l.all(1)
	})
	l.delivered(t, [][]byte{msg})
	if stamped < 40 || acksINT == 0 || probe.withINT != probe.acks || probe.acks == 0 || p.a.Stats().INTAcks != uint64(probe.acks) {
		t.Fatalf("%d data stamped, %d ACKs with INT, controller saw %d of %d ACKs with INT", stamped, acksINT, probe.withINT, probe.acks)
	}
	if len(probe.last) != 2 || probe.last[0].QLen != 100 || probe.last[1].QLen != 200 || probe.last[1].Rate != 100_000 {
		t.Fatalf("controller's records %+v", probe.last)
	}
	// Without INT: no flag, no block.
	cfg.INT = false
	p = newPair(t, cfg, 3000)
	p.drop = func(from *Endpoint, b []byte) bool {
		if pk.Decode(b) == nil && pk.Flags&wire.FlagINT != 0 {
			t.Fatalf("%v with FlagINT while int = false", pk.Type)
		}
		return false
	}
	id, _ = p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, msg[:10_000]); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, 1e9, func() bool { return len(events(p.b)) > 0 })
}

// TestINTMalformedCounted: a data packet whose INT block is cut or whose hop count
// exceeds its slots is refused and counted as ErrINT; nothing of it is acknowledged.
func TestINTMalformedCounted(t *testing.T) {
	cfg := DefaultConfig()
	cfg.INT = true
	cfg.CC = "hpcc"
	p := newPair(t, cfg, 3000)
	var pk wire.Packet
	n := 0
	p.drop = func(from *Endpoint, b []byte) bool {
		if from == p.a && pk.Decode(b) == nil && pk.Type == wire.TypeData {
			n++
			if n%2 == 0 {
				b[wire.DataHdrLen] = 9 // N beyond Cap: a hostile or broken switch
			}
		}
		return false
	}
	id, _ := p.a.Dial(0, p.bAddr)
	msg := bytes.Repeat([]byte{3}, 100_000)
	if _, err := p.a.Send(0, id, msg); err != nil {
		t.Fatal(err)
	}
	got := deliverOne(t, p, 5e9)
	st := p.b.Stats()
	if !bytes.Equal(got, msg) || st.MalformedByKind[wire.ErrINT.Code] == 0 || st.MalformedByKind[wire.ErrINT.Code] != st.Malformed {
		t.Fatalf("delivered %v; malformed %d, ErrINT %d", got != nil, st.Malformed, st.MalformedByKind[wire.ErrINT.Code])
	}
}

// TestINTConfig: hpcc is refused without INT switches; int_hops and the MTU with the INT
// block at and beyond their limits; INT with authentication is refused.
func TestINTConfig(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.CC = "hpcc" }, "needs switches that stamp in-band telemetry (int = false)"},
		{func(c *Config) { c.CC, c.INT = "hpcc", true }, ""},
		{func(c *Config) { c.INTHops = 0 }, ""},
		{func(c *Config) { c.INTHops = 5 }, ""},
		{func(c *Config) { c.INTHops = 6 }, "int_hops = 6"},
		{func(c *Config) { c.INTHops = -1 }, "int_hops = -1"},
		{func(c *Config) { c.INT, c.MTU = true, MaxMTU-wire.INTLen(5) }, ""},
		{func(c *Config) { c.INT, c.MTU = true, MaxMTU-wire.INTLen(5)+1 }, "INT block must fit"},
		{func(c *Config) { c.INT, c.INTHops, c.MTU = true, 1, MaxMTU-wire.INTLen(1) }, ""},
		{func(c *Config) { c.MTU = MaxMTU }, ""},
		{func(c *Config) {
			c.INT = true
			c.Auth = seal.Config{Mode: seal.Auth, Key: seal.Key{1, 2, 3}}
		}, "would break their seal"},
	} {
		cfg := DefaultConfig()
		cfg.RecvWindow = 1 << 20
		tc.mod(&cfg)
		err := cfg.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.INT, cfg.INTHops = true, 2
	if MaxDatagram(cfg) != cfg.MTU+wire.DataHdrLen+wire.INTLen(2) {
		t.Fatalf("MaxDatagram %d", MaxDatagram(cfg))
	}
}
