"""A node as HyperPod users find it (issue 28), on a real 1+2 Slurm cluster.

The lifecycle script relies on what AWS's public base-config relies on, written
here by us: it finds the node's address as lifecycle_script.py does (a UDP
connect to an outside address, then getsockname) and looks it up in
resource_config.json, runs its steps through `sudo bash`, and installs a package
with dpkg on all three nodes at once. Each node has its own root filesystem, so
the three dpkg runs take three different locks, the package lands on each node
and not on the host, and a replacement starts from a clean root under the same
hostname and host key. Root and a user reach every node with ssh and no key of
their own (host-based trust). A requeued job appends to its output
(JobFileAppend=1). Needs root and Debian's Slurm, sudo and openssh-server."""
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import nodestest  # noqa: E402

PKG = "hpod-e2e-probe"

# What lifecycle_script.py does, step for step, without its scripts.
ON_CREATE = r"""#!/bin/bash
set -euo pipefail
cd "$(dirname "$0")"
ip=$(python3 - <<'EOF'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("10.254.254.254", 1))  # "doesn't even have to be reachable"
print(s.getsockname()[0])
EOF
)
group=$(python3 - "$ip" <<'EOF'
import json, sys
rc = json.load(open("/opt/ml/config/resource_config.json"))
for g in rc["InstanceGroups"]:
    for i in g.get("Instances") or []:
        if i.get("CustomerIpAddress") == sys.argv[1]:
            print(g["Name"])
            sys.exit(0)
sys.exit("this instance (%s) is not in resource_config.json" % sys.argv[1])
EOF
)
echo "$ip $group" > /fsx/lookup-$(hostname)
sudo bash ./install.sh
sudo bash ./add_users.sh
"""

# add_users.sh's contract: shared_users.txt lines "user,uid,home"; the same uid on
# every node (each node has its own /etc/passwd), homes on /fsx.
ADD_USERS = r"""#!/bin/bash
set -euo pipefail
while IFS=, read -r name uid home; do
  id -u "$name" >/dev/null 2>&1 && continue
  useradd --create-home --uid "$uid" --home-dir "$home" --shell /bin/bash "$name"
done < shared_users.txt
"""

INSTALL = r"""#!/bin/bash
set -euo pipefail
[ "$(id -u)" = 0 ]
dpkg -i ./%s.deb
hostname > /etc/hpod-e2e-node
""" % PKG

REQUEUE_JOB = r"""#!/bin/bash
#SBATCH --output=/fsx/requeue.out
#SBATCH --requeue
echo "attempt ${SLURM_RESTART_COUNT:-0}"
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 120; fi
"""



def build_deb(directory):
    """A tiny package of our own (one file under /usr/share), built with dpkg-deb."""
    root = os.path.join(directory, "pkgroot")
    os.makedirs(os.path.join(root, "DEBIAN"))
    os.makedirs(os.path.join(root, "usr", "share", PKG))
    with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
        f.write("Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: hpod <hpod@localhost>\n"
                "Description: hpod e2e probe\n" % PKG)
    with open(os.path.join(root, "usr", "share", PKG, "installed"), "w") as f:
        f.write("yes\n")
    nodestest.run("dpkg-deb", "--root-owner-group", "--build", root,
                  os.path.join(directory, PKG + ".deb"))
    shutil.rmtree(root)


class HyperPodNodeTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurmctld/slurmd/munge are not installed "
                                    "(scripts/install-deps.sh installs them)")
        for program in ("sudo", "sshd"):
            if not shutil.which(program) and not os.path.exists("/usr/sbin/" + program):
                raise unittest.SkipTest(program + " is not installed "
                                        "(scripts/install-deps.sh installs it)")
        if subprocess.run(["dpkg", "-s", PKG], capture_output=True).returncode == 0:
            raise unittest.SkipTest(PKG + " is installed on this host: remove it first")
        cls.d = nodestest.NodesDaemon("t8h")
        try:
            lcs = os.path.join(cls.d.root, "lcs")
            nodestest.write_script(os.path.join(lcs, "on_create.sh"), ON_CREATE)
            nodestest.write_script(os.path.join(lcs, "install.sh"), INSTALL)
            nodestest.write_script(os.path.join(lcs, "add_users.sh"), ADD_USERS)
            with open(os.path.join(lcs, "shared_users.txt"), "w") as f:
                f.write("alice,2801,/fsx/alice\nbob,2802,/fsx/bob\n")
            build_deb(lcs)
            cls.d.start()
            src = "file://" + lcs + "/"
            spec = os.path.join(cls.d.root, "cluster.json")
            with open(spec, "w") as f:
                json.dump([nodestest.lcs_group("controller-machine", 1, src,
                                               SlurmConfig={"NodeType": "Controller"}),
                           nodestest.lcs_group("workers", 2, src,
                                               SlurmConfig={"NodeType": "Compute"})], f)
            cls.d.hpod("create-cluster", "--cluster-name", "hp", "--instance-groups",
                       "file://" + spec)
            cls.d.wait_status("hp", "InService", timeout=240)
            cls.view = nodestest.ClusterView(cls.d, "hp")
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def node_list(self):
        return self.d.nodes("hp")

    def target(self, node):
        return self.view.target(node)

    def controller(self):
        return [n for n in self.node_list() if n["InstanceGroupName"] == "controller-machine"][0]

    def fsx(self, name):
        return self.view.fsx(name)

    def ip_of(self, node):
        return self.view.ip_of(node)

    def test_1_lifecycle_script_finds_its_address_and_installs_on_its_own_root(self):
        for node in self.node_list():
            hostname = node["PrivateDnsHostname"].split(".")[0]
            # The address lookup found this node in resource_config.json.
            self.assertEqual(self.fsx("lookup-" + hostname).split(),
                             [self.ip_of(node), node["InstanceGroupName"]])
            # dpkg ran on all three at once; each has the package, on its own root.
            out = self.d.in_node(node["InstanceId"],
                                 "dpkg-query -W -f '${Status}' %s; echo; cat /etc/hpod-e2e-node; "
                                 "findmnt -n -o FSTYPE /" % PKG).stdout
            self.assertEqual(out.split("\n")[:3], ["install ok installed", hostname, "overlay"],
                             out)
        # Nothing of it reached the host.
        self.assertNotEqual(subprocess.run(["dpkg", "-s", PKG], capture_output=True).returncode, 0)
        self.assertFalse(os.path.exists("/usr/share/" + PKG))
        self.assertFalse(os.path.exists("/etc/hpod-e2e-node"))

    def test_2_a_session_is_the_nodes_own_machine(self):
        ctl = self.controller()
        out = self.d.session(self.target(ctl),
                             "echo $HOME; cmp -s ~/.bashrc /etc/skel/.bashrc && echo skel; "
                             "cat /etc/hostname; sudo -n id -u; hostname -I; "
                             "ip route get 1.1.1.1 | grep -o 'src [0-9.]*'")
        hostname = ctl["PrivateDnsHostname"].split(".")[0]
        ip = self.ip_of(ctl)
        self.assertEqual([line.strip() for line in out.split("\n")[:6]],
                         ["/root", "skel", hostname, "0", ip, "src " + ip], out)
        # Outside addresses: TCP is refused at once (apt, pip, curl fail fast), and
        # anything else is routed to the node's own loopback, never out of eth0.
        # ENETUNREACH comes from the route lookup itself (a dropped SYN would give
        # ETIMEDOUT), so the refusal is immediate without timing it here.
        script = ("import socket\ns = socket.socket()\n"
                  "try:\n    s.connect(('192.0.2.1', 80))\nexcept OSError as e:\n"
                  "    print(e.errno)\n")
        out = self.d.in_node(ctl["InstanceId"], "python3 -c \"%s\"" % script).stdout
        self.assertEqual(out.split(), ["101"])  # ENETUNREACH
        route = self.d.in_node(ctl["InstanceId"], "ip route get 192.0.2.1 ipproto udp").stdout
        self.assertIn("dev lo", route)

    def test_3_a_requeued_job_appends_to_its_output(self):
        ctl = self.target(self.controller())
        self.d.session(ctl, "cat > /fsx/requeue.sbatch <<'EOF'\n%sEOF" % REQUEUE_JOB)
        job = self.d.session(ctl, "sbatch --parsable /fsx/requeue.sbatch").strip()
        deadline = time.time() + 60
        while "attempt 0" not in self.fsx("requeue.out"):
            self.assertLess(time.time(), deadline, "the job never started")
            time.sleep(0.5)
        # The job is running attempt 0 (it sleeps): requeue it as hpod does.
        self.d.session(ctl, "scontrol requeue " + job)
        deadline = time.time() + 90
        while "attempt 1" not in self.fsx("requeue.out"):
            self.assertLess(time.time(), deadline, "the requeued job never ran: %s" %
                            self.d.session(ctl, "squeue; scontrol show job " + job))
            time.sleep(0.5)
        # Both attempts' lines, and Slurm's own line about the requeue between them.
        out = self.fsx("requeue.out")
        self.assertEqual([line for line in out.splitlines() if line.startswith("attempt")],
                         ["attempt 0", "attempt 1"], out)
        self.assertIn("DUE TO JOB REQUEUE", out)
        # Accounting keeps both attempts (slurmdbd and MariaDB on the controller).
        deadline = time.time() + 60
        while True:
            records = self.d.session(ctl, "sacct --duplicates -n -X -P -j %s -o jobid,state" % job)
            if "%s|REQUEUED" % job in records or time.time() > deadline:
                break
            time.sleep(1)
        self.assertIn("%s|REQUEUED" % job, records)
        self.assertGreaterEqual(len(records.split()), 2, records)

    def ssh_from(self, node, command, user="root"):
        """`ssh` run on `node` as `user`, never prompting (BatchMode) and refusing a
        host key that is not the known one (StrictHostKeyChecking)."""
        ssh = ("ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=5 %s"
               % command)
        if user != "root":
            ssh = "su %s -c '%s'" % (user, ssh)
        return self.d.in_node(node["InstanceId"], ssh, check=False)

    def test_3b_ssh_between_nodes_as_root_and_as_a_user(self):
        ctl = self.controller()
        workers = [n for n in self.node_list() if n["InstanceGroupName"] == "workers"]
        for w in workers:
            name = w["PrivateDnsHostname"].split(".")[0]
            for target in (name, self.ip_of(w)):
                p = self.ssh_from(ctl, target + " hostname")
                self.assertEqual((p.returncode, p.stdout.strip()), (0, name), p.stderr)
        # Worker to worker, and back to the controller.
        p = self.ssh_from(workers[0], ctl["PrivateDnsHostname"].split(".")[0] + " hostname")
        self.assertEqual(p.returncode, 0, p.stderr)
        # A user of shared_users.txt (the same uid on every node) needs no key of
        # their own: the nodes vouch for each other.
        p = self.ssh_from(ctl, workers[0]["PrivateDnsHostname"].split(".")[0] + " id -un",
                          user="alice")
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "alice"), p.stderr)
        # sshd listens on the cluster address only; no password is ever asked.
        out = self.d.in_node(ctl["InstanceId"], "ss -Hltn sport = :22").stdout
        self.assertEqual([line.split()[3] for line in out.splitlines()],
                         [self.ip_of(ctl) + ":22"], out)
        p = self.d.in_node(ctl["InstanceId"],
                           "ssh -o BatchMode=yes -o HostbasedAuthentication=no "
                           "-o PubkeyAuthentication=no %s true" % self.ip_of(workers[0]),
                           check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Permission denied", p.stderr)

    def test_3c_cluster_users_submit_jobs_and_open_shells(self):
        ctl = self.controller()
        for n in self.node_list():
            self.assertEqual(self.d.in_node(n["InstanceId"], "id -u alice; id -u bob").stdout.split(),
                             ["2801", "2802"])
        # A shell as the user: its home on /fsx, its own uid.
        out = self.d.session(self.target(ctl), "id -un; pwd; echo $HOME")
        self.assertEqual(out.split(), ["root", "/root", "/root"])  # an admin key: root by default
        p = self.d.hpod("start-session", "--target", self.target(ctl), "--user", "alice",
                        "--command", "id -un; pwd; echo $HOME")
        self.assertEqual(p.stdout.split(), ["alice", "/fsx/alice", "/fsx/alice"], p.stderr)
        # sbatch as the user across both workers; the files on /fsx are theirs.
        job = self.d.hpod("start-session", "--target", self.target(ctl), "--user", "alice",
                          "--command", "sbatch --parsable --wait -N2 -o /fsx/alice/job.out "
                          "--wrap 'srun bash -c \"id -un > /fsx/alice/rank-\\$SLURM_PROCID\"'",
                          timeout=120)
        self.assertEqual(job.returncode, 0, job.stderr)
        home = self.view.fsx_path("alice")
        for rank in ("rank-0", "rank-1"):
            path = os.path.join(home, rank)
            with open(path) as f:
                self.assertEqual(f.read(), "alice\n")
            self.assertEqual((os.stat(path).st_uid, os.stat(path).st_gid), (2801, 2801))
        # A key of the user role opens shells as a cluster user only.
        block = subprocess.run([nodestest.HPODD, "--data-dir", self.d.data_dir, "create-key",
                                "--role", "user"], capture_output=True, text=True,
                               check=True).stdout
        with open(os.path.join(self.d.aws_dir, "credentials"), "a") as f:
            f.write("\n" + block)
        env = self.d.env(AWS_PROFILE="user")
        base = [nodestest.HPOD, "--endpoint-url", self.d.endpoint, "--region", nodestest.hpodtest.REGION,
                "start-session", "--target", self.target(ctl), "--command", "id -un"]
        p = subprocess.run(base, capture_output=True, text=True, env=env, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("AccessDenied", p.stderr)
        p = subprocess.run(base + ["--user", "bob"], capture_output=True, text=True, env=env,
                           timeout=60)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "bob"), p.stderr)
        # ... and never a system account (munge's could read the cluster's munge key).
        p = subprocess.run(base + ["--user", "munge"], capture_output=True, text=True, env=env,
                           timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("system account", p.stderr)

    def test_3d_accounting_lists_every_job_with_its_user(self):
        ctl = self.target(self.controller())
        cluster = self.d.session(ctl, "sacctmgr -n -P list cluster format=cluster").split()
        self.assertEqual(len(cluster), 1, cluster)
        # slurmctld sends job records to slurmdbd in the background: wait for them.
        deadline = time.time() + 60
        while True:
            out = self.d.session(ctl, "sacct -a -n -X -P -o user,state,nnodes -S 2026-01-01")
            rows = [line.split("|") for line in out.split()]
            if ["alice", "COMPLETED", "2"] in rows or time.time() > deadline:
                break
            time.sleep(1)
        self.assertIn(["alice", "COMPLETED", "2"], rows, out)
        self.assertTrue(any(r[0] == "root" for r in rows), out)
        # sreport answers from slurmdbd (its hourly rollup has nothing yet; a missing
        # slurmdbd would fail it).
        p = self.d.hpod("start-session", "--target", ctl, "--command",
                        "sreport -n -P cluster utilization", check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def host_key_of(self, node, from_node):
        """The ed25519 host key `node` presents, as `from_node` sees it."""
        out = self.d.in_node(from_node["InstanceId"], "ssh-keyscan -t ed25519 %s 2>/dev/null"
                             % node["PrivateDnsHostname"].split(".")[0]).stdout
        return out.split()[-1] if out.strip() else ""

    def test_4_a_replacement_starts_from_a_clean_root(self):
        victim = [n for n in self.node_list() if n["InstanceGroupName"] == "workers"][0]
        ctl = self.controller()
        key_before = self.host_key_of(victim, ctl)
        self.assertTrue(key_before)
        self.d.in_node(victim["InstanceId"], "echo old > /etc/hpod-e2e-leftover")
        self.d.hpod("inject-fault", "--cluster-name", "hp", "--node-id", victim["InstanceId"],
                    "--kind", "kill-node")
        deadline = time.time() + 120
        new = None
        while new is None:
            self.assertLess(time.time(), deadline, "no replacement: %s" % self.node_list())
            time.sleep(0.5)
            new = next((n for n in self.node_list()
                        if n["PrivateDnsHostname"] == victim["PrivateDnsHostname"]
                        and n["InstanceId"] != victim["InstanceId"]
                        and n["InstanceStatus"]["Status"] == "Running"), None)
        out = self.d.in_node(new["InstanceId"],
                             "test -e /etc/hpod-e2e-leftover && echo leftover || echo clean; "
                             "cat /etc/hpod-e2e-node; dpkg-query -W -f '${Status}\n' " + PKG +
                             "; id -u alice").stdout
        self.assertEqual(out.split("\n")[:4],
                         ["clean", victim["PrivateDnsHostname"].split(".")[0],
                          "install ok installed", "2801"], out)
        # The same host key under the same name: ssh from the controller, which
        # knew the old node, connects without "REMOTE HOST IDENTIFICATION HAS CHANGED".
        deadline = time.time() + 60
        while True:
            p = self.ssh_from(ctl, victim["PrivateDnsHostname"].split(".")[0] + " hostname")
            if p.returncode == 0 or time.time() > deadline:
                break
            time.sleep(1)  # its sshd starts with its Slurm role
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.host_key_of(victim, ctl), key_before)
        # The replacement's jobs are accounted too.
        name = victim["PrivateDnsHostname"].split(".")[0]
        job = self.d.session(self.target(ctl), "sbatch --parsable --wait -w %s --wrap true"
                             % name, timeout=120).strip()
        deadline = time.time() + 60
        while True:
            out = self.d.session(self.target(ctl), "sacct -n -X -P -j %s -o nodelist,state" % job)
            if out.split() == ["%s|COMPLETED" % name] or time.time() > deadline:
                break
            time.sleep(1)
        self.assertEqual(out.split(), ["%s|COMPLETED" % name], out)

    def test_5_accounting_survives_a_controller_reboot(self):
        ctl = self.controller()
        target = self.target(ctl)
        before = self.d.session(target, "sacct -a -n -X -P -o jobid -S 2026-01-01").split()
        self.assertTrue(before)
        self.d.hpod("batch-reboot-cluster-nodes", "--cluster-name", "hp", "--node-ids",
                    ctl["InstanceId"])
        deadline = time.time() + 180
        while True:
            p = self.d.hpod("start-session", "--target", target, "--command",
                            "srun -N2 true && sacct -a -n -X -P -o jobid -S 2026-01-01",
                            check=False, timeout=60)
            if p.returncode == 0 or time.time() > deadline:
                break
            time.sleep(2)
        self.assertEqual(p.returncode, 0, p.stderr + self.d.log_tail())
        after = p.stdout.split()
        for job in before:
            self.assertIn(job, after)


if __name__ == "__main__":
    unittest.main(verbosity=2)
