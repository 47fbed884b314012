"""The seed's own files on real nodes. (a) examples/demo-cluster.json exactly as the
seed's HyperPod launched it (controller-group and worker-group, no SlurmConfig),
with its SourceS3Uri pointed at a file:// copy of examples/lifecycle/base-config/
(under the test's root in /var/tmp, which the nodes see) and the worker count
lowered from 4 to 2 to keep this test short (the full 1+4 runs in the quickstart
test), gives a Slurm cluster: base-config's provisioning_parameters.json names the
groups, and `sinfo` on the controller shows partition dev with the 2 workers.
(b) The same JSON with a copy of the prefix that lacks provisioning_parameters.json
gives a cluster without Slurm that says so plainly: the motd says why and what to
do, `sinfo` answers with a one-line hint (not Slurm's "DNS SRV lookup failed"),
and one cluster event says so. (c) A file:///tmp/... source, which the nodes
cannot see (each has its own /tmp), is refused at once by create-cluster with a
ValidationException saying what to do. Needs root and Debian's slurm packages."""
import json
import os
import shutil
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import nodestest  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HINT = ": this hpod cluster has no Slurm (no instance group has a Slurm role); see /opt/hpod/motd"



def seed_groups(source, workers):
    """examples/demo-cluster.json, read from the file, with its source and worker
    count replaced (nothing else changes)."""
    with open(os.path.join(TOP, "examples", "demo-cluster.json")) as f:
        groups = json.load(f)
    assert [g["InstanceGroupName"] for g in groups] == ["controller-group", "worker-group"]
    assert not any("SlurmConfig" in g for g in groups), "the seed's JSON has no SlurmConfig"
    for g in groups:
        g["LifeCycleConfig"]["SourceS3Uri"] = source
        if g["InstanceGroupName"] == "worker-group":
            g["InstanceCount"] = workers
    return groups


class SeedClusterTest(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        nodestest.require_nodes()
        if not nodestest.have_slurm():
            print("SKIP: Debian's slurmctld/slurmd/munge are not installed "
                  "(scripts/install-deps.sh installs them)")
            sys.exit(hpodtest.SKIP)
        cls.d = nodestest.NodesDaemon("t5s")
        try:
            base = os.path.join(TOP, "examples", "lifecycle", "base-config")
            with_params = os.path.join(cls.d.root, "base-config")
            without = os.path.join(cls.d.root, "base-config-no-params")
            shutil.copytree(base, with_params)
            shutil.copytree(base, without)
            os.remove(os.path.join(without, "provisioning_parameters.json"))
            cls.d.start()
            t0 = time.time()
            # Both clusters at once: the test stays short on 2 cores.
            for name, src in (("seed", with_params), ("noslurm", without)):
                spec = os.path.join(cls.d.root, name + ".json")
                with open(spec, "w") as f:
                    json.dump(seed_groups("file://%s/" % src, 2), f)
                cls.d.hpod("create-cluster", "--cluster-name", name, "--instance-groups",
                           "file://" + spec)
            cls.clusters = {}
            for name in ("seed", "noslurm"):
                out = cls.d.wait_status(name, "InService", timeout=240)
                cls.clusters[name] = out["ClusterArn"].split("/")[-1]
            cls.create_seconds = time.time() - t0
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.cleanup()

    def controller(self, name):
        """(start-session target, instance id) of the cluster's controller-group node."""
        node = [n for n in self.d.nodes(name) if n["InstanceGroupName"] == "controller-group"][0]
        return ("sagemaker-cluster:%s_controller-group-%s" % (self.clusters[name],
                                                              node["InstanceId"]),
                node["InstanceId"])

    def test_a_the_seeds_json_and_base_config_give_slurm(self):
        print("create-cluster x2 -> InService: %.1f s" % self.create_seconds)
        target, _ = self.controller("seed")
        workers = sorted(n["PrivateDnsHostname"].split(".")[0] for n in self.d.nodes("seed")
                         if n["InstanceGroupName"] == "worker-group")
        self.assertEqual(len(workers), 2)
        want = {w: ("dev*", "idle") for w in workers}
        got = None
        deadline = time.time() + 30
        while time.time() < deadline:
            out = self.d.session(target, "sinfo -h -N -o '%N %P %T'")
            got = {l.split()[0]: tuple(l.split()[1:]) for l in out.splitlines() if l.strip()}
            if got == want:
                break
            time.sleep(0.5)
        self.assertEqual(got, want)
        # Slurm clusters are unchanged: no hint, the real sinfo.
        self.assertNotIn("no Slurm", self.d.session(target, "cat /opt/hpod/motd"))

    def test_b_without_provisioning_parameters_the_cluster_says_it_has_no_slurm(self):
        target, instance = self.controller("noslurm")
        motd = self.d.session(target, "cat /opt/hpod/motd")
        self.assertIn("this cluster has no Slurm", motd)
        self.assertIn("provisioning_parameters.json", motd)
        self.assertIn("examples/lifecycle/base-config/", motd)
        self.assertLessEqual(len([l for l in motd.splitlines() if l.strip()]), 6, motd)
        # `hpod start-session --command sinfo` runs `bash -lc sinfo` on the node.
        p = self.d.hpod("start-session", "--target", target, "--command", "sinfo", check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("sinfo" + HINT, p.stdout + p.stderr)
        self.assertNotIn("DNS SRV", p.stdout + p.stderr)
        # An interactive shell (stdin relayed): the motd greets, sbatch says it too.
        p = self.d.hpod("start-session", "--target", target, check=False,
                        input="sbatch job.sh; echo rc=$?\nexit\n")
        self.assertIn("this cluster has no Slurm", p.stdout)
        self.assertIn("sbatch" + HINT, p.stdout)
        self.assertIn("rc=1", p.stdout)
        # Node-private: nothing was written to the host's /etc, /root or /opt/hpod.
        self.assertFalse(os.path.exists("/run/hpod-no-slurm"))
        self.assertTrue(self.d.in_node(instance, "test -e /run/hpod-no-slurm",
                                       check=False).returncode == 0)
        events = self.d.hpod_json("list-cluster-events", "--cluster-name", "noslurm")["Events"]
        said = [e for e in events if e.get("Description", "").startswith(
            "This cluster has no Slurm: no instance group has a SlurmConfig")]
        self.assertEqual(len(said), 1, events)

    def test_c_a_source_under_tmp_is_refused_at_once(self):
        lcs = "/tmp/hpod-e2e-lcs-%d" % os.getpid()
        spec = os.path.join(self.d.root, "tmp.json")
        with open(spec, "w") as f:
            json.dump(seed_groups("file://%s/" % lcs, 1), f)
        t0 = time.time()
        p = self.d.hpod("create-cluster", "--cluster-name", "intmp", "--instance-groups",
                        "file://" + spec, check=False)
        self.assertLess(time.time() - t0, 10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ValidationException", p.stderr)
        self.assertIn("instance group 'controller-group' is file://%s/, which the nodes cannot "
                      "see: each node has its own /tmp" % lcs, p.stderr)
        self.assertIn("/var/tmp or /srv", p.stderr)
        names = [c["ClusterName"] for c in self.d.hpod_json("list-clusters")["ClusterSummaries"]]
        self.assertNotIn("intmp", names)


if __name__ == "__main__":
    hpodtest.main()
