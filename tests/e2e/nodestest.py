"""Support for end-to-end tests on real nodes: the real hpodd (local provider,
Linux namespaces) as root, a test-only node block and link prefix so several
tests and a user's own hpodd never collide, and helpers that look at nodes from
the host (nsenter) and through hpod's own CLI (start-session, logs).

Everything a test starts is stopped by PID and every namespace, link, route and
directory it made is checked for and removed in cleanup()."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import hpodtest

HPODD = os.path.join(hpodtest.BIN_DIR, "cmd", "hpodd", "hpodd")
HPOD = hpodtest.HPOD_CLI
# hpodd's debug line for an API request that succeeded (log_tail leaves it out).
_POLL_LINE = re.compile(r" debug hpodd\[\d+\] request \S+ \S+ ok$")


def require_nodes():
    """Exit with SKIP unless this process may create namespaces (root + tools)."""
    if os.geteuid() != 0:
        print("SKIP: real nodes need root")
        sys.exit(hpodtest.SKIP)
    for tool in ("ip", "unshare", "nsenter"):
        if not shutil.which(tool):
            print("SKIP: %s is not installed" % tool)
            sys.exit(hpodtest.SKIP)
    if not os.path.exists(HPODD):
        print("SKIP: %s not built" % HPODD)
        sys.exit(hpodtest.SKIP)


def have_slurm():
    """Whether Debian's Slurm daemons and clients are installed (install-deps.sh)."""
    return all(shutil.which(p) or os.path.exists("/usr/sbin/" + p)
               for p in ("slurmctld", "slurmd", "munged", "sinfo"))


def run(*cmd, check=True, timeout=60, **kw):
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s%s" % (" ".join(cmd), p.returncode, p.stdout,
                                                         p.stderr))
    return p


def host_routes():
    return run("ip", "-o", "route", "show", "table", "all").stdout


def free_block():
    """A 10.X.0.0/16 that no host route touches (the provider would refuse it)."""
    routes = host_routes()
    for x in range(200, 250):
        if ("10.%d." % x) not in routes:
            return "10.%d.0.0/16" % x
    raise RuntimeError("no free 10.x.0.0/16 for test nodes")


class NodesDaemon:
    """The real hpodd with the local provider, in a private data dir under /var/tmp
    (nodes have their own /tmp, so anything they must read lives elsewhere)."""

    def __init__(self, prefix, extra_args=(), env=None):
        self.prefix = prefix  # link/netns name prefix: unique per test file
        self.root = tempfile.mkdtemp(prefix="hpod-e2e-%s-" % prefix, dir="/var/tmp")
        self.data_dir = os.path.join(self.root, "data")
        self.aws_dir = os.path.join(self.root, "aws")
        self.fsx_root = os.path.join(self.root, "fsx")
        self.block = free_block()
        self.extra_args = list(extra_args)
        # HPOD_E2E_AGENT_TRANSPORT=tls runs a whole suite with the agents on mutual
        # TLS over the node network (CI runs test_nodes_tls.py for that path).
        transport = os.environ.get("HPOD_E2E_AGENT_TRANSPORT")
        if transport and "--agent-transport" not in self.extra_args:
            self.extra_args += ["--agent-transport", transport]
        self.env_extra = dict(env or {})
        self.proc = None
        self.port = None
        run(HPODD, "--data-dir", self.data_dir, "init", "--aws-dir", self.aws_dir,
            "--region", hpodtest.REGION, "--listen", "127.0.0.1:1")

    def start(self):
        self.log = open(os.path.join(self.root, "hpodd.out"), "a")
        env = dict(os.environ, **self.env_extra)
        self.proc = subprocess.Popen(
            [HPODD, "--data-dir", self.data_dir, "--listen", "127.0.0.1:0",
             "--region", hpodtest.REGION, "--node-block", self.block, "--link-prefix",
             self.prefix, "--fsx-root", self.fsx_root, "--heartbeat-interval-ms", "1000",
             "--log-level", "debug"] + self.extra_args,
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        line = self.proc.stdout.readline()
        # With --agent-transport tls, the agents' address comes first.
        self.agent_url = None
        joins = re.search(r"agents join on (https://\S+)", line)
        if joins:
            self.agent_url = joins.group(1)
            line = self.proc.stdout.readline()
        m = re.search(r"ready on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.wait(timeout=10)
            raise RuntimeError("hpodd did not start: %r\n%s" % (line, self.log_tail()))
        self.port = int(m.group(1))
        return self

    def log_tail(self, n=60):
        """hpodd's last `n` lines, less the debug line of each successful API
        request: a test that polls would fill the tail with its own reads."""
        try:
            with open(os.path.join(self.root, "hpodd.out")) as f:
                lines = [line for line in f if not _POLL_LINE.search(line)]
                return "".join(lines[-n:])
        except OSError:
            return ""

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        log = getattr(self, "log", None)
        if log is not None and not log.closed:
            log.close()

    def kill(self):
        """kill -9 hpodd (nodes keep running: they are re-adopted by the next start)."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.stop()

    def env(self, **extra):
        return hpodtest.client_env(self.aws_dir, **extra)

    def hpod(self, *args, check=True, timeout=120, input=None):
        """Runs the hpod CLI against this daemon; returns the CompletedProcess."""
        cmd = [HPOD, "--endpoint-url", self.endpoint, "--region", hpodtest.REGION] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env(), timeout=timeout,
                           input=input)
        if check and p.returncode != 0:
            raise AssertionError("%s failed (%d): %s %s\n--- hpodd log ---\n%s" % (
                " ".join(cmd), p.returncode, p.stdout, p.stderr, self.log_tail()))
        return p

    def session(self, target, command, check=True, timeout=120):
        """Runs `command` on a node the way a user does (hpod start-session); its
        stdout (the CLI's own "Starting session" line goes to stderr)."""
        p = self.hpod("start-session", "--target", target, "--command", command, check=False,
                      timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError("%r failed (%d): %s %s\n%s" % (
                command, p.returncode, p.stdout, p.stderr, self.log_tail()))
        return p.stdout

    def hpod_json(self, *args):
        return json.loads(self.hpod(*args, "--output", "json").stdout)

    def wait_status(self, name, want, timeout=180):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            p = self.hpod("describe-cluster", "--cluster-name", name, "--output", "json",
                          check=False)
            if want is None and p.returncode != 0 and "ResourceNotFound" in p.stderr:
                return None
            if p.returncode == 0:
                out = json.loads(p.stdout)
                last = out["ClusterStatus"]
                if last == want:
                    return out
                if last == "Failed" and want != "Failed":
                    raise AssertionError("cluster %s Failed: %s\n%s" % (
                        name, out.get("FailureMessage"), self.log_tail()))
            time.sleep(0.5)
        raise AssertionError("cluster %s never reached %s (last %s)\n%s" % (
            name, want, last, self.log_tail()))

    def nodes(self, name):
        return self.hpod_json("list-cluster-nodes", "--cluster-name", name)["ClusterNodeSummaries"]

    def node_pid(self, instance_id):
        """PID 1 of a node as the host sees it (from the provider's node.json)."""
        with open(os.path.join(self.data_dir, "local", "nodes", instance_id, "node.json")) as f:
            rec = json.load(f)
        return int(rec.get("pid") or rec["process"]["pid"])

    def in_node(self, instance_id, script, check=True, timeout=60):
        """Runs a bash script inside the node (all its namespaces) via nsenter."""
        pid = self.node_pid(instance_id)
        return run("nsenter", "-t", str(pid), "-n", "-u", "-m", "-p", "--",
                   "bash", "-c", script, check=check, timeout=timeout)

    def leftovers(self):
        """What of ours still exists on the host: netns, links, mounts, processes."""
        found = []
        netns = run("ip", "netns", "list", check=False).stdout.split()
        found += ["netns " + n for n in netns if n.startswith(self.prefix + "n")]
        for line in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(self.prefix + "v") or name.startswith(self.prefix + "br"):
                found.append("link " + name)
        with open("/proc/self/mountinfo") as f:
            found += ["mount " + l.split()[4] for l in f if self.root in l]
        for pid, cmd in processes_naming(self.root):
            if "hpodd " not in cmd and not cmd.startswith(HPODD):
                found.append("process %s: %s" % (pid, cmd[:120]))
        return found

    def cleanup(self):
        """Deletes every cluster, stops hpodd, and removes anything left."""
        if self.proc and self.proc.poll() is None:
            try:
                for c in self.hpod_json("list-clusters").get("ClusterSummaries", []):
                    self.hpod("delete-cluster", "--cluster-name", c["ClusterName"], check=False)
                    try:
                        self.wait_status(c["ClusterName"], None, timeout=60)
                    except AssertionError:
                        pass
            except Exception:  # noqa: BLE001 - best effort; the sweep below is the net
                pass
        self.stop()
        # Safety net: nothing of ours may outlive the test, whatever failed above.
        nodes_dir = os.path.join(self.data_dir, "local", "nodes")
        for iid in os.listdir(nodes_dir) if os.path.isdir(nodes_dir) else []:
            try:
                os.kill(self.node_pid(iid), signal.SIGKILL)
            except (OSError, ValueError, KeyError):
                pass
        for n in run("ip", "netns", "list", check=False).stdout.split():
            if n.startswith(self.prefix + "n"):
                run("ip", "netns", "del", n, check=False)
        for line in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(self.prefix + "br") or name.startswith(self.prefix + "v"):
                run("ip", "link", "del", name, check=False)
        run("ip", "route", "del", "unreachable", self.block, check=False)
        with open("/proc/self/mountinfo") as f:
            mounts = [l.split()[4] for l in f if self.root in l]
        for m in sorted(mounts, key=len, reverse=True):
            run("umount", "-l", m, check=False)
        keep = os.environ.get("HPOD_E2E_KEEP_LOGS")
        if keep:  # a directory to keep hpodd's log in, for a failure to be read later
            os.makedirs(keep, exist_ok=True)
            for name in ("hpodd.out", os.path.join("data", "hpodd.log")):
                if os.path.exists(os.path.join(self.root, name)):
                    shutil.copy(os.path.join(self.root, name), os.path.join(
                        keep, "%s-%s" % (self.prefix, os.path.basename(name))))
            logs = os.path.join(self.data_dir, "logs")
            if os.path.isdir(logs):
                shutil.copytree(logs, os.path.join(keep, "%s-node-logs" % self.prefix),
                                dirs_exist_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)


def processes_naming(text):
    """(pid, command line) of every other process whose command line contains text."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            out.append((int(pid), cmd))
    return out


def start_slurm_script(started):
    """A start_slurm.sh as AWS's base-config has it (`start_slurm.sh ROLE
    CONTROLLERS`): `systemctl enable --now slurmctld` on the controller, whose
    slurmd unit it moves aside; on workers slurmd.service filled with envsubst,
    daemon-reload, `systemctl enable --now slurmd`, and slurmctld's unit moved
    aside. It then writes "UNIT STATE"
    (systemctl is-active) to `started`, a path the shell expands on the node."""
    return r"""#!/bin/bash
set -ex
if [[ $1 == "controller" ]]; then
  systemctl enable --now slurmctld
  mv /etc/systemd/system/slurmd{,_DO_NOT_START_ON_CONTROLLER}.service || echo "already masked"
  unit=slurmctld
else
  SLURMD_OPTIONS="--conf-server $2" envsubst < /etc/systemd/system/slurmd.service > slurmd.service
  mv slurmd.service /etc/systemd/system/
  systemctl daemon-reload
  systemctl enable --now slurmd
  mv /etc/systemd/system/slurmctld{,_DO_NOT_START_ON_CONTROLLER}.service || echo "already masked"
  unit=slurmd
fi
echo "$unit $(systemctl is-active $unit)" > """ + started + "\n"


def write_script(path, body):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(body)
    os.chmod(path, 0o755)


def cluster_json(groups):
    return json.dumps(groups)


def lcs_group(name, count, source, on_create="on_create.sh", instance_type="ml.c5.xlarge",
              **extra):
    g = {"InstanceGroupName": name, "InstanceType": instance_type, "InstanceCount": count,
         "LifeCycleConfig": {"SourceS3Uri": source, "OnCreate": on_create},
         "ExecutionRole": "arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole"}
    g.update(extra)
    return g


def slurm_cluster(d, name, workers=3, timeout=240):
    """A 1+N Slurm cluster of `d` with a no-op lifecycle script, InService: its
    controller's instance id, its workers' ids (sorted) and the controller's
    `hpod start-session` target."""
    lcs = os.path.join(d.root, "lcs-" + name)
    write_script(os.path.join(lcs, "on_create.sh"), "#!/bin/bash\ntrue\n")
    src = "file://" + lcs + "/"
    spec = os.path.join(d.root, name + ".json")
    with open(spec, "w") as f:
        json.dump([lcs_group("controller-machine", 1, src, SlurmConfig={"NodeType": "Controller"}),
                   lcs_group("workers", workers, src, SlurmConfig={"NodeType": "Compute"})], f)
    d.hpod("create-cluster", "--cluster-name", name, "--instance-groups", "file://" + spec)
    d.wait_status(name, "InService", timeout=timeout)
    nodes = d.nodes(name)
    controller = [n["InstanceId"] for n in nodes
                  if n["InstanceGroupName"] == "controller-machine"][0]
    arn = d.hpod_json("describe-cluster", "--cluster-name", name)["ClusterArn"]
    target = "sagemaker-cluster:%s_controller-machine-%s" % (arn.split("/")[-1], controller)
    return controller, sorted(n["InstanceId"] for n in nodes
                              if n["InstanceGroupName"] == "workers"), target


class ClusterView:
    """Helpers over one cluster of `d` named `name` (its ARN read once): the
    session target of a node, a file of its /fsx, a node's address."""

    def __init__(self, d, name):
        self.d = d
        self.name = name
        self.arn = d.hpod_json("describe-cluster", "--cluster-name", name)["ClusterArn"]
        self.cluster_id = self.arn.split("/")[-1]

    def target(self, node):
        return "sagemaker-cluster:%s_%s-%s" % (self.cluster_id, node["InstanceGroupName"],
                                               node["InstanceId"])

    def fsx_path(self, name):
        return os.path.join(self.d.fsx_root, self.cluster_id, name)

    def fsx(self, name):
        """A file of the cluster's /fsx ("" while it does not exist)."""
        try:
            with open(self.fsx_path(name)) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def ip_of(self, node):
        return self.d.hpod_json("describe-cluster-node", "--cluster-name", self.name, "--node-id",
                                node["InstanceId"])["NodeDetails"]["PrivatePrimaryIp"]


def wait_for_files(directory, prefix, count, timeout=120):
    """Until `count` files named prefix* are in `directory` (a gate's arrivals),
    or the timeout; returns how many there are."""
    deadline = time.time() + timeout
    while True:
        n = len([f for f in os.listdir(directory) if f.startswith(prefix)])
        if n >= count or time.time() >= deadline:
            return n
        time.sleep(0.2)


def training_fsx(fsx, on_node):
    """/fsx (host path `fsx`) for the seed's training job: hpod-train and
    hpod-data in /fsx/bin, the KJV sample at /fsx/data/corpus.txt, tokenized with a
    512-token tokenizer into /fsx/data/train512.bin by `on_node(script)` (a node of
    the cluster runs it, as a user would)."""
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for d in ("bin", "data"):
        os.makedirs(os.path.join(fsx, d), exist_ok=True)
    for tool in ("hpod-data", "hpod-train"):
        shutil.copy(os.path.join(hpodtest.BIN_DIR, "cmd", tool, tool), os.path.join(fsx, "bin"))
    shutil.copy(os.path.join(top, "src", "train", "data", "testdata", "kjv_raw_sample.txt"),
                os.path.join(fsx, "data", "corpus.txt"))
    on_node("set -e; /fsx/bin/hpod-data train-tokenizer --vocab-size 512 --input "
            "/fsx/data/corpus.txt --output /fsx/data/tok512 && /fsx/bin/hpod-data tokenize "
            "--tokenizer /fsx/data/tok512.model --input /fsx/data/corpus.txt "
            "--output /fsx/data/train512.bin")
