#!/bin/sh
# EQDS against sender-based controllers in the simulator: the 128-host scenarios and the
# 1,023:1 incast of test/sim/scenarios under REPS (as the SMaRTT paper runs every
# controller), three seeds each. Prints the markdown table of docs/cc.md ("EQDS in the
# simulator"). About 3 minutes on a shared 2-core host.
#   usage: scripts/eqds-compare.sh [path/to/smartt-lab]   (default: built from ./cmd/smartt-lab)
set -eu
cd "$(dirname "$0")/.."
SMARTT=${1:-}
if [ -z "$SMARTT" ]; then
	SMARTT=$(mktemp -d)/smartt-lab
	go build -o "$SMARTT" ./cmd/smartt-lab
fi
echo "| scenario | cc | completion / ideal, seeds 1 2 3 | max FCT slowdown, seeds 1 2 3 | trims (mean) |"
echo "|---|---|---|---|---|"
for sc in incast_128 incast_1024 permutation_128 permutation_128_4to1; do
	for cc in eqds smartt mprdma; do
		rel=""; slow=""; trims=0
		for seed in 1 2 3; do
			j=$("$SMARTT" sim run -json -progress=false -cc "$cc" -lb reps -seed "$seed" "test/sim/scenarios/$sc.yaml")
			if [ "$(echo "$j" | jq '.completed == .flows')" != true ]; then
				echo "$sc $cc seed $seed: flows incomplete" >&2
				exit 1
			fi
			rel="$rel $(echo "$j" | jq -r '.completion_rel * 1000 | round / 1000')"
			slow="$slow $(echo "$j" | jq -r '.fct.max_slowdown * 100 | round / 100')"
			trims=$((trims + $(echo "$j" | jq .trims)))
		done
		echo "| $sc | $cc |$rel |$slow | $((trims / 3)) |"
	done
done
