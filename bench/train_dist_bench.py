#!/usr/bin/env python3
"""Distributed hpod-train on this machine: 2 ranks vs 1 process, same cores.

The llama2.c "15M" shape (and the ci model), synthetic data, the same global
batch, measured in the same run:

  1 process, --threads 2     both cores in one process (the peer)
  2 ranks,   --threads 1     one core each, data parallel with ZeRO-1 over
                             gloo on loopback (reduce-scatter + allgather of
                             the 28.6 MB of gradients and parameters per step)
  1 process, --threads 1     one core (what each rank computes with)

tokens/s are the summary's (warm-up steps excluded); "comm" is rank 0's time
in collectives per step. On 2 cores the ranks share the CPU with their own
communication, so the ratio shows what data parallelism costs here, not what
it gains across real nodes.

  bench/train_dist_bench.py [--quick]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TRAIN = os.path.join(TOP, "build", "cmd", "hpod-train", "hpod-train")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(model, steps, batch, accum, threads, world, tmp):
    summary = os.path.join(tmp, "s.json")
    base = [TRAIN, "--model", model, "--data", "synthetic", "--seq-len", "256",
            "--batch-size", str(batch), "--grad-accum", str(accum), "--max-steps", str(steps),
            "--threads", str(threads), "--progress", "none", "--summary-json", summary,
            "--timing-warmup-steps", "2"]
    if world == 1:
        subprocess.run(base, check=True, capture_output=True)
    else:
        port = free_port()
        procs = [subprocess.Popen(base + ["--rank", str(r), "--world-size", str(world),
                                          "--master-addr", "127.0.0.1",
                                          "--master-port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for r in range(world)]
        for p in procs:
            _, err = p.communicate(timeout=1800)
            if p.returncode != 0:
                raise RuntimeError(err)
    with open(summary) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(TRAIN):
        print("SKIP: %s not built" % TRAIN)
        return 77
    steps = 6 if a.quick else 14
    tmp = tempfile.mkdtemp(prefix="hpod-dist-bench-")
    print("cores: %d; load %s" % (os.cpu_count(), open("/proc/loadavg").read().split()[0]))
    print("| model | setting | global batch | tokens/s | step | comm per step | vs 1 process x2 "
          "threads |")
    print("|---|---|---|---|---|---|---|")
    for model, batch in (("15m", 8), ("ci", 16)):
        rows = []
        for label, threads, world, accum in (("1 process, 2 threads", 2, 1, 2),
                                             ("2 ranks, 1 thread each", 1, 2, 1),
                                             ("1 process, 1 thread", 1, 1, 2)):
            s = run(model, steps, batch, accum, threads, world, tmp)
            t = s["throughput"]
            rows.append((label, t["tokens_per_s"], t["mean_step_s"],
                         t["communication_s"] / max(1, t["steps"])))
        peer = rows[0][1]
        for label, tps, step, comm in rows:
            print("| %s | %s | %d x 256 | %.0f | %.3f s | %.1f ms (%.0f %%) | %.2fx |" % (
                model, label, batch * 2, tps, step, comm * 1e3, 100 * comm / step, tps / peer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
