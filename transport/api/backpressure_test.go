package api_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// readRawMessages reads n received messages (Recv and Data frames) from a raw session,
// in order, within d; any other frame but Sent fails the test.
func readRawMessages(t *testing.T, conn net.Conn, n int, d time.Duration, each func(i int, body []byte)) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	defer conn.SetReadDeadline(time.Time{})
	var hb [api.HeaderLen]byte
	frame := func() (api.Header, []byte) {
		if _, err := io.ReadFull(conn, hb[:]); err != nil {
			t.Fatalf("reading: %v", err)
		}
		h, err := api.ParseHeader(hb[:])
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, h.Len)
		if _, err := io.ReadFull(conn, p); err != nil {
			t.Fatalf("reading: %v", err)
		}
		return h, p
	}
	for i := 0; i < n; {
		h, p := frame()
		switch h.Type {
		case api.FrameSent:
			continue
		case api.FrameRecv:
		default:
			code, text, _ := api.ParseError(p)
			t.Fatalf("message %d: frame 0x%02x (%d %q), want Recv", i, h.Type, code, text)
		}
		size := int(binary.BigEndian.Uint64(p[len(p)-8:]))
		body := make([]byte, 0, size)
		for len(body) < size {
			dh, dp := frame()
			if dh.Type != api.FrameData || dh.Tag != h.Tag {
				t.Fatalf("message %d: frame 0x%02x tag %d inside message %d", i, dh.Type, dh.Tag, h.Tag)
			}
			body = append(body, dp...)
		}
		each(i, body)
		i++
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC() // what sync.Pools dropped at the first is gone at the second
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Tiny messages to a client that does not read hold what the daemon charges for them:
// each holds a receive buffer (a 16 KiB chunk on 6a6241a, 64 bytes since the engine's
// size classes) and its place in the queue, and api.max_recv_queue counts both, so the
// daemon's live heap grows by about the queue's limit. On 6a6241a it grew by the chunks of
// every message (93 MB here, while recv_queued_bytes said 22 KB). Once the client reads,
// every message arrives, in order, once.
func TestTinyMessagesChargeWhatTheyHold(t *testing.T) {
	const limit = 1 << 20
	a, b := daemonPair(t, nil, func(c *smarttd.Config) {
		c.API.MaxRecvQueue, c.API.SocketBuffer = limit, 0 // the kernel's default: small beside the queue
	})
	idle := rawSession(t, b.Config.API.Socket, 5) // binds, does not read yet
	defer idle.Close()
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	before := heapInUse()
	const n = 6000
	var pend []*client.Pending
	batch := make([]client.BatchMsg, 0, client.MaxBatch)
	for i := 0; i < n; i += client.MaxBatch {
		batch = batch[:0]
		for j := i; j < min(i+client.MaxBatch, n); j++ {
			batch = append(batch, client.BatchMsg{To: addrB, Endpoint: 5, Data: binary.BigEndian.AppendUint32(nil, uint32(j))})
		}
		var err error
		if pend, err = s.SendBatch(pend, batch); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the receiving daemon takes no more (all delivered, or the rest held back).
	last, still := uint64(0), 0
	for deadline := time.Now().Add(15 * time.Second); still < 5 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if d := b.API.Stats().MsgsDelivered; d != last {
			last, still = d, 0
		} else {
			still++
		}
	}
	grew := heapInUse() - before
	st := b.API.Stats()
	t.Logf("%d of %d messages delivered to a client that does not read: live heap +%d KB, recv_queued_bytes %d",
		st.MsgsDelivered, n, grew>>10, st.RecvQueued)
	if bound := int64(2*limit + 16<<20); grew > bound {
		t.Fatalf("live heap grew %d bytes for %d queued tiny messages (recv_queued_bytes %d): want at most %d",
			grew, st.MsgsDelivered, st.RecvQueued, bound)
	}
	readRawMessages(t, idle, n, 60*time.Second, func(i int, body []byte) {
		if len(body) != 4 || binary.BigEndian.Uint32(body) != uint32(i) {
			t.Fatalf("message %d: %x", i, body)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}
