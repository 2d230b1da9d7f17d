package blast

import (
	"os"
	"testing"
	"time"
)

// The loops tolerate the -1 that recvmmsg and sendmmsg return with an error.
func TestLoopsNegativeCount(t *testing.T) {
	calls := 0
	r, err := receive(func(time.Time) error { return nil }, 10, time.Millisecond, func() (int, uint64, error) {
		calls++
		if calls == 1 {
			return 3, 300, nil
		}
		return -1, 0, os.ErrDeadlineExceeded
	})
	if err != nil || r.Packets != 3 || r.Bytes != 300 {
		t.Fatalf("receive: %v, %v; want 3 packets, 300 bytes", r, err)
	}
	n, err := send(4, 10, time.Now().Add(time.Second), func(int) (int, error) { return -1, os.ErrDeadlineExceeded })
	if n != 0 || err == nil {
		t.Fatalf("send: %d, %v; want 0 and the error", n, err)
	}
}
