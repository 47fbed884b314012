#!/usr/bin/env bash
# Runs every benchmark in bench/ in turn, then (only with --fuzz) the long
# libFuzzer run `scripts/fuzz.sh ${FUZZ_SECONDS:-600}`. Exits non-zero if any of
# them failed; each still runs when an earlier one failed.
#   bench/run.sh                 all benchmarks (full durations, ~30 min)
#   bench/run.sh --quick         all benchmarks, smoke durations (~10 min)
#   bench/run.sh --fuzz          ... and the long fuzz run afterwards
#   bench/run.sh nodes [--quick] only the named ones (api: api_latency.sh,
#                                tls: api_tls.sh, the API over TLS vs HTTP and
#                                vs nginx with TLS;
#                                nodes: nodes_bench.py, real nodes, needs root;
#                                heartbeats: heartbeat_tls.py, hpodd CPU per
#                                heartbeat, agents on TLS vs Unix socket, root;
#                                slurm: slurm_bench.py, real nodes + Slurm, root;
#                                train: train_bench.py, hpod-train vs PyTorch;
#                                signals: signal_soak.py, stops under a storm;
#                                comm: comm_bench.py, collectives vs iperf3, root;
#                                ckpt: ckpt_bench.py, checkpoint writes vs dd;
#                                dist: train_dist_bench.py, 2 ranks vs 1 process;
#                                recovery: recovery.py, node recovery vs Slurm
#                                noticing the fault alone, real nodes, root;
#                                resume: auto_resume.py, sbatch --auto-resume
#                                fault -> first resumed step and goodput, root;
#                                scale: nodesim_bench.py, 10,000 simulated nodes)
# Every benchmark stops the processes it starts by PID and is bounded in time;
# see bench/README.md for what each measures and its peer.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

fuzz=0
pass=()
only=()
for arg in "$@"; do
  case "$arg" in
    --fuzz) fuzz=1 ;;
    --quick) pass+=(--quick) ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    api) only+=(api_latency.sh) ;;
    tls) only+=(api_tls.sh) ;;
    nodes) only+=(nodes_bench.py) ;;
    heartbeats) only+=(heartbeat_tls.py) ;;
    slurm) only+=(slurm_bench.py) ;;
    train) only+=(train_bench.py) ;;
    signals) only+=(signal_soak.py) ;;
    comm) only+=(comm_bench.py) ;;
    ckpt) only+=(ckpt_bench.py) ;;
    dist) only+=(train_dist_bench.py) ;;
    recovery) only+=(recovery.py) ;;
    resume) only+=(auto_resume.py) ;;
    scale) only+=(nodesim_bench.py) ;;
    *) echo "run.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

# The benchmarks, in order. Add new ones here (each takes --quick; exit 77 = skipped,
# e.g. nodes_bench.py when not root, slurm_bench.py also without Slurm,
# train_bench.py without hpod-train or Debian's python3-torch).
benchmarks=(api_latency.sh api_tls.sh nodes_bench.py heartbeat_tls.py slurm_bench.py train_bench.py
            signal_soak.py comm_bench.py ckpt_bench.py train_dist_bench.py recovery.py auto_resume.py
            nodesim_bench.py)
if [ "${#only[@]}" -gt 0 ]; then benchmarks=("${only[@]}"); fi

status=0
summary=()
for b in "${benchmarks[@]}"; do
  echo "######## bench/$b ${pass[*]:-}"
  start=$SECONDS
  if "$top/bench/$b" "${pass[@]}"; then
    summary+=("PASS  $b ($((SECONDS - start))s)")
  else
    rc=$?
    if [ "$rc" = 77 ]; then
      summary+=("SKIP  $b ($((SECONDS - start))s)")
    else
      summary+=("FAIL  $b exit $rc ($((SECONDS - start))s)")
      status=1
    fi
  fi
  echo
done

if [ "$fuzz" = 1 ]; then
  echo "######## scripts/fuzz.sh ${FUZZ_SECONDS:-600}"
  start=$SECONDS
  if "$top/scripts/fuzz.sh" "${FUZZ_SECONDS:-600}"; then
    summary+=("PASS  fuzz.sh ${FUZZ_SECONDS:-600} ($((SECONDS - start))s)")
  else
    rc=$?
    summary+=("FAIL  fuzz.sh exit $rc ($((SECONDS - start))s)")
    status=1
  fi
  echo
fi

echo "######## summary"
printf '%s\n' "${summary[@]}"
exit "$status"
