package sim

// flowSizeCDFs are the flow-size distributions of the Poisson-arrival workload kinds:
// (bytes, cumulative probability), linearly interpolated.
var flowSizeCDFs = map[string][][2]float64{
	"websearch": websearch,
	// The Facebook Hadoop cluster's flow sizes (Roy et al., "Inside the Social Network's
	// (Datacenter) Network", SIGCOMM 2015), as distributed with HPCC (Li et al., SIGCOMM
	// 2019, traffic_gen/FbHdp_distribution.txt): the "Facebook" trace of the REPS paper's
	// App. E. Mean 120 KB; 60 % of the flows are at most 1 KB.
	"facebook_hadoop": {
		{0, 0}, {100, 0.01}, {200, 0.02}, {300, 0.05}, {350, 0.15}, {400, 0.2}, {500, 0.3},
		{600, 0.4}, {700, 0.5}, {1000, 0.6}, {2000, 0.67}, {7000, 0.7}, {30000, 0.72},
		{50000, 0.82}, {80000, 0.87}, {120000, 0.9}, {300000, 0.95}, {1000000, 0.975},
		{2000000, 0.99}, {10000000, 1},
	},
}
