package transport_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// evLog is a balancer handing out a new EV per call and recording what it was asked.
type evLog struct {
	next      uint16
	calls     int
	retxCalls int
}

func (l *evLog) NextEV(now int64, size int, retx bool) uint16 {
	l.calls++
	if retx {
		l.retxCalls++
	}
	l.next++
	return l.next
}
func (l *evLog) OnAck(int64, uint16, bool, int64)   {}
func (l *evLog) OnLoss(int64, uint16, cc.LossCause) {}

// reps.run = k: the balancer is asked once per k new data packets, which then share its
// EV (the EV runs); k = 1 asks it per packet.
func TestEVRuns(t *testing.T) {
	for _, k := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("run=%d", k), func(t *testing.T) {
			n := testnet.New(testnet.Config{Delay: 2000}, 1)
			cfg := transport.DefaultConfig()
			cfg.REPS.Run = k
			var logs []*evLog
			newLB := func(*rand.Rand) reps.Balancer {
				l := &evLog{}
				logs = append(logs, l)
				return l
			}
			ep, ad := twoHosts(t, n, cfg, 1, transport.Hooks{NewBalancer: newLB})
			id, _ := ep[0].Dial(0, ad[1])
			const msg = 1 << 20
			ep[0].Send(0, id, make([]byte, msg))
			n.Wake(ad[0])
			got := 0
			if !n.RunUntil(1e10, func() bool {
				forEvents(ep[1], func(ev transport.Event) {
					if ev.Kind == transport.MessageReceived {
						got++
					}
				})
				return got == 1
			}) {
				t.Fatal("transfer did not complete")
			}
			s := ep[0].Stats()
			if s.RetxSack+s.RetxNack+s.RetxTimeout != 0 {
				t.Fatalf("retransmissions on a lossless network: %+v", s)
			}
			l := logs[0] // the dialler's connection
			want := (int(s.DataSent) + k - 1) / k
			if l.calls != want || l.retxCalls != 0 {
				t.Fatalf("%d data packets, balancer asked %d times (%d retx), want %d", s.DataSent, l.calls, l.retxCalls, want)
			}
		})
	}
}
