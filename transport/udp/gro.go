//go:build linux

package udp

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// UDP GRO on receive: with UDP_GRO on the listen socket the kernel may hand over a run of
// same-sized datagrams from one sender (same TOS, so CE-marked ones are never merged
// with others) as one buffer plus the segment size, after one trip through the stack.
// Such a buffer may exceed any caller's packet buffer, so the socket reads into its own
// 64 KiB buffers and copies each datagram into the caller's Packets (or, with
// GROInPlace, points the Packets at them: valid until the next ReadBatch, which reads into
// the same buffers once they are all handed out); datagrams left over
// when the caller's slice is full are handed out by the next ReadBatch without a system
// call. Every datagram of a buffer shares its source, TOS and receive timestamp.

const groBufSize = 65536

type groState struct {
	bufs [][]byte  // nil: GRO off
	meta []groMeta // per received buffer
	n    int       // buffers filled by the last recvmmsg
	next int       // buffer to hand out next
	off  int       // offset of the next datagram in it
}

type groMeta struct {
	size, seg int
	addr      Packet // Addr, ECN, DSCP, RxTime, RxKernel
}

func (g *groState) init(n int) {
	g.bufs = make([][]byte, n)
	for i := range g.bufs {
		g.bufs[i] = make([]byte, groBufSize)
	}
	g.meta = make([]groMeta, n)
}

// enableGRO switches UDP_GRO on for the listen socket; a refusal turns it off.
func (c *Conn) enableGRO(fd int) {
	if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
		c.cfg.Logger.Warn("udp: kernel refused UDP_GRO; one datagram per received buffer", "err", err)
		c.caps.GRO = false
	}
}

func (c *Conn) readGRO(pkts []Packet) (int, error) {
	g := &c.gro
	if g.next >= g.n {
		b := &c.rb
		n := len(g.bufs)
		for i := 0; i < n; i++ {
			b.iovs[2*i].Base = &g.bufs[i][0]
			b.iovs[2*i].SetLen(groBufSize)
		}
		got, err := c.recv(n)
		if err != nil {
			return 0, err
		}
		var user int64
		for i := 0; i < got; i++ {
			h := &b.hdrs[i]
			m := &g.meta[i]
			m.size = int(h.Len)
			if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
				c.st.rxTrunc.Add(1)
				m.size = min(m.size, groBufSize)
			}
			o := c.parseRxOOB(b.oob[i*oobSlot : i*oobSlot+int(h.Hdr.Controllen)])
			tos, ts, seg := o.tos, o.ts, o.seg
			if seg <= 0 || seg > m.size {
				seg = m.size
			} else if seg < m.size {
				c.st.rxGROBufs.Add(1)
			}
			m.seg = seg
			m.addr = Packet{Addr: parseName(&b.names[i]), ECN: tos & 3, DSCP: tos >> 2, TTL: o.ttl, RxTime: ts, RxKernel: ts != 0}
			if ts == 0 {
				if user == 0 {
					user = time.Now().UnixNano()
				}
				m.addr.RxTime = user
			}
		}
		g.n, g.next, g.off = got, 0, 0
	}
	k := 0
	for k < len(pkts) && g.next < g.n {
		p := &pkts[k]
		if len(p.Buf) == 0 {
			if k == 0 {
				return 0, fmt.Errorf("udp: ReadBatch: Packet %d has an empty Buf", k)
			}
			break
		}
		m := &g.meta[g.next]
		end := min(g.off+m.seg, m.size)
		if c.cfg.GROInPlace {
			*p = m.addr
			p.Buf, p.N = g.bufs[g.next][g.off:end:end], end-g.off
			c.account(p)
			k++
			g.off = end
			if g.off >= m.size {
				g.next++
				g.off = 0
			}
			continue
		}
		n := copy(p.Buf, g.bufs[g.next][g.off:end])
		if n < end-g.off {
			c.st.rxTrunc.Add(1)
		}
		buf := p.Buf
		*p = m.addr
		p.Buf, p.N = buf, n
		c.account(p)
		k++
		g.off = end
		if g.off >= m.size {
			g.next++
			g.off = 0
		}
	}
	return k, nil
}
