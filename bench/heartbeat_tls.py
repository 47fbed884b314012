#!/usr/bin/env python3
"""hpodd's CPU per 1,000 agent heartbeats with the agents on mutual TLS over the
node network (`hpodd --agent-transport tls`) vs the same nodes on the Unix socket
bound into each node (the default), measured in the same run and printed as a
ratio (never asserted).

For each transport in turn: a fresh hpodd as root (local provider), a cluster of
1 controller + N workers (no-op lifecycle script), 3 s past InService, then hpodd's
and the agents' CPU ticks over the window (heartbeat every 1 s), and delete.
Full run: 1+31 nodes, 60 s windows; --quick: 1+9, 20 s. Waits (up to 15 min) until
no other hpodd runs. Everything it starts is stopped by PID and everything it made
is removed, also on failure and Ctrl-C. Needs root; exit 77 (SKIP) otherwise.
"""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nodes_bench  # noqa: E402  (its helpers; importing runs nothing)
from nodes_bench import nodestest, log, loadavg, ratio  # noqa: E402

PREFIX = {"unix": "bhu", "tls": "bht"}


def one(transport, workers, seconds):
    d = nodestest.NodesDaemon(PREFIX[transport], extra_args=["--agent-transport", transport])
    try:
        lcs = os.path.join(d.root, "lcs")
        nodestest.write_script(os.path.join(lcs, "on_create.sh"), nodes_bench.NOOP)
        d.start()
        t0 = nodes_bench.create_cluster(d, "hb", workers, lcs)
        t1 = nodes_bench.wait_in_service(d, "hb", timeout=max(240, 8 * (workers + 1)))
        agents = [a for _, a in nodes_bench.node_processes(d, "hb")]
        time.sleep(3)  # past the convergence burst
        cpu, agents_cpu, wall = nodes_bench.measure_cpu(d, seconds, agents)
        beats = (workers + 1) * wall  # one per node per second
        r = {"transport": transport, "nodes": workers + 1, "inservice_s": t1 - t0,
             "hpodd_s": cpu, "agents_s": agents_cpu, "wall": wall,
             "hpodd_per_1k_ms": 1e6 * cpu / beats, "agents_per_1k_ms": 1e6 * agents_cpu / beats,
             "load": loadavg()}
        log("%s: %d nodes InService in %.1f s; hpodd %.2f s CPU in %.1f s (agents %.2f s); "
            "load %s" % (transport, workers + 1, t1 - t0, cpu, wall, agents_cpu, r["load"]))
        nodes_bench.delete_cluster(d, "hb", timeout=max(120, 2 * (workers + 1)))
        return r
    finally:
        d.cleanup()
        left = d.leftovers()
        if left:
            log("WARNING: hpodd (%s) left %s" % (transport, left))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1+9 nodes, 20 s windows")
    ap.add_argument("--wait-other", type=int, default=900,
                    help="seconds to wait for other hpodd to end (900)")
    args = ap.parse_args()
    nodestest.require_nodes()
    workers, seconds = (9, 20) if args.quick else (31, 60)
    quiet = nodes_bench.wait_no_other_hpodd(args.wait_other)

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        results = [one(t, workers, seconds) for t in ("unix", "tls")]
    except KeyboardInterrupt:
        log("interrupted; cleaned up")
        return 130

    print()
    print("== heartbeat_tls %s, %s, %d CPUs, load %s%s" % (
        "--quick" if args.quick else "(full)",
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(), loadavg(),
        "" if quiet else ", OTHER hpodd WERE RUNNING"))
    print("hpodd's CPU per 1,000 heartbeats (one per node per second, %d s window)" % seconds)
    print("| transport | nodes | hpodd CPU per 1,000 heartbeats | agents' CPU per 1,000 "
          "heartbeats | create -> InService |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print("| %s | %d | %.1f ms | %.1f ms | %.1f s |" % (
            r["transport"], r["nodes"], r["hpodd_per_1k_ms"], r["agents_per_1k_ms"],
            r["inservice_s"]))
    u, t = results
    print("TLS / Unix socket: hpodd CPU %s, agents' CPU %s, create -> InService %s" % (
        ratio(t["hpodd_per_1k_ms"], u["hpodd_per_1k_ms"]),
        ratio(t["agents_per_1k_ms"], u["agents_per_1k_ms"]),
        ratio(t["inservice_s"], u["inservice_s"])))
    print("(CPU time from /proc/<pid>/stat; hpodd's includes its own timers and the "
          "cluster's reconcile passes, the same on both sides)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
