package transport

// sendState is a connection's sender half: the window of sent packets, the queues of
// messages, transmissions and retransmissions, the RTT estimate and the send timers.
type sendState struct {
	run            int    // EV run length (reps.run)
	runEV          uint16 // the current run's EV
	runLeft        int    // new packets left in the current run
	sndUna, sndNxt uint32
	mask           uint32
	pkts           []sentPkt
	inflight       int
	sendSeq        uint64
	maxAckedSeq    uint64
	timeq          ring[timeEntry]
	retxq          ring[uint32]
	rtsSpent       int32        // returned headers proven false, weighted (rts.go): returns are acted on below rtsCredit
	msgs           ring[*txMsg] // unfinished messages, oldest first
	cur            int          // index in msgs of the first message with unsent bytes
	nextMsgID      uint32
	streamNext     uint64
	peerDelivered  uint64
	peerWindow     uint64
	srtt, rttvar   int64
	backoff        uint8
	lastProgress   int64
	paceAt         int64 // >0: data waits for the pacer until then
	probeAt        int64 // >0: flow-control probe due then
	lastProbeTx    int64
	sub            []subflow // recovery "subflows": per-subflow dupACK state
	subDirty       uint64    // subflows whose highest acknowledged transmission moved
	subSeq         []uint32  // recovery "subflows": per PSN slot, its latest transmission's number in its subflow
	ecTx           *ecSender // recovery "ec": the block being coded
	rnrAt          int64     // >0: no data before then (the peer refused a message, rnr.go)
	rnrN           uint8     // refusals since the last acknowledged byte (the back-off's exponent)
	bytesAcked     uint64    // payload bytes the peer acknowledged (ConnInfo: the sender's progress)
}

// outstanding reports whether c has outbound data not yet acknowledged.
func (c *sendState) outstanding() bool { return c.msgs.len() > 0 }

// updateRTT folds a sample into the smoothed RTT and its variation (RFC 6298 weights).
func (c *sendState) updateRTT(rtt int64) {
	if c.srtt == 0 {
		c.srtt, c.rttvar = rtt, rtt/2
		return
	}
	d := c.srtt - rtt
	if d < 0 {
		d = -d
	}
	c.rttvar += (d - c.rttvar) / 4
	c.srtt += (rtt - c.srtt) / 8
}

// rto is the current retransmission timeout: srtt + max(MinRTO, 4 rttvar). MinRTO floors
// the variation term, not the sum (as Linux does): on a path whose RTT hardly varies
// rttvar decays toward zero, and max(MinRTO, srtt + 4 rttvar) then sat just above srtt,
// so an ACK delayed by less than MinRTO timed its packet out.
func (c *sendState) rto(cfg *Config) int64 {
	if cfg.FixedRTO > 0 {
		return int64(cfg.FixedRTO) // the papers' rule: no estimate, no backoff
	}
	r := int64(cfg.InitialRTO)
	if c.srtt > 0 {
		r = c.srtt + max(int64(cfg.MinRTO), 4*c.rttvar)
	}
	r <<= c.backoff
	if r > int64(cfg.MaxRTO) || r <= 0 {
		r = int64(cfg.MaxRTO)
	}
	return r
}

// headEntry returns the oldest live transmission, dropping stale entries. An entry is
// live while its slot is in flight with the entry's transmission number: numbers are
// never reused (sendSeq only grows, a slot taken by a later PSN gets a later one), and an
// in-flight slot is never passed by sndUna, so the PSN is then within [sndUna, sndNxt).
func (c *sendState) headEntry() (*timeEntry, *sentPkt) {
	for c.timeq.len() > 0 {
		t := c.timeq.peek()
		if sp := &c.pkts[t.psn&c.mask]; sp.state() == pktInflight && sp.seq == t.seq {
			return t, sp
		}
		c.timeq.pop()
	}
	return nil, nil
}
