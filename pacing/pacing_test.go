package pacing

import "testing"

func TestPacerSpacesPacketsAtRate(t *testing.T) {
	var p Pacer
	const rate = 1_000_000_000 // 1 GB/s: 4096 B every 4096 ns
	now := int64(1000)
	if got := p.Earliest(now, rate); got != now {
		t.Fatalf("first packet delayed to %d", got)
	}
	p.OnSend(now, 4096, rate)
	if got := p.Earliest(now, rate); got != now+4096 {
		t.Fatalf("second packet at %d, want %d", got, now+4096)
	}
	p.OnSend(now+4096, 4096, rate)
	if got := p.Earliest(now+5000, rate); got != now+8192 {
		t.Fatalf("third packet at %d", got)
	}
	// Idle time earns no burst credit.
	p.OnSend(1_000_000, 4096, rate)
	if got := p.Earliest(1_000_000, rate); got != 1_000_000+4096 {
		t.Fatalf("after idle: %d", got)
	}
	// Rate 0 never delays.
	if got := p.Earliest(5, 0); got != 5 {
		t.Fatalf("unpaced: %d", got)
	}
}
