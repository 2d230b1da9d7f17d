package cc

import "testing"

func TestFixedIgnoresFeedback(t *testing.T) {
	f := &Fixed{Bytes: 65536}
	f.OnAck(Ack{Bytes: 4096, CE: true, RTT: 1e6})
	f.OnLoss(Loss{Bytes: 4096, Cause: LossTimeout})
	if f.Window() != 65536 || f.PacingRate() != 0 {
		t.Fatalf("window %d rate %d", f.Window(), f.PacingRate())
	}
	var _ Controller = f
}

func TestLossCauseNames(t *testing.T) {
	for c, want := range map[LossCause]string{LossTrim: "trim", LossSack: "sack", LossTimeout: "timeout", 0: "unknown"} {
		if c.String() != want {
			t.Errorf("%d: %q", c, c.String())
		}
	}
}
