#!/bin/bash
# Run inside `farwing lab` (namespace A): RUNS pushes of a random SIZE_MIB file, each bounded by
# `timeout`, and for each the limiter of its --json summary: goodput, the packet train's reading,
# the most the path delivered, the capacity the verdict named (0: none) and its sentence.
#   sudo bin/farwing lab --rate 400M --rtt 140ms --loss 1% -- env LABEL=1% bench/tools/limiter.sh
set -u
FW=${FW:-$(cd "$(dirname "$0")/../.." && pwd)/bin/farwing}
RUNS=${RUNS:-10}; SIZE_MIB=${SIZE_MIB:-256}; LABEL=${LABEL:-}
SRC=$(mktemp /tmp/farwing-limiter.XXXXXX)
trap 'rm -f "$SRC"' EXIT
head -c $((SIZE_MIB << 20)) /dev/urandom >"$SRC"
for i in $(seq 1 "$RUNS"); do
	timeout 300 "$FW" copy --json -q -F "$FARWING_LAB_SSH_CONFIG" "$SRC" "$FARWING_LAB_HOST":limiter.bin |
		grep '"summary"' | python3 -c 'import sys, json
l = json.loads(sys.stdin.read()).get("limiter") or {}
m = lambda k: l.get(k, 0) / 1e6
print("%s#%s goodput %.1f train %.1f delivered %.1f capacity %.1f cause %s | %s" % (sys.argv[1], sys.argv[2],
      m("goodput_bps"), m("train_bps"), m("delivered_bps"), m("capacity_bps"), l.get("cause"), l.get("detail")))' "$LABEL" "$i"
done
