#!/bin/bash
# Run inside `farwing lab` (e.g. `sudo farwing lab --rate 400M --rtt 140ms --queue 1bdp --
# bench/tools/startup-ab.sh`): 16 MiB repeat copies of the builds in BINS (space-separated paths),
# alternated round by round, RUNS rounds (default 6), after one warm-up copy each (which also
# starts the shared ssh connection). One line per copy: the milliseconds from spawning the command
# to each mark of its -v output (ssh started, the remote's ok, the peer's ready, the UDP lanes
# open, the first data about to go) and to its exit.
set -u
CFG=$FARWING_LAB_SSH_CONFIG; H=$FARWING_LAB_HOST
W=$(mktemp -d /tmp/startup-ab.XXXXXX); trap 'rm -rf "$W"' EXIT
head -c $((16 << 20)) /dev/urandom > "$W/f"
for b in $BINS; do "$b" copy -q -F "$CFG" "$W/f" "$H:warm" >/dev/null 2>&1; done
for r in $(seq 1 "${RUNS:-6}"); do
  for b in $BINS; do
    python3 - "$r" "${b##*/}" "$b" copy -v -F "$CFG" "$W/f" "$H:f$r" <<'PY'
import subprocess, sys, time
marks = [("ssh", "riding on the shared ssh"), ("ok", "peer found on"), ("ready", "remote peer ready"),
         ("lanes", "UDP lanes open"), ("data", "sending ")]
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[3:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
seen = {}
for line in p.stderr:
    for name, text in marks:
        if name not in seen and text in line:
            seen[name] = (time.monotonic() - t0) * 1000
p.wait()
end = (time.monotonic() - t0) * 1000
print(sys.argv[1], sys.argv[2], " ".join("%s %.1f" % (n, seen.get(n, -1)) for n, _ in marks), "exit %.1f rc %d" % (end, p.returncode))
PY
  done
done
