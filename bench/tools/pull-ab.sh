#!/bin/bash
# Run inside `farwing lab`: pulls of SIZE MiB (default 64) over the shared ssh connection, the
# builds in $BINS alternated, RUNS rounds (default 3); one line per copy: round, build, whole
# command and data phase in seconds. Each build is warmed up (peer installed) first.
set -u
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST; RH=$FARWING_LAB_HOME
W=$(mktemp -d /tmp/pullab.XXXXXX); trap 'rm -rf "$W" "$RH/src.bin"' EXIT
head -c $((${SIZE:-64}<<20)) /dev/urandom > "$RH/src.bin"; chmod 644 "$RH/src.bin"
for b in $BINS; do "$b" copy -F "$CFG" "$H:src.bin" "$W/warm.bin" 2>/dev/null; rm -f "$W/warm.bin"; done
for r in $(seq 1 "${RUNS:-3}"); do for b in $BINS; do
  rm -f "$W/got.bin"; sync; sleep 1
  "$b" copy -F "$CFG" --json "$H:src.bin" "$W/got.bin" 2>/dev/null | tail -1 |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("%s %s whole %.3f data %.3f" % (sys.argv[1], sys.argv[2], d["seconds"], d["data_seconds"]))' "$r" "${b##*/}"
done; done
