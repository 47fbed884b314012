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
#   BENCH_HPODD_ARGS [] more hpodd flags, split on spaces: `--api-cache-mb 0`
#     measures every request read from the store (hpodd serves a repeated read
#     from its response cache while the store is unchanged, as it is here)
#   BENCH_DRAIN_MAX [60] / BENCH_DRAIN_LAST [10]: bound (s) on the wait for hpodd
#     to go idle after a run / after the last run
#   BENCH_KEEP=1 keeps the temp dir (logs, wrk output, Lua scripts)
#   BENCH_NO_INSTALL=1 never runs apt-get (fails if wrk/nginx are missing)
#   HPODD_FAKE [build/tests/hpodd-fake]
#
# Network: everything listens on and connects to 127.0.0.1 only. The one
# exception is the apt-get install (in api_common.sh, shared with api_tls.sh),
# which runs only when wrk or nginx is missing (and never with BENCH_NO_INSTALL=1).
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

BENCH_NAME=api_latency
# shellcheck source=bench/api_common.sh
. "$here/api_common.sh"
api_tools
api_prereqs
api_raise_fd $((B_CONNS * 2 + 256))  # BENCH_LOAD_CONNECTIONS on both ends (wrk and server)
api_workdir
api_banner "(a) ${A_CONNS} conns x ${A_SECONDS}s per op, (b) ${B_CONNS} conns x ${B_SECONDS}s, wrk -t${THREADS} --timeout ${WRK_TIMEOUT}, hpodd --http-threads ${HPODD_THREADS}, nginx workers ${NGINX_WORKERS}"

# --- hpodd -------------------------------------------------------------------
api_init_data
# shellcheck disable=SC2086  # the flags are words
start_hpodd 127.0.0.1:0 ${BENCH_HPODD_ARGS:-}

converge=$("$PY" "$helper" converge "$endpoint" "$work/aws" "$hpodd_pid" "$NODES" \
  "$CONVERGE_TIMEOUT") || { echo "FAIL: cluster did not reach InService: $converge"; exit 1; }
read -r conv_s conv_slow conv_rss conv_hwm < <("$PY" -c '
import json, sys; d = json.loads(sys.argv[1])
print(d["seconds"], d["slowest_describe_s"], round(d["rss_kib"] / 1024), round(d["hwm_kib"] / 1024))' "$converge")
echo "$(ts) $((NODES + 1)) nodes InService after ${conv_s}s; hpodd RSS ${conv_rss} MiB (peak ${conv_hwm} MiB); slowest DescribeCluster while converging ${conv_slow}s"

# --- nginx (the peer) --------------------------------------------------------
write_nginx_conf "$("$PY" "$helper" freeport)"

# sign OP BODY: (re)signs the request now and captures hpodd's response body.
sign() {
  local op=$1 body=$2
  local expect="$work/results/$op.response"
  "$PY" "$helper" sign "$endpoint" "$work/aws" "$op" "$body" "$work/results" --expect "$expect"
  cp "$work/results/$op.response" "$ngx/www/SageMaker.$op"
}

# run_op ID SERVER OP CONNS SECONDS: one wrk run, figures to results/ID.SERVER.json
run_op() {
  local id=$1 server=$2 op=$3 conns=$4 secs=$5
  if [ "$server" = hpodd ]; then
    run_wrk "$id" hpodd "$endpoint/" "$hpodd_pid" "$work/results/$op.lua" "$op" "$conns" "$secs"
  else
    run_wrk "$id" nginx "http://127.0.0.1:$nginx_port/" "$nginx_pid" "$work/results/$op.lua" "$op" "$conns" "$secs"
  fi
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
  run_op "a-$op" nginx "$op" "$A_CONNS" "$A_SECONDS"
  run_op "a-$op" hpodd "$op" "$A_CONNS" "$A_SECONDS"
  drain "a-$op" "$DRAIN_MAX"
  printf 'a-%s\t(a) %s, %d connections, %ds\n' "$op" "$op" "$A_CONNS" "$A_SECONDS" >> "$work/results/runs"
done

echo "$(ts) (b) ${B_CONNS} connections, ${B_SECONDS}s, DescribeCluster"
sign DescribeCluster "${BODY[DescribeCluster]}"
run_op b-DescribeCluster nginx DescribeCluster "$B_CONNS" "$B_SECONDS"
run_op b-DescribeCluster hpodd DescribeCluster "$B_CONNS" "$B_SECONDS"
drain b-DescribeCluster "$DRAIN_LAST"
printf 'b-DescribeCluster\t(b) DescribeCluster, %d connections, %ds\n' "$B_CONNS" "$B_SECONDS" >> "$work/results/runs"

echo
echo "$(ts) == results (ratio = hpodd / nginx; latency from wrk --latency, excluding requests over ${WRK_TIMEOUT})"
"$PY" "$helper" report "$work/results"
echo "   converge $((NODES + 1)) nodes: ${conv_s}s; hpodd RSS after converge ${conv_rss} MiB, now $(rss_mib "$hpodd_pid") MiB (peak $(hwm_mib "$hpodd_pid") MiB); hpodd log $(du -k "$work/data/hpodd.log" | cut -f1) KiB, $(wc -l < "$work/data/hpodd.log") lines"
echo "   load avg at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Any error from hpodd fails the benchmark (the 1000-connection run in particular).
failed=0
check_errors hpodd || failed=1
if ! kill -0 "$hpodd_pid" 2>/dev/null; then echo "FAIL: hpodd exited during the benchmark"; failed=1; fi
if [ "$failed" = 0 ]; then echo "PASS: no hpodd errors"; fi
exit "$failed"
