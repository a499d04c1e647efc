#!/bin/bash
# Run inside `farwing lab`: a re-run onto an identical tree (10,000 x 4 KiB): farwing copy -r -p
# then the same command twice; rsync -a likewise.
set -u
FW=${FW:-$(cd "$(dirname "$0")/../.." && pwd)/bin/farwing}
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST; RH=$FARWING_LAB_HOME
W=$(mktemp -d /tmp/skip.XXXXXX); trap 'rm -rf "$W"' EXIT
"$(dirname "$0")/small-tree.sh" "$W"
CM="-o ControlMaster=auto -o ControlPath=$W/cm-%C -o ControlPersist=120"
SSH="ssh -F $CFG $CM"; $SSH $H true
t() { local s=$(date +%s.%N); "$@" >"$W/out" 2>"$W/err"; local rc=$?; local e=$(date +%s.%N); printf "%.2f s rc=%d" "$(echo "$e - $s" | bc)" $rc; }
$SSH $H "mkdir -p same"; echo "farwing first: $(t $FW copy -q -F "$CFG" -r -p --json "$W/tree" "$H:same/")"
for i in 1 2; do
  echo "farwing re-run $i: $(t $FW copy -q -F "$CFG" -r -p --json "$W/tree" "$H:same/") $(tail -1 "$W/out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("skipped_files %s skipped_bytes %s wire_bytes %s data %.2f" % (d["skipped_files"], d["skipped_bytes"], d.get("wire_bytes",0), d["data_seconds"]))')"
done
echo "rsync first: $(t rsync -a -e "$SSH" "$W/tree/" "$H:rsame/")"
for i in 1 2; do echo "rsync re-run $i: $(t rsync -a --stats -e "$SSH" "$W/tree/" "$H:rsame/") $(grep -E 'Total bytes sent' $W/out)"; done
$SSH -O exit $H 2>/dev/null
