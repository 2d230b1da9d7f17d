package uswitch_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/test/uswitch"
)

// dataFrame builds an Ethernet/IPv4/UDP frame carrying a DATA packet of our protocol with
// payload bytes after its 64-byte header, ECN code point ecn, and a complete UDP checksum.
func dataFrame(payload int, ecn byte) []byte {
	udpLen := 8 + 64 + payload
	fr := make([]byte, 14+20+udpLen)
	binary.BigEndian.PutUint16(fr[12:], 0x0800)
	ip := fr[14:34]
	ip[0], ip[1], ip[8], ip[9] = 0x45, ecn, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
	copy(ip[12:], []byte{10, 3, 0, 1, 10, 3, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip)))
	u := fr[34:]
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], 9000)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[8] = 0x11
	for i := 8 + 64; i < len(u); i++ {
		u[i] = byte(i)
	}
	binary.BigEndian.PutUint16(u[6:], ^fold(pseudo(ip, udpLen)+sum(u)))
	return fr
}

func pseudo(ip []byte, udpLen int) uint32 {
	p := make([]byte, 12)
	copy(p, ip[12:20])
	p[9] = 17
	binary.BigEndian.PutUint16(p[10:], uint16(udpLen))
	return sum(p)
}

// checkSums fails unless the frame's IP header and UDP checksums verify.
func checkSums(t *testing.T, d []byte) {
	t.Helper()
	ip := d[14:34]
	if fold(sum(ip)) != 0xffff {
		t.Fatalf("IP header checksum does not verify")
	}
	udpLen := int(binary.BigEndian.Uint16(d[38:]))
	if udpLen != len(d)-34 {
		t.Fatalf("UDP length %d, frame holds %d", udpLen, len(d)-34)
	}
	if fold(pseudo(ip, udpLen)+sum(d[34:])) != 0xffff {
		t.Fatalf("UDP checksum does not verify")
	}
}

func TestTrimAndMark(t *testing.T) {
	f := uswitch.NewTestFrame(dataFrame(4000, 2), 34, 6)
	if !f.IsData() || !f.ECT() {
		t.Fatal("DATA frame with ECT(0) not recognised")
	}
	if !f.SetCE() || f.Data()[15]&3 != 3 {
		t.Fatal("SetCE did not mark")
	}
	checkSums(t, dataFrame(4000, 2)) // the builder itself is right
	if !f.Trim(46) {
		t.Fatal("Trim refused a DATA frame")
	}
	d := f.Data()
	if len(d) != 14+20+8+64 || d[34+8+1]&0x08 == 0 || d[15]>>2 != 46 || d[15]&3 != 3 {
		t.Fatalf("trimmed frame: %d bytes, flags %#x, tos %#x", len(d), d[43], d[15])
	}
	checkSums(t, d)
	if f.NeedsChecksum() {
		t.Fatal("a trimmed frame still asks for checksum offload")
	}
	if f.Trim(46) {
		t.Fatal("trimmed twice")
	}
	notECT := uswitch.NewTestFrame(dataFrame(10, 0), 34, 6)
	if notECT.SetCE() {
		t.Fatal("marked a Not-ECT frame")
	}
	notData := dataFrame(100, 2)
	notData[42] = 0x12 // an ACK
	if uswitch.NewTestFrame(notData, 34, 6).Trim(0) {
		t.Fatal("trimmed a control packet")
	}
}

// fifoModel is a small departure-time model for the tests: one FIFO of cap frames at
// rate, trimming data that does not fit, marking ECT frames that leave at least markAt
// frames behind. (test/switchport is the real one.)
type fifoModel struct {
	rate        int64
	cap, markAt int
	q           []arrival
	busy        int64
	out         []uswitch.Departure
}

type arrival struct {
	f            *uswitch.Frame
	at           int64
	size         int
	ect, trimmed bool
}

func (m *fifoModel) model() uswitch.Model {
	return uswitch.Model{
		Arrive: func(now int64, f *uswitch.Frame, size int, data, ect bool) uswitch.Verdict {
			m.advance(now)
			v := uswitch.Queued
			if len(m.q) >= m.cap {
				if !data {
					return uswitch.Dropped
				}
				v, size = uswitch.Trimmed, 64+42+uswitch.WireOverhead
			}
			m.q = append(m.q, arrival{f, now, size, ect, v == uswitch.Trimmed})
			return v
		},
		Advance: m.advance,
		NextStart: func() (int64, bool) {
			if len(m.q) == 0 {
				return 0, false
			}
			return max(m.busy, m.q[0].at), true
		},
		Pop: func() (uswitch.Departure, bool) {
			if len(m.out) == 0 {
				return uswitch.Departure{}, false
			}
			d := m.out[0]
			m.out = m.out[1:]
			return d, true
		},
	}
}

func (m *fifoModel) advance(now int64) {
	for len(m.q) > 0 {
		a := m.q[0]
		start := max(m.busy, a.at)
		if start > now {
			return
		}
		m.q = m.q[1:]
		m.busy = start + int64(a.size)*8*1e9/m.rate
		m.out = append(m.out, uswitch.Departure{Frame: a.f, End: m.busy, Trimmed: a.trimmed,
			Marked: a.ect && len(m.q) >= m.markAt})
	}
}

func TestModelQueue(t *testing.T) {
	m := &fifoModel{rate: 1e9, cap: 3, markAt: 2}
	const delay = 1000
	q := uswitch.NewModelQueue(m.model(), delay, 46)
	var frames []*uswitch.Frame
	for i := 0; i < 5; i++ {
		f := uswitch.NewTestFrame(dataFrame(4000, 2), 34, 6)
		frames = append(frames, f)
		if !q.Enqueue(f, 0) {
			t.Fatalf("frame %d dropped", i)
		}
	}
	// Frame 0 went into service on arrival; 1..3 fill the queue of 3; 4 is trimmed.
	ser := int64(len(frames[0].Data())+uswitch.WireOverhead) * 8 // ns at 1 Gbit/s
	if n := q.Next(); n != ser+delay {
		t.Fatalf("Next = %d, want %d (serialisation + delay)", n, ser+delay)
	}
	if f := q.Dequeue(ser + delay - 1); f != nil {
		t.Fatal("a frame left before its last bit plus the delay")
	}
	var got []*uswitch.Frame
	for now := int64(0); len(got) < 5 && now < 1e6; {
		if f := q.Dequeue(now); f != nil {
			got = append(got, f)
			continue
		}
		if now = q.Next(); now < 0 {
			break
		}
	}
	if len(got) != 5 {
		t.Fatalf("%d of 5 frames left", len(got))
	}
	for i, f := range got {
		if f != frames[i] {
			t.Fatalf("frame %d left out of order", i)
		}
		if trimmed := len(f.Data()) == 14+20+8+64; trimmed != (i == 4) {
			t.Errorf("frame %d trimmed = %v; want only frame 4 (beyond the queue of 3)", i, trimmed)
		}
		// Frames 1 and 2 leave 3 and 2 frames behind (>= markAt); 0, 3 and 4 fewer.
		if marked := f.Data()[15]&3 == 3; marked != (i == 1 || i == 2) {
			t.Errorf("frame %d marked = %v", i, marked)
		}
		checkSums(t, f.Data())
	}
}

// TestModelOverTheWire: an incast through the switch whose output port runs a model: the
// receiver's kernel accepts the trimmed frames (checksums right) and sees the trim DSCP,
// FlagTrimmed and CE marks.
func TestModelOverTheWire(t *testing.T) {
	const senders, each, trimDSCP = 4, 20, 46
	tb, sw, _ := star(t, senders+1, uswitch.Config{NewQueue: func(int) uswitch.Queue {
		m := &fifoModel{rate: 200e6, cap: 8, markAt: 4}
		return uswitch.NewModelQueue(m.model(), 10_000, trimDSCP)
	}})
	rx := udp(t, tb, "h4", func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{Port: 9000}) })
	rx.SetReadBuffer(4 << 20)
	setInt(t, rx, unix.IP_RECVTOS, 1)
	dst := &net.UDPAddr{IP: tb.Addr("h4").AsSlice(), Port: 9000}
	msg := make([]byte, 64+4000)
	msg[0] = 0x11
	for s := 0; s < senders; s++ {
		c := udp(t, tb, "h"+string(rune('0'+s)), func() (*net.UDPConn, error) { return net.DialUDP("udp4", nil, dst) })
		setInt(t, c, unix.IP_TOS, 0x02) // ECT(0)
		for i := 0; i < each; i++ {
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	var full, trimmed, marked, dscp int
	buf, oob := make([]byte, 9000), make([]byte, 256)
	for n := 0; n < senders*each; n++ {
		rx.SetReadDeadline(time.Now().Add(2 * time.Second))
		m, oobn, _, _, err := rx.ReadMsgUDP(buf, oob)
		if err != nil {
			t.Fatalf("after %d datagrams: %v (switch out port %+v)", n, err, sw.Stats(4))
		}
		switch {
		case m == len(msg):
			full++
		case m == 64 && buf[1]&0x08 != 0:
			trimmed++
		default:
			t.Fatalf("datagram of %d bytes, flags %#x", m, buf[1])
		}
		tos := -1
		cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, cm := range cms {
			if cm.Header.Level == unix.IPPROTO_IP && cm.Header.Type == unix.IP_TOS && len(cm.Data) > 0 {
				tos = int(cm.Data[0])
			}
		}
		if tos < 0 {
			t.Fatal("no IP_TOS control message")
		}
		if tos&3 == 3 {
			marked++
		}
		if tos>>2 == trimDSCP {
			dscp++
		}
	}
	t.Logf("%d full, %d trimmed (%d with the trim DSCP), %d CE-marked", full, trimmed, dscp, marked)
	if trimmed == 0 || full == 0 || marked == 0 || dscp != trimmed {
		t.Fatalf("want some full, some trimmed (all with the trim DSCP) and some marked datagrams")
	}
	if e := csumErrors(t, tb, "h4"); e != 0 {
		t.Fatalf("receiver counted %d checksum errors", e)
	}
}

func setInt(t *testing.T, c *net.UDPConn, opt, v int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, opt, v) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
}
