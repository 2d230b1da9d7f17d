package udp_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"

	"github.com/smartt-transport/smartt/transport/udp"
)

// Two Conns on loopback: a data packet on EV 5 arrives from EV 5's source port, with
// ECT(0), the data DSCP and a kernel receive timestamp.
func ExampleOpen() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := udp.Open(udp.Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 16, DataDSCP: 10, Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := udp.Open(udp.Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	msg := []byte("hello")
	if _, err := a.WriteBatch([]udp.Packet{{Buf: msg, N: len(msg), Addr: b.LocalAddr(), EV: 5, ECN: udp.ECT0}}); err != nil {
		panic(err)
	}
	in := []udp.Packet{{Buf: make([]byte, 2048)}}
	n, err := b.ReadBatch(in)
	if err != nil {
		panic(err)
	}
	p := in[0]
	fmt.Println(n, string(p.Buf[:p.N]), p.Addr.Port() == a.EVPort(5), p.ECN == udp.ECT0, p.DSCP, p.RxTime > 0)
	fmt.Println(b.Caps().TimestampSource)
	// Output:
	// 1 hello true true 10 true
	// kernel
}
