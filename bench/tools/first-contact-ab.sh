#!/bin/bash
# Run inside `farwing lab`: first-contact extra (first - repeat), SIZE MiB push (64), --ssh-persist 0,
# builds $BINS interleaved, RUNS rounds (3). KEEPPACK=1 keeps this user's compressed peer (only the
# record of installs is removed), else the whole local farwing/peer cache goes too. Each copy's
# --json goes to a file, read once the rounds are over (a python3 started beside a copy slows
# ssh's start: docs/PERFORMANCE.md, "Comparing two builds"). Prints one line per build and round,
# then per build the extra's min-median-max, of the whole command and of bootstrap_seconds (ssh's
# start to the peer's: without the data phase, which a busy machine makes vary by seconds).
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST; RH=$FARWING_LAB_HOME
W=$(mktemp -d /tmp/first.XXXXXX); trap 'rm -rf "$W"' EXIT
head -c $((${SIZE:-64}<<20)) /dev/urandom > "$W/f.bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 ${RUNS:-3}); do for b in $BINS; do
  n=$(echo "$b" | md5sum | cut -c1-8)
  if [ "${KEEPPACK:-0}" = 1 ]; then rm -rf "$RH/.cache/farwing" "${XDG_CACHE_HOME:-$HOME/.cache}/farwing/peer/installed"; else rm -rf "$RH/.cache/farwing" "${XDG_CACHE_HOME:-$HOME/.cache}/farwing/peer"; fi; sync; sleep 1
  $b copy -F "$CFG" --ssh-persist 0 --json "$W/f.bin" "$H:f.bin" > "$W/$r.$n.first" 2>/dev/null
  sleep 1
  $b copy -F "$CFG" --ssh-persist 0 --json "$W/f.bin" "$H:f.bin" > "$W/$r.$n.repeat" 2>/dev/null
  echo "$r $b $n load $(cut -d' ' -f1 /proc/loadavg)" >> "$W/runs"
done; done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$W" <<'EOF'
import json, os, sys, statistics
w = sys.argv[1]
def last(p):
    try:
        return [json.loads(l) for l in open(p) if l.strip()][-1]
    except Exception:
        return {}
ext, boot = {}, {}
for line in open(os.path.join(w, "runs")):
    r, b, n, _, load = line.split()
    f, c = last(os.path.join(w, r + "." + n + ".first")), last(os.path.join(w, r + "." + n + ".repeat"))
    if "seconds" not in f or "seconds" not in c:
        print(r, b, "FAILED"); continue
    e = f["seconds"] - c["seconds"]
    ext.setdefault(b, []).append(e)
    boot.setdefault(b, []).append(f.get("bootstrap_seconds", 0) - c.get("bootstrap_seconds", 0))
    print("%s %s first %.3f (boot %.3f, uploaded %s, %s bytes %s) repeat %.3f (boot %.3f) extra whole %.2f boot %.2f load %s" % (
        r, os.path.basename(b), f["seconds"], f.get("bootstrap_seconds", 0), f.get("peer_uploaded"), f.get("bootstrap_bytes"),
        f.get("bootstrap_format", ""), c["seconds"], c.get("bootstrap_seconds", 0), e, f.get("bootstrap_seconds", 0) - c.get("bootstrap_seconds", 0), load))
for b, es in ext.items():
    bs = boot[b]
    print("%s extra min-median-max %.2f-%.2f-%.2f s (bootstrap_seconds %.2f-%.2f-%.2f) over %d rounds" % (
        b, min(es), statistics.median(es), max(es), min(bs), statistics.median(bs), max(bs), len(es)))
EOF
