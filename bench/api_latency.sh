#!/usr/bin/env bash
# API latency benchmark: hpodd's DescribeCluster and ListClusterNodes on a
# 10,000-node cluster, against nginx serving the very same response bytes as a
# static file, both driven by wrk with identical settings in the same run.
#
#   bench/api_latency.sh            full run (~4-5 min)
#   bench/api_latency.sh --quick    smoke run (~40 s): 2 s / 3 s wrk runs, short idle waits
#
# Steps
#   1. hpodd-fake (scripted fake provider, instant nodes) starts on a free
#      127.0.0.1 port with a fresh temp data dir; CreateCluster 'bench' with a
#      1-node controller group plus two worker groups of 5,000 (ml.c5.xlarge);
#      DescribeCluster is polled (live progress line) until InService. Reports
#      the time to converge and hpodd's RSS.
#   2. For each operation the request is signed once with botocore's SigV4Auth
#      and sent once; the exact response body is captured and becomes the file
#      nginx serves. wrk replays the exact signed request bytes (Lua script) to
#      both servers; hpodd does not reject replays and the signature is valid
#      for 15 minutes (each operation is signed again right before its runs).
#   3. (a) BENCH_CONNECTIONS (64) connections for BENCH_SECONDS (20 s) per
#      operation; (b) BENCH_LOAD_CONNECTIONS (1000) for BENCH_LOAD_SECONDS
#      (60 s) on DescribeCluster. Figures are printed as hpodd, nginx, ratio.
#      Any non-2xx response or socket error (incl. wrk timeouts, BENCH_TIMEOUT)
#      from hpodd prints FAIL and the script exits 1.
#
# Environment (defaults in brackets; --quick changes only the durations and waits):
#   BENCH_SECONDS [20]  BENCH_CONNECTIONS [64]  BENCH_LOAD_SECONDS [60]
#   BENCH_LOAD_CONNECTIONS [1000]  BENCH_THREADS [2] (wrk threads)
#   BENCH_TIMEOUT [30s] (wrk --timeout: slower requests count as socket errors)
#   BENCH_NODES [10000] (worker instances)  BENCH_CONVERGE_TIMEOUT [600] (s)
#   BENCH_HPODD_THREADS [2] (hpodd --http-threads, its default)
#   BENCH_NGINX_WORKERS [2] (nginx worker_processes, matched to hpodd's threads)
#   BENCH_DRAIN_MAX [60] / BENCH_DRAIN_LAST [10]: bound (s) on the wait for hpodd
#     to go idle after a run / after the last run
#   BENCH_KEEP=1 keeps the temp dir (logs, wrk output, Lua scripts)
#   BENCH_NO_INSTALL=1 never runs apt-get (fails if wrk/nginx are missing)
#   HPODD_FAKE [build/tests/hpodd-fake]
#
# Network: everything listens on and connects to 127.0.0.1 only. The one
# exception is the apt-get install below, which runs only when wrk or nginx is
# missing (and never with BENCH_NO_INSTALL=1).
# Processes: hpodd, nginx (master + workers) and wrk are started here and are
# stopped by PID from the EXIT trap, whatever way the script ends.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
here="$top/bench"
helper="$here/api_helper.py"
PY=${PYTHON:-python3}
PY=$("$PY" -c "import sys; print(sys.executable)")  # not the pyenv shim: it is slow

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  : "${BENCH_SECONDS:=2}" "${BENCH_LOAD_SECONDS:=3}" "${BENCH_DRAIN_MAX:=5}" "${BENCH_DRAIN_LAST:=0}"
fi
A_SECONDS=${BENCH_SECONDS:-20}
A_CONNS=${BENCH_CONNECTIONS:-64}
B_SECONDS=${BENCH_LOAD_SECONDS:-60}
B_CONNS=${BENCH_LOAD_CONNECTIONS:-1000}
THREADS=${BENCH_THREADS:-2}
WRK_TIMEOUT=${BENCH_TIMEOUT:-30s}
NODES=${BENCH_NODES:-10000}
CONVERGE_TIMEOUT=${BENCH_CONVERGE_TIMEOUT:-600}
HPODD_THREADS=${BENCH_HPODD_THREADS:-2}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-2}
HPODD_FAKE=${HPODD_FAKE:-$top/build/tests/hpodd-fake}
DRAIN_MAX=${BENCH_DRAIN_MAX:-60}    # bound on the idle wait between runs
DRAIN_LAST=${BENCH_DRAIN_LAST:-10}  # ... after the last run (only reported)

# --- tools -------------------------------------------------------------------
# wrk and nginx-light are bench-only Debian packages: nothing in hpod's build,
# tests or runtime needs them, so scripts/install-deps.sh does not install them.
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${BENCH_NO_INSTALL:-0}" = 1 ]; then
    echo "api_latency: missing ${missing[*]} and BENCH_NO_INSTALL=1" >&2; exit 1
  fi
  echo "api_latency: installing bench-only packages: ${missing[*]}"
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  # The Debian nginx package would start the system nginx on port 80 unless
  # policy-rc.d forbids it (containers usually do); stop only that one, by PID.
  had_pid=; [ -f /run/nginx.pid ] && had_pid=$(cat /run/nginx.pid)
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || { $sudo apt-get update -qq && $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
  if [ -z "$had_pid" ] && [ -f /run/nginx.pid ]; then
    $sudo kill -TERM "$(cat /run/nginx.pid)" 2>/dev/null || true
  fi
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$HPODD_FAKE" ] || { echo "api_latency: $HPODD_FAKE not built (run make)" >&2; exit 1; }
"$PY" -c 'import botocore.auth' 2>/dev/null || { echo "api_latency: $PY lacks botocore" >&2; exit 1; }

# Enough descriptors for BENCH_LOAD_CONNECTIONS on both ends (wrk and server).
need_fd=$((B_CONNS * 2 + 256))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need_fd" ]; then
  ulimit -n "$need_fd" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need_fd" ]; then
  echo "api_latency: ulimit -n is $(ulimit -n), need $need_fd for $B_CONNS connections" >&2; exit 1
fi

# --- processes and cleanup ---------------------------------------------------
work=$(mktemp -d /tmp/hpod-bench.XXXXXX)
hpodd_pid='' nginx_pid='' wrk_pid='' killed=''
# stop_pid PID: TERM, up to 15 s (hpodd's own shutdown grace is 10 s), then
# KILL; only our own children, by PID.
stop_pid() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    killed="$killed $pid"
  fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$wrk_pid"
  stop_pid "$nginx_pid"  # the master stops its workers on TERM
  local t0=$SECONDS
  stop_pid "$hpodd_pid"
  echo "$(ts) stopped wrk/nginx/hpodd (pids ${wrk_pid:--} ${nginx_pid:--} ${hpodd_pid:--}); hpodd took $((SECONDS - t0))s to exit after SIGTERM${killed:+; SIGKILL needed for:$killed}"
  if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "api_latency: kept $work"; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

clk_tck=$(getconf CLK_TCK)
cpu_ticks() {  # cpu_ticks PID: utime+stime of PID (all threads) and its direct children
  local total=0 p f
  for p in "$1" $(ps -o pid= --ppid "$1" 2>/dev/null); do
    [ -r "/proc/$p/stat" ] || continue
    read -r -a f < <(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
    [ ${#f[@]} -gt 12 ] && total=$((total + f[11] + f[12]))
  done
  echo "$total"
}
rss_mib() { awk '/^VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }
hwm_mib() { awk '/^VmHWM/ {printf "%.0f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }
# wait_idle PID MAX: waits until PID uses under 5% of a CPU over a second, at most
# MAX seconds; prints the seconds waited, with "+" if it was still busy.
wait_idle() {
  local pid=$1 max=$2 waited=0 t0 t1
  while [ "$waited" -lt "$max" ]; do
    t0=$(cpu_ticks "$pid"); sleep 1; t1=$(cpu_ticks "$pid")
    [ $(((t1 - t0) * 100)) -le $((clk_tck * 5)) ] && { echo "$waited"; return; }
    waited=$((waited + 1))
  done
  echo "${waited}+"
}
ts() { printf '[%3ds]' "$SECONDS"; }

echo "== api_latency: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)"
echo "   machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load avg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   wrk: $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2), $($NGINX -v 2>&1 | sed 's/.*: //'), hpodd: $HPODD_FAKE"
echo "   settings: (a) ${A_CONNS} conns x ${A_SECONDS}s per op, (b) ${B_CONNS} conns x ${B_SECONDS}s, wrk -t${THREADS} --timeout ${WRK_TIMEOUT}, hpodd --http-threads ${HPODD_THREADS}, nginx workers ${NGINX_WORKERS}"

# --- hpodd -------------------------------------------------------------------
# No HPOD_FAKE_STATE_DIR: the fake provider then keeps its nodes in memory. With
# it, the fake writes one file per node (10,001 files: not hpodd's cost, and
# deleting them took ~37 s on this machine's ext4).
mkdir -p "$work/results"
"$HPODD_FAKE" --data-dir "$work/data" init --aws-dir "$work/aws" --region us-west-2 \
  --listen 127.0.0.1:1 > "$work/init.out"
env -u HPOD_FAKE_STATE_DIR -u HPOD_FAKE_CAPACITY HPOD_FAKE_PENDING_MS=0 HPOD_FAKE_FAIL_GROUPS= \
  "$HPODD_FAKE" --data-dir "$work/data" --listen 127.0.0.1:0 --region us-west-2 \
  --http-threads "$HPODD_THREADS" > "$work/hpodd.stdout" 2> "$work/hpodd.stderr" &
hpodd_pid=$!
port=
for _ in $(seq 300); do
  port=$(sed -n 's|.*ready on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$work/hpodd.stdout")
  [ -n "$port" ] && break
  kill -0 "$hpodd_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "FAIL: hpodd-fake did not start"; tail -20 "$work/hpodd.stderr"; exit 1
fi
endpoint="http://127.0.0.1:$port"
echo "$(ts) hpodd-fake pid $hpodd_pid on $endpoint, RSS $(rss_mib "$hpodd_pid") MiB at start"

converge=$("$PY" "$helper" converge "$endpoint" "$work/aws" "$hpodd_pid" "$NODES" \
  "$CONVERGE_TIMEOUT") || { echo "FAIL: cluster did not reach InService: $converge"; exit 1; }
read -r conv_s conv_slow conv_rss conv_hwm < <("$PY" -c '
import json, sys; d = json.loads(sys.argv[1])
print(d["seconds"], d["slowest_describe_s"], round(d["rss_kib"] / 1024), round(d["hwm_kib"] / 1024))' "$converge")
echo "$(ts) $((NODES + 1)) nodes InService after ${conv_s}s; hpodd RSS ${conv_rss} MiB (peak ${conv_hwm} MiB); slowest DescribeCluster while converging ${conv_slow}s"

# --- nginx (the peer) --------------------------------------------------------
ngx="$work/nginx"
mkdir -p "$ngx/www" "$ngx/tmp"
nginx_port=$("$PY" "$helper" freeport)
cat > "$ngx/nginx.conf" <<EOF
# Peer for bench/api_latency.sh: a plain static server returning the captured
# hpodd response bytes. POST to a static file is 405 in nginx, so the 405 is
# turned into a 200 serving the file named by X-Amz-Target (an internal redirect).
worker_processes $NGINX_WORKERS;
worker_rlimit_nofile $need_fd;
pid $ngx/nginx.pid;
error_log $ngx/error.log warn;
daemon off;
events { worker_connections $need_fd; }
http {
  access_log off;
  server_tokens off;
  etag off;
  sendfile on;
  keepalive_requests 1000000000;  # hpodd has no per-connection request limit
  keepalive_timeout 300s;         # hpodd's idle timeout
  client_body_temp_path $ngx/tmp/body;
  proxy_temp_path $ngx/tmp/proxy;
  fastcgi_temp_path $ngx/tmp/fastcgi;
  uwsgi_temp_path $ngx/tmp/uwsgi;
  scgi_temp_path $ngx/tmp/scgi;
  types { }
  default_type application/x-amz-json-1.1;
  server {
    listen 127.0.0.1:$nginx_port backlog=4096;
    root $ngx/www;
    location = / {
      error_page 405 =200 /\$http_x_amz_target;
      return 405;
    }
  }
}
EOF

start_nginx() {
  chmod 755 "$work" "$ngx" "$ngx/www"  # workers may run as nobody/www-data
  chmod 644 "$ngx/www/"*
  "$NGINX" -e "$ngx/error.log" -p "$ngx" -c "$ngx/nginx.conf" > "$ngx/stdout" 2>&1 &
  nginx_pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$nginx_port") 2>/dev/null && break
    kill -0 "$nginx_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$nginx_pid" 2>/dev/null || { echo "FAIL: nginx did not start"; cat "$ngx/error.log"; exit 1; }
  echo "$(ts) nginx pid $nginx_pid on http://127.0.0.1:$nginx_port ($NGINX_WORKERS workers)"
}

# sign OP BODY: (re)signs the request now and captures hpodd's response body.
sign() {
  local op=$1 body=$2
  local expect="$work/results/$op.response"
  "$PY" "$helper" sign "$endpoint" "$work/aws" "$op" "$body" "$work/results" --expect "$expect"
  cp "$work/results/$op.response" "$ngx/www/SageMaker.$op"
}

# run_wrk ID SERVER OP CONNS SECONDS: one wrk run, figures to results/ID.SERVER.json
run_wrk() {
  local id=$1 server=$2 op=$3 conns=$4 secs=$5 url pid before after
  if [ "$server" = hpodd ]; then url="$endpoint/"; pid=$hpodd_pid; else url="http://127.0.0.1:$nginx_port/"; pid=$nginx_pid; fi
  before=$(cpu_ticks "$pid")
  WRK_RESULT="$work/results/$id.$server.json" timeout -k 5 $((secs + 60)) \
    wrk -t"$THREADS" -c"$conns" -d"${secs}s" --timeout "$WRK_TIMEOUT" --latency \
    -s "$work/results/$op.lua" "$url" > "$work/results/$id.$server.wrk" 2>&1 &
  wrk_pid=$!
  local rc=0
  wait "$wrk_pid" || rc=$?
  wrk_pid=
  after=$(cpu_ticks "$pid")
  "$PY" -c 'import sys; print((int(sys.argv[2]) - int(sys.argv[1])) / float(sys.argv[3]))' \
    "$before" "$after" "$clk_tck" > "$work/results/$id.$server.cpu"
  local line
  line=$(grep -E 'Requests/sec|Non-2xx|Socket errors' "$work/results/$id.$server.wrk" | tr -s ' ' | paste -sd';' -)
  printf '%s %-6s %-17s %4d conns %3ds: %s\n' "$(ts)" "$server" "$op" "$conns" "$secs" "${line:-wrk rc $rc}"
  if [ "$rc" != 0 ] || [ ! -s "$work/results/$id.$server.json" ]; then
    echo "FAIL: wrk against $server exited $rc"; cat "$work/results/$id.$server.wrk"; exit 1
  fi
}

# hpodd keeps handling requests whose client has gone (wrk closes its connections
# with requests still queued), so each hpodd run is followed by a bounded wait
# until hpodd is idle, and nginx runs first in each pair: no run shares the CPUs
# with that backlog. How long hpodd stayed busy is reported.
drain() {
  [ "$2" -gt 0 ] || return 0
  local w; w=$(wait_idle "$hpodd_pid" "$2")
  echo "$w" > "$work/results/$1.drain"
  echo "$(ts)        hpodd busy ${w}s after wrk stopped (requests from closed connections)"
}
: > "$work/results/runs"
declare -A BODY=(
  [DescribeCluster]='{"ClusterName":"bench"}'
  [ListClusterNodes]='{"ClusterName":"bench","MaxResults":100}'
)
echo "$(ts) capturing responses and signing requests"
for op in DescribeCluster ListClusterNodes; do sign "$op" "${BODY[$op]}"; done
start_nginx

echo "$(ts) (a) ${A_CONNS} connections, ${A_SECONDS}s each"
for op in DescribeCluster ListClusterNodes; do
  sign "$op" "${BODY[$op]}"
  run_wrk "a-$op" nginx "$op" "$A_CONNS" "$A_SECONDS"
  run_wrk "a-$op" hpodd "$op" "$A_CONNS" "$A_SECONDS"
  drain "a-$op" "$DRAIN_MAX"
  printf 'a-%s\t(a) %s, %d connections, %ds\n' "$op" "$op" "$A_CONNS" "$A_SECONDS" >> "$work/results/runs"
done

echo "$(ts) (b) ${B_CONNS} connections, ${B_SECONDS}s, DescribeCluster"
sign DescribeCluster "${BODY[DescribeCluster]}"
run_wrk b-DescribeCluster nginx DescribeCluster "$B_CONNS" "$B_SECONDS"
run_wrk b-DescribeCluster hpodd DescribeCluster "$B_CONNS" "$B_SECONDS"
drain b-DescribeCluster "$DRAIN_LAST"
printf 'b-DescribeCluster\t(b) DescribeCluster, %d connections, %ds\n' "$B_CONNS" "$B_SECONDS" >> "$work/results/runs"

echo
echo "$(ts) == results (ratio = hpodd / nginx; latency from wrk --latency, excluding requests over ${WRK_TIMEOUT})"
"$PY" "$helper" report "$work/results"
echo "   converge $((NODES + 1)) nodes: ${conv_s}s; hpodd RSS after converge ${conv_rss} MiB, now $(rss_mib "$hpodd_pid") MiB (peak $(hwm_mib "$hpodd_pid") MiB); hpodd log $(du -k "$work/data/hpodd.log" | cut -f1) KiB, $(wc -l < "$work/data/hpodd.log") lines"
echo "   load avg at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Any error from hpodd fails the benchmark (the 1000-connection run in particular).
failed=0
for f in "$work"/results/*.hpodd.json; do
  errs=$("$PY" -c 'import json,sys; r = json.load(open(sys.argv[1]))
print(r["status"] + r["connect"] + r["read"] + r["write"] + r["timeout"])' "$f")
  if [ "$errs" != 0 ]; then
    echo "FAIL: hpodd $(basename "$f" .hpodd.json): $errs non-2xx responses or socket errors"
    failed=1
  fi
done
if ! kill -0 "$hpodd_pid" 2>/dev/null; then echo "FAIL: hpodd exited during the benchmark"; failed=1; fi
if [ "$failed" = 0 ]; then echo "PASS: no hpodd errors"; fi
exit "$failed"
