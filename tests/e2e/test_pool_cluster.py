"""A cluster made of the admin's own machines (issue 26): `hpodd --provider pool`.

Rig hosts (hostrig.py: each its own network, mounts, hostname, pids, machine id,
boot id and disk; nothing of hpodd's visible; hpodd reached only over TLS on the
rig's bridge) join pool `default` as ml.c5.large; one more is the storage host,
serving /fsx over SFTP (sshfs, as users mount NFS). A 1+2 cluster is created with
the real `hpod` CLI from a file:// lifecycle source on hpodd's machine, which the
hosts cannot see (hpodd sends the scripts in each node's config), declaring the
shared filesystem. In order:
1. the group short of a host waits, Pending, saying why ("no Spare host of type
   ml.c5.large in pool default: 1 of 2"), nothing fails, and it fills when a
   third host joins; each node runs on its own host under the host's name, its
   tenure in one directory, /fsx mounted and checked, and real Slurm runs across
   hosts;
2. a reboot through BatchRebootClusterNodes keeps the instance, brings a new
   boot id, and the node runs again from its tenure on disk;
3. the seed's `sbatch --nodes 2 --auto-resume=1 run.slurm ./llama_tiny.sh` with
   checkpoints on /fsx: a worker machine powers off mid-run; the Spare takes its
   NodeName and NodeLogicalId under a new instance id, the job resumes from its
   checkpoint and ends with the undisturbed run's loss, bit for bit; the failed
   host is Quarantined, comes back, wipes its tenure, and release-host returns it;
4. a Spare whose /fsx is not the cluster's (read-only here) fails the check when
   a node is replaced onto it: Quarantined with the reason, and another Spare
   takes the node; `hpod inject-fault --kind flag-file` reaches the host's agent
   and the node is replaced; kill-node without a power hook is refused; hpodd
   killed and restarted during a replacement ends it once, with one new node;
5. deleting the cluster leaves every host Spare with its tenure gone.
Traffic stays on the rig's bridge and loopback.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import unittest

import hostrig
import hpodtest

AGENT = os.path.join(hpodtest.BIN_DIR, "cmd", "hpod-agent", "hpod-agent")
SPANK = os.path.join(hpodtest.BIN_DIR, "src", "slurm", "spank", "spank_hpod.so")
TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TYPE = "ml.c5.large"  # every rig host is this machine: 2 CPUs, 24 GiB on CI
STEPS = 360  # as test_auto_resume: a fault after step 25 lands well before the end
SAVE_INTERVAL = 20

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
        for binary in (AGENT, hpodtest.HPOD_CLI, SPANK, "/usr/bin/sshfs", hostrig.SFTP_SERVER):
            if not os.path.exists(binary):
                raise unittest.SkipTest(binary + " is not installed or built")
        cls.rig = hostrig.Rig(7)
        cls.pool_hosts, cls.storage, cls.bad = cls.rig.hosts[:5], cls.rig.hosts[5], \
            cls.rig.hosts[6]
        try:
            cls.source, cls.options = cls.rig.start_storage(cls.storage)
            # A fixed port: the hosts keep hpodd's address across its restart (test 4c).
            probe = socket.socket()
            probe.bind((cls.rig.server_ip, 0))
            port = probe.getsockname()[1]
            probe.close()
            cls.d = hpodtest.Daemon(extra_args=[
                "--provider", "pool", "--agent-listen", "%s:%d" % (cls.rig.server_ip, port),
                "--pool-spank-plugin", "/opt/hpod/lib/spank_hpod.so"]).start()
            cls.token = cls.hpod_cls("create-join-token", "--uses", "7", "--ttl", "10m",
                                     "--instance-type", TYPE, output="text").strip()
            for h in cls.pool_hosts[:2]:
                cls.boot(h)
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
        for h in cls.rig.hosts:  # the hosts' FUSE mounts of the storage host first
            if h.init is not None:
                h.sh("umount -l /fsx 2>/dev/null || true", check=False)
        cls.rig.cleanup()
        if d is not None:
            d.cleanup()
        if getattr(cls, "lcs", None):
            shutil.rmtree(cls.lcs, ignore_errors=True)

    @classmethod
    def boot(cls, host):
        cls.rig.boot(host, AGENT, cls.d.agent_url, cls.token, TYPE, SPANK)

    @classmethod
    def hpod_cls(cls, *args, output="json"):
        return cls.d.hpod(*args, output=output)

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
        return self.hpod("list-cluster-nodes", "--cluster-name", "own",
                         "--include-node-logical-ids")["ClusterNodeSummaries"]

    def rig_host(self, name):
        return next(r for r in self.rig.hosts if r.name == name)

    def controller(self):
        c = next(n for n in self.nodes() if n["InstanceGroupName"] == "controller")
        return self.rig_host(self.hosts_by_instance()[c["InstanceId"]]["Hostname"])

    def hosts_by_instance(self):
        return {h["InstanceId"]: h for h in self.hosts().values() if "InstanceId" in h}

    def workers(self):
        """Slurm NodeNames of the workers (the first hosts' names: they stay)."""
        return sorted(n for n in re.findall(r"NodeName=(\S+)", self.controller().sh(
            "scontrol show nodes").stdout))

    def on_controller(self, command, check=True):
        return self.controller().sh(command, check=check).stdout

    def recovered(self, instance_id, action):
        for r in self.hpod("hpod-list-recoveries", "--cluster-name", "own")["Recoveries"]:
            if r["NodeId"] == instance_id and r["Action"] == action and \
                    r["Status"] != "InProgress":
                self.assertEqual(r["Status"], "Succeeded", json.dumps(r, indent=1))
                return r
        return None

    def fsx(self, path):
        return os.path.join(self.rig.fsx, path.replace("/fsx/", "", 1))

    def test_1_a_cluster_from_the_pool_waits_for_hosts_and_fills(self):
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
                  "file://" + groups_file, "--hpod-shared-filesystem", json.dumps(
                      {"Type": "fuse.sshfs", "Source": self.source, "Options": self.options}))

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
        self.assertEqual(self.hpod("describe-cluster", "--cluster-name", "own")["ClusterStatus"],
                         "Creating")

        # The third machine joins: the group fills and the cluster is InService.
        self.boot(self.pool_hosts[2])
        self.wait_for("the cluster InService", lambda: self.hpod(
            "describe-cluster", "--cluster-name", "own")["ClusterStatus"] == "InService",
            timeout=180)
        nodes = self.nodes()
        self.assertEqual(len(nodes), 3)
        by_instance = self.hosts_by_instance()
        for n in nodes:
            self.assertEqual(n["InstanceStatus"]["Status"], "Running")
            host = by_instance[n["InstanceId"]]
            self.assertEqual(host["Status"], "Assigned")
            rig_host = self.rig_host(host["Hostname"])
            # The tenure: one directory; the lifecycle script ran from hpodd's
            # files; /fsx is the storage host's, marked as the cluster's.
            inside = rig_host.sh(
                "ls /var/lib/hpod-agent/instances; cat /tmp/on-create-ran; "
                "readlink /opt/ml/config; findmnt -n -o FSTYPE /fsx; "
                "cat /fsx/.hpod-fsx-*").stdout.split("\n")
            self.assertEqual(inside[0], n["InstanceId"])
            self.assertEqual(inside[1], "helper ran on " + rig_host.name)
            self.assertEqual(inside[2],
                             "/var/lib/hpod-agent/instances/%s/config" % n["InstanceId"])
            self.assertEqual(inside[3], "fuse.sshfs")
            self.assertIn("hpod shared filesystem of arn:aws:sagemaker:", inside[4])
        type(self).worker_names = self.workers()
        self.assertEqual(len(self.worker_names), 2)
        out = self.wait_for("srun across two hosts", lambda: (lambda p: p.stdout.split()
                            if p.returncode == 0 else None)(self.controller().sh(
                                "timeout 60 srun -N2 hostname", check=False)), timeout=60)
        self.assertEqual(sorted(out), self.worker_names)

    def test_2_a_reboot_through_the_agent_keeps_the_instance(self):
        hosts = self.hosts()
        rebooted = self.rig_host(self.worker_names[1])
        rebooted_id = hosts[rebooted.name]["InstanceId"]
        old_boot = rebooted.boot_id()
        rebooted.sh("echo before-reboot > /var/lib/hpod-agent/instances/%s/marker" % rebooted_id)
        out = self.hpod("batch-reboot-cluster-nodes", "--cluster-name", "own",
                        "--node-ids", rebooted_id)
        self.assertEqual(out.get("Failed", []), [], out)
        self.wait_for("the reboot's recovery", lambda: self.recovered(rebooted_id, "Reboot"),
                      timeout=120)
        self.assertNotEqual(rebooted.boot_id(), old_boot)
        described = self.hpod("describe-host", "--host-id", hosts[rebooted.name]["HostId"])
        self.assertEqual(described["Status"], "Assigned")
        self.assertEqual(described["Facts"]["BootId"], rebooted.boot_id())
        self.assertEqual([e["To"] for e in described["History"]][-2:], ["Rebooting", "Assigned"])
        # The tenure survived the reboot: the node's disk, not a new one.
        self.assertEqual(rebooted.sh("cat /var/lib/hpod-agent/instances/%s/marker" %
                                     rebooted_id).stdout.strip(), "before-reboot")
        self.assertIn(rebooted_id, [n["InstanceId"] for n in self.nodes()
                                    if n["InstanceStatus"]["Status"] == "Running"])

    def prepare_fsx(self):
        """The example scripts, hpod-train and the tokenized KJV sample on /fsx."""
        for d in ("ar", "data", "bin"):
            os.makedirs(self.fsx("/fsx/" + d), exist_ok=True)
        for name in ("run.slurm", "llama_tiny.sh"):
            shutil.copy(os.path.join(TOP, "examples", "slurm", name), self.fsx("/fsx/ar"))
        for tool in ("hpod-data", "hpod-train"):
            shutil.copy(os.path.join(hpodtest.BIN_DIR, "cmd", tool, tool), self.fsx("/fsx/bin"))
        shutil.copy(os.path.join(TOP, "src", "train", "data", "testdata", "kjv_raw_sample.txt"),
                    self.fsx("/fsx/data/corpus.txt"))
        self.on_controller(
            "set -e; /fsx/bin/hpod-data train-tokenizer --vocab-size 512 --input "
            "/fsx/data/corpus.txt --output /fsx/data/tok512 && /fsx/bin/hpod-data tokenize "
            "--tokenizer /fsx/data/tok512.model --input /fsx/data/corpus.txt "
            "--output /fsx/data/train512.bin")

    def submit(self, name):
        out = self.on_controller(
            "cd /fsx/ar && HPOD_TRAIN=/fsx/bin/hpod-train MAX_STEPS=%d RUN_DIR=/fsx/runs/%s "
            "sbatch --nodes 2 --auto-resume=1 --output=/fsx/ar/%s.out run.slurm ./llama_tiny.sh "
            "--save-interval %d --lr-decay-steps %d" % (STEPS, name, name, SAVE_INTERVAL, STEPS))
        self.assertRegex(out, r"Submitted batch job \d+")
        return out.split()[-1]

    def wait_done(self, job, timeout=300):
        self.wait_for("job %s to end" % job, lambda: not self.on_controller(
            "squeue -h -j %s -o %%T" % job, check=False).strip(), timeout=timeout)
        return re.search(r"JobState=(\S+)", self.on_controller(
            "scontrol show job %s" % job, check=False)).group(1)

    def job_output(self, name):
        try:
            with open(self.fsx("/fsx/ar/%s.out" % name)) as f:
                return f.read()[-4000:]
        except OSError as e:
            return str(e)

    def final_loss(self, name):
        with open(self.fsx("/fsx/runs/%s/summary.json" % name)) as f:
            return json.load(f)["final_loss"]

    def test_3_the_seed_job_survives_a_worker_machine_lost(self):
        self.prepare_fsx()
        ref = self.submit("reference")
        self.assertEqual(self.wait_done(ref), "COMPLETED", self.job_output("reference"))
        reference = self.final_loss("reference")

        # A Spare waits; the job runs past a checkpoint; a worker machine stops.
        spare = self.pool_hosts[3]
        self.boot(spare)
        self.wait_for("a fourth Spare", lambda: self.hosts().get(spare.name, {}).get(
            "Status") == "Spare")
        before = {n["InstanceId"]: n for n in self.nodes()}
        hosts = self.hosts()
        job = self.submit("resumed")
        # Not the batch host (its loss requeues the whole job, test_auto_resume's
        # case): the other worker, whose step the supervisor retries.
        batch = self.wait_for("the job's batch host", lambda: (lambda m: m and m.group(1))(
            re.search(r"BatchHost=(\S+)", self.on_controller("scontrol show job %s" % job))))
        victim = self.rig_host(next(w for w in self.worker_names if w != batch))
        old_id = hosts[victim.name]["InstanceId"]
        self.wait_for("a checkpoint", lambda: os.path.exists(self.fsx(
            "/fsx/runs/resumed/checkpoints")) and any(
            e.startswith("step") for e in os.listdir(self.fsx("/fsx/runs/resumed/checkpoints"))),
            timeout=120)
        victim.power_off()

        def replaced():
            for n in self.nodes():
                if (n["NodeLogicalId"] == before[old_id]["NodeLogicalId"] and
                        n["InstanceId"] != old_id and n["InstanceStatus"]["Status"] == "Running"):
                    return n
            return None
        new = self.wait_for("the replacement Running", replaced, timeout=180)
        self.assertEqual(self.wait_done(job), "COMPLETED", self.job_output("resumed"))
        log = self.job_output("resumed")
        self.assertRegex(log, r"\[Auto Resume\] Info: JobID: %s StepID: \d+ Retrying step\. "
                              r"Attempt number: 1" % job, log)
        self.assertEqual(self.final_loss("resumed"), reference,
                         "the resumed run must end where an undisturbed one ends")
        after = self.hosts()
        self.assertEqual(after[spare.name]["InstanceId"], new["InstanceId"])
        self.assertEqual(after[victim.name]["Status"], "Quarantined")
        described = self.hpod("describe-cluster-node", "--cluster-name", "own", "--node-id",
                              new["InstanceId"])["NodeDetails"]
        self.assertEqual(described["PrivatePrimaryIp"], spare.ip)
        # Slurm's node keeps its name: slurmd on the spare runs as the lost host's.
        names = self.on_controller("timeout 60 srun -N2 -l printenv SLURMD_NODENAME | sort")
        self.assertEqual(sorted(names.split()[1::2]), self.worker_names)
        # And a job sees that name as its hostname (slurmd runs in a UTS
        # namespace of its own there), as srun tells slurmctld where to call
        # it back; the machine underneath is the spare.
        self.assertEqual(sorted(self.on_controller("timeout 60 srun -N2 hostname").split()),
                         self.worker_names)
        stayed = self.rig_host(next(w for w in self.worker_names if w != victim.name))
        ran_on = self.on_controller("timeout 60 srun -N2 hostname -I").split()
        self.assertEqual(sorted(ran_on), sorted([stayed.ip, spare.ip]))
        self.assertEqual(spare.sh("hostname").stdout.strip(), spare.name)  # its own, outside
        # An srun on the spare names the node to slurmctld, which calls it back
        # there (a lost peer's SRUN_STEP_MISSING; under the machine's name it
        # went nowhere and such a step never ended: bench/pool_recovery.py).
        job = self.on_controller("sbatch --parsable -w %s -N1 --wrap 'srun sleep 60'"
                                 % victim.name).strip()
        srun_host = self.wait_for("the job's srun step", lambda: (lambda m: m and m.group(1))(
            re.search(r"SrunHost:Pid=([^:\s]+):", self.on_controller(
                "scontrol show step %s.0" % job, check=False))))
        self.on_controller("scancel %s" % job)
        self.assertEqual(srun_host, victim.name)
        # So does a shell on the node (hpod start-session), where an srun typed
        # names the node too.
        cid = self.hpod("describe-cluster", "--cluster-name", "own")["ClusterArn"].split("/")[-1]
        target = "sagemaker-cluster:%s_%s-%s" % (cid, new["InstanceGroupName"],
                                                 new["InstanceId"])
        # The last line: a login shell's profile may print before it (pyenv on
        # a CI machine, about a working directory the host cannot see).
        out = self.hpod_cls("start-session", "--target", target, "--command", "hostname",
                            output="text")
        self.assertEqual(out.strip().splitlines()[-1], victim.name, out)

        # The lost machine comes back: told it serves nothing, it wipes its old
        # tenure, and stays Quarantined until a person releases it.
        self.boot(victim)
        self.wait_for("the quarantined host connected and wiped", lambda: (
            self.hosts()[victim.name]["Connected"] and
            victim.sh("ls -A /var/lib/hpod-agent/instances").stdout.strip() == ""))
        self.assertEqual(self.hosts()[victim.name]["Status"], "Quarantined")
        self.assertEqual(self.hpod("release-host", "--host-id", hosts[victim.name]["HostId"])[
            "Status"], "Spare")

    def test_4_a_spare_without_the_clusters_fsx_is_quarantined(self):
        # The bad host has something else at /fsx (read-only); it is the
        # preferred Spare (never failed, idle longest), so the next node takes it.
        self.boot(self.bad)
        self.wait_for("the bad host Spare", lambda: self.hosts().get(self.bad.name, {}).get(
            "Status") == "Spare")
        self.bad.sh("mkdir -p /fsx && mount -t tmpfs -o ro tmpfs /fsx")
        good = self.pool_hosts[4]
        self.boot(good)
        self.wait_for("the good host Spare", lambda: self.hosts().get(good.name, {}).get(
            "Status") == "Spare")
        hosts = self.hosts()
        worker = next(n for n in self.nodes() if n["InstanceGroupName"] == "workers")
        # The other released host is Spare too: quarantine it by hand so that the
        # choice is between the bad and the good host only.
        for name, h in hosts.items():
            if h["Status"] == "Spare" and name not in (self.bad.name, good.name):
                self.hpod("retire-host", "--host-id", h["HostId"])
        out = self.hpod("batch-replace-cluster-nodes", "--cluster-name", "own",
                        "--node-ids", worker["InstanceId"])
        self.assertEqual(out.get("Failed", []), [], out)
        self.wait_for("the replacement's recovery", lambda: self.recovered(
            worker["InstanceId"], "Replace"), timeout=180)
        after = self.hosts()
        self.assertEqual(after[self.bad.name]["Status"], "Quarantined")
        reason = self.hpod("describe-host", "--host-id", after[self.bad.name]["HostId"])
        self.assertIn("shared filesystem check failed", reason["StatusReason"])
        self.assertIn("/fsx is not writable", reason["StatusReason"])
        self.assertEqual(after[good.name]["Status"], "Assigned")
        self.assertEqual(self.bad.sh("ls -A /var/lib/hpod-agent/instances 2>/dev/null || true")
                         .stdout.strip(), "")

    def test_4b_inject_fault_on_a_pool_host(self):
        # A Spare again: the host retired in test 4, released.
        retired = next(h for h in self.hosts().values() if h["Status"] == "Retired")
        self.hpod("release-host", "--host-id", retired["HostId"])
        self.wait_for("a connected Spare", lambda: self.hosts()[retired["Hostname"]]["Status"]
                      == "Spare")
        worker = next(n for n in self.nodes() if n["InstanceGroupName"] == "workers")
        # HyperPod's fault flag, written by the host's own agent: the node is replaced.
        self.hpod("inject-fault", "--cluster-name", "own", "--node-id", worker["InstanceId"],
                  "--kind", "flag-file")
        rec = self.wait_for("the flag's recovery", lambda: self.recovered(
            worker["InstanceId"], "Replace"), timeout=180)
        self.assertEqual(rec["Source"], "HealthCheck", rec)
        self.assertEqual(self.hosts()[retired["Hostname"]]["Status"], "Assigned",
                         json.dumps([rec, self.hosts()], indent=1))
        # The machine stopping is the power hook's; this hpodd has none.
        p = subprocess.run([hpodtest.HPOD_CLI, "--endpoint-url", self.d.endpoint, "inject-fault",
                            "--cluster-name", "own", "--node-id", self.nodes()[0]["InstanceId"],
                            "--kind", "kill-node"], capture_output=True, text=True,
                           env=self.d.env(), timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--power-command", p.stderr)

    def test_4c_hpodd_killed_mid_replacement_converges_once(self):
        # A Spare: the host the flag-file replacement quarantined, released (its
        # flag went with its tenure).
        hosts = self.hosts()
        back = next(h for n, h in hosts.items()
                    if h["Status"] == "Quarantined" and n != self.bad.name)
        self.hpod("release-host", "--host-id", back["HostId"])
        worker = next(n for n in self.nodes() if n["InstanceGroupName"] == "workers")
        out = self.hpod("batch-replace-cluster-nodes", "--cluster-name", "own",
                        "--node-ids", worker["InstanceId"])
        self.assertEqual(out.get("Failed", []), [], out)
        # hpodd dies at once (the recovery is in its first steps, or a few further:
        # whatever the step, the recovery must end once, with one replacement).
        self.d.kill()
        self.d.start()
        rec = self.wait_for("the replacement's recovery", lambda: self.recovered(
            worker["InstanceId"], "Replace"), timeout=180)
        recs = [r for r in self.hpod("hpod-list-recoveries", "--cluster-name", "own")[
            "Recoveries"] if r["NodeId"] == worker["InstanceId"]]
        self.assertEqual(len(recs), 1, recs)
        nodes = self.wait_for("three Running nodes", lambda: (lambda ns: ns if len(ns) == 3 and all(
            n["InstanceStatus"]["Status"] == "Running" for n in ns) else None)(self.nodes()))
        self.assertEqual(len([n for n in nodes
                              if n["NodeLogicalId"] == worker["NodeLogicalId"]]), 1)
        assigned = [h for h in self.hosts().values() if h["Status"] == "Assigned"]
        self.assertEqual(sorted(h["InstanceId"] for h in assigned),
                         sorted(n["InstanceId"] for n in nodes))
        self.assertEqual(self.hosts()[back["Hostname"]]["InstanceId"], rec["ReplacementNodeId"])

    def test_5_delete_leaves_every_host_spare_and_wiped(self):
        self.hpod("delete-cluster", "--cluster-name", "own")
        self.wait_for("the cluster gone", lambda: not any(
            c["ClusterName"] == "own"
            for c in self.hpod("list-clusters")["ClusterSummaries"]), timeout=120)
        serving = self.wait_for("no host serving", lambda: (lambda hs: hs if not any(
            h["Status"] in ("Assigned", "Draining", "Rebooting") for h in hs.values())
            else None)(self.hosts()))
        for name, h in serving.items():
            if h["Status"] != "Spare":
                continue
            history = [e["To"] for e in self.hpod("describe-host", "--host-id",
                                                  h["HostId"])["History"]]
            if "Assigned" in history:
                self.assertEqual(history[-1], "Spare", name)
        for r in self.pool_hosts + [self.bad]:
            if r.init is None:
                continue
            left = r.sh("ls -A /var/lib/hpod-agent/instances; ls -A /opt/ml 2>/dev/null; "
                        "pgrep -x 'slurmd|slurmctld|munged' || true").stdout.split()
            self.assertEqual(left, [], r.name)


if __name__ == "__main__":
    hpodtest.main()
