#!/usr/bin/env bash
# Runs a real `farwing copy` through the built-in lab: two network namespaces joined by Farwing's
# userspace WAN emulator (100 Mbit/s, 60 ms RTT, 1 % random loss each way) and a real sshd with a
# throwaway user. Pushes a random file, pulls it back, and compares. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-64M}
RATE=${RATE:-100M}
RTT=${RTT:-60ms}
LOSS=${LOSS:-1%}
if [ "$(id -u)" -ne 0 ]; then echo "demo: the lab needs root (network namespaces); run: sudo make demo" >&2; exit 2; fi
bin=$(pwd)/bin/farwing
work=$(mktemp -d /tmp/farwing-demo.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
head -c "$SIZE" /dev/urandom > "$work/random.bin"
chmod 644 "$work/random.bin"
echo "demo: lab at $RATE, $RTT RTT, $LOSS loss each way; copying $SIZE of random data" >&2
"$bin" lab --rate "$RATE" --rtt "$RTT" --loss "$LOSS" -- sh -c '
  set -e
  f() { "'"$bin"'" copy -F "$FARWING_LAB_SSH_CONFIG" "$@"; }
  echo "== push (first contact installs the peer)" >&2
  f "'"$work"'/random.bin" "$FARWING_LAB_HOST:"
  echo "== pull back" >&2
  f "$FARWING_LAB_HOST:random.bin" "'"$work"'/back.bin"
  cmp "'"$work"'/random.bin" "'"$work"'/back.bin" && echo "demo: byte-identical after push and pull" >&2
'
