#!/bin/bash
# Run inside `farwing lab`: 10,000 files of 4 KiB in 100 directories, pushed and pulled by
# farwing copy -r, tar over ssh and rsync -a, interleaved, ROUNDS rounds. Prints one line per run.
set -u
ROUNDS=${ROUNDS:-2}
FW=${FW:-$(cd "$(dirname "$0")/../.." && pwd)/bin/farwing}
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST; RH=$FARWING_LAB_HOME
W=$(mktemp -d /tmp/small.XXXXXX)
trap 'rm -rf "$W"' EXIT
"$(dirname "$0")/small-tree.sh" "$W"
CM="-o ControlMaster=auto -o ControlPath=$W/cm-%C -o ControlPersist=120"
SSH="ssh -F $CFG $CM"
$SSH $H true
for b in ${TOOLS:-$FW}; do case $b in */farwing*) $b copy -q -F "$CFG" "$W/tree/d00/f000.bin" "$H:warm.bin" >/dev/null 2>&1;; esac; done
t() { local s=$(date +%s.%N); "$@" >"$W/out" 2>"$W/err"; local rc=$?; local e=$(date +%s.%N); printf "%.2f rc=%d" "$(echo "$e - $s" | bc)" $rc; [ $rc = 0 ] || { echo; cat "$W/err"; }; }
for r in $(seq 1 $ROUNDS); do
  for tool in ${TOOLS:-farwing tar rsync}; do
    if [ "${NODEL:-0}" = 1 ]; then D=dst.$r.${tool##*/}; else D=dst; $SSH $H "rm -rf dst; sync"; fi; sync; sleep 1
    case $tool in
      */farwing*) out=$(t $tool copy -q -F "$CFG" -r --json "$W/tree" "$H:$D"); j=$(tail -1 "$W/out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("wire %.3f data %.2f" % (d["wire_ratio"], d["data_seconds"]))');;
      tar) out=$(t sh -c "tar cf - -C '$W' tree | $SSH $H 'mkdir -p $D && tar xf - -C $D'");;
      rsync) out=$(t rsync -a -e "$SSH" "$W/tree" "$H:$D");;
    esac
    n=$(find "$RH/$D" -type f | wc -l)
    echo "round $r push ${tool##*/} $out files=$n load=$(cut -d' ' -f1 /proc/loadavg) ${j:-}"; j=
  done
  for tool in ${TOOLS:-farwing tar rsync}; do
    if [ "${NODEL:-0}" = 1 ]; then B="$W/back.$r.${tool##*/}"; else B="$W/back"; rm -rf "$B"; fi; S=$D; [ "${NODEL:-0}" = 1 ] && S=dst.$r.tar; sync; sleep 1
    case $tool in
      */farwing*) out=$(t $tool copy -q -F "$CFG" -r --json "$H:$S" "$B"); j=$(tail -1 "$W/out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("wire %.3f data %.2f" % (d["wire_ratio"], d["data_seconds"]))');;
      tar) out=$(t sh -c "mkdir -p '$B' && $SSH $H 'tar cf - $S' | tar xf - -C '$B'");;
      rsync) out=$(t rsync -a -e "$SSH" "$H:$S" "$B/");;
    esac
    n=$(find "$B" -type f | wc -l)
    echo "round $r pull ${tool##*/} $out files=$n load=$(cut -d' ' -f1 /proc/loadavg) ${j:-}"; j=
  done
done
$SSH -O exit $H 2>/dev/null
