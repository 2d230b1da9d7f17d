// Package logsink is a log destination for tests: a buffer that the goroutines of a
// daemon or socket layer may write to while the test reads what they logged.
package logsink

import (
	"strings"
	"sync"
)

// Sink collects what is written to it; its zero value is ready to use.
type Sink struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (l *Sink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Sink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
