#!/bin/bash
# Run inside `farwing lab` (e.g. `farwing lab --rate 400M --rtt 140ms -- bench/tools/delta.sh`):
# changed files, Farwing against rsync. A random file of MIB MiB (1024) is pushed whole by each
# (Farwing to f.bin, rsync to r.bin on the lab's host); then 1 % of its 1 MiB blocks get 4 KiB of new
# bytes each and both copy it again; then it grows by 10 % (a log) and both copy it again. Prints
# per copy the seconds, the bytes on the wire (Farwing: its datagrams' wire_bytes, ssh's control
# messages aside; rsync: --stats' bytes sent plus received, over ssh) and what Farwing kept and sent.
# FARWING names the farwing executable (default: farwing on PATH).
set -euo pipefail
FW=${FARWING:-farwing}; CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST; RH=$FARWING_LAB_HOME
MIB=${MIB:-1024}
W=$(mktemp -d /tmp/delta.XXXXXX); trap 'rm -rf "$W"' EXIT
command -v rsync >/dev/null || { echo "delta.sh: rsync is not installed (scripts/setup.sh installs it)" >&2; exit 2; }
rm -f "$RH/f.bin" "$RH/r.bin"
head -c $((MIB << 20)) /dev/urandom > "$W/src.bin"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg); file $MIB MiB"
fw() { # label
  "$FW" copy -F "$CFG" --json "$W/src.bin" "$H:f.bin" 2>/dev/null | tail -1 > "$W/fw.json"
  python3 - "$1" "$W/fw.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
print("%-22s farwing %7.2f s  wire %13d bytes  kept %5d blocks  sent %5d blocks  bytes %d" % (
    sys.argv[1], d["seconds"], d.get("wire_bytes", 0), d.get("kept_blocks", 0), d.get("sent_blocks", 0), d["bytes"]))
PY
}
rs() { # label
  local t0 t1
  t0=$(date +%s.%N)
  rsync -e "ssh -F $CFG" --stats "$W/src.bin" "$H:r.bin" > "$W/rs.txt"
  t1=$(date +%s.%N)
  python3 - "$1" "$t0" "$t1" "$W/rs.txt" <<'PY'
import re, sys
s = open(sys.argv[4]).read()
num = lambda k: int(re.search(k + r": ([\d,]+)", s).group(1).replace(",", ""))
print("%-22s rsync   %7.2f s  wire %13d bytes  (sent %d, received %d; literal data %d)" % (
    sys.argv[1], float(sys.argv[3]) - float(sys.argv[2]), num("Total bytes sent") + num("Total bytes received"),
    num("Total bytes sent"), num("Total bytes received"), num("Literal data")))
PY
}
fw "full copy"; rs "full copy"
python3 - "$W/src.bin" <<'PY'
import os, random, sys
n = os.path.getsize(sys.argv[1]) >> 20
r = random.Random(1)
with open(sys.argv[1], "r+b") as f:
    for b in r.sample(range(n), max(1, n // 100)):
        f.seek((b << 20) + r.randrange((1 << 20) - 4096))
        f.write(os.urandom(4096))
PY
fw "1% of blocks changed"; rs "1% of blocks changed"
head -c $((MIB * 1024 / 10))K /dev/urandom >> "$W/src.bin"
fw "grown by 10%"; rs "grown by 10%"
cmp "$W/src.bin" "$RH/f.bin" && cmp "$W/src.bin" "$RH/r.bin" && echo "both destinations equal the source"
