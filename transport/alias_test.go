package transport

import (
	"bytes"
	"testing"

	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// With SetPayloadAlias a data packet's payload of 512 bytes or more comes in
// Transmit.Payload (the message's own bytes) behind a header-only buf[:N]; smaller
// payloads, and all with authentication or encryption on, are copied as before. Every
// message arrives intact and once, also when a tenth of the first transmissions are
// lost and retransmissions take their payloads from the message again.
func TestPayloadAlias(t *testing.T) {
	for _, mode := range []seal.Mode{seal.Off, seal.Auth, seal.Encrypt} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			if mode != seal.Off {
				cfg.Auth.Mode, cfg.Auth.Key = mode, seal.Key{3}
			}
			p := newPair(t, cfg, 5000)
			p.a.SetPayloadAlias(true)
			p.b.SetPayloadAlias(true)
			n := 0
			p.drop = func(_ *Endpoint, b []byte) bool {
				if wire.Type(b[0]&0x0f) == wire.TypeData && b[1]&byte(wire.FlagRetx) == 0 {
					n++
					return n%10 == 4
				}
				return false
			}
			id, err := p.a.Dial(0, p.bAddr)
			if err != nil {
				t.Fatal(err)
			}
			msgs := [][]byte{[]byte("x"), make([]byte, 511), make([]byte, 512), make([]byte, 1<<20+3), make([]byte, 100)}
			for i, m := range msgs {
				for j := range m {
					m[j] = byte(i*37 + j*11 + j>>9)
				}
				if _, err := p.a.Send(0, id, m); err != nil {
					t.Fatal(err)
				}
			}
			got := map[int][]byte{}
			dups := 0
			p.runUntil(t, 2e9, func() bool {
				for ev := range pending(p.b) {
					if ev.Kind == MessageReceived {
						for i, m := range msgs {
							if len(m) == len(ev.Data) {
								if got[i] != nil {
									dups++
								}
								got[i] = ev.Data
							}
						}
					}
				}
				return len(got) == len(msgs)
			})
			for i, m := range msgs {
				if !bytes.Equal(got[i], m) {
					t.Fatalf("message %d (%d bytes) differs", i, len(m))
				}
			}
			st := p.a.Stats()
			if dups != 0 || st.RetxSack+st.RetxNack+st.RetxTimeout == 0 {
				t.Fatalf("%d duplicates, retransmissions %+v", dups, st)
			}
			// 1 MiB + 3 bytes is 256 full packets and one of 3 bytes; with the 512-byte
			// message, 257 payloads go aliased (counted as they leave, a dropped one again
			// in its retransmission), the 3-byte tail and the small messages copied.
			if mode == seal.Off && p.aliased < 257 || mode != seal.Off && p.aliased != 0 {
				t.Fatalf("%d datagrams with an aliased payload (dropped %d, stats %+v)", p.aliased, n, st)
			}
		})
	}
}
