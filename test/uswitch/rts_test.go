package uswitch_test

import (
	"net"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/test/uswitch"
)

// TestReturnToSenderOverTheWire: an incast through the switch whose ports run the shared
// port model with return-to-sender trimming. Every DATA frame either reaches the receiver
// whole or comes back to its own sender's socket as the 64-byte header with
// FlagTrimmed|FlagReturned (the switch routed it back: addresses and ports swapped, to
// the header's ReplyPort when it names one), and the senders' kernels accept the returned
// headers (checksums right).
func TestReturnToSenderOverTheWire(t *testing.T) {
	const senders, each = 4, 20
	tb, sw, _ := star(t, senders+1, uswitch.Config{NewQueue: func(int) uswitch.Queue {
		frame := 14 + 20 + 8 + 64 + 4000 + uswitch.WireOverhead
		p, err := switchport.New[*uswitch.Frame](switchport.Config{Rate: 200e6, DataBytes: 4 * frame, Trim: true,
			ReturnToSender: true, TrimBytes: 14 + 20 + 8 + 64 + uswitch.WireOverhead}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return netbed.ModelQueue(p, 10_000, 46)
	}})
	rx := udp(t, tb, "h4", func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{Port: 9000}) })
	rx.SetReadBuffer(4 << 20)
	dst := &net.UDPAddr{IP: tb.Addr("h4").AsSlice(), Port: 9000}
	msg := make([]byte, 64+4000)
	msg[0] = 0x11
	msg[45] = 0xa0 // PayloadLen 4000
	msg[44] = 0x0f
	msg[39] = 0xa0 // MsgLen 4000
	msg[38] = 0x0f
	// Odd senders name a listen port in the header's ReplyPort (as the daemon does, whose
	// EV source ports only send): their headers must come back there.
	const replyPort = 9100
	var tx []*net.UDPConn // where each sender's returned headers must arrive
	for s := range senders {
		host := "h" + string(rune('0'+s))
		c := udp(t, tb, host, func() (*net.UDPConn, error) { return net.DialUDP("udp4", nil, dst) })
		c.SetReadBuffer(1 << 20)
		m := append([]byte(nil), msg...)
		back := c
		if s%2 == 1 {
			m[4], m[5] = replyPort>>8, replyPort&0xff
			back = udp(t, tb, host, func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{Port: replyPort}) })
			back.SetReadBuffer(1 << 20)
		}
		tx = append(tx, back)
		for range each {
			if _, err := c.Write(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	buf := make([]byte, 9000)
	full, returned, toReply := 0, 0, 0
	last := time.Now()
	for full+returned < senders*each {
		got := false
		rx.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if m, err := rx.Read(buf); err == nil {
			if m != len(msg) {
				t.Fatalf("receiver got a datagram of %d bytes", m)
			}
			full++
			got = true
		}
		for s, c := range tx {
			c.SetReadDeadline(time.Now().Add(time.Millisecond))
			m, err := c.Read(buf)
			if err != nil {
				continue
			}
			if m != 64 || buf[1]&0x18 != 0x18 {
				t.Fatalf("sender %d got %d bytes, flags %#x: want a returned 64-byte header", s, m, buf[1])
			}
			returned++
			if s%2 == 1 {
				toReply++
			}
			got = true
		}
		if got {
			last = time.Now()
		} else if time.Since(last) > 10*time.Second { // lost, not late: nothing for 10 s
			t.Fatalf("after %d full and %d returned of %d: nothing more (switch port %+v)", full, returned, senders*each, sw.Stats(4))
		}
	}
	t.Logf("%d delivered whole, %d returned to their senders (%d to a ReplyPort)", full, returned, toReply)
	if full == 0 || returned == 0 || toReply == 0 {
		t.Fatal("want some frames delivered and some returned, some of them to a ReplyPort")
	}
	for s := range senders {
		if e := csumErrors(t, tb, "h"+string(rune('0'+s))); e != 0 {
			t.Fatalf("sender %d counted %d checksum errors", s, e)
		}
	}
}
