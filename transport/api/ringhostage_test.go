//go:build linux

package api_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/wire"
)

// A peer that starts a large message into a client's receive ring and then trickles it
// (one packet per 500 ms) holds the ring's head: space is reclaimed in order, so nothing
// the client releases behind it comes back. The client, which releases everything it
// gets, was disconnected as stalled after write_timeout (here 1 s) and got a few of an
// honest peer's 200 x 1 MiB messages although all were reported Sent. The stalled
// placement is now moved out of the ring (counter ring_displaced): the client stays
// connected and gets every message.
func TestRingHeadHeldByTricklingPeer(t *testing.T) { ringHeadHeld(t, false, nil) }

// ringHeadHeld runs TestRingHeadHeldByTricklingPeer with the receiving daemon's config
// changed by modB. lossy accepts messages the daemon dropped with a drop notice (the
// mode without back-pressure drops what overflows api.max_recv_queue): each of the n
// must then be delivered or counted in the notices and recv_overflow, none lost unseen.
func ringHeadHeld(t *testing.T, lossy bool, modB func(*smarttd.Config)) {
	mn := daemon.NewMemNet()
	const fill = 0xEE // the trickled message's bytes
	mn.Mark = trickleMark(fill, 500*time.Millisecond)
	dir := shortDir(t)
	mod := func(c *smarttd.Config) {
		c.API.WriteTimeout = config.Duration(time.Second)
		if modB != nil {
			modB(c)
		}
	}
	a := startDaemon(t, mn, addrA, dir, nil)
	b := startDaemon(t, mn, addrB, dir, mod)
	c := startDaemon(t, mn, addrC, dir, nil)
	victim := openBound(t, client.New(b.Config.API.Socket), 2)
	if err := victim.EnableRecvRing(ctx(t), 8<<20); err != nil {
		t.Fatal(err)
	}
	honest := openBound(t, client.New(a.Config.API.Socket), 1)
	hostile := openBound(t, client.New(c.Config.API.Socket), 3)

	const n, size = 200, 1 << 20
	var dropped func() int
	if lossy {
		dropped = func() int { return int(b.API.Stats().RecvOverflow) }
	}
	done := takeAll(victim, n, size, dropped)
	// The hostile peer proves its address with a small message, then starts a 3 MiB one
	// that goes into the ring and trickles.
	if _, err := hostile.Send(ctx(t), addrB, 2, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := hostile.SendAsync(addrB, 2, bytes.Repeat([]byte{fill}, 3<<20)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return b.API.Stats().RingPlaced >= 1 })
	var pend []*client.Pending
	start := time.Now()
	for i := range n {
		p, err := honest.SendAsync(addrB, 2, ringMsg(i, size))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sent := 0
	for _, p := range pend {
		if _, err := p.Wait(wctx); err == nil {
			sent++
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("victim: %v (%d of %d messages reported Sent; counters %+v)", err, sent, n, b.API.Stats())
		}
	case <-wctx.Done():
		t.Fatalf("victim got fewer than %d messages (%d reported Sent)", n, sent)
	}
	st := b.API.Stats()
	if sent != n || st.ClientsStalled != 0 {
		t.Fatalf("%d of %d Sent, clients_stalled %d", sent, n, st.ClientsStalled)
	}
	var counters struct {
		API map[string]int64 `json:"api"`
	}
	if err := client.New(b.Config.API.Socket).Get(ctx(t), "/v1/counters", &counters); err != nil {
		t.Fatal(err)
	}
	if counters.API["ring_displaced"] < 1 {
		t.Fatalf("ring_displaced %d: the trickled placement was never moved out", counters.API["ring_displaced"])
	}
	t.Logf("victim got %d in %v (recv_overflow %d); ring_placed %d, ring_fallback %d", n-int(st.RecvOverflow), time.Since(start).Round(time.Millisecond), st.RecvOverflow, st.RingPlaced, st.RingFallback)
}

type msgErr struct{ want, got int }

func (e *msgErr) Error() string {
	return fmt.Sprintf("message out of order or corrupted: want %d, got %d", e.want, e.got)
}

// trickleMark is a MemNet.Mark that lets data packets whose payload starts with four fill
// bytes through one per interval (a peer trickling that message); the message's first
// packet, which leads with the envelope, and all other traffic pass.
func trickleMark(fill byte, interval time.Duration) func(p *daemon.Packet) bool {
	var lastLet atomic.Int64
	return func(p *daemon.Packet) bool {
		b := p.Buf[:p.N]
		if len(b) < wire.DataHdrLen+4 || wire.Type(b[0]&0x0f) != wire.TypeData ||
			!bytes.Equal(b[wire.DataHdrLen:wire.DataHdrLen+4], []byte{fill, fill, fill, fill}) {
			return true
		}
		now := time.Now().UnixNano()
		last := lastLet.Load()
		return now-last >= int64(interval) && lastLet.CompareAndSwap(last, now)
	}
}

// takeAll receives on r, releasing everything, until n messages of size bytes
// (ringMsg(0..n-1, size), in order) have come; others are released and skipped. With
// dropped non-nil, drop notices are accepted and messages may be missing: it ends when
// the messages received plus dropped() reach n.
func takeAll(r *client.Session, n, size int, dropped func() int) <-chan error {
	done := make(chan error, 1)
	go func() {
		next := 0 // the lowest index the next message may carry
		for got := 0; got < n && (dropped == nil || got+dropped() < n); {
			rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			m, err := r.Recv(rctx)
			cancel()
			var ae *client.Error
			if err != nil && dropped != nil && errors.As(err, &ae) && ae.Code == apitypes.CodeRecvOverflow {
				continue
			}
			if err != nil {
				done <- err
				return
			}
			if m.Size == uint64(size) {
				i := int(binary.BigEndian.Uint32(m.Data))
				if (i != got && dropped == nil) || i < next || !bytes.Equal(m.Data, ringMsg(i, size)) {
					m.Release()
					done <- &msgErr{next, i}
					return
				}
				got, next = got+1, i+1
			}
			m.Release()
		}
		done <- nil
	}()
	return done
}
