package netbed

// IfStats are the counters of one interface.
type IfStats struct {
	Node, If                     string
	Up, Carrier                  bool
	RxPackets, TxPackets         uint64
	RxBytes, TxBytes             uint64
	RxDropped, TxDropped, Errors uint64
}
