package transport

import (
	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/transport/wire"
)

// recvState is a connection's receiver half: messages being reassembled, delivery
// order, what the next ACK and NACKs report, and the credit the peer's arrivals asked for.
type recvState struct {
	ttlHops  uint8 // fewest hops the peer's packets showed (HopsFromTTL), valid if hopsSeen
	hopsSeen bool
	rxINT    wire.INT // INT block of the last data packet with one (Cap 0: none yet)
	// Receiver.
	rxInit       bool
	tracker      *ackpath.Tracker
	coal         ackpath.Coalescer
	trig         trigger
	nacks        ring[nackEntry]
	rx           rxSet
	lastRx       *rxMsg
	nextDeliver  uint32 // lowest message ID not yet delivered
	deliveredAny bool   // a message was delivered (TIME_WAIT must then protect it)
	delivered    uint64 // stream offset up to which everything was delivered
	doneOOO      map[uint32]oooMsg
	rxPeak       int    // high-water mark of len(rx) since the map was made (shrinkRx)
	oooPeak      int    // the same of len(doneOOO)
	oooHeld      uint64 // charged for doneOOO (oooEntryBytes each)
	claimed      uint64 // stream bytes claimed by open messages (and doneOOO ones)
	held         uint64 // bytes charged for undelivered messages (receiver.go charge)
	wholeCredit  uint64 // bytes the peer delivered and may have us buffer ahead of its data (wholeNow)
	bytesRecv    uint64 // new payload bytes received (ConnInfo: the receiver's progress)
	probeEcho    int64  // >0: a probe's TxTime to echo in the next ACK
	probeEV      uint16
	ackNow       bool            // an ACK must go even without new data (probe, duplicate)
	ecTrims      ring[nackEntry] // recovery "ec": NACKs of trimmed data waiting on their block's parity
	gbnNacked    bool            // recovery "gobackn": a go-back NACK for gbnPSN was sent
	gbnPSN       uint32
	rxPull       eqds.PullState // EQDS: bytes the peer's arrivals asked for, and granted
	inPull       bool           // in the endpoint's pull queue
	regrant      bool           // resend the cumulative grant (the peer probed)
}
