#!/bin/bash
# Run inside `farwing lab`: a first copy (peer not installed: the remote cache and the local
# packed peer emptied) against a repeat copy, both --ssh-persist 0, a 256 MiB push, RUNS runs.
# PROXY="CMD %h %p": ssh goes through that ProxyCommand (the user's own, so farwing's bbr
# ProxyCommand is not used); the CUBIC row of the first-contact table (git show b3300e1:README.md) used one that sets TCP_CONGESTION=cubic on its
# socket before it connects, as most hosts' default TCP behaves.
set -u
FW=${FW:-$(cd "$(dirname "$0")/../.." && pwd)/bin/farwing}; RUNS=${RUNS:-3}
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST; RH=$FARWING_LAB_HOME
W=$(mktemp -d /tmp/first.XXXXXX); trap 'rm -rf "$W"' EXIT
head -c $((256<<20)) /dev/urandom > "$W/f.bin"
EXTRA=()
if [ -n "${PROXY:-}" ]; then EXTRA=(-o "ProxyCommand=$PROXY"); fi
echo "tcp cc here: $(sysctl -n net.ipv4.tcp_congestion_control) extra: ${EXTRA[*]}"
show() {
  python3 -c '
import json,sys
d=[json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
print("%s %s whole %.2f data %.2f bootstrap %.2f s uploaded %s bytes %s" % (sys.argv[2], sys.argv[3], d.get("seconds",0), d.get("data_seconds",0), d.get("bootstrap_seconds",0), d.get("peer_uploaded"), d.get("bootstrap_bytes")))' "$1" "$2" "$3"
}
for r in $(seq 1 $RUNS); do
  rm -rf "$RH/.cache/farwing" "${XDG_CACHE_HOME:-$HOME/.cache}/farwing/peer"
  sync; sleep 1
  $FW copy -v -F "$CFG" --ssh-persist 0 "${EXTRA[@]}" --json "$W/f.bin" "$H:f.bin" > "$W/first.json" 2> "$W/first.err"; rc=$?
  show "$W/first.json" "run $r first rc=$rc" "load $(cut -d' ' -f1 /proc/loadavg)"
  grep -iE "ssh session|connections|upload" "$W/first.err" | grep -v "%" | cut -c1-220 | head -4
  rm -f "$RH/f.bin"; sync; sleep 1
  $FW copy -F "$CFG" --ssh-persist 0 "${EXTRA[@]}" --json "$W/f.bin" "$H:f.bin" > "$W/rep.json" 2> "$W/rep.err"; rc=$?
  show "$W/rep.json" "run $r repeat rc=$rc" "load $(cut -d' ' -f1 /proc/loadavg)"
  rm -f "$RH/f.bin"
done
