#!/usr/bin/env python3
"""hpodd at scale with simulated nodes (issue 30): hpod-nodesim runs every node's
agent on the real channel protocol (tests/support/nodesim/) against hpodd-fake,
whose fake provider launches instantly and hands each node's agent config to the
simulator. Figures, never assertions; ratios where a peer exists:

 1. detection of silent nodes (3 hang at once) in a 4-node cluster: the peer;
 2. create -> InService of 1 controller + N-1 workers (Slurm roles; the simulated
    controller reports the simulated slurmds), with a live progress line;
 3. steady state: hpodd's CPU (% of one core) and RSS over a window, per 1,000
    nodes, and the simulator's CPU beside it;
 4. GET /metrics: time of a scrape by curl (min / median of 5, and to the first byte);
 5. detection of 3 silent nodes among N, as a ratio to (1);
 6. 100 nodes killed at once: all recovered, none twice; the recovery rate;
 7. delete -> gone.
With --clusters K, K clusters of N nodes each instead (steps 2, 3, 4, 7).
With --tls, the nodes are network agents: each joins with its launch's join token
(the real agent's join) and holds its channel over mutual TLS.

  bench/nodesim_bench.py --nodes 10000          # about 10 minutes here
  bench/nodesim_bench.py --nodes 100 --clusters 100
  bench/nodesim_bench.py --quick                # 500 nodes, short windows
  bench/nodesim_bench.py --nodes 10000 --tls    # network agents
Talks to 127.0.0.1 only; stops what it starts by PID, also on failure.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
os.environ.setdefault("HPOD_BIN_DIR", os.path.join(TOP, "build"))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
import hpodtest  # noqa: E402
from test_nodesim import Simulator, free_port, list_nodes, list_recoveries  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
MAX_PER_GROUP = 5000  # CreateCluster allows at most 6,758 per group


def log(msg):
    """A step's line, with the UTC time it ended: a recovery no fault asked for
    is placed in the run by its own time (below)."""
    print("%s %s" % (time.strftime("%H:%M:%S", time.gmtime()), msg), flush=True)


def epoch_of(t):
    """Epoch seconds of an API time: epoch seconds or ISO 8601 text."""
    if isinstance(t, (int, float)):
        return float(t)
    from datetime import datetime
    return datetime.fromisoformat(str(t).replace("Z", "+00:00")).timestamp()


def clock_of(t):
    """HH:MM:SS (UTC) of an API time: epoch seconds or ISO 8601 text."""
    if isinstance(t, (int, float)):
        return time.strftime("%H:%M:%S", time.gmtime(t))
    return str(t)[11:19]


def stat_cpu_seconds(text):
    """User + system CPU seconds of a /proc/.../stat line."""
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        return stat_cpu_seconds(f.read())


def thread_cpu_seconds(pid):
    """{thread name: CPU seconds} of `pid`'s threads, summed by name."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                text = f.read()
        except OSError:
            continue  # the thread ended
        name = text[text.index("(") + 1:text.rindex(")")]
        out[name] = out.get(name, 0) + stat_cpu_seconds(text)
    return out


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def groups_for(n):
    gs = [hpodtest.group("controller-machine", 1, SlurmConfig={"NodeType": "Controller"})]
    left, k = n - 1, 0
    while left > 0:
        take = min(left, MAX_PER_GROUP)
        gs.append(hpodtest.group("workers-%d" % k, take, SlurmConfig={"NodeType": "Compute"}))
        left -= take
        k += 1
    return gs


class Bench:
    def __init__(self, args):
        self.args = args
        self.d = hpodtest.Daemon(pending_ms=0)
        self.agent_dir = os.path.join(self.d.root, "agents")
        self.d.env_extra["HPOD_FAKE_AGENT_DIR"] = self.agent_dir
        if args.tls:
            self.d.env_extra["HPOD_FAKE_AGENT_URL"] = "https://127.0.0.1:%d" % free_port()
        if args.register_timeout:
            self.d.extra_args += ["--agent-register-timeout", str(args.register_timeout)]
        self.d.start()
        self.sim = Simulator(self.agent_dir, ["--join-threads", str(args.join_threads)])
        self.client = self.d.boto3()
        token_file = os.path.join(self.d.data_dir, "metrics-token")
        self.metrics_token = open(token_file).read().strip() if os.path.exists(token_file) else ""

    def close(self):
        self.sim.stop()
        self.d.stop()
        if self.args.keep_log:
            self.d.log.flush()
            shutil.copyfile(self.d.log.name, self.args.keep_log)
        self.d.cleanup()

    def nodes(self, name):
        return list_nodes(self.client, name)

    def recoveries(self, name):
        return list_recoveries(self.d, name)

    def create(self, names, n):
        t0 = time.time()
        for name in names:
            self.client.create_cluster(ClusterName=name, InstanceGroups=groups_for(n))
        pending = set(names)
        last = 0
        while pending:
            for name in list(pending):
                desc = self.client.describe_cluster(ClusterName=name)
                if desc["ClusterStatus"] == "InService":
                    pending.discard(name)
                elif desc["ClusterStatus"] not in ("Creating", "Updating"):
                    raise RuntimeError("%s is %s: %s (simulator: %s)" % (
                        name, desc["ClusterStatus"], desc.get("FailureMessage", ""),
                        json.dumps(self.sim.stats())))
                if len(pending) == len(names) == 1 and time.time() - last >= 5:
                    last = time.time()
                    current = sum(g.get("CurrentCount", 0) for g in desc["InstanceGroups"])
                    st = self.sim.stats()
                    log("  %6.1f s  %d/%d nodes running, %d agents connected%s" %
                        (time.time() - t0, current, n, st["connected"],
                         ", %d joined" % st["joins"] if self.args.tls else ""))
                if time.time() - t0 > self.args.timeout:
                    raise RuntimeError("not InService after %d s" % self.args.timeout)
            if len(names) > 1 and time.time() - last >= 5:
                last = time.time()
                log("  %6.1f s  %d/%d clusters InService" %
                    (time.time() - t0, len(names) - len(pending), len(names)))
            time.sleep(0.5)
        return time.time() - t0

    def steady(self, window):
        pid, spid = self.d.proc.pid, self.sim.proc.pid
        c0, s0, t0 = cpu_seconds(pid), cpu_seconds(spid), time.time()
        time.sleep(window)
        dt = time.time() - t0
        return ((cpu_seconds(pid) - c0) / dt * 100, rss_mib(pid),
                (cpu_seconds(spid) - s0) / dt * 100)

    def scrape(self):
        """Five scrapes by curl, as a Prometheus server reads one (a Python reader
        of 17 MB adds its own tens of ms): each scrape's time to the first byte
        (hpodd collecting and rendering) and to the last. Returns (min total,
        median total, median first byte, bytes)."""
        totals, firsts = [], []
        size = 0
        for _ in range(5):
            p = subprocess.run(
                ["curl", "-sS", "-o", "/dev/null", "--max-time", "60",
                 "-H", "Authorization: Bearer " + self.metrics_token,
                 "-w", "%{http_code} %{time_starttransfer} %{time_total} %{size_download}",
                 self.d.endpoint + "/metrics"], capture_output=True, text=True, check=True)
            code, first, total, size = p.stdout.split()
            if code != "200":
                raise RuntimeError("GET /metrics answered %s" % code)
            firsts.append(float(first) * 1000)
            totals.append(float(total) * 1000)
        return min(totals), statistics.median(totals), statistics.median(firsts), int(size)

    def fail_and_wait(self, name, verb, ids, timeout=600):
        """Applies `verb` to `ids` at once; waits until each has one Succeeded
        recovery. Returns (detection seconds each, seconds until the last finished,
        every recovery of the cluster)."""
        before = {r["RecoveryId"] for r in self.recoveries(name)}
        t0 = time.time()
        reply = self.sim.command("%s %s" % (verb, ",".join(ids)))
        assert reply["ok"], reply
        want = set(ids)
        while True:
            rs = [r for r in self.recoveries(name) if r["RecoveryId"] not in before]
            done = [r for r in rs if r["Status"] == "Succeeded" and r["NodeId"] in want]
            if len({r["NodeId"] for r in done}) == len(want):
                break
            if time.time() - t0 > timeout:
                raise RuntimeError("%d of %d recovered after %d s" % (len(done), len(want), timeout))
            time.sleep(1)
        detect = sorted(epoch_of(r["Timeline"][0]["Time"]) - t0 for r in done)
        last = max(epoch_of(r["FinishedTime"]) for r in done) - t0
        time.sleep(8)  # a duplicate would show by now
        rs = [r for r in self.recoveries(name) if r["RecoveryId"] not in before]
        return detect, last, rs

    def delete(self, names):
        t0 = time.time()
        for name in names:
            self.client.delete_cluster(ClusterName=name)
        for name in names:
            hpodtest.wait_cluster(self.client, name, None, timeout=self.args.timeout)
        return time.time() - t0


def workers_of(nodes, k):
    return sorted(n["InstanceId"] for n in nodes if n["InstanceGroupName"] != "controller-machine")[:k]


def run(args):
    b = Bench(args)
    try:
        n = args.nodes
        if args.clusters == 1:
            log("peer: 4-node cluster, 3 nodes silenced at once")
            b.create(["peer"], 4)
            d4, _, _ = b.fail_and_wait("peer", "silence", workers_of(b.nodes("peer"), 3))
            b.delete(["peer"])
            log("  detected after %s s" % ", ".join("%.1f" % x for x in d4))
        names = ["sim"] if args.clusters == 1 else ["sim%03d" % i for i in range(args.clusters)]
        total = n * len(names)
        log("create: %d cluster(s) of %d nodes (%d)" % (len(names), n, total))
        # Whose CPU the creation took: with network agents, a join's key, CSR and
        # handshakes are the simulator's (each real node does its own), the
        # certificate and the handshakes' other ends hpodd's.
        pids = (b.d.proc.pid, b.sim.proc.pid)
        cpu0 = [cpu_seconds(p) for p in pids]
        threads0 = thread_cpu_seconds(pids[1])
        created = b.create(names, n)
        cpu = [cpu_seconds(p) - c for p, c in zip(pids, cpu0)]
        threads = thread_cpu_seconds(pids[1])
        log("  InService after %.1f s (%.2f ms per node)" % (created, created * 1000 / total))
        log("  CPU during the create: hpodd %.1f s (%.2f ms per node, %.0f%% of one core), "
            "simulator %.1f s (%.2f ms per node)" %
            (cpu[0], cpu[0] * 1000 / total, cpu[0] * 100 / created, cpu[1], cpu[1] * 1000 / total))
        # The simulator's one I/O thread near 100% would make its heartbeats late.
        log("  the simulator's threads during the create (%% of one core): %s" % ", ".join(
            "%s %.0f%%" % (name, (sec - threads0.get(name, 0)) * 100 / created)
            for name, sec in sorted(threads.items(), key=lambda kv: -kv[1])))
        stats = b.sim.stats()
        log("  simulator: received %s" % json.dumps({k: (v, stats["received_bytes_by_type"][k]) for k, v in stats["received_by_type"].items()}))
        log("  simulator: %d agents, %d connected, connect failures %s; its longest gap "
            "between one agent's heartbeats %d ms, %d gaps over 5 s" %
            (stats["agents"], stats["connected"], stats["failure_reasons"] or "none",
             stats["max_heartbeat_gap_ms"], stats["heartbeat_gaps_over_5s"]))
        if args.tls:
            log("  joins: %d, refused %d, slowest %d ms; tried again %d times: %s" %
                (stats["joins"], stats["join_failures"], stats["max_join_ms"],
                 stats["join_retries"], stats["join_retry_reasons"] or "-"))
        time.sleep(args.settle)
        cpu, rss, sim_cpu = b.steady(args.window)
        log("steady state over %d s: hpodd CPU %.1f%% of one core (%.2f%% per 1,000 nodes), "
            "RSS %.0f MiB (%.1f MiB per 1,000 nodes); simulator CPU %.1f%%" %
            (args.window, cpu, cpu * 1000 / total, rss, rss * 1000 / total, sim_cpu))
        smin, smed, sfirst, size = b.scrape()
        log("GET /metrics (curl): min %.1f ms, median %.1f ms, first byte after %.1f ms "
            "(median; %d bytes)" % (smin, smed, sfirst, size))
        if args.perf_metrics:
            profile_scrapes(b, args.perf_keep)
        if args.clusters == 1:
            nodes = b.nodes("sim")
            ws = workers_of(nodes, 3 + args.fail)
            dn, _, _ = b.fail_and_wait("sim", "silence", ws[:3])
            log("detection of 3 silent nodes among %d: %s s; median %.1f s vs %.1f s among 4: %.2fx"
                % (n, ", ".join("%.1f" % x for x in dn), statistics.median(dn),
                   statistics.median(d4), statistics.median(dn) / statistics.median(d4)))
            killed = ws[3:3 + args.fail]
            detect, last, rs = b.fail_and_wait("sim", "kill", killed)
            per_node = {}
            for r in rs:
                per_node[r["NodeId"]] = per_node.get(r["NodeId"], 0) + 1
            twice = [k for k, v in per_node.items() if v > 1]
            others = [k for k in per_node if k not in set(killed)]
            log("%d nodes killed at once: all recovered %.1f s after the kill (%.1f nodes/s), "
                "detection %.1f..%.1f s; recovered twice: %d; recoveries of other nodes: %d" %
                (len(killed), last, len(killed) / last, detect[0], detect[-1], len(twice),
                 len(others)))
            # Every recovery of the run that no fault asked for: a healthy node taken
            # for a failed one (an hpodd too slow to read heartbeats in time).
            faulted = set(ws[:3] + killed)
            unasked = [r for r in b.recoveries("sim") if r["NodeId"] not in faulted]
            extra = [(r["NodeId"], r["Action"], r["Reason"][:60], clock_of(r.get("CreatedTime")))
                     for r in unasked]
            stats = b.sim.stats()
            # A gap the simulator made (its one thread busy) is not hpodd's doing:
            # each such recovery is laid against its agent's own long gaps.
            gaps = b.sim.command("gaps " + ",".join(sorted({r["NodeId"] for r in unasked})))[
                "gaps"] if unasked else {}
            in_gap = []
            for r in unasked:
                at = epoch_of(r["Timeline"][0]["Time"])  # hpodd's detection
                for start, end in gaps.get(r["NodeId"], []):
                    if start <= at <= end + 2:  # + one health pass after the gap ended
                        in_gap.append("%s: its agent sent no heartbeat for %.1f s" %
                                      (r["NodeId"], end - start))
                        break
            log("recoveries of nodes no fault was injected into, over the whole run: %d %s; "
                "the simulator's longest gap between one agent's heartbeats %d ms, %d over 5 s" %
                (len(extra), extra[:5], stats["max_heartbeat_gap_ms"],
                 stats["heartbeat_gaps_over_5s"]))
            log("  of those, %d came while the simulator itself sent that node no heartbeat "
                "(its thread busy): %s" % (len(in_gap), in_gap[:5] or "-"))
        log("delete: gone after %.1f s" % b.delete(names))
    finally:
        b.close()


def profile_scrapes(b, keep=""):
    """Where a scrape's time goes: perf samples every thread of hpodd over 20
    scrapes; the threads that rendered a scrape (a sample in EmitNodes or the
    Exposition) are told apart from the rest (heartbeats, the reconcilers), and
    their symbols are logged by their share of those threads' samples (hpodd is
    built without frame pointers: no call graph, each symbol's own time)."""
    if keep:
        data, how = keep, ["--call-graph", "dwarf", "-F", "500"]
    else:
        fd, data = tempfile.mkstemp(prefix="hpod-metrics-perf-")
        os.close(fd)
        how = ["-F", "2000"]
    rec = subprocess.Popen(["perf", "record", "-q"] + how + ["-o", data, "-p", str(b.d.proc.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    try:
        for _ in range(4):
            b.scrape()
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=60)
    try:
        out = subprocess.run(["perf", "script", "-G", "-i", data, "-F", "tid,ip,sym"],
                             capture_output=True, text=True, timeout=600).stdout
    finally:
        if not keep:
            os.unlink(data)
    by_tid = {}
    for line in out.splitlines():
        parts = line.split(None, 2)  # tid, address, symbol
        if len(parts) == 3 and parts[0].isdigit():
            by_tid.setdefault(parts[0], []).append(parts[2].strip())
    scrapers = [t for t, syms in by_tid.items()
                if any("EmitNodes" in s or "Exposition::" in s for s in syms)]
    counts = {}
    for t in scrapers:
        for sym in by_tid[t]:
            counts[sym] = counts.get(sym, 0) + 1
    total = sum(len(v) for v in by_tid.values())
    mine = sum(counts.values())
    log("perf over 20 scrapes: %d samples of hpodd, %d (%.0f%%) on the %d thread(s) that "
        "rendered them; their symbols by share of those:" %
        (total, mine, 100.0 * mine / max(total, 1), len(scrapers)))
    for sym, n in sorted(counts.items(), key=lambda kv: -kv[1])[:18]:
        log("  %5.1f%%  %s" % (100.0 * n / max(mine, 1), sym[:140]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=10000, help="nodes per cluster")
    p.add_argument("--clusters", type=int, default=1)
    p.add_argument("--fail", type=int, default=100, help="nodes killed at once")
    p.add_argument("--window", type=int, default=30, help="steady-state window, seconds")
    p.add_argument("--settle", type=int, default=10, help="seconds after InService first")
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--quick", action="store_true", help="500 nodes, 20 failing, short windows")
    p.add_argument("--perf-metrics", action="store_true",
                   help="profile hpodd (perf record) over 20 more scrapes of /metrics")
    p.add_argument("--perf-keep", metavar="FILE", default="",
                   help="with --perf-metrics: record DWARF call graphs and keep them in FILE "
                        "(perf report -i FILE)")
    p.add_argument("--keep-log", metavar="FILE", default="",
                   help="copy hpodd's log (stdout and stderr) to FILE before its temp dir goes")
    p.add_argument("--tls", action="store_true",
                   help="network agents: join, then mutual TLS (HPOD_FAKE_AGENT_URL)")
    p.add_argument("--register-timeout", type=int, default=0,
                   help="hpodd's --agent-register-timeout, seconds (0: its default, 120)")
    p.add_argument("--join-threads", type=int, default=16,
                   help="joins the simulator runs at once (--tls; real machines join in parallel)")
    args = p.parse_args()
    if args.quick:
        args.nodes, args.fail, args.window, args.settle = 500, 20, 10, 3
    if not os.path.exists(os.path.join(hpodtest.BIN_DIR, "tests", "hpod-nodesim")):
        print("SKIP: build hpod-nodesim and hpodd-fake first (make)")
        return 77
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
