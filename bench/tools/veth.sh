#!/bin/bash
# bench/tools/veth.sh — Farwing's CPU per GiB and data-phase rate on real sockets: run inside
# `farwing lab --veth` (namespace A; the kernel's path to the lab's sshd in B, no emulator).
#
#   sudo FARWING=bin/farwing RUNS=3 MIB=2048 bin/farwing lab --veth -- bench/tools/veth.sh
#
# Per round, each bounded by `timeout`: a --sink push and a disk-to-disk push (to the remote
# user's home; the source file is in the page cache, the receiver writes with O_DIRECT) of one
# random file, then kernel TCP on the same veth (iperf3, one stream and four, 5 s). Before each
# measurement it prints `uptime` (the machine is shared: read the load beside the figure). One
# line per copy from its --json summary: data-phase Gbit/s (goodput_bps), the whole command's,
# CPU seconds per GiB of the client (cpu_seconds) and the peer (peer_cpu_seconds).
#
# PROFILE=DIR writes CPU profiles of both ends of every copy into DIR (FARWING_CPUPROFILE; the
# peer gets it in front of its command line, since the lab's sshd accepts only LANG and LC_*),
# DIR made writable for the lab's user. PERF=1 also records `perf record -a -g` of each copy
# into DIR (the kernel's share, both ends). JSON=DIR keeps each copy's --json output there.
set -u
F=${FARWING:?path of farwing}
CFG=${FARWING_LAB_SSH_CONFIG:?run inside farwing lab --veth}
H=$FARWING_LAB_HOST
MIB=${MIB:-2048}
RUNS=${RUNS:-3}
W=$(mktemp -d /var/tmp/veth-sh.XXXXXX)
trap 'rm -rf "$W"' EXIT # farwing lab ends the iperf3 server in B with the lab
PROF=${PROFILE:-}
SSH=ssh
if [ -n "$PROF" ]; then
	mkdir -p "$PROF" && chmod 1777 "$PROF"
	# The peer reads FARWING_CPUPROFILE from its own environment: this ssh puts it in front of
	# the remote command (the argument after the host).
	cat >"$W/ssh" <<SH
#!/bin/sh
s=
for a; do shift; case \$s in host) s=cmd;; cmd) a="FARWING_CPUPROFILE=$PROF/peer \$a"; s=done;; '') [ "\$a" = -- ] && s=host;; esac; set -- "\$@" "\$a"; done
exec ssh "\$@"
SH
	chmod 755 "$W/ssh"
	SSH=$W/ssh
fi
head -c $((MIB << 20)) /dev/urandom >"$W/src.bin"
cat "$W/src.bin" >/dev/null # in the page cache

copy() { # label round args...
	local label=$1 r=$2 env=()
	shift 2
	[ -n "$PROF" ] && env=(FARWING_CPUPROFILE="$PROF/client.$label.$r" FARWING_SSH="$SSH")
	echo "# $(date -u +%T) $label round $r: $(uptime)"
	local perfpid=
	if [ "${PERF:-0}" = 1 ] && [ -n "$PROF" ]; then
		perf record -a -g -q -o "$PROF/perf.$label.$r.data" >/dev/null 2>&1 &
		perfpid=$!
		sleep 0.5
	fi
	env "${env[@]}" timeout 300 "$F" copy -F "$CFG" --json "$@" >"$W/o.json" 2>"$W/e.txt"
	local rc=$?
	[ -n "${JSON:-}" ] && mkdir -p "$JSON" && cp "$W/o.json" "$JSON/$label.$r.json"
	[ -n "$perfpid" ] && kill -INT "$perfpid" && wait "$perfpid"
	tail -1 "$W/o.json" | python3 -c '
import json, sys
d = json.load(sys.stdin); gib = d["bytes"] / 2**30
print("%-5s round %s exit %s: %6.2f Gbit/s data phase, %6.2f whole; CPU s/GiB client %.3f, peer %.3f; %d re-sent, %d receive-buffer overflows, %d congestion events; limiter: %s" % (
  sys.argv[1], sys.argv[2], sys.argv[3], d["goodput_bps"]/1e9, d["bytes"]*8/d["seconds"]/1e9,
  d["cpu_seconds"]/gib, d["peer_cpu_seconds"]/gib, d.get("retransmitted", 0), d.get("rx_dropped", 0),
  (d.get("cc") or {}).get("congestion_events", 0), (d.get("limiter") or {}).get("detail", "-")))' "$label" "$r" "$rc" ||
		{ echo "$label round $r: exit $rc"; tail -3 "$W/e.txt"; }
}

iperf() { # round streams
	echo "# $(date -u +%T) iperf3 -P $2 round $1: $(uptime)"
	# The CPU per GiB of kernel TCP on the same veth (no file read, no sealing, no hashing): each
	# end's share of one CPU over the test (iperf3's cpu_utilization_percent, user and system, of a
	# 2-CPU machine's 200 %) times its length, per GiB received.
	timeout 30 iperf3 -c "$FARWING_LAB_ADDR_B" -t 5 -P "$2" -J 2>&1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
e = d["end"]; r = e["sum_received"]; c = e["cpu_utilization_percent"]; gib = r["bytes"] / 2**30
print("tcp-%s round %s: %.2f Gbit/s (iperf3 receiver); CPU s/GiB sender %.3f, receiver %.3f" % (
  sys.argv[1], sys.argv[2], r["bits_per_second"]/1e9,
  c["host_total"]/100*r["seconds"]/gib, c["remote_total"]/100*r["seconds"]/gib))' "$2" "$1" ||
		echo "tcp-$2 round $1: iperf3 failed"
}

ip netns exec "$FARWING_LAB_NS_B" iperf3 -s -D >/dev/null
# Warm-up: installs the peer and starts the shared ssh connection.
timeout 120 "$F" copy -F "$CFG" -q --sink "$W/src.bin" "$H:x" >/dev/null 2>&1
for r in $(seq 1 "$RUNS"); do
	copy sink "$r" --sink "$W/src.bin" "$H:x"
	ssh -F "$CFG" "$H" rm -f dst.bin # a file already there would be skipped, not copied
	copy disk "$r" "$W/src.bin" "$H:dst.bin"
	iperf "$r" 1
	iperf "$r" 4
done
