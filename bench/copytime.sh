#!/usr/bin/env bash
# bench/copytime.sh — whole-command time of a 256 MiB disk-to-disk push through the lab at
# 400 Mbit/s and 140 ms RTT, at each loss level: with a ceiling of --rate 350M, with the defaults
# (the ssh connection the warm-up copy left open is reused, as it is for any copy within a minute
# of the last one to the host), and with a fresh ssh connection per copy (--ssh-persist 0).
# 3 runs each, peer already installed (the warm-up copy installs it). Prints one line per run
# from `farwing copy --json` plus the wall clock.
# Needs root (the lab). Usage: sudo bench/copytime.sh [LOSSES]   (default "0% 0.1% 1% 3%")
set -euo pipefail
cd "$(dirname "$0")/.."
LOSSES=${1:-"0% 0.1% 1% 3%"}
. bench/lib.sh
bench_work copytime f256m 256M
for loss in $LOSSES; do
  echo "== 400M 140ms loss $loss, load $(cut -d' ' -f1 /proc/loadavg)"
  timeout 600 "$F" lab --rate 400M --rtt 140ms --loss "$loss" -- bash -c '
    set -u
    C=(-F "$FARWING_LAB_SSH_CONFIG")
    summ() { python3 -c "import json,sys; r=json.load(sys.stdin); print(\"%-18s seconds %.2f data_seconds %.2f goodput %.1f Mbit/s re-sent %d wire/file %.3f uploaded %s\" % (sys.argv[1], r[\"seconds\"], r[\"data_seconds\"], r[\"goodput_bps\"]/1e6, r[\"retransmitted\"], r[\"wire_bytes\"]/r[\"bytes\"], r[\"peer_uploaded\"]))" "$1"; }
    "$F" copy -q "${C[@]}" "$W/empty" "$FARWING_LAB_HOST:"
    for i in 1 2 3; do "$F" copy -q "${C[@]}" --json --rate 350M "$W/f256m" "$FARWING_LAB_HOST:" | summ "rate-350M run$i"; done
    for i in 1 2 3; do /usr/bin/time -f "  wall %e s" "$F" copy -q "${C[@]}" --json "$W/f256m" "$FARWING_LAB_HOST:" | summ "default run$i"; done
    for i in 1 2 3; do /usr/bin/time -f "  wall %e s" "$F" copy -q "${C[@]}" --ssh-persist 0 --json "$W/f256m" "$FARWING_LAB_HOST:" | summ "fresh-ssh run$i"; done
  ' 2>&1 | grep -v "socket buffers capped"
done
