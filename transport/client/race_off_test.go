//go:build !race

package client_test

const raceOn = false
