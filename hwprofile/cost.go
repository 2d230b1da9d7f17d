// Package hwprofile holds named NIC hardware profiles (ConnectX-6Dx programmable CC, the
// REPS paper's FPGA NIC) with their memory, operation-count and decision-time budgets,
// and the accounting every algorithm reports against them.
package hwprofile

// Cost is what one instance of an algorithm (a congestion controller or a load balancer
// of one flow) costs on a NIC: the numbers a profile's budgets are checked against.
type Cost struct {
	Name        string // algorithm name as configured ("smartt", "reps", ...)
	StateBytes  int    // packed per-flow state, bytes (pinned by the algorithm's tests)
	GlobalBytes int    // state shared by all flows (parameters, model), bytes
	Ops         int    // worst-case arithmetic/compare/memory operations per decision
	IntegerOnly bool   // the decision path uses no floating point
}

// Coster is implemented by every congestion controller and load balancer: it reports
// the algorithm's hardware cost, so a profile can accept or refuse it.
type Coster interface {
	Cost() Cost
}
