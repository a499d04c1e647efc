#!/bin/bash
# Run inside `farwing lab`: the bench against the lab's sshd as an ordinary host, then iperf3
# between the same two namespaces, TCP rows side by side. OUT: directory for the results.
set -u
FW=${FW:-$(cd "$(dirname "$0")/../.." && pwd)/bin/farwing}; OUT=${OUT:-$(mktemp -d /tmp/nonlab.XXXXXX)}; mkdir -p "$OUT"
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST
echo "bench start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
$FW bench -F "$CFG" "$H" --size ${SIZE:-256M} --runs ${RUNS:-3} --json "$OUT/ledger.json" -q > "$OUT/table.md" 2> "$OUT/bench.err"
echo "bench rc=$? end $(date -u +%FT%TZ)"
ip netns exec "$FARWING_LAB_NS_B" iperf3 -s -D --logfile "$OUT/iperf3-server.log"
sleep 1
for r in 1 2 3; do
  for cc in default cubic bbr bbr8; do
    case $cc in default) a="";; cubic) a="-C cubic";; bbr) a="-C bbr";; bbr8) a="-C bbr -P 8";; esac
    iperf3 -c "$FARWING_LAB_ADDR_B" -t ${DUR:-20} $a -J > "$OUT/iperf3-$cc-$r.json" 2>&1
    python3 - "$OUT/iperf3-$cc-$r.json" "$cc" "$r" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
e=d["end"]; r=e["sum_received"]["bits_per_second"]/1e6; s=e["sum_sent"].get("retransmits")
print("iperf3 %-7s run %s: %.1f Mbit/s received, retransmits %s" % (sys.argv[2], sys.argv[3], r, s))
PY
  done
done
pkill -f "iperf3 -s -D --logfile $OUT" || true
cat "$OUT/table.md"
