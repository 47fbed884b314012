"""Hosts that look like separate machines, on one machine (issue 26's test rig).

Each host is a network namespace with one veth on the rig's bridge and an address
in a guarded test block, and a process tree in its own mount, UTS and PID
namespaces whose PID 1 is tests/e2e/hostinit.sh: it gives the host private
/tmp, /run, /var/lib, /var/log, /var/spool, /home, /opt, /srv and /var/tmp, its own machine
id and boot id and a disk of its own (kept across its reboots), and plays
systemd for hpod-agent (restarts it unless it exits 78; SIGUSR1 reboots). The
host reaches hpodd only over its veth (hpodd's --agent-listen on the bridge
address) and sees nothing of hpodd's data dir or sockets. /usr stays the
machine's: the stand-in for "the .deb is installed".

Network safety (../shared/reference/slurm-on-namespaces.md): the unreachable
guard route for the whole block and the bridge address exist before any host
namespace does, so no packet for a host address can leave through the default
route. Names start with `hpr` (netns hpr-h<k>, links hprbr, hprv<k>-h): a rig
that ctest killed is swept by the next one (`sweep()`), by name and by the block
it recorded.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import nodestest

HERE = os.path.dirname(os.path.abspath(__file__))
INIT = os.path.join(HERE, "hostinit.sh")
SFTP_SERVE = os.path.join(HERE, "sftp_serve.py")
AGENT_UNIT = os.path.join(HERE, "..", "..", "packaging", "hpod-agent.service")
SFTP_SERVER = "/usr/lib/openssh/sftp-server"  # what sftp_serve.py runs per connection
PREFIX = "hpr"
BRIDGE = PREFIX + "br"
STATE = "/run/hpod-hostrig.block"  # the guarded block, for the next sweep


def run(*cmd, check=True):
    return nodestest.run(*cmd, check=check)


def sweep():
    """Removes what a killed rig left: its hosts' processes, namespaces, links and
    guard route."""
    for ns in run("ip", "netns", "list", check=False).stdout.split("\n"):
        name = ns.split(" ")[0]
        if not name.startswith(PREFIX + "-h"):
            continue
        for pid in run("ip", "netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        run("ip", "netns", "del", name, check=False)
    for line in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        link = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if link.startswith(PREFIX):
            run("ip", "link", "del", link, check=False)
    # The cgroups a systemd host's namespace was rooted at (hostinit.sh), once
    # their processes are gone: the deepest first.
    for hierarchy in os.listdir("/sys/fs/cgroup"):
        top = os.path.join("/sys/fs/cgroup", hierarchy)
        if os.path.islink(top) or not os.path.ismount(top):
            continue
        ours = [d for d, _, _ in os.walk(top) if os.path.basename(d).startswith(PREFIX + "-")]
        for root in ours:
            for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -w[0].count("/")):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
    if os.path.exists(STATE):
        with open(STATE) as f:
            block = f.read().strip()
        if block:
            run("ip", "route", "del", "unreachable", block, check=False)
        os.remove(STATE)


def systemd_possible():
    """Whether boot(systemd=True) can run here: Debian's systemd, and the
    machine's cgroups in hybrid mode (a mounted name=systemd hierarchy), in which
    hostinit.sh gives each host a cgroup namespace of its own."""
    return os.path.exists("/lib/systemd/systemd") and os.path.ismount("/sys/fs/cgroup/systemd")


class Host:
    def __init__(self, rig, k, name, ip):
        self.rig, self.k, self.name, self.ip = rig, k, name, ip
        self.netns = "%s-h%d" % (PREFIX, k)
        self.disk = os.path.join(rig.root, name)
        self.init = None

    @property
    def log(self):
        return os.path.join(self.disk, "log", "agent.log")

    def pid1(self):
        """The host's PID 1 as the machine sees it (unshare's only child)."""
        children = "/proc/%d/task/%d/children" % (self.init.pid, self.init.pid)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with open(children) as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        raise RuntimeError("host %s has no PID 1" % self.name)

    def sh(self, command, check=True):
        """Runs `command` (bash) inside the host: its network, mounts, hostname, pids."""
        return run("nsenter", "-t", str(self.pid1()), "-n", "-m", "-u", "-p", "--", "bash", "-c",
                   command, check=check)

    def agent_pids(self):
        out = self.sh("pgrep -x hpod-agent || true").stdout.split()
        return [int(p) for p in out]

    def wait_for_systemd(self, timeout=30):
        """Until the host's systemd (boot(systemd=True)) finished starting up."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = self.sh("systemctl is-system-running 2>/dev/null || true").stdout.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.2)
        raise RuntimeError("systemd on %s did not start: %s" % (self.name, state))

    def join_by_hand(self, server, token, instance_type):
        """What an admin types on the machine: the first join, which hands the
        agent to the packaged hpod-agent.service (service_handoff.h)."""
        # A join that does not hand off keeps the agent in the foreground: bounded,
        # and the unit must then run it.
        out = self.sh("timeout 40 /opt/hpod/bin/hpod-agent join --server %s --token %s "
                      "--instance-type %s" % (server, token, instance_type), check=False)
        if out.returncode != 0:
            raise RuntimeError("the join on %s did not hand the agent to hpod-agent.service "
                               "(exit %d): %s" % (self.name, out.returncode, out.stderr[-2000:]))
        return out

    def reboot(self):
        os.kill(self.pid1(), signal.SIGUSR1)

    def power_off(self):
        """The machine stops: every process of the host at once (its PID 1 and
        so its PID namespace). Its disk stays; boot() starts it again."""
        os.kill(self.pid1(), signal.SIGKILL)
        self.init.wait(timeout=30)
        self.init = None

    def boot_id(self):
        with open(os.path.join(self.disk, "boot_id")) as f:
            return f.read().strip()

    def read_log(self):
        """The agent's log, after the init's own output (mount errors, ...)."""
        out = ""
        for path in (os.path.join(self.disk, "init.log"), self.log):
            try:
                with open(path) as f:
                    out += f.read()
            except FileNotFoundError:
                pass
        return out


class Rig:
    """`hosts` machines on a bridge in a free guarded block; hpodd listens for
    agents on `server_ip` (the bridge's address)."""

    def __init__(self, hosts):
        sweep()
        self.block = nodestest.free_block()  # 10.X.0.0/16
        base = self.block.split(".0.0/")[0]  # 10.X
        self.server_ip = base + ".0.1"
        self.root = tempfile.mkdtemp(prefix="hpod-hostrig-", dir="/var/tmp")
        with open(STATE, "w") as f:
            f.write(self.block)
        # Guard first, then the bridge and its address: only then any namespace.
        run("ip", "route", "add", "unreachable", self.block)
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", self.server_ip + "/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        self.hosts = [Host(self, k, "host%d" % k, "%s.0.%d" % (base, 10 + k))
                      for k in range(hosts)]
        for h in self.hosts:
            run("ip", "netns", "add", h.netns)
            hv, cv = "%sv%d-h" % (PREFIX, h.k), "%sv%d-c" % (PREFIX, h.k)
            run("ip", "link", "add", hv, "type", "veth", "peer", "name", cv)
            run("ip", "link", "set", cv, "netns", h.netns)
            run("ip", "-n", h.netns, "link", "set", cv, "name", "eth0")
            run("ip", "-n", h.netns, "addr", "add", h.ip + "/24", "dev", "eth0")
            run("ip", "-n", h.netns, "link", "set", "lo", "up")
            run("ip", "-n", h.netns, "link", "set", "eth0", "up")
            run("ip", "link", "set", hv, "master", BRIDGE, "up")

    def boot(self, host, agent, server, token, instance_type, spank="", systemd=False):
        """Starts the host's PID 1 (hostinit.sh), which joins with `token` once;
        `spank` (a path) is installed as /opt/hpod/lib/spank_hpod.so. With
        `systemd`, PID 1 is Debian's systemd with the packaged hpod-agent.service,
        which nothing runs until join_by_hand()."""
        os.makedirs(host.disk, exist_ok=True)
        env = dict(os.environ)
        if systemd and not systemd_possible():
            raise RuntimeError("a systemd host needs the machine's name=systemd cgroup hierarchy")
        if systemd:
            env.update(HOSTRIG_INIT="systemd", HOSTRIG_AGENT_UNIT=AGENT_UNIT)
        # The init writes the boot's id first; a caller reads it as soon as this
        # returns, so the old boot's file must not be what it finds.
        boot_file = os.path.join(host.disk, "boot_id")
        if os.path.exists(boot_file):
            os.unlink(boot_file)
        with open(os.path.join(host.disk, "init.log"), "a") as out:  # the child keeps its copy
            host.init = subprocess.Popen(
                ["nsenter", "--net=/run/netns/" + host.netns, "unshare", "--uts", "--mount",
                 "--pid", "--fork", "--mount-proc", "--propagation", "private", INIT, host.disk,
                 host.name, agent, server, token, instance_type, spank],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
        host.pid1()
        deadline = time.time() + 10
        while not (os.path.exists(boot_file) and len(host.boot_id()) == 36):
            if time.time() > deadline:
                raise RuntimeError("host %s wrote no boot id (see init.log)" % host.name)
            time.sleep(0.05)
        return host

    def start_storage(self, host, port=2222):
        """Makes `host` the storage host: it serves <rig root>/fsx over SFTP on
        `port` (sftp_serve.py, no sshd). Returns (source, options) for
        HpodSharedFilesystem of Type fuse.sshfs."""
        self.fsx = os.path.join(self.root, "fsx")
        os.makedirs(self.fsx, exist_ok=True)
        out = open(os.path.join(self.root, "storage.log"), "a")
        self.storage = subprocess.Popen(
            ["ip", "netns", "exec", host.netns, sys.executable, SFTP_SERVE, host.ip, str(port)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        deadline = time.time() + 10
        while time.time() < deadline:
            if run("ip", "netns", "exec", host.netns, "bash", "-c",
                   "exec 3<>/dev/tcp/%s/%d" % (host.ip, port), check=False).returncode == 0:
                return "%s:%s" % (host.ip, self.fsx), "directport=%d,allow_other" % port
            time.sleep(0.1)
        raise RuntimeError("the storage host did not start serving (see storage.log)")

    def cleanup(self):
        if getattr(self, "storage", None) is not None:
            self.storage.kill()
            self.storage.wait(timeout=30)
        for h in self.hosts:
            if h.init is not None and h.init.poll() is None:
                try:
                    os.kill(h.pid1(), signal.SIGKILL)
                except (RuntimeError, ProcessLookupError):
                    pass
                h.init.kill()
                h.init.wait(timeout=30)
        sweep()
        shutil.rmtree(self.root, ignore_errors=True)
