#!/usr/bin/env bash
# API over TLS: hpodd's DescribeCluster on a small cluster served over plain HTTP
# and over TLS (`--tls`) by the same hpodd data dir, against nginx serving the very
# same response bytes over plain HTTP and over TLS with hpodd's own certificate
# and key; all driven by wrk with identical settings and request bytes in one run.
#
#   bench/api_tls.sh            full run (~3-4 min)
#   bench/api_tls.sh --quick    smoke run (~40 s): 2 s wrk runs, short idle waits
#
# Steps
#   1. `hpodd init` of a fresh temp data dir (server certificate for 127.0.0.1 and
#      localhost under <data-dir>/tls). hpodd-fake (scripted fake provider,
#      instant nodes, nodes kept in HPOD_FAKE_STATE_DIR so a restart finds them)
#      serves plain HTTP on a free 127.0.0.1 port; CreateCluster 'bench' with a
#      1-node controller group and BENCH_NODES (20) workers, polled until
#      InService. DescribeCluster is signed once with botocore's SigV4Auth and sent
#      once; its exact response body becomes the file nginx serves.
#   2. nginx (the peer) listens on two more loopback ports: plain HTTP, and `ssl`
#      with <data-dir>/tls/server.pem and server.key.
#   3. Plain phase: hpodd is stopped and started again (plain HTTP, same data dir
#      and port); the saved request, sent once, must get the same response bytes.
#      For keep-alive, then `Connection: close` on every request (wrk -H; a new
#      TCP connection, and over TLS a new handshake, per request): nginx, then
#      hpodd, BENCH_CONNECTIONS (64) connections for BENCH_SECONDS (20 s) each.
#   4. hpodd is stopped and started again on the same data dir and port with
#      --tls; the saved request is sent once over https (verified against
#      <data-dir>/tls/ca.pem) and must get the same response bytes.
#   5. TLS phase: the same two runs against nginx's ssl port, then hpodd.
#   6. The table: requests/s, p50/p99 latency, conns / (req/s), server CPU per
#      request, the CPU TLS adds, errors; ratios hpodd-TLS / hpodd-HTTP,
#      hpodd-TLS / nginx-TLS, nginx-TLS / nginx-HTTP and hpodd-HTTP / nginx-HTTP.
#      Any non-2xx response or socket error from hpodd prints FAIL and the script
#      exits 1.
# All runs replay the same signed request bytes (re-signed only when the signature
# would be older than 10 minutes; hpodd accepts one for 15). wrk does not verify
# certificates (it is a load generator; the helper's one-off requests do).
#
# Environment (defaults in brackets; --quick changes only the durations and waits):
#   BENCH_SECONDS [20]  BENCH_CONNECTIONS [64]  BENCH_THREADS [2] (wrk threads)
#   BENCH_TIMEOUT [30s] (wrk --timeout: slower requests count as socket errors)
#   BENCH_NODES [20] (worker instances)  BENCH_CONVERGE_TIMEOUT [120] (s)
#   BENCH_HPODD_THREADS [2] (hpodd --http-threads, its default)
#   BENCH_NGINX_WORKERS [2] (nginx worker_processes, matched to hpodd's threads)
#   BENCH_DRAIN_MAX [30]: bound (s) on the wait for hpodd to go idle after a run
#   BENCH_KEEP=1 keeps the temp dir (logs, wrk output, Lua scripts)
#   BENCH_NO_INSTALL=1 never runs apt-get (fails if wrk/nginx are missing)
#   HPODD_FAKE [build/tests/hpodd-fake]
#
# Network: everything listens on and connects to 127.0.0.1 only. The one
# exception is the apt-get install (in api_common.sh, shared with
# api_latency.sh), which runs only when wrk or nginx is missing (and never with
# BENCH_NO_INSTALL=1).
# Processes: hpodd, nginx (master + workers) and wrk are started here and are
# stopped by PID (api_common.sh's EXIT trap), whatever way the script ends.
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
  : "${BENCH_SECONDS:=2}" "${BENCH_DRAIN_MAX:=3}"
fi
SECS=${BENCH_SECONDS:-20}
CONNS=${BENCH_CONNECTIONS:-64}
THREADS=${BENCH_THREADS:-2}
WRK_TIMEOUT=${BENCH_TIMEOUT:-30s}
NODES=${BENCH_NODES:-20}
CONVERGE_TIMEOUT=${BENCH_CONVERGE_TIMEOUT:-120}
HPODD_THREADS=${BENCH_HPODD_THREADS:-2}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-2}
HPODD_FAKE=${HPODD_FAKE:-$top/build/tests/hpodd-fake}
DRAIN_MAX=${BENCH_DRAIN_MAX:-30}

BENCH_NAME=api_tls
# shellcheck source=bench/api_common.sh
. "$here/api_common.sh"
api_tools
api_prereqs
api_raise_fd $((CONNS * 2 + 256))
api_workdir
api_banner "${CONNS} conns x ${SECS}s per run, keep-alive and Connection: close, wrk -t${THREADS} --timeout ${WRK_TIMEOUT}, hpodd --http-threads ${HPODD_THREADS}, nginx workers ${NGINX_WORKERS}, $(openssl version 2>/dev/null | cut -d' ' -f1-2 || echo 'OpenSSL ?')"

# --- hpodd, plain HTTP -------------------------------------------------------
# One data dir for both hpodd runs: the same store, cluster, credentials and
# certificate, and (same port) the same signed request bytes; only one hpodd runs
# at a time, so no idle second daemon shares the CPUs.
api_init_data
ca="$work/data/tls/ca.pem"
FAKE_STATE_DIR="$work/fake"
hpodd_port=$("$PY" "$helper" freeport)
start_hpodd "127.0.0.1:$hpodd_port"
converge=$("$PY" "$helper" converge "$endpoint" "$work/aws" "$hpodd_pid" "$NODES" \
  "$CONVERGE_TIMEOUT") || { echo "FAIL: cluster did not reach InService: $converge"; exit 1; }
echo "$(ts) $((NODES + 1)) nodes InService after $("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["seconds"])' "$converge")s"

# --- nginx (the peer) --------------------------------------------------------
write_nginx_conf "$("$PY" "$helper" freeport)" "$("$PY" "$helper" freeport)"

op=DescribeCluster
lua="$work/results/$op.lua"
signed_at=
# sign_now: signs the request against the running hpodd and captures its body.
sign_now() {
  "$PY" "$helper" sign "$endpoint" "$work/aws" "$op" '{"ClusterName":"bench"}' \
    "$work/results" --expect "$work/results/$op.response" --cafile "$ca"
  signed_at=$SECONDS
}
echo "$(ts) capturing the response and signing the request"
sign_now
cp "$work/results/$op.response" "$ngx/www/SageMaker.$op"
start_nginx
echo "$(ts) nginx TLS: $("$PY" "$helper" tlsinfo "https://127.0.0.1:$nginx_tls_port" "$ca")"

: > "$work/results/runs"
for mode in keepalive close; do
  if [ "$mode" = keepalive ]; then title="keep-alive"; else title="Connection: close (a new connection per request)"; fi
  printf '%s\t%s, %d connections, %ds\t%d\n' "$mode" "$title" "$CONNS" "$SECS" "$CONNS" >> "$work/results/runs"
done

# run_pair MODE NGINX_SERVER NGINX_URL HPODD_SERVER: nginx, then hpodd, then the
# bounded wait until hpodd is idle.
run_pair() {
  local mode=$1 nserver=$2 nurl=$3 hserver=$4 extra=()
  [ "$mode" = close ] && extra=(-H "Connection: close")
  # The signature must stay valid (15 min) for the whole run.
  if [ $((SECONDS - signed_at + SECS)) -gt 600 ]; then sign_now; fi
  run_wrk "$mode" "$nserver" "$nurl" "$nginx_pid" "$lua" "$op $mode" "$CONNS" "$SECS" "${extra[@]}"
  run_wrk "$mode" "$hserver" "$endpoint/" "$hpodd_pid" "$lua" "$op $mode" "$CONNS" "$SECS" "${extra[@]}"
  drain "$mode.$hserver" "$DRAIN_MAX"
}

# restart_hpodd SCHEME [FLAG...]: hpodd stopped and started again on the same data
# dir and port; the saved request, sent once, must get the same response bytes.
# Both phases run on an hpodd started this way: a restarted hpodd reads its store
# differently from the process that created the cluster (3 fstat() of state.db per
# DescribeCluster, none before), so neither phase gets the other's condition.
restart_hpodd() {
  local scheme=$1
  shift
  stop_hpodd
  start_hpodd "127.0.0.1:$hpodd_port" "$@"
  if [ "$endpoint" != "$scheme://127.0.0.1:$hpodd_port" ]; then
    echo "FAIL: hpodd $* serves $endpoint, not $scheme://127.0.0.1:$hpodd_port"; exit 1
  fi
  "$PY" "$helper" replay "$endpoint" "$work/results/$op.request" \
    --expect "$work/results/$op.response" --cafile "$ca"
  echo "$(ts) hpodd idle $(wait_idle "$hpodd_pid" "$DRAIN_MAX")s after its start"
}

restart_hpodd http
echo "$(ts) plain HTTP: ${CONNS} connections, ${SECS}s each"
for mode in keepalive close; do
  run_pair "$mode" nginx "http://127.0.0.1:$nginx_port/" hpodd
done
echo "$(ts) load avg $(cut -d' ' -f1-3 /proc/loadavg)"

# --- hpodd, TLS --------------------------------------------------------------
restart_hpodd https --tls
echo "$(ts) hpodd TLS: $("$PY" "$helper" tlsinfo "$endpoint" "$ca")"

echo "$(ts) TLS: ${CONNS} connections, ${SECS}s each"
for mode in keepalive close; do
  run_pair "$mode" nginx-tls "https://127.0.0.1:$nginx_tls_port/" hpodd-tls
done
echo "$(ts) load avg $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "$(ts) == results ($op, $(wc -c < "$work/results/$op.response") B response; latency from wrk --latency: from writing the request to the response, so without connect and TLS handshake; conns / (req/s) is the whole cycle, handshake included)"
"$PY" "$helper" report-tls "$work/results"
echo "   load avg at end: $(cut -d' ' -f1-3 /proc/loadavg)"

failed=0
check_errors hpodd hpodd-tls || failed=1
if ! kill -0 "$hpodd_pid" 2>/dev/null; then echo "FAIL: hpodd exited during the benchmark"; failed=1; fi
if [ "$failed" = 0 ]; then echo "PASS: no hpodd errors"; fi
exit "$failed"
