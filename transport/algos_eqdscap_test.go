package transport

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
)

// TestEQDSCappedBothBind: eqds-smartt and eqds-mprdma are EQDS credit gates whose window
// is the capping controller's. Trims (which give EQDS no credit back) shrink the cap's
// window, so a sender holding credit is held by the cap; spending its credit closes
// CanSend while the window stays open, so credit still binds.
func TestEQDSCappedBothBind(t *testing.T) {
	for _, name := range []string{"eqds-smartt", "eqds-mprdma"} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			ctl, err := NewCC(name, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c, ok := ctl.(*eqdsCapped)
			if !ok || creditGateOf(ctl) == nil {
				t.Fatalf("%T is not a credit gate", ctl)
			}
			if r, _ := LookupCC(name); r.Credit != "eqds" || !r.Needs.ECN {
				t.Fatalf("registration %+v", r)
			}
			credit := c.Credit()
			w0 := c.Window()
			if w0 != min(c.Sender.Window(), c.cap.Window()) {
				t.Fatalf("window %d, want min(%d, %d)", w0, c.Sender.Window(), c.cap.Window())
			}
			now := int64(1_000_000)
			for i := range 64 {
				now += 1_000
				c.OnLoss(cc.Loss{Now: now, Bytes: 4096, Cause: cc.LossTrim, EV: uint16(i), InFlight: w0})
				c.OnAck(cc.Ack{Now: now, Bytes: 4096, Packets: 1, RTT: 20_000, CE: true, CECount: 1, InFlight: w0})
			}
			if c.Credit() != credit {
				t.Fatalf("trims changed EQDS's credit: %d -> %d", credit, c.Credit())
			}
			if w := c.Window(); w >= w0 || w >= credit || w != c.cap.Window() {
				t.Fatalf("cap does not bind: window %d (was %d), credit %d, cap %d", w, w0, credit, c.cap.Window())
			}
			// Credit binds under an open window: spend it all.
			for c.CanSend(4096, false) {
				c.OnSend(4096, false)
			}
			if c.Window() <= 0 || c.CanSend(4096, false) {
				t.Fatalf("window %d, CanSend %v after spending the credit", c.Window(), c.CanSend(4096, false))
			}
			// A packet lost whole refunds EQDS's credit (as eqds alone does).
			c.OnLoss(cc.Loss{Now: now, Bytes: 4096, Cause: cc.LossTimeout})
			if !c.CanSend(4096, true) {
				t.Fatal("a timeout did not refund credit")
			}
		})
	}
}
