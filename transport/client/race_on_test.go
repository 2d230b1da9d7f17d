//go:build race

package client_test

// raceOn: the race detector is on (sync.Pool drops items at random: allocation counts do not hold).
const raceOn = true
