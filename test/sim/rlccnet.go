package sim

// The simulator runs rlcc.policy: mlp, the float64 policy network the tree model was
// distilled from (package rlccnet registers it); the daemon does not link it.
import _ "github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
