#!/usr/bin/env bash
# Issue 5 lab check: --fec auto against --fec off, 1 GiB --sink pushes through the built-in lab
# (400 Mbit/s of IP bytes, 140 ms RTT, one-BDP queue), alternating the two modes run by run.
#
#   sudo bench/fec.sh ["LOSSES"] [RUNS]      (default "0% 1% 3%" and 3)
#
# One line per run: goodput (file bits / data seconds), wire bytes / file bytes, FEC groups and
# the share that completed without a repair round trip, parity sent, re-sent datagrams, the time
# from the last new data datagram to the verified end, and the random loss the controller measured.
set -euo pipefail
cd "$(dirname "$0")/.."
LOSSES=${1:-"0% 1% 3%"}
RUNS=${2:-3}
. bench/lib.sh
bench_work fec f1g 1G
export RUNS
for loss in $LOSSES; do
	echo "== 400M 140ms 1bdp loss $loss, load $(cut -d' ' -f1 /proc/loadavg)"
	timeout 1200 "$F" lab --rate 400M --rtt 140ms --queue 1bdp --loss "$loss" -- bash -c '
		set -u
		C=(-F "$FARWING_LAB_SSH_CONFIG")
		summ() { python3 -c "
import json, sys
r = json.load(sys.stdin)
g, rg = r[\"fec_groups\"], r[\"repair_groups\"]
print(\"fec %-4s goodput %5.1f Mbit/s  wire/file %.4f  groups %4d without repair %5.1f %%  parity %6d  re-sent %6d  tail %.2f s  random loss %.4f  congestion events %d\" % (
    r[\"fec\"], r[\"goodput_bps\"] / 1e6, r[\"wire_ratio\"], g, 100 * (g - rg) / g if g else 0,
    r[\"parity_sent\"], r[\"retransmitted\"], r[\"tail_seconds\"], r[\"cc\"][\"random_loss\"], r[\"cc\"][\"congestion_events\"]))"; }
		"$F" copy -q "${C[@]}" "$W/empty" "$FARWING_LAB_HOST:" # installs the peer
		for i in $(seq "$RUNS"); do
			for mode in auto off; do
				"$F" copy -q "${C[@]}" --sink --json --fec "$mode" "$W/f1g" "$FARWING_LAB_HOST:" | summ
			done
		done
	' 2>&1 | grep --line-buffered -v "socket buffers capped"
done
