package api

import "time"

// SetMaxLocalWaiting sets the bound of waiting local messages for a test and returns a
// function that restores it.
func SetMaxLocalWaiting(n int64) (restore func()) {
	old := maxLocalWaiting
	maxLocalWaiting = n
	return func() { maxLocalWaiting = old }
}

// SetMaxDirectPairs sets the bound of a session's direct pairs for a test and returns a
// function that restores it.
func SetMaxDirectPairs(n int) (restore func()) {
	old := maxDirectPairs
	maxDirectPairs = n
	return func() { maxDirectPairs = old }
}

// SetRefuseLinger sets how long a connection refused at max_control_conns is read from
// for a test and returns a function that restores it.
func SetRefuseLinger(d time.Duration) (restore func()) {
	old := lingerMax
	lingerMax = d
	return func() { lingerMax = old }
}

// MaxLingering is the bound of refused connections read from at once.
const MaxLingering = maxLingering

// Lingering is the number of refused connections being read from.
func (s *Server) Lingering() int { return int(s.ctlCap.lingering.Load()) }
