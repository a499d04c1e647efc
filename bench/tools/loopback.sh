#!/usr/bin/env bash
# bench/tools/loopback.sh — Farwing against scp and iperf3 on loopback, with CPU cost.
#
# Starts its own sshd on 127.0.0.1 (throwaway keys, root login by key only, internal-sftp) and
# removes it afterwards, creates a random file, then runs, interleaved, RUNS times each:
#   scp                        disk to disk
#   farwing copy               disk to disk (fsync + rename at the receiver)
#   farwing copy --sink        memory to memory (the receiver verifies and discards)
# and one iperf3 single-stream TCP run of 10 s on 127.0.0.1. Every transfer runs with the ssh
# server in a cpuacct cgroup of its own, so the CPU seconds reported cover both ends (client
# tree + the server's sshd/farwing serve/sftp) in user and system time.
#
# Usage: sudo bench/tools/loopback.sh [SIZE_MIB (2048)] [RUNS (5)]
# Env:   FARWING=path (default bin/farwing, built with CGO_ENABLED=0 if missing)
#        FARWING_CPUPROFILE=prefix: CPU profiles of both ends (the server's sessions get it by SetEnv)
#        PORT (default: first free from 22220), WORK (a fresh directory under /var/tmp), KEEP=1 keeps WORK.
# Output: one line per run (TSV) and a summary table (min / median / max) on stdout.
set -euo pipefail

SIZE_MIB=${1:-2048}
RUNS=${2:-5}
PORT=${PORT:-}
if [[ -z $PORT ]]; then # the first free port from 22220 (others may run their own sshd on 2222)
	for PORT in $(seq 22220 22299); do
		ss -ltnH "sport = :$PORT" | grep -q . || break
	done
fi
cd "$(dirname "$0")/../.."
FARWING=${FARWING:-bin/farwing}
if [[ ! -x $FARWING ]]; then
	CGO_ENABLED=0 go build -o "$FARWING" ./cmd/farwing
fi
FARWING=$(realpath "$FARWING")
for t in /usr/sbin/sshd ssh scp ssh-keygen iperf3 awk timeout; do
	command -v "$t" >/dev/null || { echo "loopback.sh: $t is missing" >&2; exit 1; }
done
[[ $(id -u) == 0 ]] || { echo "loopback.sh: needs root (sshd, cgroups)" >&2; exit 1; }

WORK=${WORK:-$(mktemp -d /var/tmp/fwloop.XXXXXX)}
CG=/sys/fs/cgroup/cpuacct/fwloop.$$
SSHD_PID=
IPERF_PID=
cleanup() {
	[[ -n $SSHD_PID ]] && kill "$SSHD_PID" 2>/dev/null || true
	[[ -n $IPERF_PID ]] && kill "$IPERF_PID" 2>/dev/null || true
	if [[ -d $CG ]]; then
		# Move anything left back to the root group, then remove ours.
		while read -r p; do echo "$p" >/sys/fs/cgroup/cpuacct/cgroup.procs 2>/dev/null || true; done <"$CG/cgroup.procs"
		rmdir "$CG" 2>/dev/null || true
	fi
	[[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 130" INT TERM # so that cleanup runs when interrupted or timed out

mkdir -p "$WORK/keys" "$WORK/src" "$WORK/dst" /run/sshd
K=$WORK/keys
ssh-keygen -q -t ed25519 -N '' -f "$K/host" -C fwloop-host
ssh-keygen -q -t ed25519 -N '' -f "$K/client" -C fwloop-client
cp "$K/client.pub" "$K/authorized_keys"
cat >"$K/sshd_config" <<EOF
ListenAddress 127.0.0.1:$PORT
HostKey $K/host
PidFile $K/sshd.pid
AuthorizedKeysFile $K/authorized_keys
AllowUsers root
PermitRootLogin prohibit-password
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
StrictModes no
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
MaxStartups 100
MaxSessions 100
Subsystem sftp internal-sftp
EOF
if [[ -n ${FARWING_CPUPROFILE:-} ]]; then # the remote peer profiles where its own environment says so (docs/USAGE.md, environment)
	echo "SetEnv FARWING_CPUPROFILE=$FARWING_CPUPROFILE" >>"$K/sshd_config"
fi
cat >"$K/ssh_config" <<EOF
Host fwloop
  HostName 127.0.0.1
  Port $PORT
  User root
  IdentityFile $K/client
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
EOF

# The cgroup holds sshd (so every session's processes) and each measured client.
mkdir "$CG"
cgusage() { cat "$CG/cpuacct.usage"; }
(echo $BASHPID >"$CG/cgroup.procs" && exec /usr/sbin/sshd -D -e -f "$K/sshd_config" 2>"$WORK/sshd.log") &
SSHD_PID=$!
for _ in $(seq 50); do
	timeout 5 ssh -F "$K/ssh_config" fwloop true 2>/dev/null && break
	sleep 0.2
done
timeout 5 ssh -F "$K/ssh_config" fwloop true || { echo "loopback.sh: sshd did not come up:" >&2; cat "$WORK/sshd.log" >&2; exit 1; }

SRC=$WORK/src/big
echo "# creating $SIZE_MIB MiB of random data in $SRC" >&2
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$SRC"
BYTES=$(stat -c %s "$SRC")
sync

# measure NAME CMD...: runs CMD in the cgroup, prints NAME wall_s cpu_s data_s.
measure() {
	local name=$1
	shift
	local before after t0 t1 data
	before=$(cgusage)
	t0=$(date +%s.%N)
	data=$( (echo $BASHPID >"$CG/cgroup.procs" && exec timeout 300 "$@") )
	t1=$(date +%s.%N)
	sleep 0.3 # let the server side exit and be accounted
	after=$(cgusage)
	# farwing --json gives data_seconds (first datagram to verified end); others: the wall time.
	local ds
	printf '%s\n' "$data" >>"$WORK/$name.json"
	ds=$(printf '%s' "$data" | sed -n 's/.*"data_seconds": *\([0-9.e+-]*\).*/\1/p' | head -1)
	awk -v n="$name" -v t0="$t0" -v t1="$t1" -v a="$after" -v b="$before" -v ds="${ds:-0}" -v by="$BYTES" \
		'BEGIN{w=t1-t0; printf "%s\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\n", n, w, (a-b)/1e9, ds, by*8/w/1e9, (a-b)/1e9/(by/2^30)}'
}

echo "# $(nproc) CPUs, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), kernel $(uname -r), $("$FARWING" version 2>/dev/null | head -1 || true)" >&2
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf 'run\ttool\twall_s\tcpu_s\tdata_s\tGbit/s\tcpu_s/GiB\n'
RES=$WORK/results.tsv
: >"$RES"
for r in $(seq "$RUNS"); do
	rm -f "$WORK/dst/big"
	line=$(measure scp scp -q -F "$K/ssh_config" "$SRC" "fwloop:$WORK/dst/big")
	printf '%s\t%s\n' "$r" "$line" | tee -a "$RES"
	cmp -s "$SRC" "$WORK/dst/big" || { echo "scp: copy differs" >&2; exit 1; }
	rm -f "$WORK/dst/big"
	line=$(measure farwing "$FARWING" copy -q --json -F "$K/ssh_config" "$SRC" "fwloop:$WORK/dst/")
	printf '%s\t%s\n' "$r" "$line" | tee -a "$RES"
	cmp -s "$SRC" "$WORK/dst/big" || { echo "farwing: copy differs" >&2; exit 1; }
	rm -f "$WORK/dst/big"
	line=$(measure farwing-sink "$FARWING" copy -q --json --sink -F "$K/ssh_config" "$SRC" "fwloop:$WORK/dst/")
	printf '%s\t%s\n' "$r" "$line" | tee -a "$RES"
done

echo "# iperf3 -c 127.0.0.1 -t 10, one TCP stream" >&2
iperf3 -s -1 -p 5299 -B 127.0.0.1 >/dev/null 2>&1 &
IPERF_PID=$!
sleep 0.5
IPERF=$(timeout 30 iperf3 -c 127.0.0.1 -p 5299 -t 10 -J | awk -F'[:,]' '/"sum_received"/{f=1} f && /"bits_per_second"/{print $2/1e9; exit}')
wait "$IPERF_PID" 2>/dev/null || true
IPERF_PID=
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Summary: min / median / max per tool of Gbit/s (wall), goodput over data_seconds, cpu s/GiB.
echo
printf 'tool\tGbit/s wall (min/med/max)\tGbit/s data phase (min/med/max)\tCPU s/GiB both ends (min/med/max)\n'
for tool in scp farwing farwing-sink; do
	stats() { awk -F'\t' -v t="$tool" -v c="$1" '$2==t{print $c}' "$RES" | sort -g | awk '{a[NR]=$1} END{printf "%.2f / %.2f / %.2f", a[1], a[int((NR+1)/2)], a[NR]}'; }
	dataphase=$(awk -F'\t' -v t="$tool" -v by="$BYTES" '$2==t && $5>0{print by*8/$5/1e9}' "$RES" | sort -g | awk '{a[NR]=$1} END{if (NR) printf "%.2f / %.2f / %.2f", a[1], a[int((NR+1)/2)], a[NR]; else printf "-"}')
	printf '%s\t%s\t%s\t%s\n' "$tool" "$(stats 6)" "$dataphase" "$(stats 7)"
done
printf 'iperf3\t%.2f (one 10 s run, TCP, no disk, no ssh)\n' "$IPERF"
med() { awk -F'\t' -v t="$1" '$2==t{print $6}' "$RES" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
awk -v f="$(med farwing)" -v s="$(med scp)" -v k="$(med farwing-sink)" -v i="$IPERF" \
	'BEGIN{printf "ratios (medians, wall): farwing/scp %.2f  farwing-sink/iperf3 %.2f\n", f/s, k/i}'
