"""End-to-end: BatchRebootClusterNodes / BatchReplaceClusterNodes through the real
`aws sagemaker` CLI (v1) against hpodd with the fake provider.

What the API answers, not what the recovery then does (the fake provider runs no
agents or Slurm; recovery is tested where it runs): ValidationException for 0
and 26 ids, ResourceNotFound for an unknown cluster, InstanceIdNotFound in
Failed, the controller refused for Replace, a Running worker accepted, and
AccessDeniedException for a user key; plus the CLI's text and table output, and
the hpod CLI printing byte for byte what the aws CLI prints.

The aws CLI must know the two operations (botocore >= 1.41, 2025-11). awscli
1.45.11 (botocore 1.43.11) does. An older CLI is given the model of the newest
botocore this Python can import, the documented way: `aws configure add-model
--service-model file://service-2.json --service-name sagemaker`, which writes
~/.aws/models/sagemaker/2017-07-24/service-2.json, under a private HOME.
"""
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, parallel, wait_cluster  # noqa: E402

REBOOT, REPLACE = "BatchRebootClusterNodes", "BatchReplaceClusterNodes"
VERBS = {REBOOT: "batch-reboot-cluster-nodes", REPLACE: "batch-replace-cluster-nodes"}
UNKNOWN_ID = "i-0123456789abcdef0"


def cli_knows(verb, env):
    """Whether the aws CLI has `verb` (it then complains of the missing flag, not the verb)."""
    p = subprocess.run(["aws", "sagemaker", verb], capture_output=True, text=True, env=env)
    return "the following arguments are required: --cluster-name" in p.stderr


def recovery_ops_env(d):
    """Extra environment under which `aws` knows both operations; {} if it already does.

    Raises SkipTest when no importable botocore has them either."""
    import unittest
    if all(cli_knows(v, d.env()) for v in VERBS.values()):
        return {}
    import botocore
    path = os.path.join(os.path.dirname(botocore.__file__), "data", "sagemaker", "2017-07-24",
                        "service-2.json.gz")
    with gzip.open(path) as f:
        model = f.read()
    if b'"BatchRebootClusterNodes"' not in model:
        raise unittest.SkipTest("neither the aws CLI nor botocore %s has BatchRebootClusterNodes"
                                % botocore.__version__)
    home = os.path.join(d.root, "home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "sagemaker-service-2.json"), "wb") as f:
        f.write(model)
    env = {"HOME": home}
    subprocess.run(["aws", "configure", "add-model", "--service-name", "sagemaker",
                    "--service-model", "file://" + os.path.join(home, "sagemaker-service-2.json")],
                   check=True, env=d.env(**env))
    if not all(cli_knows(v, d.env(**env)) for v in VERBS.values()):
        raise AssertionError("aws configure add-model did not give the CLI the operations")
    return env


class BatchRecoveryTest(hpodtest.CliTestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon(pending_ms=100).start()
        cls.addClassCleanup(cls.d.cleanup)
        cls.env = recovery_ops_env(cls.d)
        cls.b = cls.d.boto3()
        cls.b.create_cluster(ClusterName="rc", InstanceGroups=[
            group("controller-machine", 1, SlurmConfig={"NodeType": "Controller"}),
            group("workers", 2)])
        wait_cluster(cls.b, "rc", "InService")
        cls.nodes = {}
        for n in cls.b.list_cluster_nodes(ClusterName="rc")["ClusterNodeSummaries"]:
            cls.nodes.setdefault(n["InstanceGroupName"], []).append(n["InstanceId"])

    def run_op(self, op, *args, **env):
        return self.cli(VERBS[op], "--cluster-name", "rc", *args, **dict(self.env, **env))

    def op_error(self, op, code, *args, cluster="rc", **env):
        return self.cli_error(op, code, VERBS[op], "--cluster-name", cluster, *args,
                              **dict(self.env, **env))

    def test_request_errors(self):
        many = ["i-%017x" % (i + 1) for i in range(26)]
        calls = []
        for op in (REBOOT, REPLACE):
            calls += [
                lambda op=op: self.op_error(op, "ValidationException", "--node-ids", *many),
                lambda op=op: self.op_error(op, "ResourceNotFound", "--node-ids", UNKNOWN_ID,
                                            cluster="no-such-cluster"),
            ]
        msgs = parallel(*calls)
        for too_many, not_found in zip(msgs[0::2], msgs[1::2]):
            self.assertIn("1 validation error detected: Value '<list of 26 items>'", too_many)
            self.assertIn("at 'nodeIds' failed to satisfy constraint: Member must have length "
                          "less than or equal to 25", too_many)
            self.assertIn("no-such-cluster", not_found)

    def test_no_ids(self):
        import boto3
        import botocore.config
        import botocore.exceptions
        creds = hpodtest.read_profile(os.path.join(self.d.aws_dir, "credentials"), "hpod")
        unchecked = boto3.session.Session(
            aws_access_key_id=creds["aws_access_key_id"],
            aws_secret_access_key=creds["aws_secret_access_key"],
            region_name=hpodtest.REGION).client(
                "sagemaker", endpoint_url=self.d.endpoint,
                config=botocore.config.Config(parameter_validation=False,
                                              retries={"max_attempts": 1}))
        for op in (REBOOT, REPLACE):
            # The CLI checks the model's min itself and sends nothing.
            rc, _, err = self.d.aws(VERBS[op], "--cli-input-json",
                                    json.dumps({"ClusterName": "rc", "NodeIds": []}),
                                    check=False, **self.env)
            self.assertEqual(rc, 255, err)
            self.assertIn("Invalid length for parameter NodeIds, value: 0, valid min length: 1",
                          err)
            # The daemon refuses it too, and a call naming no ids at all.
            call = getattr(unchecked, VERBS[op].replace("-", "_"))
            for req in ({"ClusterName": "rc", "NodeIds": []}, {"ClusterName": "rc"}):
                with self.assertRaises(botocore.exceptions.ClientError) as e:
                    call(**req)
                self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException",
                                 (op, req))

    def test_per_node_failures_and_success(self):
        ctl = self.nodes["controller-machine"][0]
        worker = self.nodes["workers"][0]
        out = self.run_op(REPLACE, "--node-ids", UNKNOWN_ID, ctl)
        self.assertNotIn("Successful", out)  # at least one id in the model, so left out
        failed = {f["NodeId"]: f for f in out["Failed"]}
        self.assertEqual(set(failed), {UNKNOWN_ID, ctl})
        self.assertEqual(failed[UNKNOWN_ID]["ErrorCode"], "InstanceIdNotFound")
        self.assertEqual(failed[ctl]["ErrorCode"], "InvalidInstanceStatus")
        self.assertIn("controller", failed[ctl]["Message"])

        text = self.run_op(REBOOT, "--node-ids", worker, UNKNOWN_ID, "--output", "text")
        lines = text.splitlines()
        self.assertIn("SUCCESSFUL\t" + worker, lines)
        self.assertTrue(any(line.startswith("FAILED\tInstanceIdNotFound\t") and
                            line.endswith("\t" + UNKNOWN_ID) for line in lines), text)
        # Asked again: in use while that reboot is in progress (the fake provider
        # runs no Slurm, so it may stay there), accepted anew once it is done.
        again = self.run_op(REPLACE, "--node-ids", worker)
        if again.get("Successful") != [worker]:
            self.assertEqual([f["ErrorCode"] for f in again["Failed"]], ["InstanceIdInUse"], again)

        table = self.run_op(REPLACE, "--node-ids", UNKNOWN_ID, "--output", "table")
        self.assertIn(REPLACE, table)
        self.assertIn("InstanceIdNotFound", table)

    def test_hpod_cli_prints_what_aws_prints(self):
        if not os.path.exists(hpodtest.HPOD_CLI):
            self.skipTest("hpod CLI not built at " + hpodtest.HPOD_CLI)
        for op in (REBOOT, REPLACE):
            for fmt in ("json", "text", "table"):
                args = [VERBS[op], "--cluster-name", "rc", "--node-ids", UNKNOWN_ID,
                        "i-0123456789abcdef1", "--output", fmt]
                want = subprocess.run(
                    ["aws", "--endpoint-url", self.d.endpoint, "sagemaker"] + args,
                    capture_output=True, text=True, env=self.d.env(**self.env), check=True).stdout
                got = subprocess.run([hpodtest.HPOD_CLI, "--endpoint-url", self.d.endpoint] + args,
                                     capture_output=True, text=True, env=self.d.env(), check=True)
                self.assertEqual(got.stdout, want, (op, fmt))

    def test_user_key_is_refused(self):
        block = subprocess.run(
            [hpodtest.HPODD_FAKE, "--data-dir", self.d.data_dir, "create-key", "--role", "user"],
            capture_output=True, text=True, check=True).stdout
        self.assertTrue(block.startswith("[user]\n"), block)
        with open(os.path.join(self.d.aws_dir, "credentials"), "a") as f:
            f.write("\n" + block)
        worker = self.nodes["workers"][1]
        for op in (REBOOT, REPLACE):
            msg = self.op_error(op, "AccessDeniedException", "--node-ids", worker,
                                AWS_PROFILE="user")
            self.assertIn(op, msg)
        events = self.b.list_cluster_events(ClusterName="rc", NodeId=worker)["Events"]
        self.assertFalse([e for e in events if "Recovery" in e.get("Description", "")], events)


if __name__ == "__main__":
    hpodtest.require_aws_clients()
    hpodtest.main()
