# shellcheck shell=bash
# Shared plumbing of bench/api_latency.sh and bench/api_tls.sh (sourced, not run):
# the bench-only tools, process bookkeeping and the EXIT trap, CPU accounting from
# /proc, starting hpodd-fake, the nginx peer, and one wrk run.
#
# The sourcing script sets before it calls anything here:
#   BENCH_NAME   prefix of messages (api_latency, api_tls)
#   top, PY, helper, HPODD_FAKE, HPODD_THREADS, NGINX_WORKERS, THREADS, WRK_TIMEOUT
# and calls, in this order: api_tools, api_prereqs, api_raise_fd N, api_workdir.
#
# Network: everything listens on and connects to 127.0.0.1 only. The one
# exception is the apt-get install in api_tools, which runs only when wrk or nginx
# is missing (and never with BENCH_NO_INSTALL=1).
# Processes: hpodd, nginx (master + workers) and wrk are started here and are
# stopped by PID from the EXIT trap, whatever way the script ends.

# --- tools -------------------------------------------------------------------
# wrk and nginx-light are bench-only Debian packages: nothing in hpod's build,
# tests or runtime needs them, so scripts/install-deps.sh does not install them.
api_tools() {
  local missing=() had_pid='' sudo=''
  command -v wrk >/dev/null 2>&1 || missing+=(wrk)
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "${BENCH_NO_INSTALL:-0}" = 1 ]; then
      echo "$BENCH_NAME: missing ${missing[*]} and BENCH_NO_INSTALL=1" >&2; exit 1
    fi
    echo "$BENCH_NAME: installing bench-only packages: ${missing[*]}"
    [ "$(id -u)" = 0 ] || sudo=sudo
    # The Debian nginx package would start the system nginx on port 80 unless
    # policy-rc.d forbids it (containers usually do); stop only that one, by PID.
    [ -f /run/nginx.pid ] && had_pid=$(cat /run/nginx.pid)
    $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
      || { $sudo apt-get update -qq && $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
    if [ -z "$had_pid" ] && [ -f /run/nginx.pid ]; then
      $sudo kill -TERM "$(cat /run/nginx.pid)" 2>/dev/null || true
    fi
  fi
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
}

api_prereqs() {
  [ -x "$HPODD_FAKE" ] || { echo "$BENCH_NAME: $HPODD_FAKE not built (run make)" >&2; exit 1; }
  "$PY" -c 'import botocore.auth' 2>/dev/null || { echo "$BENCH_NAME: $PY lacks botocore" >&2; exit 1; }
}

# api_raise_fd N: enough descriptors for N (wrk and the server's ends); sets need_fd.
api_raise_fd() {
  need_fd=$1
  if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need_fd" ]; then
    ulimit -n "$need_fd" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
  fi
  if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need_fd" ]; then
    echo "$BENCH_NAME: ulimit -n is $(ulimit -n), need $need_fd" >&2; exit 1
  fi
}

# --- processes and cleanup ---------------------------------------------------
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
api_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$wrk_pid"
  stop_pid "$nginx_pid"  # the master stops its workers on TERM
  local t0=$SECONDS
  stop_pid "$hpodd_pid"
  echo "$(ts) stopped wrk/nginx/hpodd (pids ${wrk_pid:--} ${nginx_pid:--} ${hpodd_pid:--}); hpodd took $((SECONDS - t0))s to exit after SIGTERM${killed:+; SIGKILL needed for:$killed}"
  if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "$BENCH_NAME: kept $work"; else rm -rf "$work"; fi
  exit "$rc"
}
# api_workdir: the temp dir ($work, results in $work/results) and the traps.
api_workdir() {
  work=$(mktemp -d /tmp/hpod-bench.XXXXXX)
  mkdir -p "$work/results"
  trap api_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

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

api_banner() {  # api_banner SETTINGS: the header every run prints
  echo "== $BENCH_NAME: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)"
  echo "   machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load avg $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "   wrk: $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2), $($NGINX -v 2>&1 | sed 's/.*: //'), hpodd: $HPODD_FAKE"
  echo "   settings: $1"
}

# --- hpodd -------------------------------------------------------------------
# api_init_data: `hpodd init` of a fresh data dir ($work/data; credentials in
# $work/aws; TLS files in $work/data/tls, the server certificate for 127.0.0.1
# and localhost).
api_init_data() {
  "$HPODD_FAKE" --data-dir "$work/data" init --aws-dir "$work/aws" --region us-west-2 \
    --listen 127.0.0.1:1 > "$work/init.out"
}

# start_hpodd LISTEN [FLAG...]: hpodd-fake on $work/data (instant nodes); sets
# hpodd_pid and endpoint (http:// or https://, from its ready line).
# FAKE_STATE_DIR set: the fake provider keeps its nodes there (so a restarted
# hpodd finds them); unset: in memory (with 10,001 nodes the file per node is not
# hpodd's cost, and deleting them took ~37 s on this machine's ext4).
hpodd_starts=0
start_hpodd() {
  local listen=$1 state=(-u HPOD_FAKE_STATE_DIR) out
  shift
  [ -n "${FAKE_STATE_DIR:-}" ] && state=("HPOD_FAKE_STATE_DIR=$FAKE_STATE_DIR")
  hpodd_starts=$((hpodd_starts + 1))
  out="$work/hpodd.$hpodd_starts"
  env -u HPOD_FAKE_CAPACITY "${state[@]}" HPOD_FAKE_PENDING_MS=0 HPOD_FAKE_FAIL_GROUPS= \
    "$HPODD_FAKE" --data-dir "$work/data" --listen "$listen" --region us-west-2 \
    --http-threads "$HPODD_THREADS" "$@" > "$out.stdout" 2> "$out.stderr" &
  hpodd_pid=$!
  endpoint=
  for _ in $(seq 300); do
    endpoint=$(sed -n 's|.*ready on \(https\{0,1\}://127\.0\.0\.1:[0-9]*\).*|\1|p' "$out.stdout")
    [ -n "$endpoint" ] && break
    kill -0 "$hpodd_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$endpoint" ]; then
    echo "FAIL: hpodd-fake did not start"; tail -20 "$out.stderr"; exit 1
  fi
  echo "$(ts) hpodd-fake pid $hpodd_pid on $endpoint${*:+ ($*)}, RSS $(rss_mib "$hpodd_pid") MiB at start"
}

# stop_hpodd: SIGTERM by PID, as the EXIT trap does.
stop_hpodd() {
  local t0=$SECONDS
  stop_pid "$hpodd_pid"
  echo "$(ts) hpodd pid $hpodd_pid stopped ($((SECONDS - t0))s after SIGTERM)${killed:+; SIGKILL needed for:$killed}"
  hpodd_pid=
}

# hpodd keeps handling requests whose client has gone (wrk closes its connections
# with requests still queued), so each hpodd run is followed by a bounded wait
# until hpodd is idle, and nginx runs first in each pair: no run shares the CPUs
# with that backlog. How long hpodd stayed busy is reported.
drain() {  # drain ID MAX
  [ "$2" -gt 0 ] || return 0
  local w; w=$(wait_idle "$hpodd_pid" "$2")
  echo "$w" > "$work/results/$1.drain"
  echo "$(ts)        hpodd busy ${w}s after wrk stopped (requests from closed connections)"
}

# --- nginx (the peer) --------------------------------------------------------
# write_nginx_conf PORT [TLS_PORT]: a static server on 127.0.0.1:PORT (and, with
# TLS_PORT, the same with ssl, using hpodd's own server.pem/server.key) returning
# the files in $ngx/www. POST to a static file is 405 in nginx, so the 405 is
# turned into a 200 serving the file named by X-Amz-Target (an internal redirect).
ngx=
write_nginx_conf() {
  local plain=$1 tls=${2:-} server
  ngx="$work/nginx"
  nginx_port=$plain nginx_tls_port=$tls
  mkdir -p "$ngx/www" "$ngx/tmp"
  server="
    root $ngx/www;
    location = / {
      error_page 405 =200 /\$http_x_amz_target;
      return 405;
    }"
  cat > "$ngx/nginx.conf" <<EOF
# Peer for bench/$BENCH_NAME: a plain static server returning the captured
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
    listen 127.0.0.1:$plain backlog=4096;$server
  }
EOF
  if [ -n "$tls" ]; then
    # TLS as hpodd does it: its certificate and key, TLS 1.2 and 1.3 (hpodd's
    # minimum is 1.2; nginx 1.22's default list lacks 1.3, so it would talk 1.2 to
    # wrk while hpodd talks 1.3), OpenSSL's default ciphers and groups, session
    # tickets on (nginx's default, and OpenSSL's in hpodd).
    cat >> "$ngx/nginx.conf" <<EOF
  server {
    listen 127.0.0.1:$tls ssl backlog=4096;
    ssl_certificate $work/data/tls/server.pem;
    ssl_certificate_key $work/data/tls/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;$server
  }
EOF
  fi
  echo "}" >> "$ngx/nginx.conf"
}

start_nginx() {
  chmod 755 "$work" "$ngx" "$ngx/www"  # workers may run as nobody/www-data
  chmod 644 "$ngx/www/"*
  "$NGINX" -e "$ngx/error.log" -p "$ngx" -c "$ngx/nginx.conf" > "$ngx/stdout" 2>&1 &
  nginx_pid=$!
  local p
  for p in $nginx_port $nginx_tls_port; do
    for _ in $(seq 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break
      kill -0 "$nginx_pid" 2>/dev/null || break
      sleep 0.1
    done
  done
  kill -0 "$nginx_pid" 2>/dev/null || { echo "FAIL: nginx did not start"; cat "$ngx/error.log"; exit 1; }
  echo "$(ts) nginx pid $nginx_pid on http://127.0.0.1:$nginx_port${nginx_tls_port:+ and https://127.0.0.1:$nginx_tls_port} ($NGINX_WORKERS workers)"
}

# --- wrk ---------------------------------------------------------------------
# run_wrk ID SERVER URL PID LUA LABEL CONNS SECONDS [WRK_ARG...]: one wrk run
# replaying LUA's request; figures to results/ID.SERVER.json (wrk's done()) and
# results/ID.SERVER.cpu (PID's CPU seconds, with its children, over the run).
run_wrk() {
  local id=$1 server=$2 url=$3 pid=$4 lua=$5 label=$6 conns=$7 secs=$8 before after
  shift 8
  before=$(cpu_ticks "$pid")
  WRK_RESULT="$work/results/$id.$server.json" timeout -k 5 $((secs + 60)) \
    wrk -t"$THREADS" -c"$conns" -d"${secs}s" --timeout "$WRK_TIMEOUT" --latency "$@" \
    -s "$lua" "$url" > "$work/results/$id.$server.wrk" 2>&1 &
  wrk_pid=$!
  local rc=0
  wait "$wrk_pid" || rc=$?
  wrk_pid=
  after=$(cpu_ticks "$pid")
  "$PY" -c 'import sys; print((int(sys.argv[2]) - int(sys.argv[1])) / float(sys.argv[3]))' \
    "$before" "$after" "$clk_tck" > "$work/results/$id.$server.cpu"
  local line
  line=$(grep -E 'Requests/sec|Non-2xx|Socket errors' "$work/results/$id.$server.wrk" | tr -s ' ' | paste -sd';' -)
  printf '%s %-9s %-25s %4d conns %3ds: %s\n' "$(ts)" "$server" "$label" "$conns" "$secs" "${line:-wrk rc $rc}"
  if [ "$rc" != 0 ] || [ ! -s "$work/results/$id.$server.json" ]; then
    echo "FAIL: wrk against $server exited $rc"; cat "$work/results/$id.$server.wrk"; exit 1
  fi
}

# check_errors SERVER...: FAIL (returns 1) for any non-2xx response or socket
# error (wrk timeouts included) in the runs of these servers.
check_errors() {
  local failed=0 f s errs
  for s in "$@"; do
    for f in "$work"/results/*."$s".json; do
      [ -e "$f" ] || continue
      errs=$("$PY" -c 'import json,sys; r = json.load(open(sys.argv[1]))
print(r["status"] + r["connect"] + r["read"] + r["write"] + r["timeout"])' "$f")
      if [ "$errs" != 0 ]; then
        echo "FAIL: $s $(basename "$f" ".$s.json"): $errs non-2xx responses or socket errors"
        failed=1
      fi
    done
  done
  return "$failed"
}
