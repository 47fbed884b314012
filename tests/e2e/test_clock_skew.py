"""Nodes whose clocks disagree with hpodd's (issue 25, one clock per fact), with
`hpodd --fake-clock-skew` (libfaketime under each node's agent and all it starts:
slurmd, munged, shells). A 1+3 Slurm cluster whose controller and workers run 90 s
ahead of hpodd, plus one node 90 s behind it in a partition of its own. Slurm needs
the clocks of the nodes of one job to agree (its job credentials expire after
120 s: a worker 90 s ahead of a true controller has its task launches refused), so
the nodes that run the jobs share one clock, and that clock is not hpodd's: the
case of hpodd on a machine of its own. The workers run an --auto-resume training
job, then the same job through kill-node, and it ends bit-exact
(test_auto_resume.py's first two tests); the node behind is killed and replaced
too, keeps its clock and joins Slurm again; describe-cluster-node shows each
offset. hpodd tells a replacement's slurmd from its predecessor's by the node's
own clock. Needs root, Debian's slurm and faketime packages."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_auto_resume  # noqa: E402  (a module: its own test class is not collected here)

FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SKEW = {"controller-machine": 90, "workers": 90, "behind": -90}


class SkewedClocksTest(test_auto_resume.AutoResumeTest):
    PREFIX = "t5c"
    HPODD_ARGS = ("--fake-clock-skew", "controller-machine=90", "--fake-clock-skew",
                  "workers=90", "--fake-clock-skew", "behind=-90")
    EXTRA_GROUPS = (("behind", 1, {"NodeType": "Compute", "PartitionNames": ["behind"]}),)

    test_3_hang_and_partition_are_recovered_the_same_way = None
    test_4_a_users_action_replace_during_the_job = None
    test_5_batch_host_killed_requeues_and_resumes = None
    test_6_without_auto_resume_the_job_fails = None
    test_7_bad_option_values_are_one_line_errors = None
    test_8_a_rolling_software_update_keeps_the_job_running = None
    test_9_a_pytorch_ddp_job_resumes_from_its_snapshot = None

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(FAKETIME):
            raise unittest.SkipTest("Debian's faketime package is not installed")
        super().setUpClass()

    def node_of(self, group):
        return [n for n in self.d.nodes("ar") if n["InstanceGroupName"] == group][0]

    def offset(self, iid):
        d = self.d.hpod_json("describe-cluster-node", "--cluster-name", "ar", "--node-id", iid)
        return d["NodeDetails"].get("HpodClockOffsetSeconds")

    def assert_skews(self):
        for group, skew in SKEW.items():
            iid = self.node_of(group)["InstanceId"]
            deadline = time.time() + 30
            while self.offset(iid) is None and time.time() < deadline:
                time.sleep(0.5)
            self.assertAlmostEqual(self.offset(iid), skew, delta=3, msg=group)
            # The node's userland sees it too: a shell its agent starts. (Tasks that
            # srun starts take the submitter's environment, so they keep the
            # controller's clock: slurmd and slurmstepd are the skewed ones.)
            target = self.target.replace("controller-machine-" + self.controller,
                                         "%s-%s" % (group, iid))
            out = self.d.session(target, "date +%s").strip()
            self.assertAlmostEqual(int(out.splitlines()[-1]), time.time() + skew, delta=5,
                                   msg="date on " + group)

    def test_0_each_node_runs_on_its_own_clock(self):
        self.assert_skews()

    def test_8_the_node_behind_is_replaced_like_any_other(self):
        old = self.node_of("behind")
        host = self.hostname(old["InstanceId"])
        self.d.hpod("inject-fault", "--cluster-name", "ar", "--node-id", old["InstanceId"],
                    "--kind", "kill-node")
        deadline = time.time() + 120
        recoveries = []
        while time.time() < deadline:
            recoveries = self.d.hpod_json("hpod-list-recoveries", "--cluster-name", "ar",
                                          "--node-id", old["InstanceId"])["Recoveries"]
            if recoveries and recoveries[0]["Status"] != "InProgress":
                break
            time.sleep(0.5)
        self.assertEqual([r["Status"] for r in recoveries], ["Succeeded"],
                         "%s\n%s" % (recoveries, self.d.log_tail()))
        new = self.node_of("behind")
        self.assertNotEqual(new["InstanceId"], old["InstanceId"])
        self.assertEqual(self.hostname(new["InstanceId"]), host)
        self.assertIn("idle", self.on_controller("sinfo -h -n %s -o %%T" % host))
        self.assert_skews()  # the replacement kept its group's clock
        # Slurm runs work on it, 180 s behind the controller.
        self.assertEqual(self.on_controller("srun -p behind -N1 hostname").strip(), host)


if __name__ == "__main__":
    unittest.main()
