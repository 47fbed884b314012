#!/usr/bin/env python3
"""Benchmark of create-cluster -> all Slurm worker nodes idle on hpod's real local
nodes (hpodd as root, local provider, Debian's Slurm 22.05), against a peer
measured in the same run and printed as a ratio (never asserted):

  hpod: create-cluster with 1 controller + N workers (SlurmConfig roles, a no-op
        lifecycle script) until `sinfo` on the controller shows N idle nodes.
  peer: "bare Slurm", a bash script doing by hand what
        reference/slurm-on-namespaces.md sections 3-5 do (guard route, bridge,
        netns + veth + unshare per node, one munged, slurm.conf, slurmctld and
        slurmds), until `sinfo` from the host shows N idle nodes.

Full run: 1+4 (5 runs) and 1+16 (3 runs); --quick: 1+4, 2 runs. Medians are
reported, with hpod's breakdown from ListClusterEvents. Everything it starts is
stopped by PID and every netns, link, route and directory it made is removed,
also on failure and Ctrl-C. Needs root and Debian's slurmctld, slurmd, munge.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nodes_bench  # noqa: E402  (also puts tests/e2e on sys.path, sets HPOD_BIN_DIR)
from nodes_bench import children, comm, loadavg, log, ratio  # noqa: E402
import nodestest  # noqa: E402

NOOP = "#!/bin/bash\ntrue\n"
HPOD_PREFIX = "bs"   # hpodd's link/netns prefix
PEER_PREFIX = "bp"   # the bare Slurm peer's
SLURM_PROGRAMS = ("slurmctld", "slurmd", "munged", "sinfo")
GOAL_SLACK_S = 5.0   # the goal: 1+4 idle within 5 s + the lifecycle scripts' time
POLL_S = 0.1         # sinfo polling period, both sides


def have_slurm():
    return all(shutil.which(p) or os.path.exists("/usr/sbin/" + p) for p in SLURM_PROGRAMS)


def idle_count(sinfo_out):
    """Idle nodes in `sinfo -h -o '%T %D'` output."""
    n = 0
    for line in sinfo_out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "idle" and f[1].isdigit():
            n += int(f[1])
    return n


def wait_idle(sinfo_cmd, n, t0, timeout, env=None):
    """Runs sinfo_cmd() (a list, or None while there is nothing to ask yet) every
    POLL_S s until it reports n idle nodes; returns that moment (epoch s)."""
    deadline = t0 + timeout
    last = ""
    while time.time() < deadline:
        cmd = sinfo_cmd()
        if cmd:
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=10, env=env)
                last = (p.stdout + p.stderr).strip()
                if p.returncode == 0 and idle_count(p.stdout) >= n:
                    return time.time()
            except subprocess.TimeoutExpired:
                last = "sinfo timed out"
        time.sleep(POLL_S)
    raise RuntimeError("not %d idle nodes after %d s (last sinfo: %r)" % (n, timeout, last[-300:]))


# ---------------------------------------------------------------- the bare peer

PEER_SCRIPT = r"""#!/bin/bash
# Bare Slurm by hand, as reference/slurm-on-namespaces.md sections 3-5 do it:
# 1 controller (ctl) + N workers (w1..wN), each node netns + veth + unshare'd
# uts/mnt/pid with a minimal init; one munged outside the nodes; slurmctld and
# slurmd started inside their nodes. Records every PID it starts under $D.
set -euo pipefail
P=$1 N=$2 NET=$3 BLOCK=$4 D=$5
CONF=$D/etc/slurm.conf

# Network safety: the guard route before any bridge, namespace or packet.
ip route add unreachable "$BLOCK"
ip link add ${P}br type bridge
ip addr add $NET.1/24 dev ${P}br
ip link set ${P}br up

# munge (section 4): socket dir 0755 (munged refuses 0700), key 0400; as root.
install -d -m 0755 "$D/munge"
head -c 1024 /dev/urandom > "$D/munge/munge.key"
chmod 400 "$D/munge/munge.key"
munged --socket="$D/munge/munge.socket.2" --key-file="$D/munge/munge.key" \
  --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" \
  --seed-file="$D/munge/munged.seed"

# slurm.conf (section 5).
mkdir -p "$D/etc" "$D/log" "$D/state/ctld"
: > "$D/etc/plugstack.conf"
cat > "$CONF" <<EOF
ClusterName=bench
SlurmctldHost=ctl($NET.10)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket.2,cred_expire=10
StateSaveLocation=$D/state/ctld
SlurmdSpoolDir=$D/state/%n/spool
SlurmctldPidFile=$D/state/ctld/slurmctld.pid
SlurmdPidFile=$D/state/%n/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdTimeout=10
SlurmctldTimeout=10
MessageTimeout=5
InactiveLimit=0
KillWait=5
MinJobAge=300
ReturnToService=2
PlugStackConfig=$D/etc/plugstack.conf
NodeName=w[1-$N] NodeAddr=$NET.[11-$((10 + N))] CPUs=1 RealMemory=500 State=UNKNOWN
PartitionName=dev Nodes=w[1-$N] Default=YES MaxTime=INFINITE State=UP
EOF

# One node (section 3): netns, veth onto the bridge (eth0 inside), address, and a
# process tree whose PID 1 sets the hostname, mounts a private /run and waits.
# Sets PID1 to the node's PID 1 as the host sees it.
node() {
  local i=$1 name=$2
  ip netns add ${P}n$i
  ip link add ${P}v${i}h type veth peer name ${P}v${i}c
  ip link set ${P}v${i}c netns ${P}n$i
  ip -n ${P}n$i link set ${P}v${i}c name eth0
  ip -n ${P}n$i addr add $NET.$((10 + i))/24 dev eth0
  ip -n ${P}n$i link set lo up
  ip -n ${P}n$i link set eth0 up
  ip link set ${P}v${i}h master ${P}br up
  nsenter --net=/run/netns/${P}n$i unshare --uts --mount --pid --fork --mount-proc \
    --propagation private --kill-child bash -c \
    'hostname "$1"; mount -t tmpfs -o mode=755 tmpfs /run; : > "$2"; sleep infinity & wait' \
    init "$name" "$D/ready-$name" </dev/null >"$D/log/init-$name.log" 2>&1 &
  local u=$!
  echo $u >> "$D/unshare.pids"
  for ((t = 0; t < 1000; t++)); do [ -e "$D/ready-$name" ] && break; sleep 0.01; done
  [ -e "$D/ready-$name" ] || { echo "node $name did not start" >&2; exit 1; }
  PID1=$(cat /proc/$u/task/$u/children)
  echo $PID1 >> "$D/init.pids"
}

node 0 ctl
nsenter -t $PID1 -n -u -m -p --wd="$D" -- env SLURM_CONF="$CONF" slurmctld -i -f "$CONF"
for ((i = 1; i <= N; i++)); do
  node $i w$i
  mkdir -p "$D/state/w$i/spool"
  nsenter -t $PID1 -n -u -m -p --wd="$D" -- env SLURM_CONF="$CONF" slurmd -f "$CONF"
done
"""


class BareSlurm:
    """The peer: 1 + N bare Slurm nodes on their own /16 (guarded by an unreachable
    route added first thing) and link prefix, in a temp dir under `root`. Not
    thread-safe; one run at a time, always torn down."""

    def __init__(self, root, avoid_block):
        self.root = root
        self.block = nodes_bench.free_peer_block(avoid_block)
        self.net = ".".join(self.block.split(".")[:2]) + ".0"
        self.script = os.path.join(root, "bare_slurm.sh")
        nodestest.write_script(self.script, PEER_SCRIPT)
        self.dir = None
        self.proc = None

    def conf(self):
        return os.path.join(self.dir, "etc", "slurm.conf")

    def run(self, workers, timeout=300):
        """Creates the cluster; returns seconds from the script's start until sinfo
        (from the host, through the bridge's .1) shows `workers` idle nodes."""
        self.dir = tempfile.mkdtemp(prefix="run-", dir=self.root)
        # munged wants every directory above its socket traversable by all.
        for d in (self.root, self.dir):
            os.chmod(d, 0o755)
        env = dict(os.environ, SLURM_CONF=self.conf())
        t0 = time.time()
        self.proc = subprocess.Popen(
            ["bash", self.script, PEER_PREFIX, str(workers), self.net, self.block, self.dir],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        conf = self.conf()

        def cmd():
            if self.proc.poll() not in (None, 0):
                raise RuntimeError("bare Slurm script failed (%d): %s" % (
                    self.proc.returncode, self.proc.stdout.read()[-2000:]))
            return ["sinfo", "-h", "-o", "%T %D"] if os.path.exists(conf) else None

        t1 = wait_idle(cmd, workers, t0, timeout, env=env)
        self.proc.wait(timeout=timeout)
        if self.proc.returncode != 0:
            raise RuntimeError("bare Slurm script failed (%d): %s" % (
                self.proc.returncode, self.proc.stdout.read()[-2000:]))
        return t1 - t0

    def _pids(self, name):
        try:
            with open(os.path.join(self.dir, name)) as f:
                return [int(x) for x in f.read().split()]
        except (OSError, TypeError, ValueError):
            return []

    def _our_processes(self):
        """Host PIDs whose command line names this run's dir (daemons, inits, nsenters)."""
        if not self.dir:
            return []
        return [(pid, cmd[:120]) for pid, cmd in nodestest.processes_naming(self.dir)]

    @staticmethod
    def _kill(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    def teardown(self):
        if self.proc and self.proc.poll() is None:
            self._kill(self.proc.pid)  # the script, if it is still creating nodes
            self.proc.wait(timeout=10)
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        # Each node's PID 1 first: SIGKILL to a pid namespace's init kills every
        # process in it (slurmctld, slurmd and whatever they forked).
        for p in self._pids("init.pids"):
            self._kill(p)
        munged = self._pids("munge/munged.pid")
        for p in munged:
            if comm(p) == "munged":
                self._kill(p)
        for p in self._pids("unshare.pids"):
            for c in children(p):
                self._kill(c)
            self._kill(p)
        for ns in nodestest.run("ip", "netns", "list", check=False).stdout.split():
            if ns.startswith(PEER_PREFIX + "n"):
                # Anything still in it (a node whose PID was not yet recorded).
                for p in nodestest.run("ip", "netns", "pids", ns, check=False).stdout.split():
                    try:
                        self._kill(int(p))
                    except ValueError:
                        pass
                nodestest.run("ip", "netns", "del", ns, check=False)
        for pid, _ in self._our_processes():  # safety net
            self._kill(pid)
        for line in nodestest.run("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(PEER_PREFIX + "v") or name == PEER_PREFIX + "br":
                nodestest.run("ip", "link", "del", name, check=False)
        # The block was free when chosen, so a guard route on it now is ours.
        if self.block in nodestest.host_routes():
            nodestest.run("ip", "route", "del", "unreachable", self.block, check=False)
        deadline = time.time() + 10
        while self._our_processes() and time.time() < deadline:
            time.sleep(0.05)
        left = self.leftovers()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return left

    def leftovers(self):
        found = ["netns " + ns for ns in
                 nodestest.run("ip", "netns", "list", check=False).stdout.split()
                 if ns.startswith(PEER_PREFIX + "n")]
        for line in nodestest.run("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(PEER_PREFIX + "v") or name == PEER_PREFIX + "br":
                found.append("link " + name)
        if self.block in nodestest.host_routes():
            found.append("route " + self.block)
        found += ["process %d: %s" % p for p in self._our_processes()]
        return found


# ---------------------------------------------------------------- hpod side

def create_cluster(d, name, workers, lcs_dir):
    src = "file://" + lcs_dir + "/"
    groups = [nodestest.lcs_group("controller-machine", 1, src,
                                  SlurmConfig={"NodeType": "Controller"}),
              nodestest.lcs_group("workers", workers, src, instance_type="ml.c5.2xlarge",
                                  SlurmConfig={"NodeType": "Compute",
                                               "PartitionNames": ["dev"]})]
    spec = os.path.join(d.root, "%s.json" % name)
    with open(spec, "w") as f:
        json.dump(groups, f)
    t0 = time.time()
    d.hpod("create-cluster", "--cluster-name", name, "--instance-groups", "file://" + spec)
    return t0


def controller_pid(d, name):
    """PID 1 of the cluster's controller node once the provider has launched it."""
    nodes_dir = os.path.join(d.data_dir, "local", "nodes")
    try:
        ids = os.listdir(nodes_dir)
    except OSError:
        return None
    for iid in ids:
        try:
            with open(os.path.join(nodes_dir, iid, "node.json")) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        if rec.get("cluster_name") == name and rec.get("group_name") == "controller-machine":
            return rec.get("pid")
    return None


def wait_in_service(d, name, t0, timeout, out, stop):
    """Polls DescribeCluster every 0.2 s (on its own thread, beside the sinfo
    poller); puts the moment InService was seen into out["inservice"]."""
    deadline = t0 + timeout
    while time.time() < deadline and not stop.is_set():
        p = d.hpod("describe-cluster", "--cluster-name", name, "--output", "json", check=False)
        if p.returncode == 0:
            status = json.loads(p.stdout)["ClusterStatus"]
            if status == "InService":
                out["inservice"] = time.time()
                return
            if status == "Failed":
                out["error"] = "cluster %s Failed" % name
                return
        time.sleep(0.2)


def event_time(v):
    if isinstance(v, (int, float)):
        return float(v)
    return datetime.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()


# A node's start as ListClusterEvents tells it, in order.
MILESTONES = [("requested", "is Pending: launch requested"),
              ("script", "Lifecycle scripts Running"),
              ("script_done", "Lifecycle scripts Succeeded"),
              ("running", "Instance status changed from Pending to Running")]
# The phases between them, with what happens in each.
PHASES = [("requested", "script", "namespaces + agent + config"),
          ("script", "script_done", "lifecycle script"),
          ("script_done", "running", "Slurm daemons + registration")]


def breakdown(d, name, t0):
    """From ListClusterEvents: per phase the critical path (the longest per-node
    duration), when the last node reached each milestone, and InService."""
    events = d.hpod_json("list-cluster-events", "--cluster-name", name)["Events"]
    at = {k: {} for k, _ in MILESTONES}
    r = {}
    for e in events:
        desc, iid = e.get("Description", ""), e.get("InstanceId")
        t = event_time(e["EventTime"])
        if "Cluster status changed from Creating to InService" in desc:
            r["inservice_event"] = t - t0
        if not iid:
            continue
        for k, pat in MILESTONES:
            if pat in desc:
                at[k][iid] = min(t, at[k].get(iid, t))
    for k, _ in MILESTONES:
        if at[k]:
            r["last_" + k] = max(at[k].values()) - t0
    for a, b, _ in PHASES:
        spans = [at[b][i] - at[a][i] for i in at[b] if i in at[a]]
        if spans:
            r[a + ">" + b] = max(spans)
    r["nodes_seen"] = len(at["running"])
    return r


def hpod_run(d, name, workers, lcs, timeout):
    """One create -> all idle -> delete; returns the figures of the run."""
    t0 = create_cluster(d, name, workers, lcs)
    found = {}
    stop = threading.Event()
    poller = threading.Thread(target=wait_in_service, args=(d, name, t0, timeout, found, stop))
    poller.start()
    try:
        def cmd():
            pid = controller_pid(d, name)
            if not pid:
                return None
            return ["nsenter", "-t", str(pid), "-n", "-u", "-m", "-p", "--",
                    "sinfo", "-h", "-o", "%T %D"]
        t_idle = wait_idle(cmd, workers, t0, timeout)
        poller.join(timeout=max(1, t0 + timeout - time.time()))
    finally:
        stop.set()
        poller.join()
    if "error" in found:
        raise RuntimeError(found["error"] + "\n" + d.log_tail())
    r = {"idle": t_idle - t0,
         "inservice": found["inservice"] - t0 if "inservice" in found else float("nan")}
    r.update(breakdown(d, name, t0))
    r["delete"] = nodes_bench.delete_cluster(d, name, timeout=max(120, 4 * workers))
    return r


# ---------------------------------------------------------------- main

def med(runs, key):
    xs = [r[key] for r in runs if key in r and r[key] == r[key]]
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1+4 only, 2 runs")
    ap.add_argument("--runs", type=int, default=0,
                    help="runs per size (default 5 for 1+4, 3 for 1+16; --quick 2)")
    ap.add_argument("--wait-other", type=int, default=0,
                    help="seconds to wait for other hpodd to end first (0: measure at once "
                         "and say so in the output)")
    args = ap.parse_args()
    nodestest.require_nodes()
    if not have_slurm():
        print("SKIP: Debian's slurmctld/slurmd/munge/sinfo are not installed "
              "(scripts/install-deps.sh installs them)")
        return 77

    if args.quick:
        sizes = [(4, args.runs or 2)]
    else:
        sizes = [(4, args.runs or 5), (16, args.runs or 3)]
    others = subprocess.run(["pgrep", "-x", "hpodd"], capture_output=True, text=True)
    others = others.stdout.split()
    if others and args.wait_other:
        nodes_bench.wait_no_other_hpodd(args.wait_other)
        others = subprocess.run(["pgrep", "-x", "hpodd"], capture_output=True,
                                text=True).stdout.split()

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    # Also when started in the background, where SIGINT arrives ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    results = []
    d = peer = None
    root = tempfile.mkdtemp(prefix="hpod-bench-slurm-", dir="/var/tmp")
    failed = False
    try:
        d = nodestest.NodesDaemon(HPOD_PREFIX)
        lcs = os.path.join(d.root, "lcs")
        nodestest.write_script(os.path.join(lcs, "on_create.sh"), NOOP)
        d.start()
        peer = BareSlurm(root, d.block)
        log("hpodd pid %d, block %s, prefix %s; peer block %s, prefix %s; load %s%s" % (
            d.proc.pid, d.block, HPOD_PREFIX, peer.block, PEER_PREFIX, loadavg(),
            "; other hpodd running: " + ",".join(others) if others else ""))
        for workers, runs in sizes:
            res = {"workers": workers, "peer": [], "hpod": []}
            results.append(res)
            for i in range(runs):
                # Interleaved, so a change in the machine's load hits both sides.
                try:
                    s = peer.run(workers)
                finally:
                    left = peer.teardown()
                if left:
                    raise RuntimeError("bare Slurm peer left %s" % left)
                res["peer"].append(s)
                r = hpod_run(d, "slurm%d-%d" % (workers + 1, i), workers, lcs,
                             timeout=max(240, 10 * workers))
                res["hpod"].append(r)
                log("1+%d run %d: hpod all idle %.2f s (InService %.2f s), bare Slurm %.2f s, "
                    "hpod/bare %s; delete %.2f s; load %s" % (
                        workers, i + 1, r["idle"], r["inservice"], s, ratio(r["idle"], s),
                        r["delete"], loadavg()))
                log("  events, s after create-cluster (a>b: longest per-node phase) for %d "
                    "nodes: %s" % (r["nodes_seen"], ", ".join(
                        "%s %.2f" % (k, v) for k, v in r.items()
                        if k not in ("idle", "inservice", "nodes_seen", "delete"))))
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    except Exception:
        failed = True
        raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if peer:
            left = peer.teardown()
            if left:
                log("WARNING: bare Slurm peer left %s" % left)
        if d:
            d.cleanup()
            left = d.leftovers()
            if left:
                log("WARNING: hpodd left %s" % left)
        shutil.rmtree(root, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if failed:
            log("FAILED; everything was cleaned up")

    report(results, args, others)
    return 0


def report(results, args, others):
    print()
    print("== slurm_bench %s, %s, %d CPUs, load %s%s" % (
        "--quick" if args.quick else "(full)", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        os.cpu_count(), loadavg(),
        ", other hpodd running (%s)" % ",".join(others) if others else ""))
    print()
    print("create-cluster -> all Slurm workers idle (median of runs), no-op lifecycle script,"
          " vs bare Slurm by hand")
    print("| Nodes | runs | hpod | bare Slurm | hpod / bare | hpod min..max | bare min..max | "
          "hpod InService (polled) | delete -> gone |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        h, p = res["hpod"], res["peer"]
        hm, pm = med(h, "idle"), statistics.median(p)
        print("| 1+%d | %d | %.2f s | %.2f s | %s | %.2f..%.2f | %.2f..%.2f | %.2f s | %.2f s |" % (
            res["workers"], len(h), hm, pm, ratio(hm, pm), min(r["idle"] for r in h),
            max(r["idle"] for r in h), min(p), max(p), med(h, "inservice"), med(h, "delete")))
    print()
    print("Where hpod's time goes (median over runs; from ListClusterEvents): critical path of each"
          " phase = its longest per-node duration; 'last' = when the last node got there, s after"
          " create-cluster")
    print("| Nodes | requested -> script Running (namespaces + agent + config) | "
          "script Running -> Succeeded (lifecycle) | Succeeded -> Running (Slurm daemons + "
          "registration) | last requested | last script Running | last Succeeded | last Running "
          "| InService event | all idle (sinfo) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        h = res["hpod"]
        print("| 1+%d | %s | %s | %s | %s | %s | %s | %s | %s | %.2f s |" % (
            res["workers"],
            *["%.2f s" % med(h, a + ">" + b) for a, b, _ in PHASES],
            *["%.2f s" % med(h, "last_" + k) for k, _ in MILESTONES],
            "%.2f s" % med(h, "inservice_event"), med(h, "idle")))
    print()
    for res in results:
        if res["workers"] != 4:
            continue
        h = res["hpod"]
        lifecycle = med(h, "script>script_done")
        goal = GOAL_SLACK_S + lifecycle
        got = med(h, "idle")
        print("Goal (informational, not asserted): 1+4 all idle within %.0f s + lifecycle time "
              "(%.2f s) = %.2f s: hpod median %.2f s -> %s" % (
                  GOAL_SLACK_S, lifecycle, goal, got, "PASS" if got <= goal else "MISS"))
    print("(hpod: t0 = the create-cluster call, idle = sinfo on the controller via nsenter; "
          "bare Slurm: t0 = the script's start, sinfo from the host through the bridge; both "
          "polled every %.1f s)" % POLL_S)


if __name__ == "__main__":
    sys.exit(main())
