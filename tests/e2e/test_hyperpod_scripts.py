"""Lifecycle scripts shaped like AWS's base-config, run unchanged on a real 1+2
Slurm cluster (issue 28).

The scripts are ours (the project copies no public code) and rely on exactly
what the public ones rely on: provisioning_parameters.json names the groups;
on_create.sh tees to /var/log/provision/provisioning.log and runs a Python
driver that runs each step through `sudo bash`; add_users.sh reads
shared_users.txt; the driver waits for /opt/slurm/etc/slurm.conf to name the
controller, finds the node's address with a UDP connect, and looks itself up in
resource_config.json; the controller sets accounting up in HyperPod's order
(`systemctl start mariadb`, `systemctl enable --now slurmdbd`, wait on
`systemctl is-active slurmdbd`) and then start_slurm.sh starts Slurm with
systemctl: `systemctl enable --now slurmctld` on the controller, and on workers
slurmd.service filled with envsubst, `systemctl daemon-reload`, `systemctl
enable --now slurmd`. On hpod's nodes systemctl is the agent's (PID 1 is not
systemd): the daemons the scripts start are the ones hpod supervises, one
process each. Then: sinfo and srun, a user of shared_users.txt submits a job,
ssh between nodes as that user and as root, sacct, a stop that hpod does not
undo, the AMI's user `ubuntu`, pdsh and mpirun as a user, and kill-node under an
--auto-resume job: the replacement ran the same
scripts, has the same host key and the user, joins accounting, and the job
resumes and completes with both attempts in sacct. Needs root and Debian's
slurm, slurmdbd, mariadb-server, sudo, openssh-server, gettext-base, pdsh and
openmpi-bin."""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import nodestest  # noqa: E402

# Whether this host had a user `ubuntu` of its own before the test (the nodes' must
# not land on it).
HOST_HAS_UBUNTU = subprocess.run(["getent", "passwd", "ubuntu"],
                                 capture_output=True).returncode == 0

PARAMS = {"version": "1.0.0", "workload_manager": "slurm",
          "controller_group": "controller-machine",
          "worker_groups": [{"instance_group_name": "workers", "partition_name": "dev"}]}

ON_CREATE = r"""#!/bin/bash
set -ex
LOG_FILE="/var/log/provision/provisioning.log"
mkdir -p /var/log/provision
touch $LOG_FILE
: "${SAGEMAKER_RESOURCE_CONFIG_PATH:=/opt/ml/config/resource_config.json}"
python3 -u lifecycle.py -rc "$SAGEMAKER_RESOURCE_CONFIG_PATH" \
  -pp provisioning_parameters.json > >(tee -a $LOG_FILE) 2>&1
"""

# The driver's steps, as lifecycle_script.py takes them.
LIFECYCLE = r'''
import argparse, json, os, socket, subprocess, time

SLURM_CONF = os.getenv("SLURM_CONF", "/opt/slurm/etc/slurm.conf")

def bash(script, *args):
    print("Execute script: %s %s" % (script, " ".join(args)), flush=True)
    subprocess.run(["sudo", "bash", script, *args], check=True)

def addresses(rc, group):
    for g in rc["InstanceGroups"]:
        if g["Name"] == group:
            return [i["CustomerIpAddress"] for i in g.get("Instances") or []]
    return []

def wait_for_slurm_conf(controllers):
    for _ in range(12):
        if not os.path.exists(SLURM_CONF):
            return "absent"
        if any(ip in open(SLURM_CONF).read() for ip in controllers):
            return "names the controller"
        time.sleep(5)
    return "without the controller"

def my_address():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("10.254.254.254", 1))
    return s.getsockname()[0]

def wait_for_scontrol():
    for _ in range(24):
        out = subprocess.run(["scontrol", "show", "nodes"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return True
        time.sleep(5)
    return False

p = argparse.ArgumentParser()
p.add_argument("-rc")
p.add_argument("-pp")
a = p.parse_args()
params = json.load(open(a.pp))
rc = json.load(open(a.rc))
bash("./add_users.sh")
controllers = addresses(rc, params["controller_group"])
conf = wait_for_slurm_conf(controllers)
ip = my_address()
group = next(g for g in rc["InstanceGroups"]
             if ip in [i["CustomerIpAddress"] for i in g.get("Instances") or []])
node_type = "controller" if group["Name"] == params["controller_group"] else "compute"
host = socket.gethostname()
with open("/fsx/script-%s" % host, "w") as f:
    f.write("%s %s %s\n" % (ip, node_type, conf.replace(" ", "-")))
if node_type == "controller":
    bash("./setup_accounting.sh")
bash("./start_slurm.sh", node_type, ",".join(controllers))
if node_type == "controller":
    assert wait_for_scontrol(), "scontrol show nodes never answered"
print("[INFO]: Success: All provisioning scripts completed", flush=True)
'''

ADD_USERS = r"""#!/bin/bash
set -ex
[[ -s shared_users.txt ]] || exit 0
while IFS="," read -r username uid home; do
  id -u "$username" >/dev/null 2>&1 && continue
  useradd -m "$username" --uid "$uid" -d "$home" --shell /bin/bash
done < shared_users.txt
"""

# HyperPod's order: MariaDB up, then slurmdbd, before slurmctld starts.
SETUP_ACCOUNTING = r"""#!/bin/bash
set -euxo pipefail
systemctl start mariadb
systemctl status mariadb
systemctl enable --now slurmdbd
for i in $(seq 30); do systemctl is-active --quiet slurmdbd && break; sleep 2; done
systemctl is-active --quiet slurmdbd
"""

START_SLURM = nodestest.start_slurm_script("/fsx/started-$(hostname)")

# srun --auto-resume across two nodes: attempt 0 waits at a gate on /fsx until a
# node is killed; the retry (on the replacement and the other worker) finishes.
RESUMED_STEP = r"""#!/bin/bash
if [ "${HPOD_AUTO_RESUME_ATTEMPT:-0}" = 0 ]; then
  touch /fsx/ar.at-gate.$SLURM_PROCID
  while true; do sleep 0.2; done
fi
echo "attempt ${HPOD_AUTO_RESUME_ATTEMPT}" > /fsx/ar.done.$SLURM_PROCID
"""


class HyperPodScriptsTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            raise unittest.SkipTest("Debian's slurmctld/slurmd/munge are not installed "
                                    "(scripts/install-deps.sh installs them)")
        for path in ("/usr/bin/sudo", "/usr/sbin/sshd", "/usr/sbin/slurmdbd",
                     "/usr/sbin/mariadbd", "/usr/bin/envsubst", "/usr/bin/pdsh", "/usr/bin/mpirun"):
            if not os.path.exists(path):
                raise unittest.SkipTest(path + " is not installed "
                                        "(scripts/install-deps.sh installs it)")
        cls.d = nodestest.NodesDaemon("t8s", extra_args=("--slurm-accounting", "on"))
        try:
            lcs = os.path.join(cls.d.root, "lcs")
            for name, text in (("on_create.sh", ON_CREATE), ("lifecycle.py", LIFECYCLE),
                               ("add_users.sh", ADD_USERS),
                               ("setup_accounting.sh", SETUP_ACCOUNTING),
                               ("start_slurm.sh", START_SLURM)):
                nodestest.write_script(os.path.join(lcs, name), text)
            with open(os.path.join(lcs, "shared_users.txt"), "w") as f:
                f.write("alice,2801,/fsx/alice\n")
            with open(os.path.join(lcs, "provisioning_parameters.json"), "w") as f:
                json.dump(PARAMS, f)
            cls.d.start()
            src = "file://" + lcs + "/"
            spec = os.path.join(cls.d.root, "cluster.json")
            # No SlurmConfig: the roles come from provisioning_parameters.json.
            with open(spec, "w") as f:
                json.dump([nodestest.lcs_group("controller-machine", 1, src),
                           nodestest.lcs_group("workers", 2, src)], f)
            cls.d.hpod("create-cluster", "--cluster-name", "hs", "--instance-groups",
                       "file://" + spec)
            cls.d.wait_status("hs", "InService", timeout=300)
            cls.view = nodestest.ClusterView(cls.d, "hs")
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def nodes(self):
        return self.d.nodes("hs")

    def name(self, node):
        return node["PrivateDnsHostname"].split(".")[0]

    def controller(self):
        return [n for n in self.nodes() if n["InstanceGroupName"] == "controller-machine"][0]

    def workers(self):
        return [n for n in self.nodes() if n["InstanceGroupName"] == "workers"]

    def target(self, node):
        return self.view.target(node)

    def fsx_path(self, name):
        return self.view.fsx_path(name)

    def fsx(self, name):
        return self.view.fsx(name)

    def on_ctl(self, command, **kw):
        return self.d.session(self.target(self.controller()), command, **kw)

    def ip_of(self, node):
        return self.view.ip_of(node)

    def wait(self, what, probe, timeout=90):
        deadline = time.time() + timeout
        while True:
            got = probe()
            if got or time.time() > deadline:
                self.assertTrue(got, what)
                return got
            time.sleep(0.5)

    def test_1_the_scripts_started_slurm_through_systemctl(self):
        for node in self.nodes():
            host = self.name(node)
            role = "controller" if node["InstanceGroupName"] == "controller-machine" else "compute"
            # slurm.conf was there before the script looked (the controller's names
            # the controller; workers are configless, as on HyperPod).
            conf = "names-the-controller" if role == "controller" else "absent"
            self.assertEqual(self.fsx("script-" + host).split(), [self.ip_of(node), role, conf])
            # Its own start: active right after `systemctl enable --now`, before
            # the scripts ended (hpod starts nothing of its own until they did).
            unit = "slurmctld" if role == "controller" else "slurmd"
            self.assertEqual(self.fsx("started-" + host).split(), [unit, "active"])
            log = self.d.in_node(node["InstanceId"],
                                 "cat /var/log/provision/provisioning.log").stdout
            self.assertIn("[INFO]: Success: All provisioning scripts completed", log)
            # One daemon: the one systemctl reports is the one running.
            out = self.d.in_node(node["InstanceId"],
                                 "systemctl show -p MainPID --value %s; pgrep -x %s" %
                                 (unit, unit)).stdout.split()
            self.assertEqual(len(out), 2, out)
            self.assertEqual(out[0], out[1])
            p = self.d.in_node(node["InstanceId"], "systemctl is-active munge sshd", check=False)
            self.assertEqual((p.returncode, p.stdout.split()), (0, ["active", "active"]))
        ctl = self.controller()
        # The controller's slurmd is not its own (start_slurm.sh moved its unit
        # aside); systemd's exit codes and words.
        p = self.d.in_node(ctl["InstanceId"], "systemctl is-active slurmd", check=False)
        self.assertEqual((p.returncode, p.stdout.strip()), (3, "inactive"))
        p = self.d.in_node(ctl["InstanceId"], "systemctl start slurmd", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("does not run on this node", p.stderr)
        p = self.d.in_node(ctl["InstanceId"], "systemctl start docker", check=False)
        self.assertEqual(p.returncode, 5, p.stderr)
        self.assertIn("docker.service", p.stderr)
        out = self.d.in_node(ctl["InstanceId"],
                             "systemctl status slurmctld slurmdbd mariadb; "
                             "journalctl -xeu slurmctld --no-pager").stdout
        self.assertIn("Active: active (running)", out)
        self.assertIn("slurmctld version", out)  # slurmctld.log's first line, via journalctl
        # Slurm answers.
        self.assertIn("dev", self.on_ctl("sinfo -h -o %P"))
        self.assertEqual(self.on_ctl("srun -N2 hostname | sort").split(),
                         sorted(self.name(w) for w in self.workers()))

    def test_2_a_user_submits_and_ssh_works_as_the_user_and_root(self):
        ctl = self.controller()
        w = self.workers()[0]
        job = self.d.hpod("start-session", "--target", self.target(ctl), "--user", "alice",
                          "--command", "sbatch --parsable --wait -N2 -o /fsx/alice/j.out "
                          "--wrap 'srun id -un'", timeout=120)
        self.assertEqual(job.returncode, 0, job.stderr)
        self.assertEqual(self.fsx("alice/j.out").split(), ["alice", "alice"])
        ssh = "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes %s id -un" % self.name(w)
        for user, command in (("root", ssh), ("alice", "su alice -c '%s'" % ssh)):
            p = self.d.in_node(ctl["InstanceId"], command, check=False)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, user), p.stderr)
        # pdsh-style fan-out over ssh, as MPI launchers do it.
        names = ",".join(self.name(n) for n in self.workers())
        p = self.d.in_node(ctl["InstanceId"], "su alice -c 'pdsh -R ssh -w %s id -un' | sort"
                           % names, check=False)
        self.assertEqual((p.returncode, p.stdout.split()),
                         (0, [x for n in sorted(self.workers(), key=self.name)
                              for x in (self.name(n) + ":", "alice")]), p.stderr)
        # mpirun launches its daemons on the other nodes over ssh (Open MPI's rsh
        # launcher), as a user: one rank on each worker.
        p = self.d.in_node(ctl["InstanceId"], "su alice -c 'mpirun --host %s -np 2 hostname' | sort"
                           % names, check=False, timeout=120)
        self.assertEqual((p.returncode, p.stdout.split()),
                         (0, sorted(self.name(n) for n in self.workers())), p.stderr)
        # Accounting lists the user's job.
        jobid = job.stdout.strip()
        self.wait("sacct lists alice's job",
                  lambda: "alice|COMPLETED" in self.on_ctl(
                      "sacct -n -X -P -j %s -o user,state" % jobid))

    def test_2b_the_amis_user(self):
        # HyperPod's AMI has `ubuntu` with passwordless sudo (AWS's scripts set up
        # its keys): the same uid on every node, its home on /fsx, and not on the host.
        uids = set()
        for node in self.nodes():
            out = self.d.in_node(node["InstanceId"],
                                 "id -u ubuntu; getent passwd ubuntu | cut -d: -f6; "
                                 "su ubuntu -c 'sudo -n id -u'").stdout.split()
            self.assertEqual(out[1:], ["/fsx/ubuntu", "0"], out)
            uids.add(out[0])
        self.assertEqual(len(uids), 1, uids)
        self.assertGreaterEqual(int(uids.pop()), 1000)
        self.assertTrue(os.path.isdir(self.fsx_path("ubuntu")))
        if not HOST_HAS_UBUNTU:
            self.assertNotEqual(subprocess.run(["getent", "passwd", "ubuntu"],
                                               capture_output=True).returncode, 0)

    def test_3_a_unit_systemctl_stopped_stays_stopped_until_started(self):
        w = self.workers()[1]
        iid = w["InstanceId"]
        self.d.in_node(iid, "systemctl stop slurmd")
        self.assertEqual(self.d.in_node(iid, "pgrep -x slurmd", check=False).returncode, 1)
        p = self.d.in_node(iid, "systemctl is-active slurmd; systemctl status slurmd",
                           check=False)
        self.assertEqual(p.returncode, 3)
        self.assertIn("stopped by systemctl", p.stdout)
        # Non-root users may look, not touch.
        p = self.d.in_node(iid, "su alice -c 'systemctl start slurmd'", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("only root", p.stderr)
        self.d.in_node(iid, "systemctl start slurmd")
        self.assertEqual(self.d.in_node(iid, "systemctl is-active slurmd").stdout.strip(),
                         "active")
        self.wait("the worker is back in Slurm",
                  lambda: "idle" in self.on_ctl("sinfo -h -n %s -o %%t" % self.name(w)))

    def test_4_kill_node_under_an_auto_resume_job(self):
        ctl = self.controller()
        self.on_ctl("cat > /fsx/resumed.sh <<'EOF'\n%sEOF\nchmod +x /fsx/resumed.sh" % RESUMED_STEP)
        job = self.on_ctl("sbatch --parsable -N2 -o /fsx/ar.out "
                          "--wrap 'srun --auto-resume=1 /fsx/resumed.sh'").strip()
        self.wait("attempt 0 runs on both workers",
                  lambda: all(os.path.exists(self.fsx_path("ar.at-gate.%d" % i)) for i in (0, 1)))
        # The worker that is not the batch host: its loss ends the step, not the job.
        batch = self.on_ctl("scontrol show job %s | grep -o 'BatchHost=[^ ]*'" % job).strip()
        victim = [w for w in self.workers() if "BatchHost=" + self.name(w) != batch][0]
        host = self.name(victim)
        ctl_ssh = "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes %s " % host
        key = self.d.in_node(ctl["InstanceId"], "ssh-keyscan -t ed25519 %s 2>/dev/null" %
                             host).stdout.split()[-1]
        self.d.hpod("inject-fault", "--cluster-name", "hs", "--node-id", victim["InstanceId"],
                    "--kind", "kill-node")
        self.wait("the job resumed with the replacement and finished",
                  lambda: self.fsx("ar.done.0") and self.fsx("ar.done.1"), timeout=240)
        self.assertEqual(self.fsx("ar.done.0") + self.fsx("ar.done.1"),
                         "attempt 1\nattempt 1\n")
        new = [n for n in self.workers() if self.name(n) == host][0]
        self.assertNotEqual(new["InstanceId"], victim["InstanceId"])
        # The replacement ran the scripts again: their log, its user, its own
        # systemctl start; and it presents the cluster's host key for its name.
        out = self.d.in_node(new["InstanceId"],
                             "grep -c 'Success: All provisioning' /var/log/provision/"
                             "provisioning.log; id -u alice; systemctl is-active slurmd").stdout
        self.assertEqual(out.split(), ["1", "2801", "active"])
        p = self.d.in_node(ctl["InstanceId"], ctl_ssh + "hostname", check=False)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, host), p.stderr)
        self.assertEqual(self.d.in_node(ctl["InstanceId"], "ssh-keyscan -t ed25519 %s "
                                        "2>/dev/null" % host).stdout.split()[-1], key)
        # sacct shows each attempt, a step each: the one the node's loss ended
        # (its recorded state depends on how srun ended it, so it is not checked)
        # and the one that finished.
        def steps():
            out = self.on_ctl("sacct -n -P -j %s -o jobid,state" % job)
            rows = [line.split("|") for line in out.split()]
            done = [r for r in rows if r[0] == job] == [[job, "COMPLETED"]]
            return rows if done and len([r for r in rows if r[0].startswith(job + ".")
                                         and r[0][len(job) + 1:].isdigit()]) >= 2 else None
        rows = self.wait("sacct lists both attempts", steps, timeout=60)
        numbered = [r for r in rows if r[0][len(job) + 1:].isdigit()]
        self.assertEqual(numbered[0][0], job + ".0", rows)
        self.assertEqual(numbered[-1][1], "COMPLETED", rows)


if __name__ == "__main__":
    unittest.main(verbosity=2)
