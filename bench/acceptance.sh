#!/usr/bin/env bash
# Issue 4 acceptance: farwing against kernel TCP, scp and HTTP through the built-in lab
# (400 Mbit/s of IP bytes, 140 ms RTT, drop-tail queue of one BDP, random loss each way).
# Run as root from the repository root; see docs/ACCEPTANCE.md for what each cell measures.
#
#   sudo bench/acceptance.sh [options]
#
# Prints a markdown table (min–median–max per cell) and leaves, in the results directory,
# results.jsonl (one JSON object per measurement), table.md, meta.json and raw/ (every tool's
# own output, lab counters, timestamped farwing progress).
set -euo pipefail

usage() {
	cat <<'EOF'
usage: sudo bench/acceptance.sh [options]
  -n, --runs N            runs per cell (3)
  -l, --loss "LIST"       random loss levels in % ("0 0.1 1 3")
  -t, --tests LIST        comma list of throughput,copy,fairness,halving (all)
  -o, --out DIR           results directory (/var/tmp/farwing-acceptance/results-DATE)
      --iperf-seconds S   iperf3 duration (20)
      --iperf-short S     iperf3 duration for the 0.1 % and 3 % cells (same as --iperf-seconds)
      --stall S           time limit of the scp and HTTP copies; beyond it "stalled" (120)
      --baseline-runs N   runs of the scp and HTTP copies per loss level (same as --runs)
      --fair-seconds S    duration of the competing CUBIC flow (40)
      --halve AT          the lab --at change of the halving test ("8s:rate=200M")
      --load-max X        wait before each cell until the 1-minute load is below X (1.5)
      --load-wait S       ... but at most S seconds per cell (30) and WAIT seconds in all
      --wait-budget WAIT  (300); the load is recorded with every result either way
      --data DIR          where the test files live (/var/tmp/farwing-acceptance)
EOF
}

# Settings (the inner runs inside each lab get them from the environment).
if [ "${1:-}" != --inner ]; then
	RUNS=3
	BASE_RUNS=""
	LOSSES="0 0.1 1 3"
	TESTS="throughput,copy,fairness,halving"
	IPERF_T=20
	IPERF_T_SHORT=""
	STALL_S=120
	FAIR_T=40
	HALVE_AT="8s:rate=200M"
	LOAD_MAX=1.5
	LOAD_WAIT_S=30
	WAIT_BUDGET_S=300
	DATA=/var/tmp/farwing-acceptance
	OUT=""
fi

# Path of the lab: fixed by the issue.
LAB_FLAGS=(--rate 400M --rtt 140ms --queue 1bdp)

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "acceptance: $*"; exit 1; }
load1() { cut -d' ' -f1 /proc/loadavg; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
has() { [[ ",$TESTS," == *",$1,"* ]]; }

# wait_load sets LOAD and WAITED: the 1-minute load average after waiting for it to drop below
# LOAD_MAX, at most LOAD_WAIT_S per cell and WAIT_BUDGET_S over the whole run (the total so far
# is kept in $OUT/waited, shared by the labs). The machine is shared: the load is recorded with
# every result.
wait_load() {
	local start=$SECONDS used
	used=$(cat "$OUT/waited" 2>/dev/null || echo 0)
	while awk -v l="$(load1)" -v m="$LOAD_MAX" 'BEGIN { exit !(l >= m) }'; do
		((SECONDS - start < LOAD_WAIT_S && used + SECONDS - start < WAIT_BUDGET_S)) || break
		sleep 3
	done
	LOAD=$(load1)
	WAITED=$((SECONDS - start))
	echo $((used + WAITED)) >"$OUT/waited"
	log "  load $LOAD (waited ${WAITED} s; $((used + WAITED)) s in all)"
}

# stamp prefixes every line with the unix time it arrived.
stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }

rec() { "$ACC" rec "$@" >>"$RESULTS"; }

# kill_wait ends a process this script started, by its pid.
kill_wait() {
	[ -n "${1:-}" ] || return 0
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------
# Inside a lab (namespace A). Environment from `farwing lab` and the ACC_* exports below.

# seed_peer puts this build where the first copy would install it: the lab's remote home is on
# this machine, and uploading 6 MB with scp through 1-3 % loss would take minutes. The warm-up
# copy then checks that farwing finds it (peer_uploaded false).
seed_peer() {
	local h dir
	h=$(sha256sum "$FW" | cut -c1-64)
	dir="$FARWING_LAB_HOME/.cache/farwing"
	mkdir -p "$dir"
	cp "$FW" "$dir/farwing-${h:0:16}"
	chmod 755 "$dir/farwing-${h:0:16}"
	chown -R "$FARWING_LAB_USER:" "$FARWING_LAB_HOME/.cache"
}

common() { echo "loss_pct=$LOSS" "run=$RUN" "load1=$LOAD" "load_wait_s=$WAITED"; }

warmup() {
	local rc=0 t0 t1
	t0=$EPOCHREALTIME
	timeout -k 5 120 "$FW" copy -F "$FARWING_LAB_SSH_CONFIG" -q --json "$DATA/warm.bin" "$FARWING_LAB_HOST:" \
		>"$D/warmup.json" 2>"$D/warmup.err" || rc=$?
	t1=$EPOCHREALTIME
	LOAD=$(load1) WAITED=0
	# shellcheck disable=SC2046
	rec test=warmup $(common) rc=$rc seconds="$(secs "$t0" "$t1")" farwing=@"$D/warmup.json"
	log "  warm-up copy: rc $rc, $(secs "$t0" "$t1") s, $(grep -o '"peer_uploaded": [a-z]*' "$D/warmup.json" || echo '?')"
	rm -f "$FARWING_LAB_HOME/warm.bin"
}

sink_1g() {
	log "throughput: farwing 1 GiB --sink, loss $LOSS %, run $RUN"
	wait_load
	local rc=0 t0 t1
	t0=$EPOCHREALTIME
	timeout -k 5 300 "$FW" copy -F "$FARWING_LAB_SSH_CONFIG" --sink --json "$DATA/f1g" "$FARWING_LAB_HOST:" \
		>"$D/sink.json" 2>"$D/sink.err" || rc=$?
	t1=$EPOCHREALTIME
	# shellcheck disable=SC2046
	rec test=throughput tool=farwing $(common) rc=$rc wall_s="$(secs "$t0" "$t1")" farwing=@"$D/sink.json"
	log "  rc $rc: $(grep -E '"(data_seconds|goodput_bps|wire_bytes)"' "$D/sink.json" | tr -d ' \n')"
}

# iperf_server LOG starts a one-shot iperf3 server in namespace B, logging to LOG, sets SPID to
# its pid and returns once it listens (at most 5 s).
iperf_server() {
	local i
	ip netns exec "$FARWING_LAB_NS_B" iperf3 -s -1 -B "$FARWING_LAB_ADDR_B" >"$1" 2>&1 &
	SPID=$!
	for i in $(seq 50); do
		ip netns exec "$FARWING_LAB_NS_B" ss -Hltn 'sport = :5201' | grep -q . && break
		sleep 0.1
	done
}

iperf() { # name, seconds, flags...
	local name=$1 t=$2 rc=0 spid
	shift 2
	log "throughput: iperf3 $name ($*), ${t} s, loss $LOSS %, run $RUN"
	wait_load
	iperf_server "$D/iperf-$name-server.txt"
	spid=$SPID
	timeout -k 5 $((t + 40)) iperf3 -c "$FARWING_LAB_ADDR_B" -t "$t" -J "$@" >"$D/iperf-$name.json" 2>"$D/iperf-$name.err" || rc=$?
	kill_wait "$spid"
	"$ACC" iperf "$D/iperf-$name.json" >"$D/iperf-$name.sum.json"
	# shellcheck disable=SC2046
	rec test=throughput tool="iperf3 $name" $(common) rc=$rc seconds="$t" flags="$*" iperf=@"$D/iperf-$name.sum.json"
	log "  rc $rc: $(cat "$D/iperf-$name.sum.json" | cut -c1-160)"
}

http_start() {
	mkdir -p "$D/http"
	if [ "$HTTP_SERVER" = nginx ]; then
		cat >"$D/http/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $D/http/nginx.pid;
error_log $D/http/error.log;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path $D/http/body;
    proxy_temp_path $D/http/proxy;
    fastcgi_temp_path $D/http/fastcgi;
    uwsgi_temp_path $D/http/uwsgi;
    scgi_temp_path $D/http/scgi;
    server {
        listen $FARWING_LAB_ADDR_B:8080;
        root $DATA/www;
    }
}
EOF
		ip netns exec "$FARWING_LAB_NS_B" nginx -p "$D/http" -c "$D/http/nginx.conf" -e "$D/http/error.log" \
			-g 'daemon off;' >"$D/http/out.txt" 2>&1 &
	else
		ip netns exec "$FARWING_LAB_NS_B" python3 -m http.server 8080 --bind "$FARWING_LAB_ADDR_B" \
			--directory "$DATA/www" >"$D/http/out.txt" 2>&1 &
	fi
	HTTP_PID=$!
	local i
	for i in $(seq 50); do
		ip netns exec "$FARWING_LAB_NS_B" ss -Hltn 'sport = :8080' | grep -q . && return 0
		sleep 0.1
	done
	log "  HTTP server ($HTTP_SERVER) did not start: $(tail -3 "$D/http/out.txt" "$D/http/error.log" 2>/dev/null)"
}

copy_farwing() {
	log "copy: farwing 256 MiB disk to disk, loss $LOSS %, run $RUN"
	wait_load
	local rc=0 t0 t1 intact=false dst="$FARWING_LAB_HOME/f256m"
	rm -f "$dst"
	t0=$EPOCHREALTIME
	timeout -k 5 120 "$FW" copy -F "$FARWING_LAB_SSH_CONFIG" --json "$DATA/f256m" "$FARWING_LAB_HOST:" \
		>"$D/copy.json" 2>"$D/copy.err" || rc=$?
	t1=$EPOCHREALTIME
	cmp -s "$DATA/f256m" "$dst" && intact=true
	# shellcheck disable=SC2046
	rec test=copy tool=farwing $(common) rc=$rc seconds="$(secs "$t0" "$t1")" intact=$intact farwing=@"$D/copy.json"
	log "  rc $rc, $(secs "$t0" "$t1") s, intact $intact"
	rm -f "$dst"
}

# baseline copies may stall at 1-3 % loss: after a stall at one loss level the later runs of
# that cell are skipped (recorded as such) to keep the whole run bounded.
copy_baseline() { # tool
	local tool=$1 rc=0 t0 t1 intact=false stalled=false done_bytes=0 dst extra=()
	local mark="$OUT/stalled-$tool-$LOSS"
	if [ "$RUN" -gt "$BASE_RUNS" ]; then
		return
	fi
	if [ -e "$mark" ]; then
		log "copy: $tool skipped, loss $LOSS %, run $RUN (stalled in run $(cat "$mark"))"
		# shellcheck disable=SC2046
		rec test=copy tool="$tool" loss_pct="$LOSS" run="$RUN" skipped="stalled in run $(cat "$mark")"
		return
	fi
	log "copy: $tool 256 MiB disk to disk, loss $LOSS %, run $RUN (limit $STALL_S s)"
	wait_load
	if [ "$tool" = scp ]; then
		dst="$FARWING_LAB_HOME/f256m"
		rm -f "$dst"
		t0=$EPOCHREALTIME
		timeout -k 5 "$STALL_S" scp -q -F "$FARWING_LAB_SSH_CONFIG" "$DATA/f256m" "$FARWING_LAB_HOST:" \
			>"$D/scp.out" 2>&1 || rc=$?
		t1=$EPOCHREALTIME
		[ "$rc" = 124 ] && stalled=true
		done_bytes=$(stat -c %s "$dst" 2>/dev/null || echo 0)
	else
		dst="$DATA/dl/f256m"
		mkdir -p "$DATA/dl"
		rm -f "$dst"
		t0=$EPOCHREALTIME
		timeout -k 5 $((STALL_S + 10)) curl -sS --max-time "$STALL_S" -o "$dst" \
			-w '%{size_download} %{http_code}\n' "http://$FARWING_LAB_ADDR_B:8080/f256m" >"$D/http.out" 2>&1 || rc=$?
		t1=$EPOCHREALTIME
		[ "$rc" = 28 ] || [ "$rc" = 124 ] && stalled=true
		done_bytes=$(stat -c %s "$dst" 2>/dev/null || echo 0)
		extra=(server="$HTTP_SERVER")
	fi
	cmp -s "$DATA/f256m" "$dst" && intact=true
	if [ "$stalled" = true ]; then
		echo "$RUN" >"$mark"
	fi
	# shellcheck disable=SC2046
	rec test=copy tool="$tool" "${extra[@]}" $(common) tcp_cc="$TCP_CC" rc=$rc seconds="$(secs "$t0" "$t1")" stalled=$stalled \
		limit_s="$STALL_S" bytes_done="$done_bytes" intact=$intact
	log "  rc $rc, $(secs "$t0" "$t1") s, stalled $stalled, $done_bytes bytes, intact $intact"
	rm -f "$dst"
}

inner_main() {
	local short=$IPERF_T
	case "$LOSS" in 0.1 | 3) short=${IPERF_T_SHORT:-$IPERF_T} ;; esac
	seed_peer
	warmup
	if has throughput; then
		sink_1g
		iperf cubic "$short" -C cubic
		iperf bbr "$short" -C bbr
		iperf 8xbbr "$short" -C bbr -P 8
	fi
	if has copy; then
		# scp and curl cannot choose their congestion control: they get the namespace's default,
		# which a new namespace takes from the host (net.ipv4.tcp_congestion_control). scp sends
		# from A, the HTTP server from B.
		TCP_CC="A:$(cat /proc/sys/net/ipv4/tcp_congestion_control),B:$(ip netns exec "$FARWING_LAB_NS_B" cat /proc/sys/net/ipv4/tcp_congestion_control)"
		http_start
		copy_farwing
		copy_baseline scp
		copy_baseline http
		kill_wait "${HTTP_PID:-}"
	fi
}

# Fairness: farwing runs first; once its data flows, one CUBIC flow joins for FAIR_T seconds;
# then farwing is interrupted. Both goodputs are taken over the iperf3 run.
inner_fair() {
	seed_peer
	log "fairness: farwing --sink + iperf3 -C cubic ${FAIR_T} s, run $RUN"
	wait_load
	local fifo="$D/progress.fifo" spid fwpid stpid irc=0 frc=0 t0 t1 i
	rm -f "$fifo"
	mkfifo "$fifo"
	stamp <"$fifo" >"$D/fw-progress.txt" &
	stpid=$!
	"$FW" copy -F "$FARWING_LAB_SSH_CONFIG" --sink --json -v "$DATA/big.sparse" "$FARWING_LAB_HOST:" \
		>"$D/fw.json" 2>"$fifo" &
	fwpid=$!
	for i in $(seq 100); do
		grep -qE '^[0-9.]+ +[0-9]+% [1-9]' "$D/fw-progress.txt" && break
		sleep 0.2
	done
	iperf_server "$D/iperf-server.txt"
	spid=$SPID
	t0=$EPOCHREALTIME
	timeout -k 5 $((FAIR_T + 40)) iperf3 -c "$FARWING_LAB_ADDR_B" -t "$FAIR_T" -J -C cubic >"$D/iperf.json" 2>"$D/iperf.err" || irc=$?
	t1=$EPOCHREALTIME
	kill_wait "$spid"
	kill -INT "$fwpid" 2>/dev/null || true
	wait "$fwpid" || frc=$?
	wait "$stpid" || true
	"$ACC" iperf "$D/iperf.json" >"$D/iperf.sum.json"
	"$ACC" progress "$D/fw-progress.txt" --from "$t0" --to "$t1" >"$D/progress.sum.json"
	# shellcheck disable=SC2046
	rec test=fairness $(common) rc=$irc farwing_rc=$frc iperf_start="$t0" iperf_end="$t1" \
		iperf=@"$D/iperf.sum.json" progress=@"$D/progress.sum.json"
	log "  iperf3 rc $irc $(cut -c1-80 "$D/iperf.sum.json"); farwing rc $frc (130 = interrupted as planned) $(cut -c1-120 "$D/progress.sum.json")"
}

# Halving: the lab's --at changes the rate 8 s after this command started; farwing's progress
# lines (one per 0.5 s with -v when stderr is not a terminal) are stamped as they arrive.
inner_halve() {
	seed_peer
	local rc=0
	timeout -k 5 300 "$FW" copy -F "$FARWING_LAB_SSH_CONFIG" --sink --json -v "$DATA/f1g" "$FARWING_LAB_HOST:" \
		2>&1 >"$D/fw.json" | stamp >"$D/fw-progress.txt" || rc=${PIPESTATUS[0]}
	echo "$rc" >"$D/rc"
}

if [ "${1:-}" = --inner ]; then
	set +e
	KIND=$2 LOSS=$3 RUN=$4 D=$5
	LOAD=$(load1) WAITED=0
	case "$KIND" in
	main) inner_main ;;
	fair) inner_fair ;;
	halve) inner_halve ;;
	esac
	exit 0
fi

# ---------------------------------------------------------------------------------------------
# Outside: build, prepare, run the labs, summarize.

while [ $# -gt 0 ]; do
	case "$1" in
	-n | --runs) RUNS=$2; shift ;;
	-l | --loss) LOSSES=$2; shift ;;
	-t | --tests) TESTS=$2; shift ;;
	-o | --out) OUT=$2; shift ;;
	--iperf-seconds) IPERF_T=$2; shift ;;
	--iperf-short) IPERF_T_SHORT=$2; shift ;;
	--stall) STALL_S=$2; shift ;;
	--baseline-runs) BASE_RUNS=$2; shift ;;
	--fair-seconds) FAIR_T=$2; shift ;;
	--halve) HALVE_AT=$2; shift ;;
	--load-max) LOAD_MAX=$2; shift ;;
	--load-wait) LOAD_WAIT_S=$2; shift ;;
	--wait-budget) WAIT_BUDGET_S=$2; shift ;;
	--data) DATA=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, TUN, a throwaway sshd user)"
cd "$(dirname "$0")/.."
[ -f go.mod ] || die "run from the farwing repository"
for t in go ip iperf3 ssh scp curl sha256sum cmp timeout awk; do
	command -v "$t" >/dev/null || die "$t not found (scripts/setup.sh installs the lab's tools)"
done
[ -x /usr/sbin/sshd ] || command -v sshd >/dev/null || die "sshd not found (scripts/setup.sh)"
START=$SECONDS
OUT=${OUT:-$DATA/results-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/bin" "$OUT/raw" "$DATA/www"
OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
SELF=$(pwd)/bench/acceptance.sh

log "building farwing and fwacc into $OUT/bin"
GIT_DESC=$(git describe --always --dirty 2>/dev/null || echo unknown) # of the tree built
CGO_ENABLED=0 go build -o "$OUT/bin/farwing" ./cmd/farwing
go build -o "$OUT/bin/fwacc" ./bench/acceptance
FW=$OUT/bin/farwing
ACC=$OUT/bin/fwacc

HTTP_SERVER=python3
if ! command -v nginx >/dev/null && [ -z "${ACC_NO_INSTALL:-}" ]; then
	log "nginx missing: trying apt-get install nginx-light (set ACC_NO_INSTALL=1 to skip)"
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends nginx-light \
		>"$OUT/apt.log" 2>&1 || log "  not installed; HTTP uses python3 -m http.server"
fi
command -v nginx >/dev/null && HTTP_SERVER=nginx
if [ "$HTTP_SERVER" = python3 ] && has copy; then
	command -v python3 >/dev/null || die "neither nginx nor python3 for the HTTP baseline"
fi
modprobe tcp_bbr 2>/dev/null || true
grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control ||
	log "warning: no tcp_bbr in this kernel; the BBR cells will fail"

mkfile() { # path, MiB
	if [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" != $(($2 << 20)) ]; then
		log "writing $1 ($2 MiB of random bytes)"
		head -c $(($2 << 20)) /dev/urandom >"$1.tmp" && mv "$1.tmp" "$1"
	fi
}
mkfile "$DATA/f1g" 1024
mkfile "$DATA/f256m" 256
mkfile "$DATA/warm.bin" 1
# The fairness run is interrupted after the CUBIC flow ends; a sparse file is enough to feed it.
[ "$(stat -c %s "$DATA/big.sparse" 2>/dev/null || echo 0)" = $((8 << 30)) ] || truncate -s 8G "$DATA/big.sparse"
ln -f "$DATA/f256m" "$DATA/www/f256m" 2>/dev/null || cp "$DATA/f256m" "$DATA/www/f256m"

BASE_RUNS=${BASE_RUNS:-$RUNS}
export FW ACC OUT RESULTS DATA TESTS IPERF_T IPERF_T_SHORT STALL_S FAIR_T LOAD_MAX LOAD_WAIT_S HTTP_SERVER BASE_RUNS WAIT_BUDGET_S

"$ACC" rec date="$(date -Is)" git="$GIT_DESC" \
	git_changed_files="$(git status --porcelain 2>/dev/null | wc -l)" farwing_sha256="$(sha256sum "$FW" | cut -c1-64)" \
	kernel="$(uname -r)" nproc="$(nproc)" go="$(go env GOVERSION)" lab="${LAB_FLAGS[*]}" runs="$RUNS" losses="$LOSSES" \
	tests="$TESTS" iperf_s="$IPERF_T" iperf_short_s="${IPERF_T_SHORT:-$IPERF_T}" stall_s="$STALL_S" fair_s="$FAIR_T" \
	baseline_runs="$BASE_RUNS" wait_budget_s="$WAIT_BUDGET_S" \
	halve="$HALVE_AT" load_max="$LOAD_MAX" load_wait_s="$LOAD_WAIT_S" http_server="$HTTP_SERVER" \
	tcp_cc_default="$(cat /proc/sys/net/ipv4/tcp_congestion_control)" >"$OUT/meta.json"
log "results in $OUT ($(cat "$OUT/meta.json" | cut -c1-200)...)"

lab() { # dir, timeout, lab flags... -- command...
	local d=$1 t=$2 rc=0
	shift 2
	mkdir -p "$d"
	timeout -k 10 "$t" "$FW" lab "${LAB_FLAGS[@]}" "$@" </dev/null 2>&1 | tee "$d/lab.txt" >&2 || rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || log "lab exited $rc (see $d/lab.txt)"
}

if has throughput || has copy; then
	for loss in $LOSSES; do
		for run in $(seq "$RUNS"); do
			d=$OUT/raw/loss$loss-run$run
			log "=== lab: loss $loss %, run $run"
			lab "$d" 2400 --loss "$loss%" --seed "$run" -- bash "$SELF" --inner main "$loss" "$run" "$d"
		done
	done
fi

if has fairness; then
	for run in $(seq "$RUNS"); do
		d=$OUT/raw/fair-run$run
		log "=== lab: fairness, run $run"
		lab "$d" $((FAIR_T + 300)) --loss 0 --seed "$run" -- bash "$SELF" --inner fair 0 "$run" "$d"
	done
fi

if has halving; then
	cap=$(sed -n 's/.*rate=\([0-9.]*\)[Mm].*/\1e6/p' <<<"$HALVE_AT")
	for run in $(seq "$RUNS"); do
		d=$OUT/raw/halve-run$run
		log "=== lab: capacity halved (--at $HALVE_AT), run $run"
		wait_load
		lab "$d" 600 --loss 0 --seed "$run" --at "$HALVE_AT" -- bash "$SELF" --inner halve 0 "$run" "$d"
		change=$("$ACC" labchange "$d/lab.txt" || echo 0)
		"$ACC" progress "$d/fw-progress.txt" --change "$change" --capacity "${cap:-200e6}" >"$d/progress.sum.json" || true
		rec test=halving loss_pct=0 run="$run" load1="$LOAD" load_wait_s="$WAITED" rc="$(cat "$d/rc" 2>/dev/null || echo -1)" \
			at="$HALVE_AT" capacity_bps="${cap:-200e6}" change_unix="$change" farwing=@"$d/fw.json" progress=@"$d/progress.sum.json"
		log "  rc $(cat "$d/rc" 2>/dev/null), $(cut -c1-200 "$d/progress.sum.json")"
	done
fi

"$ACC" table "$RESULTS" >"$OUT/table.md"
{
	echo
	echo "farwing $GIT_DESC (built at the start), $(uname -r), $(nproc) CPUs, HTTP server: $HTTP_SERVER;" \
		"iperf3 ${IPERF_T} s (0.1/3 %: ${IPERF_T_SHORT:-$IPERF_T} s), baseline limit ${STALL_S} s," \
		"baseline runs $BASE_RUNS, TCP default $(cat /proc/sys/net/ipv4/tcp_congestion_control); waited $(cat "$OUT/waited" 2>/dev/null || echo 0) s for load;" \
		"total $(((SECONDS - START) / 60)) min $(((SECONDS - START) % 60)) s."
} >>"$OUT/table.md"
cat "$OUT/table.md"
log "done in $((SECONDS - START)) s; results: $OUT"
