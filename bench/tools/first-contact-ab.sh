#!/bin/bash
# Run inside `farwing lab`: first-contact extra (first - repeat), 16 MiB push, --ssh-persist 0,
# builds $BINS interleaved, RUNS rounds. KEEPPACK=1 keeps this user's compressed peer (only the
# record of installs is removed), else the whole local farwing/peer cache goes too.
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST; RH=$FARWING_LAB_HOME
W=$(mktemp -d /tmp/first.XXXXXX); trap 'rm -rf "$W"' EXIT
head -c $((16<<20)) /dev/urandom > "$W/f.bin"
for r in $(seq 1 ${RUNS:-3}); do for b in $BINS; do
  if [ "${KEEPPACK:-0}" = 1 ]; then rm -rf "$RH/.cache/farwing" "${XDG_CACHE_HOME:-$HOME/.cache}/farwing/peer/installed"; else rm -rf "$RH/.cache/farwing" "${XDG_CACHE_HOME:-$HOME/.cache}/farwing/peer"; fi; sync; sleep 1
  a=$($b copy -F "$CFG" --ssh-persist 0 --json "$W/f.bin" "$H:f.bin" | tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.3f %.3f" % (d["seconds"], d["bootstrap_seconds"]))')
  sleep 1
  c=$($b copy -F "$CFG" --ssh-persist 0 --json "$W/f.bin" "$H:f.bin" | tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.3f %.3f" % (d["seconds"], d["bootstrap_seconds"]))')
  echo "$r ${b##*/} first $a repeat $c" | awk '{printf "%s extra whole %.2f boot %.2f\n", $0, $4-$7, $5-$8}'
done; done
