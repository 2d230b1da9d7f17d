// Package hwprofile will hold named NIC hardware profiles (ConnectX-6Dx programmable CC,
// the REPS paper's FPGA NIC) with their memory, operation-count and decision-time
// budgets, and the accounting every algorithm reports against them. It is empty until
// the RL-CC / hardware-profile issue fills it.
package hwprofile
