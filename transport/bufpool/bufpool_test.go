package bufpool

import "testing"

// TestClasses: buffers from 64 KiB to 64 MiB come in power-of-two classes and are
// recycled; smaller and larger ones are plain heap buffers of their exact size.
func TestClasses(t *testing.T) {
	for _, c := range []struct{ n, class, capacity int }{
		{1, -1, 1}, {64<<10 - 1, -1, 64<<10 - 1}, {64 << 10, 0, 64 << 10}, {64<<10 + 1, 1, 128 << 10},
		{16<<20 + 12, 9, 32 << 20}, {64 << 20, 10, 64 << 20}, {64<<20 + 1, -1, 64<<20 + 1},
	} {
		if got := poolClass(c.n); got != c.class {
			t.Errorf("poolClass(%d) = %d, want %d", c.n, got, c.class)
		}
		b := Get(c.n)
		if len(b) != c.n || cap(b) != c.capacity {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", c.n, len(b), cap(b), c.capacity)
		}
		Put(b)
	}
	// A foreign buffer of a non-class capacity is not taken.
	Put(make([]byte, 100<<10))
	for range 10 {
		if b := Get(100 << 10); cap(b) != 128<<10 {
			t.Fatalf("Get(100 KiB) has cap %d, want the class's 128 KiB", cap(b))
		}
	}
}
