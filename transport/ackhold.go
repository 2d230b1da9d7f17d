package transport

// ackHold is a connection's held ACK: whether it rides on the next data packet to the
// peer (releaseHeld, rideHeld) and the back-off when holds go unanswered.
type ackHold struct {
	ackRide    bool   // the held ACK goes now, ahead of a data packet to the peer (releaseHeld)
	rideEV     uint16 // with ackRide: that data packet's EV
	evPicked   bool   // pickedEV is the EV of c's next data packet (rideHeld)
	pickedRetx bool   // ... if it is a retransmission (else a first transmission)
	pickedEV   uint16
	inHeld     bool   // in the endpoint's list of held ACKs
	holdSkip   uint16 // completions not to hold: holds went unanswered (holdBackoff)
	holdBack   uint16 // the current backoff, doubled each time (0: none since the last ride)
	holdMiss   uint8  // holds in a row that ran out unanswered
}
