package transport

// RecoveryDupAck is TCP-like loss recovery: a packet is lost once Recovery.DupThresh
// packets sent after it were acknowledged (the SACK-gap rule with the dupACK threshold)
// + RTO.
const RecoveryDupAck = "dupack"

func init() {
	registerRecovery(recoveryMode{
		name:      RecoveryDupAck,
		threshold: func(c *Config) int { return c.Recovery.dupThresh() },
	})
}
