package xsk

import "runtime"

// TxPacket is one IPv4 UDP datagram for SendUDP4.
type TxPacket struct {
	Payload          []byte
	SrcPort, DstPort uint16 // the source port carries the packet's EV
	TOS              uint8  // DSCP<<2 | ECN
}

// SendUDP4 builds each packet toward h in free TX frames (headers, then the payload
// copied behind them, spilling into further frames when it does not fit in one), queues
// them and kicks once per batch of up to 64 packets. When every frame is in flight it
// kicks and reaps completions a bounded number of times, then returns the number of
// packets queued so far.
func (s *Socket) SendUDP4(h *Hop, pkts []TxPacket) (int, error) {
	fs := s.cfg.FrameSize
	sent := 0
	for sent < len(pkts) {
		n := min(len(pkts)-sent, 64)
		for i := range n {
			p := &pkts[sent+i]
			if len(p.Payload) > 65535-28 { // the IPv4 total length field
				s.Kick()
				return sent + i, ErrTooBig
			}
			need := (HeaderLen + len(p.Payload) + fs - 1) / fs
			for try := 0; len(s.free) < need; try++ {
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
			addr, buf, _ := s.Frame()
			PutUDP4(buf, h, p.SrcPort, p.DstPort, p.TOS, len(p.Payload))
			c := copy(buf[HeaderLen:], p.Payload)
			s.Queue(addr, HeaderLen+c, c < len(p.Payload))
			for c < len(p.Payload) {
				addr, buf, _ = s.Frame()
				k := copy(buf, p.Payload[c:])
				c += k
				s.Queue(addr, k, c < len(p.Payload))
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
