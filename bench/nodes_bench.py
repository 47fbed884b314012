#!/usr/bin/env python3
"""Benchmarks of hpod's real local nodes (hpodd as root, local provider), each
against a peer measured in the same run and printed as a ratio (never asserted):

 1. create-cluster -> InService for 1 controller + N workers (lifecycle script a
    no-op) vs a bash script doing the bare namespace plumbing for as many nodes
    (netns, veth onto a bridge, address, unshare --uts --mount --pid sleep).
 2. memory per node: RSS and PSS of hpod-agent and hpod-node-init vs an idle
    bash started in each node.
 3. hpodd CPU while N nodes heartbeat every second vs the same hpodd once the
    cluster is deleted (0 nodes), over the same window.

Full run: 1+4, 1+16 and 1+199 (200 nodes, the CPU run). --quick: 1+4 and 1+19
(20 nodes, the CPU run). Waits (up to 15 min) until no other hpodd runs first.
Everything it starts is stopped by PID and every netns, link, route and directory
it made is removed, also on failure and Ctrl-C. Needs root.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
os.environ.setdefault("HPOD_BIN_DIR", os.path.join(TOP, "build"))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
import nodestest  # noqa: E402

NOOP = "#!/bin/bash\ntrue\n"
HPOD_PREFIX = "bnh"   # hpodd's link/netns prefix
PEER_PREFIX = "bnp"   # the bare peer's
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(msg, flush=True)


def ratio(a, b):
    if not b:
        return "n/a" if not a else "inf"
    r = a / b
    return "%.2fx" % r if r >= 0.1 else "%.3fx" % r


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---------------------------------------------------------------- /proc helpers

def cpu_ticks(pid):
    """utime+stime of a process (all its threads), in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)


def children(pid):
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def memory_kib(pid):
    """(RSS, PSS) in KiB from /proc/<pid>/smaps_rollup."""
    rss = pss = None
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss, pss


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


# ---------------------------------------------------------------- waiting

def wait_no_other_hpodd(max_seconds):
    start = time.time()
    while True:
        p = subprocess.run(["pgrep", "-x", "hpodd"], capture_output=True, text=True)
        pids = p.stdout.split()
        if not pids:
            if time.time() - start > 1:
                log("no other hpodd after %.0f s; starting" % (time.time() - start))
            return True
        if time.time() - start > max_seconds:
            log("WARNING: other hpodd still running (%s) after %.0f s; measuring anyway, "
                "figures are skewed" % (",".join(pids), max_seconds))
            return False
        if int(time.time() - start) % 60 < 5:
            log("waiting for other hpodd to end (pids %s, %.0f s so far)" %
                (",".join(pids), time.time() - start))
        time.sleep(5)


def wait_in_service(d, name, timeout):
    """Polls DescribeCluster every 0.2 s; returns the time InService was seen."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        p = d.hpod("describe-cluster", "--cluster-name", name, "--output", "json", check=False)
        if p.returncode == 0:
            out = json.loads(p.stdout)
            last = out["ClusterStatus"]
            if last == "InService":
                return time.time()
            if last == "Failed":
                raise RuntimeError("cluster %s Failed: %s\n%s" % (
                    name, out.get("FailureMessage"), d.log_tail()))
        time.sleep(0.2)
    raise RuntimeError("cluster %s not InService after %d s (last %s)\n%s" % (
        name, timeout, last, d.log_tail()))


# ---------------------------------------------------------------- the bare peer

PEER_SCRIPT = r"""#!/bin/bash
# Bare namespace plumbing for $N nodes, as the local provider does per node.
set -euo pipefail
P=$1 N=$2 NET=$3 PIDS=$4
ip link add ${P}br type bridge
ip addr add ${NET}.1/24 dev ${P}br
ip link set ${P}br up
for ((i = 0; i < N; i++)); do
  ip netns add ${P}n$i
  ip link add ${P}v${i}h type veth peer name ${P}v${i}c
  ip link set ${P}v${i}c netns ${P}n$i
  ip link set ${P}v${i}h master ${P}br up
  ip -n ${P}n$i addr add ${NET}.$((10 + i))/24 dev ${P}v${i}c
  ip -n ${P}n$i link set ${P}v${i}c up
  ip -n ${P}n$i link set lo up
  nsenter --net=/run/netns/${P}n$i unshare --uts --mount --pid --fork --mount-proc \
    --kill-child sleep 1000 </dev/null >/dev/null 2>&1 &
  echo $! >> "$PIDS"
done
"""


def free_peer_block(avoid_block):
    """A 10.x.0.0/16 no host route touches (counting down from 10.249), for a peer."""
    routes = nodestest.host_routes()
    for x in range(249, 199, -1):
        b = "10.%d.0.0/16" % x
        if ("10.%d." % x) not in routes and b != avoid_block:
            return b
    raise RuntimeError("no free 10.x.0.0/16 for a bare peer")


class BarePeer:
    """The peer of (1): N bare 'nodes' on its own /16 and link prefix, guarded by
    an unreachable route added before any netns exists. Not thread-safe; one
    instance per measurement, always torn down."""

    def __init__(self, root, avoid_block):
        self.root = root
        self.block = free_peer_block(avoid_block)
        self.net = ".".join(self.block.split(".")[:2]) + ".0"
        self.script = os.path.join(root, "bare_nodes.sh")
        self.pids_file = os.path.join(root, "bare_pids")
        nodestest.write_script(self.script, PEER_SCRIPT)
        self.guarded = False

    def run(self, n, timeout=600):
        """Creates n bare nodes; returns seconds until every node's sleep runs."""
        if n > 245:
            raise ValueError("the peer's /24 holds at most 245 nodes")
        open(self.pids_file, "w").close()
        # Network safety: the guard before any bridge or namespace.
        nodestest.run("ip", "route", "add", "unreachable", self.block)
        self.guarded = True
        t0 = time.time()
        nodestest.run("bash", self.script, PEER_PREFIX, str(n), self.net, self.pids_file,
                      timeout=timeout)
        deadline = t0 + timeout
        while True:
            pids = [int(x) for x in open(self.pids_file).read().split()]
            up = sum(1 for p in pids if any(comm(c) == "sleep" for c in children(p)))
            if len(pids) == n and up == n:
                return time.time() - t0
            if time.time() > deadline:
                raise RuntimeError("bare peer: %d of %d nodes up" % (up, n))
            time.sleep(0.01)

    def teardown(self):
        pids = []
        if os.path.exists(self.pids_file):
            pids = [int(x) for x in open(self.pids_file).read().split()]
        for p in pids:  # the sleep (PID 1 of its pid ns) first, then its unshare
            for c in children(p):
                try:
                    os.kill(c, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        for p in pids:
            for _ in range(100):
                if not os.path.exists("/proc/%d" % p) or comm(p) == "":
                    break
                try:
                    os.waitpid(p, os.WNOHANG)
                except ChildProcessError:
                    pass
                time.sleep(0.05)
        for ns in nodestest.run("ip", "netns", "list", check=False).stdout.split():
            if ns.startswith(PEER_PREFIX + "n"):
                # Anything still in it (a node whose PID was not yet recorded).
                for p in nodestest.run("ip", "netns", "pids", ns, check=False).stdout.split():
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
                nodestest.run("ip", "netns", "del", ns, check=False)
        for line in nodestest.run("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(PEER_PREFIX + "v") or name == PEER_PREFIX + "br":
                nodestest.run("ip", "link", "del", name, check=False)
        if self.guarded:
            nodestest.run("ip", "route", "del", "unreachable", self.block, check=False)
            self.guarded = False
        if os.path.exists(self.pids_file):
            os.unlink(self.pids_file)

    def leftovers(self):
        found = [ns for ns in nodestest.run("ip", "netns", "list", check=False).stdout.split()
                 if ns.startswith(PEER_PREFIX + "n")]
        for line in nodestest.run("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(PEER_PREFIX):
                found.append(name)
        if self.block in nodestest.host_routes():
            found.append("route " + self.block)
        return found


# ---------------------------------------------------------------- hpod side

def create_cluster(d, name, workers, lcs_dir):
    src = "file://" + lcs_dir + "/"
    groups = [nodestest.lcs_group("controller-machine", 1, src,
                                  SlurmConfig={"NodeType": "Controller"}),
              nodestest.lcs_group("worker-group-1", workers, src)]
    spec = os.path.join(d.root, "%s.json" % name)
    with open(spec, "w") as f:
        json.dump(groups, f)
    t0 = time.time()
    d.hpod("create-cluster", "--cluster-name", name, "--instance-groups", "file://" + spec)
    return t0


def delete_cluster(d, name, timeout):
    t0 = time.time()
    d.hpod("delete-cluster", "--cluster-name", name)
    d.wait_status(name, None, timeout=timeout)
    return time.time() - t0


LOG_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+[+-]\d\d:?\d\d) ")
IID = re.compile(r"\b(i-[0-9a-f]+)\b")
# The steps of a node's start as hpodd logs them (info and debug level).
STEPS = [("launched", "local provider: launched"),
         ("connected", "connected (bootstrap)"),
         ("script", "Lifecycle scripts Running"),
         ("running", "from Pending to Running")]


def timeline(d, since):
    """{step: {instance id: epoch s}} from hpodd's log lines after `since`, plus
    "inservice": the time of "Cluster status changed ... to InService"."""
    out = {k: {} for k, _ in STEPS}
    out["inservice"] = None
    try:
        f = open(os.path.join(d.root, "hpodd.out"), errors="replace")
    except OSError:
        return out
    with f:
        for line in f:
            m = LOG_TS.match(line)
            if not m:
                continue
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
            if t < since - 1:
                continue
            if "Cluster status changed from Creating to InService" in line:
                out["inservice"] = t
                continue
            iid = IID.search(line)
            for k, pat in STEPS:
                if iid and pat in line:
                    out[k].setdefault(iid.group(1), t)
    return out


def breakdown(tl, t0):
    """Where the time went: the span of each step over all nodes and each step's
    mean per-node latency after the previous step."""
    r = {}
    for k, _ in STEPS:
        if tl[k]:
            r[k + "_first"] = min(tl[k].values()) - t0
            r[k + "_last"] = max(tl[k].values()) - t0
    for (a, _), (b, _) in zip(STEPS, STEPS[1:]):
        gaps = [tl[b][i] - tl[a][i] for i in tl[b] if i in tl[a]]
        if gaps:
            r[a + "_to_" + b] = mean(gaps)
    if tl["inservice"]:
        r["inservice"] = tl["inservice"] - t0
    return r


def node_processes(d, name):
    """[(node-init pid, agent pid)] for every node of the cluster."""
    out = []
    for n in d.nodes(name):
        init = d.node_pid(n["InstanceId"])
        agents = [c for c in children(init) if comm(c) == "hpod-agent"]
        if comm(init) != "hpod-node-init" or len(agents) != 1:
            raise RuntimeError("node %s: pid %d is %r with agents %r" % (
                n["InstanceId"], init, comm(init), agents))
        out.append((init, agents[0]))
    return out


def measure_memory(d, name):
    procs = node_processes(d, name)
    agent = [memory_kib(a) for _, a in procs]
    init = [memory_kib(i) for i, _ in procs]
    # Peer: one idle bash in every node, all alive at once (so shared pages are
    # split among as many bash processes as there are agents).
    bashes = []
    try:
        for i, _ in procs:
            bashes.append(subprocess.Popen(
                ["nsenter", "-t", str(i), "-n", "-u", "-m", "-p", "--", "bash", "-c",
                 "read -r -t 120 x"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL))
        deadline = time.time() + 30
        bash_pids = []
        while time.time() < deadline:
            bash_pids = [[c for c in children(b.pid) if comm(c) == "bash"] for b in bashes]
            if all(len(x) == 1 for x in bash_pids):
                break
            time.sleep(0.05)
        time.sleep(0.5)  # let each bash reach its read
        bash = [memory_kib(x[0]) for x in bash_pids if x]
    finally:
        for b in bashes:
            try:
                b.stdin.close()
            except OSError:
                pass
        for b in bashes:
            try:
                b.wait(timeout=10)
            except subprocess.TimeoutExpired:
                b.kill()
                b.wait(timeout=10)
    hpodd_rss, hpodd_pss = memory_kib(d.proc.pid)
    return {
        "nodes": len(procs),
        "agent_rss": mean([r for r, _ in agent]), "agent_pss": mean([p for _, p in agent]),
        "init_rss": mean([r for r, _ in init]), "init_pss": mean([p for _, p in init]),
        "bash_rss": mean([r for r, _ in bash]), "bash_pss": mean([p for _, p in bash]),
        "hpodd_rss": hpodd_rss, "hpodd_pss": hpodd_pss,
    }


def measure_cpu(d, seconds, agents=()):
    """CPU ticks of hpodd (and of the given agent pids) over `seconds` of wall time."""
    a0 = {p: cpu_ticks(p) for p in agents}
    h0 = cpu_ticks(d.proc.pid)
    t0 = time.time()
    time.sleep(seconds)
    h1 = cpu_ticks(d.proc.pid)
    wall = time.time() - t0
    a = 0
    for p in agents:
        try:
            a += cpu_ticks(p) - a0[p]
        except OSError:
            pass
    return (h1 - h0) / CLK_TCK, a / CLK_TCK, wall


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="1+4 nodes, and 20 nodes for the CPU run (instead of 1+4, 1+16, 200)")
    ap.add_argument("--seconds", type=int, default=30, help="CPU sampling window (30)")
    ap.add_argument("--hpodd-arg", action="append", default=[],
                    help="an extra hpodd flag, e.g. --hpodd-arg=--slurm-accounting=off (repeatable)")
    ap.add_argument("--wait-other", type=int, default=900,
                    help="seconds to wait for other hpodd to end (900)")
    args = ap.parse_args()
    nodestest.require_nodes()

    # (workers, is the CPU run)
    sizes = [(4, False), (19, True)] if args.quick else [(4, False), (16, False), (199, True)]
    quiet = wait_no_other_hpodd(args.wait_other)

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    # Also when started in the background, where SIGINT arrives ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    results = []
    d = peer = None
    root = tempfile.mkdtemp(prefix="hpod-bench-nodes-", dir="/var/tmp")
    try:
        d = nodestest.NodesDaemon(HPOD_PREFIX, extra_args=args.hpodd_arg)
        lcs = os.path.join(d.root, "lcs")
        nodestest.write_script(os.path.join(lcs, "on_create.sh"), NOOP)
        d.start()
        log("hpodd pid %d, block %s, prefix %s; load %s; %s" % (
            d.proc.pid, d.block, HPOD_PREFIX, loadavg(),
            "quiet" if quiet else "OTHER hpodd RUNNING"))
        peer = BarePeer(root, d.block)
        for workers, cpu_run in sizes:
            n = workers + 1
            r = {"nodes": n}
            # (1) the peer first, torn down before hpodd's cluster exists.
            try:
                r["bare_s"] = peer.run(n)
            finally:
                peer.teardown()
            left = peer.leftovers()
            if left:
                raise RuntimeError("bare peer left %s" % left)
            name = "bench%d" % n
            t0 = create_cluster(d, name, workers, lcs)
            t1 = wait_in_service(d, name, timeout=max(240, 6 * n))
            r["hpod_s"] = t1 - t0
            b = r["steps"] = breakdown(timeline(d, t0), t0)
            log("%d nodes: create-cluster -> InService %.2f s, bare plumbing %.2f s, hpod/bare %s"
                "; load %s" % (n, r["hpod_s"], r["bare_s"], ratio(r["hpod_s"], r["bare_s"]),
                               loadavg()))
            log("  where the time goes (s after create-cluster): " + ", ".join(
                "%s %.2f" % (k, v) for k, v in b.items()))
            # (2)
            time.sleep(2)
            r["mem"] = measure_memory(d, name)
            m = r["mem"]
            log("%d nodes: per node agent RSS/PSS %.0f/%.0f KiB, node-init %.0f/%.0f KiB, "
                "idle bash %.0f/%.0f KiB; hpodd RSS %.0f KiB" % (
                    n, m["agent_rss"], m["agent_pss"], m["init_rss"], m["init_pss"],
                    m["bash_rss"], m["bash_pss"], m["hpodd_rss"]))
            # (3)
            if cpu_run:
                agents = [a for _, a in node_processes(d, name)]
                time.sleep(3)  # past the convergence burst
                cpu, agent_cpu, wall = measure_cpu(d, args.seconds, agents)
                r["cpu"] = {"hpodd_s": cpu, "agents_s": agent_cpu, "wall": wall,
                            "load": loadavg()}
                log("%d nodes heartbeating: hpodd %.2f s CPU in %.1f s (agents together %.2f s)"
                    "; load %s" % (n, cpu, wall, agent_cpu, loadavg()))
            r["delete_s"] = delete_cluster(d, name, timeout=max(120, 2 * n))
            log("%d nodes: delete-cluster -> gone %.2f s" % (n, r["delete_s"]))
            if cpu_run:
                time.sleep(3)
                cpu0, _, wall0 = measure_cpu(d, args.seconds)
                r["cpu"].update({"idle_hpodd_s": cpu0, "idle_wall": wall0})
                log("0 nodes: hpodd %.2f s CPU in %.1f s; load %s" % (cpu0, wall0, loadavg()))
            results.append(r)
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if peer:
            peer.teardown()
        if d:
            d.cleanup()
            left = d.leftovers()
            if left:
                log("WARNING: hpodd left %s" % left)
        if peer and peer.leftovers():
            log("WARNING: bare peer left %s" % peer.leftovers())
        shutil.rmtree(root, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    report(results, args, quiet)
    return 0


def report(results, args, quiet):
    print()
    print("== nodes_bench %s, %s, %d CPUs, load %s%s" % (
        "--quick" if args.quick else "(full)", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        os.cpu_count(), loadavg(), "" if quiet else ", OTHER hpodd WERE RUNNING"))
    print()
    print("(1) create-cluster -> InService, no-op lifecycle script, vs bare plumbing")
    print("| Nodes | hpod | bare netns+veth+unshare | hpod / bare | hpod per node | "
          "bare per node | delete -> gone |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print("| 1+%d | %.2f s | %.2f s | %s | %.0f ms | %.0f ms | %.2f s |" % (
            r["nodes"] - 1, r["hpod_s"], r["bare_s"], ratio(r["hpod_s"], r["bare_s"]),
            1000 * r["hpod_s"] / r["nodes"], 1000 * r["bare_s"] / r["nodes"], r["delete_s"]))
    print()
    print("Where hpod's time goes, from hpodd's log (s after create-cluster; first..last node;"
          " mean per-node step latency)")
    print("| Nodes | launched | agent connected | lifecycle script running | Running | "
          "InService logged | launched->connected | connected->script | script->Running |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    nan = float("nan")
    for r in results:
        b = r["steps"]
        span = lambda k: "%.2f..%.2f" % (b.get(k + "_first", nan), b.get(k + "_last", nan))
        print("| %d | %s | %s | %s | %s | %.2f | %.0f ms | %.0f ms | %.0f ms |" % (
            r["nodes"], span("launched"), span("connected"), span("script"), span("running"),
            b.get("inservice", nan), 1000 * b.get("launched_to_connected", nan),
            1000 * b.get("connected_to_script", nan), 1000 * b.get("script_to_running", nan)))
    print()
    print("(2) memory per node (mean), vs an idle bash in each node")
    print("| Nodes | hpod-agent RSS / PSS | hpod-node-init RSS / PSS | bash RSS / PSS | "
          "agent / bash (PSS) | agent+init / bash (PSS) | hpodd RSS |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        m = r["mem"]
        print("| %d | %.0f / %.0f KiB | %.0f / %.0f KiB | %.0f / %.0f KiB | %s | %s | %.1f MiB |"
              % (m["nodes"], m["agent_rss"], m["agent_pss"], m["init_rss"], m["init_pss"],
                 m["bash_rss"], m["bash_pss"], ratio(m["agent_pss"], m["bash_pss"]),
                 ratio(m["agent_pss"] + m["init_pss"], m["bash_pss"]), m["hpodd_rss"] / 1024))
    print()
    print("(3) hpodd CPU, heartbeat every 1 s, %d s window, vs the same hpodd with 0 nodes"
          % args.seconds)
    print("| Nodes | hpodd CPU (% of one core) | 0 nodes | ratio | hpodd CPU per heartbeat | "
          "agents' CPU per heartbeat | create -> InService |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        c = r.get("cpu")
        if not c:
            continue
        pct = 100 * c["hpodd_s"] / c["wall"]
        pct0 = 100 * c["idle_hpodd_s"] / c["idle_wall"]
        beats = r["nodes"] * c["wall"]  # one per node per second
        if c["idle_hpodd_s"] > 0:
            idle, rat = "%.2f %%" % pct0, ratio(pct, pct0)
        else:  # not one tick: bound the ratio by one tick
            one_tick = 100.0 / CLK_TCK / c["idle_wall"]
            idle, rat = "0 (< %.3f %%)" % one_tick, "> %.0fx" % (pct / one_tick)
        print("| %d | %.2f %% | %s | %s | %.0f µs | %.0f µs | %.1f s (bare %.1f s, %s) |" % (
            r["nodes"], pct, idle, rat, 1e6 * c["hpodd_s"] / beats,
            1e6 * c["agents_s"] / beats, r["hpod_s"], r["bare_s"],
            ratio(r["hpod_s"], r["bare_s"])))
    print("(CPU time from /proc/<pid>/stat in %d Hz ticks; per heartbeat = CPU / (nodes x "
          "seconds); the 0-node figure includes hpodd's own timers)" % CLK_TCK)


if __name__ == "__main__":
    sys.exit(main())
