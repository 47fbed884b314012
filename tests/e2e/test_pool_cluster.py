"""A cluster made of the admin's own machines (issue 26): `hpodd --provider pool`.

Three rig hosts (hostrig.py: each its own network, mounts, hostname, pids,
machine id, boot id and disk; nothing of hpodd's visible; hpodd reached only over
TLS on the rig's bridge) join pool `default` as ml.c5.large. Two boot first; a
1+2 cluster is created with the real `hpod` CLI from a file:// lifecycle source
on hpodd's machine, which the hosts cannot see (hpodd sends the scripts in each
node's config). Checked:
- the group short of a host waits with the reason, visible on the node
  ("no Spare host of type ml.c5.large in pool default: 1 of 2"), the cluster does
  not fail, and it fills when the third host joins;
- every node runs on its own host, as its own hostname, with the lifecycle
  script run from the shipped files, and real Slurm works across hosts
  (`srun -N2 hostname` from the controller host);
- each host is Assigned to its instance, with everything of the tenure under
  /var/lib/hpod-agent/instances/<instance id>;
- deleting the cluster leaves every host Spare (history Assigned → Draining →
  Spare) with its tenure directory and the links into it gone, and no Slurm
  daemon running.
Traffic stays on the rig's bridge and loopback.
"""
import json
import os
import subprocess
import tempfile
import unittest

import hostrig
import hpodtest

AGENT = os.path.join(hpodtest.BIN_DIR, "cmd", "hpod-agent", "hpod-agent")
SPANK = os.path.join(hpodtest.BIN_DIR, "src", "slurm", "spank", "spank_hpod.so")
TYPE = "ml.c5.large"  # every rig host is this machine: 2 CPUs, 24 GiB on CI

ON_CREATE = """#!/bin/bash
set -euo pipefail
# As a HyperPod script finds its group: resource_config.json at HyperPod's path.
python3 - <<'PY'
import json, socket
rc = json.load(open("/opt/ml/config/resource_config.json"))
print("on_create on", socket.gethostname(), "of", rc["ClusterConfig"]["ClusterName"])
PY
./helper.sh > /tmp/on-create-ran
"""
HELPER = "#!/bin/bash\necho \"helper ran on $(hostname)\"\n"
PARAMS = json.dumps({"version": "1.0.0", "workload_manager": "slurm",
                     "controller_group": "controller",
                     "worker_groups": [{"instance_group_name": "workers",
                                        "partition_name": "dev"}]})


class PoolClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("the rig needs root (namespaces, a bridge, mounts)")
        for binary in (AGENT, hpodtest.HPOD_CLI, SPANK):
            if not os.path.exists(binary):
                raise unittest.SkipTest(binary + " is not built")
        cls.rig = hostrig.Rig(4)
        try:
            cls.d = hpodtest.Daemon(extra_args=[
                "--provider", "pool", "--agent-listen", cls.rig.server_ip + ":0",
                "--pool-spank-plugin", "/opt/hpod/lib/spank_hpod.so"]).start()
            cls.token = cls.hpod_cls("create-join-token", "--uses", "3", "--ttl", "10m",
                                     "--instance-type", TYPE, output="text").strip()
            cls.token4 = cls.hpod_cls("create-join-token", "--ttl", "10m",
                                      "--instance-type", TYPE, output="text").strip()
            for h in cls.rig.hosts[:2]:
                cls.rig.boot(h, AGENT, cls.d.agent_url, cls.token, TYPE, SPANK)
            # The scripts live on hpodd's machine only: the hosts hide /var/tmp.
            cls.lcs = tempfile.mkdtemp(prefix="hpod-pool-lcs-", dir="/var/tmp")
            for name, text in (("on_create.sh", ON_CREATE), ("helper.sh", HELPER),
                               ("provisioning_parameters.json", PARAMS)):
                path = os.path.join(cls.lcs, name)
                with open(path, "w") as f:
                    f.write(text)
                os.chmod(path, 0o755 if name.endswith(".sh") else 0o644)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        d = getattr(cls, "d", None)
        if d is not None:
            # Clusters before hosts: a node's tenure ends through its host.
            subprocess.run([hpodtest.HPOD_CLI, "--endpoint-url", d.endpoint, "delete-cluster",
                            "--cluster-name", "own"], env=d.env(), capture_output=True)
        cls.rig.cleanup()
        if d is not None:
            d.cleanup()
        if getattr(cls, "lcs", None):
            subprocess.run(["rm", "-rf", cls.lcs])

    @classmethod
    def hpod_cls(cls, *args, output="json"):
        p = subprocess.run([hpodtest.HPOD_CLI, "--endpoint-url", cls.d.endpoint, "--output",
                            output] + list(args), capture_output=True, text=True,
                           env=cls.d.env(), timeout=60)
        if p.returncode != 0:
            raise AssertionError("hpod %s: %s" % (args, p.stderr))
        return p.stdout

    def hpod(self, *args):
        return json.loads(self.hpod_cls(*args))

    def wait_for(self, what, predicate, timeout=90):
        def logs():
            with open(os.path.join(self.d.root, "hpodd.out")) as f:
                out = "; hpodd log:\n" + f.read()[-12000:]
            return out + "; agent logs:\n" + "\n".join(
                "== %s\n%s" % (h.name, h.read_log()[-3000:]) for h in self.rig.hosts)
        return hpodtest.wait_for(self, what, predicate, timeout, logs)

    def hosts(self):
        return {h["Hostname"]: h for h in self.hpod("list-hosts")["Hosts"]}

    def nodes(self):
        return self.hpod("list-cluster-nodes", "--cluster-name", "own")["ClusterNodeSummaries"]

    def test_pool_cluster(self):
        self.wait_for("two Spare hosts", lambda: [
            h for h in self.hosts().values() if h["Status"] == "Spare" and h["Connected"]
        ][1:])
        groups = [{"InstanceGroupName": name, "InstanceType": TYPE, "InstanceCount": count,
                   "ExecutionRole": "arn:aws:iam::123456789012:role/hpod",
                   "LifeCycleConfig": {"SourceS3Uri": "file://" + self.lcs,
                                       "OnCreate": "on_create.sh"}}
                  for name, count in (("controller", 1), ("workers", 2))]
        groups_file = os.path.join(self.d.root, "groups.json")
        with open(groups_file, "w") as f:
            json.dump(groups, f)
        self.hpod("create-cluster", "--cluster-name", "own", "--instance-groups",
                  "file://" + groups_file)

        # Two hosts for three nodes: one node waits, saying why; nothing fails.
        def waiting():
            for n in self.nodes():
                d = self.hpod("describe-cluster-node", "--cluster-name", "own", "--node-id",
                              n["InstanceId"])["NodeDetails"]
                msg = d["InstanceStatus"].get("Message", "")
                if "no Spare host" in msg:
                    return msg
            return None
        msg = self.wait_for("a node waiting for a host", waiting)
        self.assertIn("no Spare host of type %s in pool default" % TYPE, msg)
        self.assertRegex(msg, r": [01] of 2$")
        self.assertIn(self.hpod("describe-cluster", "--cluster-name", "own")["ClusterStatus"],
                      ("Creating",))

        # The third machine joins: the group fills and the cluster is InService.
        self.rig.boot(self.rig.hosts[2], AGENT, self.d.agent_url, self.token, TYPE, SPANK)
        self.wait_for("the cluster InService", lambda: self.hpod(
            "describe-cluster", "--cluster-name", "own")["ClusterStatus"] == "InService",
            timeout=180)
        nodes = self.nodes()
        self.assertEqual(len(nodes), 3)
        hosts = self.hosts()
        by_instance = {h["InstanceId"]: h for h in hosts.values() if "InstanceId" in h}
        for n in nodes:
            self.assertEqual(n["InstanceStatus"]["Status"], "Running")
            host = by_instance[n["InstanceId"]]
            self.assertEqual(host["Status"], "Assigned")
            rig_host = next(r for r in self.rig.hosts if r.name == host["Hostname"])
            # The tenure: one directory, the lifecycle script ran from hpodd's files.
            inside = rig_host.sh(
                "ls /var/lib/hpod-agent/instances; cat /tmp/on-create-ran; "
                "readlink /opt/ml/config").stdout.split("\n")
            self.assertEqual(inside[0], n["InstanceId"])
            self.assertEqual(inside[1], "helper ran on " + rig_host.name)
            self.assertEqual(inside[2],
                             "/var/lib/hpod-agent/instances/%s/config" % n["InstanceId"])
        controller = next(r for r in self.rig.hosts if r.name == by_instance[next(
            n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller")]["Hostname"])
        workers = sorted(h["Hostname"] for h in hosts.values() if h.get("InstanceGroupName") == "workers")
        out = self.wait_for("srun across two hosts", lambda: (lambda p: p.stdout.split()
                            if p.returncode == 0 else None)(controller.sh(
                                "timeout 60 srun -N2 hostname", check=False)), timeout=60)
        self.assertEqual(sorted(out), workers)

        # A reboot through the agent: the same instance, a new boot id, Running
        # again from its tenure on disk (its lifecycle scripts do not run twice).
        rebooted = next(r for r in self.rig.hosts if r.name == workers[1])
        rebooted_id = hosts[rebooted.name]["InstanceId"]
        old_boot = rebooted.boot_id()
        rebooted.sh("echo before-reboot > /var/lib/hpod-agent/instances/%s/marker" % rebooted_id)
        out = self.hpod("batch-reboot-cluster-nodes", "--cluster-name", "own",
                        "--node-ids", rebooted_id)
        self.assertEqual(out.get("Failed", []), [], out)

        def recovered(instance_id, action):
            for r in self.hpod("hpod-list-recoveries", "--cluster-name", "own")["Recoveries"]:
                if r["NodeId"] == instance_id and r["Action"] == action and \
                        r["Status"] == "Succeeded":
                    return r
            return None
        self.wait_for("the reboot's recovery Succeeded",
                      lambda: recovered(rebooted_id, "Reboot"), timeout=120)
        self.assertNotEqual(rebooted.boot_id(), old_boot)
        described = self.hpod("describe-host", "--host-id", hosts[rebooted.name]["HostId"])
        self.assertEqual(described["Status"], "Assigned")
        self.assertEqual(described["Facts"]["BootId"], rebooted.boot_id())
        self.assertEqual([e["To"] for e in described["History"]][-2:], ["Rebooting", "Assigned"])
        self.assertEqual(rebooted.sh("cat /var/lib/hpod-agent/instances/%s/marker; "
                                     "cat /tmp/on-create-ran 2>&1 || true" % rebooted_id)
                         .stdout.split("\n")[0], "before-reboot")
        self.assertEqual(
            [n["InstanceId"] for n in self.nodes() if n["InstanceStatus"]["Status"] == "Running"
             and n["InstanceId"] == rebooted_id], [rebooted_id])

        # A worker machine stops. A fourth host waits as a Spare: it takes the
        # node's NodeName and NodeLogicalId under a new instance id, with its own
        # address; the failed host is Quarantined with the reason.
        spare_host = self.rig.hosts[3]
        self.rig.boot(spare_host, AGENT, self.d.agent_url, self.token4, TYPE, SPANK)
        self.wait_for("host3 Spare", lambda: self.hosts().get("host3", {}).get("Status") == "Spare")
        logical = {n["InstanceId"]: n for n in self.hpod(
            "list-cluster-nodes", "--cluster-name", "own",
            "--include-node-logical-ids")["ClusterNodeSummaries"]}
        victim_name = workers[0]
        victim_host = hosts[victim_name]
        victim = next(r for r in self.rig.hosts if r.name == victim_name)
        old_id = victim_host["InstanceId"]
        victim.power_off()

        def replaced():
            for n in self.hpod("list-cluster-nodes", "--cluster-name", "own",
                               "--include-node-logical-ids")["ClusterNodeSummaries"]:
                if (n["NodeLogicalId"] == logical[old_id]["NodeLogicalId"] and
                        n["InstanceId"] != old_id and
                        n["InstanceStatus"]["Status"] == "Running"):
                    return n
            return None
        new = self.wait_for("the replacement Running", replaced, timeout=180)
        after = self.hosts()
        self.assertEqual(after["host3"]["InstanceId"], new["InstanceId"])
        self.assertEqual(after[victim_name]["Status"], "Quarantined")
        described = self.hpod("describe-cluster-node", "--cluster-name", "own", "--node-id",
                              new["InstanceId"])["NodeDetails"]
        self.assertEqual(described["PrivatePrimaryIp"], spare_host.ip)
        # Slurm's node keeps its name: slurmd on host3 runs as the failed host's.
        names = self.wait_for("srun on the replacement", lambda: (lambda p: p.stdout.split()
                              if p.returncode == 0 else None)(controller.sh(
                                  "timeout 60 srun -N2 -l printenv SLURMD_NODENAME | sort",
                                  check=False)), timeout=90)
        self.assertEqual(sorted(names[1::2]), workers)
        ran_on = controller.sh("timeout 60 srun -N2 hostname", check=True).stdout.split()
        self.assertEqual(sorted(ran_on), sorted(set(workers) - {victim_name} | {"host3"}))

        # The failed machine comes back: told it serves nothing, it wipes its old
        # tenure and stays Quarantined until a person releases it.
        self.rig.boot(victim, AGENT, self.d.agent_url, self.token, TYPE, SPANK)
        self.wait_for("the quarantined host connected and wiped", lambda: (
            self.hosts()[victim_name]["Connected"] and
            victim.sh("ls -A /var/lib/hpod-agent/instances").stdout.strip() == ""))
        self.assertEqual(self.hosts()[victim_name]["Status"], "Quarantined")
        self.assertEqual(self.hpod("release-host", "--host-id", victim_host["HostId"])["Status"],
                         "Spare")

        # Delete: every host back to Spare, its tenure wiped.
        self.hpod("delete-cluster", "--cluster-name", "own")
        self.wait_for("the cluster gone", lambda: not any(
            c["ClusterName"] == "own"
            for c in self.hpod("list-clusters")["ClusterSummaries"]), timeout=120)
        spare = self.wait_for("four Spare hosts", lambda: (lambda hs: hs if len(hs) == 4 and all(
            h["Status"] == "Spare" for h in hs.values()) else None)(self.hosts()))
        for name, h in spare.items():
            history = [e["To"] for e in self.hpod("describe-host", "--host-id",
                                                  h["HostId"])["History"]]
            ended = ["Assigned", "Quarantined", "Spare"] if name == victim_name else \
                ["Assigned", "Draining", "Spare"]
            self.assertEqual(history[-3:], ended, name)
        for r in self.rig.hosts:
            left = r.sh("ls -A /var/lib/hpod-agent/instances; ls -A /opt/ml 2>/dev/null; "
                        "pgrep -x 'slurmd|slurmctld|munged' || true").stdout.split()
            self.assertEqual(left, [], r.name)


if __name__ == "__main__":
    hpodtest.main()
