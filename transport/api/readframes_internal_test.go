//go:build linux

package api

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unixPair returns the two ends of a Unix stream socket pair.
func unixPair(t testing.TB) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cs [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return cs[0], cs[1]
}

// A message of several Data frames is read the way session.readBody reads it: with direct
// reads only the payload bytes that arrived in the same read as the Send frame pass
// through the read buffer (at most its size per message); the rest is read straight into
// the message's buffer. Without (api.direct_reads: false, the bufio.Reader of before),
// the first bytes of every frame go through it.
func TestFrameReaderReadsPayloadsDirectly(t *testing.T) {
	const frames, size = 8, MaxPayload
	msg := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstu"), frames*size/31+1)[:frames*size]
	for _, direct := range []bool{true, false} {
		w, r := unixPair(t)
		go func() {
			var bufs net.Buffers
			bufs = append(bufs, AppendHeader(nil, Header{Type: FrameSend, Tag: 1, Len: SendHeaderLen}), make([]byte, SendHeaderLen))
			for i := range frames {
				bufs = append(bufs, AppendHeader(nil, Header{Type: FrameData, Tag: 1, Len: size}), msg[i*size:(i+1)*size])
			}
			bufs.WriteTo(w)
		}()
		f := newFrameReader(nil, newFDReader(r), nil, direct)
		var hb [HeaderLen + SendHeaderLen]byte
		if err := f.ReadFull(hb[:]); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		for i := range frames {
			if err := f.ReadFull(hb[:HeaderLen]); err != nil {
				t.Fatal(err)
			}
			tail := len(f.buf)
			if i < frames-1 {
				tail = HeaderLen
			}
			if err := f.readFull(got[i*size:(i+1)*size], tail); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("direct=%v: the message differs", direct)
		}
		// copied counts the frame headers too.
		t.Logf("direct=%v: %d bytes of %d copied out of the read buffer", direct, f.copied, len(msg))
		if limit := int64(readBufSize + (frames+1)*HeaderLen + SendHeaderLen); direct && f.copied > limit {
			t.Errorf("direct reads: %d bytes copied out of the read buffer, want at most %d", f.copied, limit)
		}
	}
}

// BenchmarkFrameReader reads 16 MiB messages (Send frame, 1 MiB Data frames) from a Unix
// socket the way a session does, with direct reads and without (the bufio.Reader of
// before), interleaved in rounds; the writer is another goroutine of the process. Reports
// the process's CPU seconds per GB.
func BenchmarkFrameReader(b *testing.B) {
	const size, frame = 16 << 20, MaxPayload
	msg := make([]byte, size)
	for round := range 3 {
		for _, direct := range []bool{false, true} {
			b.Run(fmt.Sprintf("round=%d/direct=%v", round, direct), func(b *testing.B) {
				w, r := unixPair(b)
				go func() {
					var bufs net.Buffers
					for range b.N {
						bufs = append(bufs[:0], AppendHeader(nil, Header{Type: FrameSend, Tag: 1, Len: SendHeaderLen}), make([]byte, SendHeaderLen))
						for off := 0; off < size; off += frame {
							bufs = append(bufs, AppendHeader(nil, Header{Type: FrameData, Tag: 1, Len: frame}), msg[off:off+frame])
						}
						if _, err := bufs.WriteTo(w); err != nil {
							return
						}
					}
				}()
				f := newFrameReader(nil, newFDReader(r), nil, direct)
				dst := make([]byte, size)
				var hb [HeaderLen + SendHeaderLen]byte
				b.SetBytes(size)
				var ru0, ru1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				b.ResetTimer()
				for range b.N {
					if err := f.ReadFull(hb[:]); err != nil {
						b.Fatal(err)
					}
					for off := 0; off < size; off += frame {
						if err := f.ReadFull(hb[:HeaderLen]); err != nil {
							b.Fatal(err)
						}
						tail := len(f.buf)
						if off+frame < size {
							tail = HeaderLen
						}
						if err := f.readFull(dst[off:off+frame], tail); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()).Seconds()
				b.ReportMetric(cpu/(float64(b.N)*size/1e9), "cpu_s/GB")
				b.ReportMetric(float64(f.reads)/float64(b.N), "reads/msg")
				b.ReportMetric(float64(f.copied)/float64(b.N)/size, "copied/byte")
			})
		}
	}
}
