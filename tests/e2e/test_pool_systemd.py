"""Pool hosts that run real systemd (issue 28): a lifecycle script's systemctl
reaches hpod's daemons, and the host is left as it was.

Two rig hosts (hostrig.py) boot Debian's systemd as their PID 1, with Debian's
munge.service running (the package enables it) and hpod-agent.service as the
package installs it. An admin's first `hpod-agent join`, typed in each host,
hands the agent to that unit. A 1+1 cluster is then made from them with
lifecycle scripts that start Slurm as AWS's start_slurm.sh does (`systemctl
enable --now slurmctld`; slurmd.service filled with envsubst, daemon-reload,
`systemctl enable --now slurmd`). What must hold:
1. the agent runs under systemd, enabled; while the node runs, munge, slurmctld
   and slurmd are systemd units whose main process asks hpod's agent: one munged
   (the cluster's key; Debian's stepped aside), one slurmd, `journalctl -u slurmd`
   shows slurmd's own log, and Slurm works across the hosts;
2. `systemctl stop slurmd` stops hpod's slurmd and hpod leaves it stopped;
   start and restart bring one back, and srun works again; restarting
   hpod-agent.service (an upgrade) leaves the units running;
3. after a reboot through hpod, the unit the script enabled starts at boot and
   waits for the agent: still one slurmd, and Slurm works;
4. deleting the cluster hands the units back: no drop-in or unit file of hpod's
   is left, the script's enable is undone, and Debian's munged runs again.
Traffic stays on the rig's bridge and loopback.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import hostrig
import hpodtest
import nodestest

AGENT = os.path.join(hpodtest.BIN_DIR, "cmd", "hpod-agent", "hpod-agent")
TYPE = "ml.c5.large"
PARAMS = json.dumps({"version": "1.0.0", "workload_manager": "slurm",
                     "controller_group": "controller",
                     "worker_groups": [{"instance_group_name": "workers",
                                        "partition_name": "dev"}]})

# test_3's agent, for one boot: it starts once slurmd.service has said in this
# boot's journal that it waits for the agent (or after 30 s).
LATE_AGENT = "/etc/systemd/system/hpod-agent.service.d/late-agent.sh"
LATE_AGENT_DROPIN = "/etc/systemd/system/hpod-agent.service.d/zz-late.conf"
LATE_AGENT_SCRIPT = """#!/bin/sh
timeout 30 sh -c 'until journalctl -b -q -u slurmd | grep -q "waiting for the hpod agent"; do
  sleep 0.2; done'
exec /opt/hpod/bin/hpod-agent join --foreground --state-dir /var/lib/hpod-agent"""
LATE_AGENT_UNIT = "[Service]\nExecStart=\nExecStart=" + LATE_AGENT

# The role as AWS's lifecycle_script.py finds it (its address among the
# groups'), then Slurm started as its start_slurm.sh does. A pool host has no
# outside route, so the address comes from `hostname -I`.
ON_CREATE = r"""#!/bin/bash
set -euxo pipefail
read -r role controller < <(python3 - <<'PY'
import json, subprocess
rc = json.load(open("/opt/ml/config/resource_config.json"))
pp = json.load(open("provisioning_parameters.json"))
mine = set(subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split())
ips = lambda g: [i["CustomerIpAddress"] for i in g.get("Instances") or []]
ctrl = next(g for g in rc["InstanceGroups"] if g["Name"] == pp["controller_group"])
role = "controller" if mine & set(ips(ctrl)) else "compute"
print(role, ips(ctrl)[0])
PY
)
bash ./start_slurm.sh "$role" "$controller"
"""

START_SLURM = nodestest.start_slurm_script("/tmp/started")


def daemons(host, name):
    """The pids of `name`'s processes on `host` but their own children (slurmd
    forks at its start; a child gone between the two ps calls counts once)."""
    return host.sh("for p in $(pgrep -x %s); do [[ $(ps -o comm= -p $(ps -o ppid= -p $p)) == %s ]] "
                   "|| echo $p; done" % (name, name)).stdout.split()


class PoolSystemdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("the rig needs root (namespaces, a bridge, mounts)")
        for binary in (AGENT, hpodtest.HPOD_CLI, "/lib/systemd/systemd", "/usr/sbin/munged",
                       "/usr/sbin/slurmd", "/usr/bin/envsubst"):
            if not os.path.exists(binary):
                raise unittest.SkipTest(binary + " is not installed or built")
        if not hostrig.systemd_possible():
            raise unittest.SkipTest("the rig's systemd hosts need Debian's systemd and the "
                                    "machine's cgroups in hybrid mode (/sys/fs/cgroup/systemd)")
        cls.rig = hostrig.Rig(2)
        try:
            cls.d = hpodtest.Daemon(extra_args=[
                "--provider", "pool", "--agent-listen", cls.rig.server_ip + ":0",
                "--pool-spank-plugin", "", "--slurm-accounting", "off"]).start()
            token = cls.hpod_cls("create-join-token", "--uses", "2", "--ttl", "10m",
                                 "--instance-type", TYPE, output="text").strip()
            for h in cls.rig.hosts:
                cls.rig.boot(h, AGENT, cls.d.agent_url, token, TYPE, systemd=True)
            cls.debian_munged = {}
            for h in cls.rig.hosts:
                h.wait_for_systemd()
                # Debian's munge.service runs before the machine joins.
                cls.debian_munged[h.name] = h.sh(
                    "systemctl is-active munge; pgrep -u munge -a munged").stdout.split("\n")
                h.join_by_hand(cls.d.agent_url, token, TYPE)
            cls.lcs = tempfile.mkdtemp(prefix="hpod-pool-systemd-lcs-", dir="/var/tmp")
            for name, text in (("on_create.sh", ON_CREATE), ("start_slurm.sh", START_SLURM),
                               ("provisioning_parameters.json", PARAMS)):
                with open(os.path.join(cls.lcs, name), "w") as f:
                    f.write(text)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        d = getattr(cls, "d", None)
        if d is not None:
            subprocess.run([hpodtest.HPOD_CLI, "--endpoint-url", d.endpoint, "delete-cluster",
                            "--cluster-name", "sd"], env=d.env(), capture_output=True)
        cls.rig.cleanup()
        if d is not None:
            d.cleanup()
        if getattr(cls, "lcs", None):
            shutil.rmtree(cls.lcs, ignore_errors=True)

    @classmethod
    def hpod_cls(cls, *args, output="json"):
        return cls.d.hpod(*args, output=output)

    def hpod(self, *args):
        return json.loads(self.hpod_cls(*args))

    def wait_for(self, what, predicate, timeout=90):
        def logs():
            with open(os.path.join(self.d.root, "hpodd.out")) as f:
                out = "; hpodd log:\n" + f.read()[-8000:]
            return out + "; host logs:\n" + "\n".join(
                "== %s\n%s\n%s" % (h.name, h.read_log()[-4000:], h.sh(
                    "systemctl --no-pager status munge slurmd slurmctld hpod-agent; "
                    "journalctl --no-pager -n 40", check=False).stdout[-4000:])
                for h in self.rig.hosts)
        return hpodtest.wait_for(self, what, predicate, timeout, logs)

    def by_role(self):
        hosts = {h["InstanceId"]: h["Hostname"] for h in self.hpod("list-hosts")["Hosts"]
                 if "InstanceId" in h}
        out = {}
        for n in self.hpod("list-cluster-nodes", "--cluster-name", "sd")["ClusterNodeSummaries"]:
            name = hosts[n["InstanceId"]]
            out[n["InstanceGroupName"]] = next(r for r in self.rig.hosts if r.name == name)
        return out["controller"], out["workers"]

    def one_daemon(self, host, name):
        """The pid of `name`'s one daemon on `host`, once the children a daemon
        forks at its start are gone; the same a second later."""
        pids = self.wait_for("one %s on %s" % (name, host.name),
                             lambda: (lambda p: p if len(p) == 1 else None)(daemons(host, name)),
                             timeout=15)
        time.sleep(1)
        self.assertEqual(daemons(host, name), pids)
        return pids[0]

    def srun_works(self, controller, worker):
        p = controller.sh("timeout 30 srun -N1 -w %s hostname" % worker.name, check=False)
        return p.returncode == 0 and p.stdout.strip() == worker.name

    def test_1_the_scripts_systemctl_starts_hpods_daemons_under_systemd(self):
        for h in self.rig.hosts:
            self.assertEqual(self.debian_munged[h.name][0], "active")
            self.assertIn("/usr/sbin/munged", self.debian_munged[h.name][1])
            self.assertEqual(h.sh("systemctl is-enabled hpod-agent; systemctl is-active "
                                  "hpod-agent").stdout.split(), ["enabled", "active"])
        self.wait_for("two Spare hosts", lambda: [
            h for h in self.hpod("list-hosts")["Hosts"]
            if h["Status"] == "Spare" and h["Connected"]][1:])
        groups = [{"InstanceGroupName": name, "InstanceType": TYPE, "InstanceCount": 1,
                   "ExecutionRole": "arn:aws:iam::123456789012:role/hpod",
                   "LifeCycleConfig": {"SourceS3Uri": "file://" + self.lcs,
                                       "OnCreate": "on_create.sh"}}
                  for name in ("controller", "workers")]
        groups_file = os.path.join(self.d.root, "groups.json")
        with open(groups_file, "w") as f:
            json.dump(groups, f)
        self.hpod("create-cluster", "--cluster-name", "sd", "--instance-groups",
                  "file://" + groups_file)
        self.wait_for("the cluster InService", lambda: self.hpod(
            "describe-cluster", "--cluster-name", "sd")["ClusterStatus"] == "InService",
            timeout=180)
        controller, worker = self.by_role()
        type(self).controller, type(self).worker = controller, worker
        # The scripts' systemctl found the unit active as it returned.
        self.assertEqual(controller.sh("cat /tmp/started").stdout, "slurmctld active\n")
        self.assertEqual(worker.sh("cat /tmp/started").stdout, "slurmd active\n")
        for h, unit in ((controller, "slurmctld"), (worker, "slurmd")):
            for u in (unit, "munge"):
                self.assertEqual(h.sh("systemctl show -p ActiveState --value %s; systemctl show "
                                      "-p SubState --value %s" % (u, u)).stdout.split(),
                                 ["active", "running"], u)
                self.assertIn("%s.service.d/50-hpod-agent.conf" % u, h.sh(
                    "systemctl show -p DropInPaths --value " + u).stdout)
            # One daemon each, hpod's: its munged has the cluster's key, and the
            # unit's main process is the agent's follower.
            self.one_daemon(h, unit)
            munged = h.sh("pgrep -a munged").stdout.strip().split("\n")
            self.assertEqual(len(munged), 1, munged)
            self.assertIn("--key-file=/var/lib/hpod-agent/instances/", munged[0])
            main = h.sh("systemctl show -p MainPID --value %s" % unit).stdout.strip()
            self.assertIn("hpod-agent systemd-unit start " + unit,
                          h.sh("tr '\\0' ' ' < /proc/%s/cmdline" % main).stdout)
        # start_slurm.sh's envsubst read the AMI's unit file hpod put there.
        self.assertIn("--conf-server " + controller.ip,
                      worker.sh("cat /etc/systemd/system/slurmd.service").stdout)
        # slurmd's own log in the journal, under its unit.
        self.wait_for("slurmd's log in journalctl -u slurmd", lambda: "slurmd version" in
                      worker.sh("journalctl --no-pager -u slurmd").stdout, timeout=30)
        self.wait_for("srun on the worker", lambda: self.srun_works(controller, worker),
                      timeout=60)

    def test_2_a_systemctl_stop_stays_until_start(self):
        w = self.worker
        self.assertEqual(w.sh("systemctl stop slurmd; systemctl is-active slurmd",
                              check=False).stdout.strip(), "inactive")
        self.assertEqual(w.sh("pgrep -x slurmd", check=False).stdout, "")
        time.sleep(3)  # hpod's agent would have restarted a daemon that died by now
        self.assertEqual(w.sh("pgrep -x slurmd", check=False).stdout, "")
        self.assertEqual(w.sh("systemctl is-active slurmd", check=False).stdout.strip(),
                         "inactive")
        w.sh("systemctl start slurmd")
        first = self.one_daemon(w, "slurmd")
        w.sh("systemctl restart slurmd")
        second = self.one_daemon(w, "slurmd")
        self.assertNotEqual(first, second, "restart runs a new slurmd")
        self.assertEqual(w.sh("systemctl is-active slurmd").stdout.strip(), "active")
        self.wait_for("srun on the worker again",
                      lambda: self.srun_works(self.controller, w), timeout=60)

    def test_2b_an_agent_restart_leaves_the_units_running(self):
        # An upgrade restarts hpod-agent.service: the node agent goes and comes
        # back, its units read inactive until hpodd sends the role again, and no
        # unit takes that for a stop.
        w = self.worker
        follower = w.sh("systemctl show -p MainPID --value slurmd").stdout.strip()
        w.sh("systemctl restart hpod-agent")
        self.wait_for("srun on the worker after the agent's restart",
                      lambda: self.srun_works(self.controller, w), timeout=60)
        self.one_daemon(w, "slurmd")
        self.assertEqual(w.sh("systemctl is-active slurmd munge").stdout.split(),
                         ["active", "active"])
        self.assertEqual(w.sh("systemctl show -p MainPID --value slurmd").stdout.strip(),
                         follower, "the unit rode through the restart")

    def test_3_after_a_reboot_the_enabled_units_come_back_through_the_agent(self):
        w = self.worker
        hosts = {h["Hostname"]: h for h in self.hpod("list-hosts")["Hosts"]}
        instance = hosts[w.name]["InstanceId"]
        old_boot = w.boot_id()
        # What is checked is a unit that starts before the agent answers. Boot
        # order alone does not say which comes first (the agent's unit is
        # Type=simple, so slurmd.service, ordered after it, may start before
        # or after the agent listens). For this boot the agent waits until
        # slurmd.service said it waits (30 s at most, so a unit that never
        # says so fails the check below rather than hanging the boot).
        w.sh("cat > %s <<'EOF'\n%s\nEOF\nchmod +x %s\ncat > %s <<'EOF'\n%s\nEOF" % (
            LATE_AGENT, LATE_AGENT_SCRIPT, LATE_AGENT, LATE_AGENT_DROPIN, LATE_AGENT_UNIT))
        self.addCleanup(w.sh, "rm -f %s %s && systemctl daemon-reload" % (
            LATE_AGENT, LATE_AGENT_DROPIN), check=False)
        out = self.hpod("batch-reboot-cluster-nodes", "--cluster-name", "sd",
                        "--node-ids", instance)
        self.assertEqual(out.get("Failed", []), [], out)
        # systemd shuts the machine down (its units stop first); the rig powers
        # it on again, as the machine's firmware would.
        w.init.wait(timeout=90)
        w.init = None
        self.rig.boot(w, AGENT, self.d.agent_url, "spent", TYPE, systemd=True)
        self.assertNotEqual(w.boot_id(), old_boot)
        self.wait_for("the node Running again after its reboot", lambda: [
            n for n in self.hpod("list-cluster-nodes", "--cluster-name", "sd")[
                "ClusterNodeSummaries"]
            if n["InstanceId"] == instance and n["InstanceStatus"]["Status"] == "Running"],
            timeout=120)
        # The script's enable brought slurmd.service up at boot; it waited for
        # the agent, and the agent's start and the unit's are one slurmd.
        self.wait_for("slurmd.service active after the boot", lambda: w.sh(
            "systemctl is-active slurmd", check=False).stdout.strip() == "active", timeout=60)
        self.one_daemon(w, "slurmd")
        # It started before the agent could answer, and waited for it.
        self.assertIn("waiting for the hpod agent",
                      w.sh("journalctl --no-pager -b -u slurmd").stdout)
        self.assertIn("hpod-agent systemd-unit start slurmd", w.sh(
            "tr '\\0' ' ' < /proc/$(systemctl show -p MainPID --value slurmd)/cmdline").stdout)
        self.assertEqual(len(w.sh("pgrep -a munged").stdout.strip().split("\n")), 1)
        self.wait_for("srun on the rebooted worker",
                      lambda: self.srun_works(self.controller, w), timeout=60)

    def test_4_deleting_the_cluster_hands_the_units_back(self):
        self.hpod("delete-cluster", "--cluster-name", "sd")
        self.wait_for("both hosts Spare", lambda: all(
            h["Status"] == "Spare" for h in self.hpod("list-hosts")["Hosts"]), timeout=120)
        for h in self.rig.hosts:
            etc = h.sh("ls /etc/systemd/system").stdout.split()
            self.assertEqual([e for e in etc if e.startswith(("slurm", "munge"))], [], etc)
            self.assertEqual(h.sh("grep -rl 'hpod-agent tenure:' /etc/systemd/system || true"
                                  ).stdout, "")
            self.assertEqual(h.sh("systemctl is-active hpod-agent").stdout.strip(), "active")
            self.assertIn("hpod-agent.service", etc)
            self.assertNotIn("enabled", h.sh("systemctl is-enabled slurmd slurmctld",
                                             check=False).stdout.split())
            self.assertEqual(h.sh("pgrep -x slurmd; pgrep -x slurmctld", check=False).stdout, "")
            # Debian's munge again, with its own key.
            self.wait_for("Debian's munged on " + h.name, lambda: h.sh(
                "systemctl is-active munge", check=False).stdout.strip() == "active",
                timeout=30)
            munged = h.sh("pgrep -a munged").stdout.strip().split("\n")
            self.assertEqual(len(munged), 1, munged)
            self.assertNotIn("--key-file", munged[0])


if __name__ == "__main__":
    unittest.main()
