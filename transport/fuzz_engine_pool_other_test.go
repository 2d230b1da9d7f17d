//go:build !linux

package transport

// Elsewhere fuzzPool takes every buffer from the Go heap (see the linux variant).
func fuzzMap(n int) ([]byte, bool) { return make([]byte, n), false }

func fuzzUnmap([]byte) {}
