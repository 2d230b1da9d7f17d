package switchport

import (
	"testing"
	"unsafe"

	"github.com/smartt-transport/smartt/transport/wire"
)

// TestINTRecords: a port's INT records carry each packet's service start, the bytes the
// port serialised before it (control packets included), the data queue behind it and
// the rate; a record from a busy port's consecutive departures gives txRate = B.
func TestINTRecords(t *testing.T) {
	const rate = 100_000_000_000 // 12.5 bytes/ns
	p, err := New[int](Config{Rate: rate}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		p.Arrive(0, i, 4000, true, true)
	}
	p.Arrive(0, 99, 100, false, false) // control: served before the queued data
	p.Advance(1_000_000)
	var x INT
	var recs []wire.INTHop
	for {
		d, ok := p.Pop()
		if !ok {
			break
		}
		if d.Control {
			x.Count(d.Size)
			continue
		}
		recs = append(recs, x.Record(d.Start, d.Size, d.QLen, p.Rate()))
	}
	want := []wire.INTHop{
		{TS: 0, TxBytes: 0, QLen: 0, Rate: 100_000},         // idle port: served at once, nothing behind yet
		{TS: 328, TxBytes: 4100, QLen: 8000, Rate: 100_000}, // after packet 0 (320 ns) and the control packet (8 ns)
		{TS: 648, TxBytes: 8100, QLen: 4000, Rate: 100_000},
		{TS: 968, TxBytes: 12100, QLen: 0, Rate: 100_000},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records", len(recs))
	}
	for i := range want {
		if recs[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, recs[i], want[i])
		}
	}
	// Busy port: (tx3 - tx2) / (ts3 - ts2) = line rate.
	if r := float64(recs[3].TxBytes-recs[1].TxBytes) / float64(recs[3].TS-recs[1].TS); r < 12.4 || r > 12.6 {
		t.Errorf("txRate %v bytes/ns, want 12.5", r)
	}
}

// TestDepartureSize: the INT queue length fits Departure's padding (a simulator keeps
// one per port in its hottest cache lines).
func TestDepartureSize(t *testing.T) {
	if n := unsafe.Sizeof(Departure[[16]byte]{}); n != 48 {
		t.Fatalf("Departure of a 16-byte item is %d bytes, want 48", n)
	}
}
