package transport_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
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

// evTransfer sends one message of size bytes between two hosts of network n with cfg,
// every connection's balancer an evLog, and returns the sender's counters and the
// dialler's log once the message arrived.
func evTransfer(t *testing.T, n *testnet.Network, cfg transport.Config, size int) (transport.Stats, *evLog) {
	t.Helper()
	var logs []*evLog
	newLB := func(*rand.Rand) reps.Balancer {
		l := &evLog{}
		logs = append(logs, l)
		return l
	}
	ep, ad := twoHosts(t, n, cfg, 1, transport.Hooks{NewBalancer: newLB})
	id, _ := ep[0].Dial(0, ad[1])
	ep[0].Send(0, id, make([]byte, size))
	n.Wake(ad[0])
	if !receiveAll(n, ep[1], 1) {
		t.Fatal("transfer did not complete")
	}
	return ep[0].Stats(), logs[0]
}

// reps.run = k: the balancer is asked once per k new data packets, which then share its
// EV (the EV runs); k = 1 asks it per packet, and so does auto, the default (the engine,
// and so the simulator, resolves it to 1).
func TestEVRuns(t *testing.T) {
	for _, run := range []reps.RunLen{reps.RunAuto, 1, 4, 16} {
		k := run.Len()
		t.Run(fmt.Sprintf("run=%v", run), func(t *testing.T) {
			cfg := transport.DefaultConfig()
			if cfg.REPS.Run != reps.RunAuto {
				t.Fatalf("default reps.run %v, want auto", cfg.REPS.Run)
			}
			cfg.REPS.Run = run
			s, l := evTransfer(t, testnet.New(testnet.Config{Delay: 2000}, 1), cfg, 1<<20)
			if s.RetxSack+s.RetxNack+s.RetxTimeout != 0 {
				t.Fatalf("retransmissions on a lossless network: %+v", s)
			}
			want := (int(s.DataSent) + k - 1) / k
			if l.calls != want || l.retxCalls != 0 {
				t.Fatalf("%d data packets, balancer asked %d times (%d retx), want %d", s.DataSent, l.calls, l.retxCalls, want)
			}
		})
	}
}

// A loss on the current run's EV ends the run: the next new data packet asks the balancer
// again, so the message takes more EV choices than ceil(packets/k), which it takes exactly
// without loss (TestEVRuns); the lost packet's retransmission asks for its own.
func TestEVRunEndsOnLoss(t *testing.T) {
	const k = reps.MaxRun
	data := 0
	lossy := testnet.Config{Delay: 2000, Loss: 1, LossFilter: func(b []byte) bool {
		var p wire.Packet
		if p.Decode(b) != nil || p.Type != wire.TypeData {
			return false
		}
		data++
		return data == 3*k+2 // the second packet of the fourth run, on the run's EV
	}}
	cfg := transport.DefaultConfig()
	cfg.REPS.Run = k
	// A window of a quarter run: the loss is detected while its run still has packets to send.
	cfg.CC, cfg.InitialWindow = "fixed", k/4*cfg.MTU
	s, l := evTransfer(t, testnet.New(lossy, 1), cfg, 2<<20)
	retx := int(s.RetxSack + s.RetxNack + s.RetxTimeout)
	newData := int(s.DataSent) - retx
	if retx == 0 || l.retxCalls != retx {
		t.Fatalf("%d retransmissions, balancer asked %d times for them: want one each, at least one", retx, l.retxCalls)
	}
	if fresh, whole := l.calls-l.retxCalls, (newData+k-1)/k; fresh <= whole {
		t.Fatalf("%d new data packets in runs of %d: balancer asked %d times, want more than %d (the loss ends its run)", newData, k, fresh, whole)
	}
}
