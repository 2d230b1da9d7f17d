//go:build linux

package api

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// A session keeps a reused memfd mapped: the next message through it reads what the
// client wrote since (beyond the first page and in it), the envelope the daemon writes
// into the headroom stays the daemon's whatever the client writes there, a memfd whose
// message is in flight is mapped apart, and the cache keeps at most maxFDMaps memfds and
// unmaps them when the session ends (a busy one when its message completes).
func TestFDMapsReuse(t *testing.T) {
	const size = 3*4096 + 100
	fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, FDHeadroom+size)
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	write := func(seed byte) []byte {
		b := bytes.Repeat([]byte{seed}, size)
		b[0], b[size-1] = seed+1, seed+2
		unix.Pwrite(fd, b, FDHeadroom)
		return b
	}
	var c fdMaps
	for i := range 3 {
		want := write(byte(10 * i))
		st, err := checkMemfd(fd, size)
		if err != nil {
			t.Fatal(err)
		}
		buf, release, err := c.mapFor(fd, &st, size, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		putEnvelope(buf, 7, 9)
		unix.Pwrite(fd, []byte("spoofed-envel"), 0) // the client scribbles on the headroom
		if dst, src, ok := parseEnvelope(buf); !ok || dst != 7 || src != 9 {
			t.Fatalf("message %d: envelope %d %d %v after the client wrote the headroom", i, dst, src, ok)
		}
		if !bytes.Equal(buf[FDHeadroom:], want) {
			t.Fatalf("message %d: the mapping does not hold what the client wrote", i)
		}
		// The same memfd again while its message is in flight: a mapping of its own.
		st2, _ := checkMemfd(fd, size)
		buf2, release2, err := c.mapFor(fd, &st2, size, 1<<30)
		if err != nil || &buf2[0] == &buf[0] {
			t.Fatalf("a busy memfd was not mapped apart (%v)", err)
		}
		release2()
		release()
		if len(c.maps) != 1 {
			t.Fatalf("%d memfds cached, want 1", len(c.maps))
		}
	}
	// Beyond maxFDMaps memfds the one used longest ago goes.
	for range maxFDMaps + 2 {
		g, _ := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		unix.Ftruncate(g, FDHeadroom+100)
		unix.FcntlInt(uintptr(g), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		st, _ := checkMemfd(g, 100)
		_, release, err := c.mapFor(g, &st, 100, 1<<30)
		unix.Close(g)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if len(c.maps) != maxFDMaps {
		t.Fatalf("%d memfds cached, want at most %d", len(c.maps), maxFDMaps)
	}
	// A memfd larger than the limit (a sparse terabyte, say) is mapped only for its
	// message, not kept.
	huge, _ := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	unix.Ftruncate(huge, 1<<40)
	unix.FcntlInt(uintptr(huge), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	sth, err := checkMemfd(huge, 100)
	if err != nil {
		t.Fatal(err)
	}
	hb, hrelease, err := c.mapFor(huge, &sth, 100, 1<<30)
	unix.Close(huge)
	if err != nil || len(hb) != FDHeadroom+100 || len(c.maps) != maxFDMaps {
		t.Fatalf("a 1 TiB memfd: mapped %d bytes, %d cached, %v", len(hb), len(c.maps), err)
	}
	for _, m := range c.maps {
		if len(m.mem) > 1<<30 {
			t.Fatal("the 1 TiB memfd was kept mapped")
		}
	}
	hrelease()
	st, _ := checkMemfd(fd, size)
	_, release, _ := c.mapFor(fd, &st, size, 1<<30) // busy when the session ends
	c.close()
	if len(c.maps) != 1 {
		t.Fatalf("%d mappings left after close, want the busy one", len(c.maps))
	}
	release()
	if len(c.maps) != 0 {
		t.Fatalf("%d mappings left after the last message completed", len(c.maps))
	}
}
