package api

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
