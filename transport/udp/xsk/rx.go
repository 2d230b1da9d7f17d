//go:build linux

package xsk

import "net/netip"

// RxPacket is one received UDP datagram, its payload copied into a caller-owned buffer.
type RxPacket struct {
	Buf []byte         // storage; len(Buf) is the capacity offered
	N   int            // payload length
	Src netip.AddrPort // sender
	Dst netip.AddrPort // destination (our address and the port the XDP program matched)
	TOS uint8          // DSCP<<2 | ECN
	TTL uint8          // IP TTL
}

// RxStats counts what ReadUDP4 delivered and refused; frames from the network are
// untrusted, so every refusal is counted by reason and the frame dropped.
type RxStats struct {
	Packets, Bytes uint64
	Malformed      [BadUDPLen + 1]uint64 // by Malformed reason (index OK unused)
	Truncated      uint64                // payload larger than the buffer offered
	WrongDst       uint64                // to another address or port than SetDst's
	InPlace        uint64                // of Packets, delivered in place (ReadUDP4InPlace)
}

// RxReader turns a Socket's received frames into UDP datagrams. Use it from one
// goroutine (the Socket's RX side).
type RxReader struct {
	s      *Socket
	frames []Frame
	st     RxStats
	dst    netip.AddrPort // if valid: the only destination delivered
}

// SetDst makes the reader deliver only datagrams to dst (address and port); the others
// (to another address of the interface, the subnet broadcast) are counted in
// RxStats.WrongDst and dropped.
func (r *RxReader) SetDst(dst netip.AddrPort) { r.dst = dst }

// NewRxReader reads up to batch frames per call (at least 17, the most one packet spans).
func NewRxReader(s *Socket, batch int) *RxReader {
	return &RxReader{s: s, frames: make([]Frame, max(batch, 17))}
}

// Stats returns the reader's counters.
func (r *RxReader) Stats() RxStats { return r.st }

// ReadUDP4 waits up to timeoutMs (-1: forever; 0: no wait, no system call) for frames, then copies up to len(pkts)
// datagrams into pkts and returns how many; malformed frames are counted and dropped, so
// it may return 0 before the timeout. Frames go back to the fill ring before it returns.
func (r *RxReader) ReadUDP4(pkts []RxPacket, timeoutMs int) (int, error) {
	return r.read(pkts, timeoutMs, false)
}

// ReadUDP4InPlace is ReadUDP4 without the copy where it can: a delivered pkts[i].Buf is
// the payload itself in the UMEM (N == len(Buf)), valid until the next read call (which
// gives its frames back to the fill ring), or, for a payload spanning frames that are
// not neighbours in the UMEM, a copy in the Buf offered. A payload that spans
// neighbouring frames is made contiguous by moving the later frames' bytes down over
// the gap copy mode leaves between them (the 256-byte headroom), a few hundred bytes
// for a 4 KiB datagram.
func (r *RxReader) ReadUDP4InPlace(pkts []RxPacket, timeoutMs int) (int, error) {
	return r.read(pkts, timeoutMs, true)
}

func (r *RxReader) read(pkts []RxPacket, timeoutMs int, inPlace bool) (int, error) {
	r.s.Release() // frames an in-place read handed out: the caller is done with them
	ok, err := r.s.Wait(timeoutMs)
	if err != nil || !ok {
		return 0, err
	}
	k := 0
	for k < len(pkts) {
		m := r.s.Receive(r.frames[:min(len(r.frames), 17*(len(pkts)-k))])
		if m == 0 {
			break
		}
		i := 0
		for i < m && k < len(pkts) {
			j := i // the packet is frames[i..j]
			for j < m-1 && r.frames[j].More {
				j++
			}
			if r.deliver(&pkts[k], r.frames[i:j+1], inPlace) {
				k++
			}
			i = j + 1
		}
		if i < m {
			r.s.Unreceive(m - i) // no room left: the rest stay for the next call
			break
		}
	}
	if !inPlace {
		r.s.Release()
	}
	return k, nil
}

// deliver parses a packet made of fs (headers in the first frame) into p: in place
// (p.Buf pointed at the UMEM) when inPlace and the frames can be joined, else copied.
func (r *RxReader) deliver(p *RxPacket, fs []Frame, inPlace bool) bool {
	total := 0
	for _, f := range fs {
		total += len(f.Data)
	}
	d, why := parseUDP4(fs[0].Data, total)
	if why != OK {
		r.st.Malformed[why]++
		return false
	}
	if r.dst.IsValid() && d.Dst != r.dst {
		r.st.WrongDst++
		return false
	}
	if inPlace {
		if b := r.join(fs, total); b != nil {
			p.Buf = b[d.poff : d.poff+d.plen : d.poff+d.plen]
			p.N, p.Src, p.Dst, p.TOS, p.TTL = d.plen, d.Src, d.Dst, d.TOS, d.TTL
			r.st.Packets++
			r.st.Bytes += uint64(d.plen)
			r.st.InPlace++
			return true
		}
	}
	if d.plen > len(p.Buf) {
		r.st.Truncated++
		return false
	}
	// Copy the payload out of the frames it spans.
	off, n := d.poff, 0
	for _, f := range fs {
		if off >= len(f.Data) {
			off -= len(f.Data)
			continue
		}
		n += copy(p.Buf[n:d.plen], f.Data[off:])
		off = 0
		if n == d.plen {
			break
		}
	}
	p.N, p.Src, p.Dst, p.TOS, p.TTL = d.plen, d.Src, d.Dst, d.TOS, d.TTL
	r.st.Packets++
	r.st.Bytes += uint64(d.plen)
	return true
}

// join returns the packet of frames fs (total bytes) as one slice of the UMEM, moving the
// bytes of each frame after the first down to where the previous one ends, or nil if
// some frame is not in the UMEM chunk right after the previous frame's. The frames are
// the caller's until Release, so the bytes moved over (the tail of a chunk and the
// headroom of the next) are ours to overwrite.
func (r *RxReader) join(fs []Frame, total int) []byte {
	fsz := uint64(r.s.cfg.FrameSize)
	chunk := fs[0].addr &^ (fsz - 1)
	start := fs[0].addr
	end := start + uint64(len(fs[0].Data))
	if end > chunk+fsz {
		return nil
	}
	for _, f := range fs[1:] {
		c := f.addr &^ (fsz - 1)
		n := uint64(len(f.Data))
		if c != chunk+fsz || f.addr+n > c+fsz {
			return nil
		}
		chunk = c
		if f.addr != end { // end <= c <= f.addr: a move down, over the gap
			copy(r.s.umem[end:end+n], f.Data)
		}
		end += n
	}
	if end-start != uint64(total) {
		return nil
	}
	return r.s.umem[start:end:end]
}
