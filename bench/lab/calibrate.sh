#!/bin/sh
# Calibrates the lab with kernel TCP (iperf3). Run as root from the repo
# root, on an otherwise idle machine (the emulator shares the CPUs):
#   sh bench/lab/calibrate.sh [seconds]
# Each case starts a fresh lab (`farwing lab`); the iperf3
# server runs in namespace B, the client in A, data flows A->B. Printed:
# iperf3's sender/receiver totals, the mean of the second half of the
# 1-second intervals ("steady"), and the lab's own counters.
set -eu
T=${1:-20}
CGO_ENABLED=0 go build -o /tmp/farwing-lab ./cmd/farwing
run() { # name, lab flags, iperf3 client flags
	echo "== $1 (load $(cut -d' ' -f1 /proc/loadavg))"
	echo "   farwing lab --no-ssh $2 -- iperf3 -c \$FARWING_LAB_ADDR_B -t $T $3"
	# shellcheck disable=SC2086
	/tmp/farwing-lab lab --no-ssh $2 -- sh -c '
		ip netns exec "$FARWING_LAB_NS_B" iperf3 -s -1 >/dev/null 2>&1 &
		sleep 0.5
		timeout '"$((T + 30))"' iperf3 -c "$FARWING_LAB_ADDR_B" -t '"$T"' -f m '"$3"' >/tmp/fwlab-iperf.txt
		wait
		grep -E "(SUM|  5\]).*(sender|receiver)" /tmp/fwlab-iperf.txt | grep -E "SUM|$(grep -q SUM /tmp/fwlab-iperf.txt && echo NONE || echo .)"
		awk -v t='"$T"' '"'"'
			/sender|receiver/ { next }
			/Mbits\/sec/ && ($0 ~ /SUM/ || !multi) {
				split($0, a, "sec"); split(a[1], iv, "-"); end = iv[2] + 0
				for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") r = $(i-1)
				if (end > t / 2) { s += r; n++ }
			}
			BEGIN { multi = 0 } /\[SUM\]/ { multi = 1 }
			END { if (n) printf "   steady (2nd half): %.0f Mbit/s\n", s / n }'"'"' /tmp/fwlab-iperf.txt
		rm -f /tmp/fwlab-iperf.txt' 2>&1 | grep -vE "^lab: (A |[0-9.]+s elapsed)"
}
run "cubic 400M 140ms 1bdp" "--rate 400M --rtt 140ms" "-C cubic"
run "bbr 400M 140ms 1bdp" "--rate 400M --rtt 140ms" "-C bbr"
run "bbr -P 8 400M 140ms 1bdp" "--rate 400M --rtt 140ms" "-C bbr -P 8"
run "cubic 400M 140ms 1bdp 1% loss" "--rate 400M --rtt 140ms --loss 1%" "-C cubic"
run "bbr 400M 140ms 1bdp 1% loss" "--rate 400M --rtt 140ms --loss 1%" "-C bbr"
run "bbr -P 8 400M 140ms 1bdp 1% loss" "--rate 400M --rtt 140ms --loss 1%" "-C bbr -P 8"
run "ceiling: unlimited rate, 0 delay, cubic" "--rate 0 --rtt 0" "-C cubic"
run "ceiling: unlimited rate, 0 delay, bbr -P 4" "--rate 0 --rtt 0" "-C bbr -P 4"
run "ceiling: unlimited rate, 140ms, bbr" "--rate 0 --rtt 140ms" "-C bbr"
