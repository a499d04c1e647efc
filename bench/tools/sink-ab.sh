#!/bin/bash
# Run inside `farwing lab` (e.g. `sudo farwing lab --rate 400M --rtt 140ms --loss 1% --queue 1bdp
# -- bench/tools/sink-ab.sh`): 1 GiB `--sink` pushes of the builds in BINS (space-separated paths),
# alternated round by round, RUNS rounds (default 4), after one warm-up copy each (which also
# starts the shared ssh connection). One line per copy: goodput, BtlBw, congestion verdicts, the
# data phase, the tail (last new data to the verified end) and wire/file bytes, from the copy's
# --json summary.
set -u
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST
W=$(mktemp -d /tmp/sink-ab.XXXXXX); trap 'rm -rf "$W"' EXIT
truncate -s 1G "$W/f"
for b in $BINS; do "$b" copy -q -F "$CFG" "$W/f" "$H:warm" --sink >/dev/null 2>&1; done
for r in $(seq 1 "${RUNS:-4}"); do
  for b in $BINS; do
    "$b" copy -F "$CFG" --sink --json "$W/f" "$H:x" > "$W/o.json" 2>/dev/null
    tail -1 "$W/o.json" | python3 -c '
import json, sys
d = json.load(sys.stdin); c = d["cc"]
print("%s %s goodput %.1f btl %.0f ev %d data %.2f tail %.3f wire/file %.4f verdicts %s" % (sys.argv[1], sys.argv[2],
      d["goodput_bps"]/1e6, c["btlbw_bps"]/1e6, c["congestion_events"], d["data_seconds"],
      d.get("tail_seconds", 0), d.get("wire_ratio", 0), [v["reason"] for v in c.get("verdicts", [])]))' "$r" "${b##*/}"
  done
done
