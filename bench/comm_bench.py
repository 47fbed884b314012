#!/usr/bin/env python3
"""Collective bandwidth between two hpod nodes vs iperf3 on the same link.

hpodd (the real daemon, local provider) brings up a cluster of a controller
and two workers; every node is its own network namespace on the cluster's
bridge. Between the two workers, in the same run:

  peer    iperf3, one TCP stream A -> B (one-way), then two at once, A -> B and
          B -> A (two-way: what the link carries when both directions are busy,
          as they are in a ring collective);
  hpod    train_comm_bench, one rank per worker: the trainer's gradient path
          (ring reduce-scatter + allgather, RS+AG), each half alone, and gloo's
          own ring allreduce, for 1 KiB .. 64 MiB (median time per op). Bus
          bandwidth = the bytes each rank sends (and receives) per op / time:
          size x 2(N-1)/N for an allreduce, x (N-1)/N for RS or AG alone.

Prints a table and the ratios hpod busbw / iperf3 for both peers. Needs root
(nodes are namespaces); exit 77 (skipped) otherwise. --quick: fewer sizes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
os.environ.setdefault("HPOD_BIN_DIR", os.path.join(TOP, "build"))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
import nodestest  # noqa: E402

BENCH = os.path.join(os.environ["HPOD_BIN_DIR"], "src", "train", "comm", "train_comm_bench")


def log(msg):
    print(msg, flush=True)


def in_node(d, iid, script, timeout=120):
    return d.in_node(iid, script, timeout=timeout).stdout


def spawn_in_node(d, iid, script):
    pid = d.node_pid(iid)
    return subprocess.Popen(["nsenter", "-t", str(pid), "-n", "-u", "-m", "-p", "--",
                             "bash", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def iperf(d, a, b, b_ip, seconds, two_way):
    """GB/s (1e9 bytes) A -> B, and B -> A when two_way (concurrent streams)."""
    servers = [spawn_in_node(d, b, "exec iperf3 -s -1 -p 5201 >/dev/null 2>&1")]
    a_ip = None
    if two_way:
        a_ip = in_node(d, a, "hostname -I").split()[0]
        servers.append(spawn_in_node(d, a, "exec iperf3 -s -1 -p 5202 >/dev/null 2>&1"))
    time.sleep(0.5)
    clients = [spawn_in_node(d, a, "exec iperf3 -c %s -p 5201 -t %d -J" % (b_ip, seconds))]
    if two_way:
        clients.append(spawn_in_node(d, b, "exec iperf3 -c %s -p 5202 -t %d -J" % (a_ip, seconds)))
    out = []
    for c in clients:
        text, _ = c.communicate(timeout=seconds + 30)
        out.append(json.loads(text)["end"]["sum_received"]["bits_per_second"] / 8e9)
    for s in servers:
        s.wait(timeout=30)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        log("SKIP: nodes need root")
        return 77
    if not os.path.exists(BENCH):
        log("SKIP: %s not built" % BENCH)
        return 77
    d = nodestest.NodesDaemon("bcm")
    try:
        lcs = os.path.join(d.root, "lcs")
        nodestest.write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\ntrue\n")
        d.start()
        src = "file://" + lcs + "/"
        groups = [nodestest.lcs_group("controller-machine", 1, src,
                                      SlurmConfig={"NodeType": "Controller"}),
                  nodestest.lcs_group("worker-group-1", 2, src)]
        spec = os.path.join(d.root, "c.json")
        with open(spec, "w") as f:
            json.dump(groups, f)
        d.hpod("create-cluster", "--cluster-name", "comm", "--instance-groups", "file://" + spec)
        d.wait_status("comm", "InService", timeout=240)
        workers = [n["InstanceId"] for n in d.nodes("comm")
                   if n["InstanceGroupName"] == "worker-group-1"]
        a_id, b_id = workers
        a_ip = in_node(d, a_id, "hostname -I").split()[0]
        b_ip = in_node(d, b_id, "hostname -I").split()[0]
        log("two workers: %s (%s) and %s (%s), one bridge; %s" % (
            a_id, a_ip, b_id, b_ip, open("/proc/loadavg").read().split()[0] + " load"))
        secs = 2 if a.quick else 4
        one_way = iperf(d, a_id, b_id, b_ip, secs, False)[0]
        two_way = iperf(d, a_id, b_id, b_ip, secs, True)
        log("iperf3: one-way %.2f GB/s; two-way %.2f + %.2f GB/s" % (one_way, *two_way))
        max_mb = 16 if a.quick else 64
        r1 = spawn_in_node(d, b_id, "exec %s 1 2 %s 29500 %d" % (BENCH, a_ip, max_mb))
        r0 = spawn_in_node(d, a_id, "exec %s 0 2 %s 29500 %d" % (BENCH, a_ip, max_mb))
        out, err = r0.communicate(timeout=600)
        r1.communicate(timeout=60)
        if r0.returncode != 0:
            log("train_comm_bench failed: " + err)
            return 1
        rows = [json.loads(l) for l in out.splitlines()]
        two = sum(two_way) / 2
        log("")
        log("| size | RS+AG (the trainer's) | busbw | RS alone | AG alone | gloo allreduce | "
            "busbw | RS+AG busbw / iperf3 one-way | / two-way |")
        log("|---|---|---|---|---|---|---|---|---|")
        by_size = {}
        for r in rows:
            by_size.setdefault(r["bytes"], {})[r["op"]] = r
        for size in sorted(by_size):
            ops = by_size[size]
            ours, gl = ops["reduce-scatter+allgather"], ops["gloo allreduce"]
            label = "%d KiB" % (size >> 10) if size < (1 << 20) else "%d MiB" % (size >> 20)
            log("| %s | %.3f ms | %.2f GB/s | %.2f GB/s | %.2f GB/s | %.3f ms | %.2f GB/s | "
                "%.2f | %.2f |" % (
                    label, ours["seconds"] * 1e3, ours["busbw_gbps"],
                    ops["reduce-scatter"]["busbw_gbps"], ops["allgather"]["busbw_gbps"],
                    gl["seconds"] * 1e3, gl["busbw_gbps"], ours["busbw_gbps"] / one_way,
                    ours["busbw_gbps"] / two))
        best = max(r["busbw_gbps"] for r in rows if r["op"] == "reduce-scatter+allgather")
        log("")
        log("peak busbw %.2f GB/s: %.2fx iperf3 one-way (%.2f), %.2fx two-way per direction "
            "(%.2f); goal >= 0.80" % (best, best / one_way, one_way, best / two, two))
    finally:
        d.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
