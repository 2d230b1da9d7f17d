package transport

import (
	"bytes"
	"slices"
	"testing"
)

// Unsend takes back only the newest message of a connection, and only before any byte
// of it was sent: the connection then goes on as if it had never been queued (the next
// message takes its ID and stream offset), and no event is reported for it.
func TestUnsendNewestUnstartedOnly(t *testing.T) {
	p := newPair(t, DefaultConfig(), 10_000)
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{1}, 4<<20)
	m1, _ := p.a.Send(0, id, big)
	m2, _ := p.a.Send(0, id, []byte("two"))
	m3, _ := p.a.Send(0, id, []byte("three"))
	if p.a.Unsend(id, m2) {
		t.Fatal("took back a message with a newer one behind it")
	}
	if !p.a.Unsend(id, m3) || p.a.Unsend(id, m3) {
		t.Fatal("the newest unstarted message: taken back once")
	}
	m4, _ := p.a.Send(0, id, []byte("four"))
	if m4 != m3 {
		t.Fatalf("the next message got ID %d, want the taken-back %d", m4, m3)
	}
	p.step() // m1's first packets leave
	if p.a.Unsend(id, m1) || p.a.Unsend(id+1, m4) {
		t.Fatal("took back a started message, or one of an unknown connection")
	}
	var l msgLog
	p.runUntil(t, 60e9, func() bool {
		l.poll(t, p)
		return len(l.sent) == 3
	})
	l.delivered(t, [][]byte{big, []byte("two"), []byte("four")})
	if !slices.Contains(l.sent, m1) || !slices.Contains(l.sent, m2) || !slices.Contains(l.sent, m4) {
		t.Fatalf("sent events %v", l.sent)
	}
}
