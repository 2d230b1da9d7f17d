package api

import "testing"

// TestBodyPoolClasses: bodies from 64 KiB to 64 MiB come in power-of-two classes and are
// recycled; smaller and larger ones are plain heap buffers of their exact size.
func TestBodyPoolClasses(t *testing.T) {
	for _, c := range []struct{ n, class, capacity int }{
		{1, -1, 1}, {64<<10 - 1, -1, 64<<10 - 1}, {64 << 10, 0, 64 << 10}, {64<<10 + 1, 1, 128 << 10},
		{16<<20 + 12, 9, 32 << 20}, {64 << 20, 10, 64 << 20}, {64<<20 + 1, -1, 64<<20 + 1},
	} {
		if got := poolClass(c.n); got != c.class {
			t.Errorf("poolClass(%d) = %d, want %d", c.n, got, c.class)
		}
		b := getBody(c.n)
		if len(b) != c.n || cap(b) != c.capacity {
			t.Errorf("getBody(%d): len %d cap %d, want cap %d", c.n, len(b), cap(b), c.capacity)
		}
		putBody(b)
	}
	// A foreign buffer of a non-class capacity is not taken.
	putBody(make([]byte, 100<<10))
	for range 10 {
		if b := getBody(100 << 10); cap(b) != 128<<10 {
			t.Fatalf("getBody(100 KiB) has cap %d, want the class's 128 KiB", cap(b))
		}
	}
}
