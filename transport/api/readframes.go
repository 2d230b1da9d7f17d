package api

import (
	"errors"
	"io"
)

// readBufSize is a session's read buffer: a burst of small frames (a SendBatch, releases
// with a Send) comes in with one read.
const readBufSize = 64 << 10

// frameReader is a session's read side. Frames that arrive together are taken
// with one read into its buffer and parsed from there: a burst of small messages costs one
// system call. The rest of a Data frame's payload that is not in the buffer yet is read
// straight into the message's buffer, where the engine sends it from, with one readv that
// puts what follows it (the next frame header) into the buffer: a byte of a large message
// is copied once, by the kernel out of the socket. With direct off (api.direct_reads:
// false) it behaves as the bufio.Reader it replaced: payloads that start in the buffer
// are copied out of it.
type frameReader struct {
	buf    []byte
	r, w   int       // buf[r:w] is read and not consumed
	src    io.Reader // the connection when it is not a Unix socket (tests)
	fdr    *fdReader // a Unix socket: recvmsg, with the descriptors passed along
	direct bool
	copied int64 // bytes copied out of buf by readFull (tests)
	reads  int64 // read system calls (tests)
}

// newFrameReader reads from fdr (or src if fdr is nil), ahead first: bytes the HTTP
// server read past the Upgrade request.
func newFrameReader(ahead []byte, fdr *fdReader, src io.Reader, direct bool) *frameReader {
	f := &frameReader{buf: make([]byte, max(readBufSize, len(ahead))), fdr: fdr, src: src, direct: direct}
	f.w = copy(f.buf, ahead)
	return f
}

// Buffered is the bytes read and not consumed yet.
func (f *frameReader) Buffered() int { return f.w - f.r }

func (f *frameReader) read(p []byte) (int, error) {
	f.reads++
	if f.fdr != nil {
		return f.fdr.Read(p)
	}
	return f.src.Read(p)
}

// fill reads at least one more byte into the buffer.
func (f *frameReader) fill() error {
	if f.r > 0 {
		f.w = copy(f.buf, f.buf[f.r:f.w])
		f.r = 0
	}
	if f.w == len(f.buf) {
		return errors.New("frame reader: buffer full")
	}
	for range 100 {
		n, err := f.read(f.buf[f.w:])
		f.w += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// Peek returns the next n bytes (n <= the buffer's size) without consuming them.
func (f *frameReader) Peek(n int) ([]byte, error) {
	for f.w-f.r < n {
		if err := f.fill(); err != nil {
			return nil, err
		}
	}
	return f.buf[f.r : f.r+n], nil
}

// ReadFull reads len(p) bytes into p.
func (f *frameReader) ReadFull(p []byte) error { return f.readFull(p, len(f.buf)) }

// readFull reads len(p) bytes into p. What is not buffered is read straight into p
// (direct on a Unix socket), with up to tail bytes of what follows into the empty buffer
// in the same readv: HeaderLen when the next frame is known to be another Data frame
// whose payload should go the same way, the whole buffer otherwise.
func (f *frameReader) readFull(p []byte, tail int) error {
	k := copy(p, f.buf[f.r:f.w])
	f.r += k
	f.copied += int64(k)
	p = p[k:]
	for len(p) > 0 {
		if f.direct && f.fdr != nil {
			f.r, f.w = 0, 0 // empty: everything buffered was copied out
			f.reads++
			n, m, err := f.fdr.readv(p, f.buf[:min(tail, len(f.buf))])
			p, f.w = p[n:], m
			if err != nil && len(p) > 0 {
				return err
			}
			continue
		}
		if len(p) >= len(f.buf) { // as bufio: a large read bypasses the empty buffer
			n, err := f.read(p)
			p = p[n:]
			if err != nil && len(p) > 0 {
				return err
			}
			continue
		}
		if err := f.fill(); err != nil {
			return err
		}
		k := copy(p, f.buf[f.r:f.w])
		f.r += k
		f.copied += int64(k)
		p = p[k:]
	}
	return nil
}

// Discard skips n bytes.
func (f *frameReader) Discard(n int64) error {
	for n > 0 {
		if f.r == f.w {
			if err := f.fill(); err != nil {
				return err
			}
		}
		k := min(int64(f.w-f.r), n)
		f.r += int(k)
		n -= k
	}
	return nil
}
