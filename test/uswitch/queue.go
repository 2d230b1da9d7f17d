// Package uswitch is the testbed's userspace switch datapath: one event loop per switch
// namespace that moves Ethernet frames between veth ports over AF_PACKET sockets
// (golang.org/x/sys/unix, no cgo), batched with recvmmsg/sendmmsg.
//
// What happens to a frame between its input and output port is pluggable: a Router picks
// the output port and a Queue per output port models the port's queues and decides when
// each frame departs (and may mark, trim or drop it). The defaults are a MAC-learning
// router and a drop-tail FIFO with an optional rate; the shared switch-port model
// (test/switchport: ECMP hash, RED marking, trimming) plugs in through the same interfaces.
package uswitch

import (
	"encoding/binary"
	"fmt"
)

// VnetHdrLen is the size of the virtio-net header that precedes every frame: the kernel's
// checksum-offload and GSO state travels through the switch in it.
const VnetHdrLen = 10

// Frame is one frame in flight. Its buffer holds the virtio-net header and then the
// Ethernet frame; frames belong to the switch's pool and are recycled after transmission.
type Frame struct {
	buf    []byte
	n      int   // header + frame bytes in buf
	In     int   // input port
	Depart int64 // departure time a Queue may record (ns, switch clock)
}

// Data is the Ethernet frame (without the virtio-net header).
func (f *Frame) Data() []byte { return f.buf[VnetHdrLen:f.n] }

// Len is the length of the Ethernet frame in bytes.
func (f *Frame) Len() int { return f.n - VnetHdrLen }

// SetLen truncates the Ethernet frame to n bytes (trimming); n larger than now is ignored.
func (f *Frame) SetLen(n int) {
	if n >= 0 && VnetHdrLen+n < f.n {
		f.n = VnetHdrLen + n
	}
}

// NeedsChecksum reports whether the sender left the L4 checksum for offload to complete.
func (f *Frame) NeedsChecksum() bool { return f.buf[0]&vnetNeedsCsum != 0 }

const (
	vnetNeedsCsum = 1
	vnetDataValid = 2
)

// FinishChecksum computes the L4 checksum the sender left to offload and clears the
// offload request, so the frame is complete on the wire (needed before a model rewrites
// the payload, e.g. trimming). It is a no-op for frames that need nothing.
func (f *Frame) FinishChecksum() error {
	if !f.NeedsChecksum() {
		return nil
	}
	start := int(binary.LittleEndian.Uint16(f.buf[6:]))
	off := int(binary.LittleEndian.Uint16(f.buf[8:]))
	d := f.Data()
	if start+off+2 > len(d) {
		return fmt.Errorf("checksum start %d + offset %d beyond frame of %d bytes", start, off, len(d))
	}
	// The stack stored the folded pseudo-header sum in the checksum field; summing the
	// region from start (field included) and complementing completes it.
	var sum uint32
	b := d[start:]
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 && off == 6 { // UDP sends an all-zero checksum as 0xffff
		c = 0xffff
	}
	binary.BigEndian.PutUint16(d[start+off:], c)
	f.buf[0] &^= vnetNeedsCsum | vnetDataValid
	return nil
}

// Queue models one output port: it takes every frame routed to the port and says when the
// next one departs. Implementations are single-threaded (the switch loop calls them) and
// driven only by the now they are given, so a model behaves the same on coarse timers.
type Queue interface {
	// Enqueue offers f at time now (ns). The queue keeps it (and may modify it: mark,
	// trim) and returns true, or drops it and returns false (the switch recycles it).
	Enqueue(f *Frame, now int64) bool
	// Next is the departure time of the head frame, or -1 when the queue is empty.
	Next() int64
	// Dequeue removes and returns the head frame if it departs at or before now, else nil.
	Dequeue(now int64) *Frame
}

// Router picks the output port of a frame arriving on port in: a port index, Flood for
// every port but in, or Drop.
type Router interface {
	Route(f *Frame, in int) int
}

// Route results besides a port index.
const (
	Drop  = -1
	Flood = -2
)

// FIFO is a drop-tail queue of Cap frames served at Rate bits/s (0: departs at once).
type FIFO struct {
	Rate int64 // bits per second; 0 = unlimited
	ring []*Frame
	head int
	n    int
	last int64 // departure time of the last frame queued
}

// NewFIFO returns a FIFO of capacity frames at rate bits/s.
func NewFIFO(capacity int, rate int64) *FIFO {
	return &FIFO{Rate: rate, ring: make([]*Frame, capacity)}
}

// Enqueue queues f behind the frames already waiting, or drops it when full.
func (q *FIFO) Enqueue(f *Frame, now int64) bool {
	if q.n == len(q.ring) {
		return false
	}
	d := now
	if q.Rate > 0 {
		d = max(now, q.last) + int64(f.Len()+24)*8*1_000_000_000/q.Rate // + preamble, FCS, gap
	}
	f.Depart, q.last = d, d
	q.ring[(q.head+q.n)%len(q.ring)] = f
	q.n++
	return true
}

// Next is the head frame's departure time, or -1.
func (q *FIFO) Next() int64 {
	if q.n == 0 {
		return -1
	}
	return q.ring[q.head].Depart
}

// Dequeue pops the head frame if it is due.
func (q *FIFO) Dequeue(now int64) *Frame {
	if q.n == 0 || q.ring[q.head].Depart > now {
		return nil
	}
	f := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return f
}

// Len is the number of frames queued.
func (q *FIFO) Len() int { return q.n }

// Learning is a MAC-learning router: it remembers which port each source address came
// from, and floods frames to unknown or group addresses.
type Learning struct {
	table map[[6]byte]int
}

// NewLearning returns an empty learning router.
func NewLearning() *Learning { return &Learning{table: make(map[[6]byte]int)} }

// Learn pins address mac to port (static entries, so no flooding is needed at all).
func (l *Learning) Learn(mac [6]byte, port int) { l.table[mac] = port }

// Route learns the source and looks up the destination.
func (l *Learning) Route(f *Frame, in int) int {
	d := f.Data()
	if len(d) < 14 {
		return Drop
	}
	var dst, src [6]byte
	copy(dst[:], d[0:6])
	copy(src[:], d[6:12])
	if src[0]&1 == 0 {
		if p, ok := l.table[src]; !ok || p != in {
			l.table[src] = in
		}
	}
	if dst[0]&1 != 0 {
		return Flood
	}
	p, ok := l.table[dst]
	if !ok {
		return Flood
	}
	if p == in {
		return Drop
	}
	return p
}

// NewTestFrame wraps an Ethernet frame whose L4 checksum at csumStart+csumOffset was left
// for offload, as the kernel hands it to the switch; for tests and models.
func NewTestFrame(eth []byte, csumStart, csumOffset int) *Frame {
	f := &Frame{buf: make([]byte, VnetHdrLen+len(eth)), n: VnetHdrLen + len(eth)}
	f.buf[0] = vnetNeedsCsum
	binary.LittleEndian.PutUint16(f.buf[6:], uint16(csumStart))
	binary.LittleEndian.PutUint16(f.buf[8:], uint16(csumOffset))
	copy(f.buf[VnetHdrLen:], eth)
	return f
}
