#!/bin/sh
# Resume measurement ("Resume after a kill" in git show b3300e1:README.md): a 1 GiB push and pull, whole, then killed
# (SIGKILL of the local farwing) once the receiver's record says 512 blocks are synced, then run
# again to resume. Run inside the lab:
#   sudo farwing lab --rate 400M --rtt 140ms --loss 1% --queue 1bdp -- env RUN=1 bench/tools/resume-measure.sh
# FARWING is the build to measure (in a 0755 directory), DATA where the local files go, OUT the
# --json summaries and messages of each copy; MAINBIN another build whose full push is measured
# first, for comparison.
set -u
F=${FARWING:-farwing}
CFG="$FARWING_LAB_SSH_CONFIG"; H="$FARWING_LAB_HOST"; RH="$FARWING_LAB_HOME"
D=${DATA:-/tmp/farwing-resume-data}; OUT=${OUT:-$D/out-${RUN:-1}}
mkdir -p $D $OUT
[ -f $D/big.bin ] || head -c 1073741824 /dev/urandom > $D/big.bin
quiet() { while [ -e /tmp/farwing-quiet ]; do sleep 10; done; }
blocks() {
  for r in "$1"/.*.farwing-*.rec; do
    if [ -f "$r" ]; then grep -o '"blocks":[0-9]*' "$r" | cut -d: -f2; return; fi
  done
  echo 0
}
killat() { # pid dir
  while kill -0 $1 2>/dev/null; do
    b=$(blocks $2); b=${b:-0}
    if [ "$b" -ge 512 ]; then kill -9 $1; echo "killed at $b recorded blocks, $(date +%T.%N)"; return; fi
    sleep 0.05
  done
  echo "ended before half"
}
head -c 1000 /dev/urandom > $D/warm.bin
$F copy -F "$CFG" -q $D/warm.bin "$H:warm.bin"   # installs the peer, opens the shared connection
if [ -n "${MAINBIN:-}" ]; then # the same full push with another build, for comparison
  $MAINBIN copy -F "$CFG" -q $D/warm.bin "$H:warm.bin"
  quiet; $MAINBIN copy -F "$CFG" --json $D/big.bin "$H:main.bin" > $OUT/push-main.json 2> $OUT/push-main.err
  rm -f "$RH/main.bin"
fi
quiet; $F copy -F "$CFG" --json $D/big.bin "$H:full.bin" > $OUT/push-full.json 2> $OUT/push-full.err
quiet; $F copy -F "$CFG" --json $D/big.bin "$H:dst.bin" > $OUT/push-killed.json 2> $OUT/push-killed.err & pid=$!
killat $pid "$RH" > $OUT/push-killed.kill; wait $pid; echo "exit $?" >> $OUT/push-killed.kill
sleep 2
quiet; $F copy -F "$CFG" --json $D/big.bin "$H:dst.bin" > $OUT/push-resume.json 2> $OUT/push-resume.err
cmp $D/big.bin "$RH/dst.bin" && echo "push: identical" > $OUT/push.cmp
quiet; $F copy -F "$CFG" --json "$H:full.bin" $D/pulled-full.bin > $OUT/pull-full.json 2> $OUT/pull-full.err
quiet; $F copy -F "$CFG" --json "$H:full.bin" $D/pulled.bin > $OUT/pull-killed.json 2> $OUT/pull-killed.err & pid=$!
killat $pid $D > $OUT/pull-killed.kill; wait $pid; echo "exit $?" >> $OUT/pull-killed.kill
sleep 2
quiet; $F copy -F "$CFG" --json "$H:full.bin" $D/pulled.bin > $OUT/pull-resume.json 2> $OUT/pull-resume.err
cmp $D/big.bin $D/pulled.bin && echo "pull: identical" > $OUT/pull.cmp
ls -la "$RH" $D > $OUT/ls.txt
rm -f $D/pulled.bin $D/pulled-full.bin "$RH/dst.bin" "$RH/full.bin"
