//go:build linux

package xsk

import "runtime"

// TxPacket is one IPv4 UDP datagram for SendUDP4.
type TxPacket struct {
	Payload          []byte
	SrcPort, DstPort uint16 // the source port carries the packet's EV
	TOS              uint8  // DSCP<<2 | ECN
}

// SendUDP4 builds each packet toward h in a free TX unit (headers, then the payload
// copied behind them; a payload built in place in a unit from TxBuffer is not copied),
// queues its frames and kicks once per batch of up to 64 packets. When every unit is in
// flight it kicks and reaps completions a bounded number of times, then returns the
// number of packets queued so far. A payload over Config.MaxDatagram is ErrTooBig.
func (s *Socket) SendUDP4(h *Hop, pkts []TxPacket) (int, error) {
	fs := s.cfg.FrameSize
	sent := 0
	for sent < len(pkts) {
		n := min(len(pkts)-sent, 64)
		for i := range n {
			p := &pkts[sent+i]
			if len(p.Payload) > s.cfg.MaxDatagram {
				s.Kick()
				return sent + i, ErrTooBig
			}
			addr, inPlace := s.lentUnit(p.Payload)
			if inPlace {
				u, _ := s.unitOf(addr)
				s.isLent[u] = false
			} else {
				var ok bool
				for try := 0; ; try++ {
					if addr, ok = s.unit(); ok {
						break
					}
					if try == 1000 {
						return sent + i, s.Kick()
					}
					if err := s.Kick(); err != nil {
						return sent + i, err
					}
					if s.Reap() == 0 && try > 0 {
						runtime.Gosched()
					}
				}
			}
			end := addr + s.unitBytes()
			buf := s.umem[addr:end:end]
			PutUDP4(buf, h, p.SrcPort, p.DstPort, p.TOS, len(p.Payload))
			if !inPlace {
				copy(buf[HeaderLen:], p.Payload)
			}
			// One descriptor per frame the datagram spans, all in this unit.
			total := HeaderLen + len(p.Payload)
			for off := 0; off < total; off += fs {
				s.Queue(addr+uint64(off), min(fs, total-off), off+fs < total)
			}
			s.st.TxPackets++
		}
		if err := s.Kick(); err != nil {
			return sent + n, err
		}
		sent += n
	}
	return sent, nil
}
