"""End-to-end: boto3 against hpodd-fake.

The cluster journey through boto3, its paginators (tokens advance, nothing is
repeated or lost), ClientError codes with their HTTP statuses, request ids, and
NextToken tampering.
"""
import http.client
import json
import os
import re
import subprocess
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, wait_cluster  # noqa: E402

import boto3  # noqa: E402
import botocore.config  # noqa: E402
import botocore.exceptions  # noqa: E402

REQUEST_ID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
VPC = {"SecurityGroupIds": ["sg-0a1b2c3d"], "Subnets": ["subnet-0a1b2c3d", "subnet-4e5f6a7b"]}


class Boto3Base(unittest.TestCase):
    pending_ms = 100

    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon(pending_ms=cls.pending_ms).start()
        cls.addClassCleanup(cls.d.cleanup)
        cls.sm = cls.d.boto3()

    def client_error(self, call, code, status=400, **kwargs):
        """Calls `call(**kwargs)`, which must raise ClientError `code`; returns the response."""
        with self.assertRaises(botocore.exceptions.ClientError) as cm:
            call(**kwargs)
        resp = cm.exception.response
        self.assertEqual(resp["Error"]["Code"], code, resp)
        self.assertEqual(resp["ResponseMetadata"]["HTTPStatusCode"], status, resp)
        self.assertRegex(resp["ResponseMetadata"]["RequestId"], REQUEST_ID_RE)
        self.assertTrue(resp["Error"]["Message"])
        return cm.exception

    def client_for(self, access_key, secret):
        session = boto3.session.Session(aws_access_key_id=access_key,
                                        aws_secret_access_key=secret,
                                        region_name=hpodtest.REGION)
        return session.client("sagemaker", endpoint_url=self.d.endpoint,
                              config=botocore.config.Config(retries={"max_attempts": 1}))

    def wait_nodes(self, name, pred, timeout=30):
        deadline = time.time() + timeout
        while True:
            nodes = self.sm.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]
            if pred(nodes) or time.time() > deadline:
                return nodes
            time.sleep(0.1)


class Boto3JourneyTest(Boto3Base):
    def test_journey(self):
        sm = self.sm
        controller = group("controller-machine", 1, SlurmConfig={"NodeType": "Controller"})
        out = sm.create_cluster(ClusterName="b3-journey", VpcConfig=VPC,
                                Tags=[{"Key": "project", "Value": "e2e"}],
                                NodeRecovery="Automatic",
                                InstanceGroups=[controller, group("compute", 2)])
        arn = out["ClusterArn"]
        self.assertRegex(arn, r"^arn:aws:sagemaker:us-west-2:123456789012:cluster/[a-z0-9]{12}$")
        self.assertEqual(out["ResponseMetadata"]["HTTPStatusCode"], 200)
        self.assertRegex(out["ResponseMetadata"]["RequestId"], REQUEST_ID_RE)
        self.assertEqual(out["ResponseMetadata"]["HTTPHeaders"]["content-type"],
                         "application/x-amz-json-1.1")
        first = sm.describe_cluster(ClusterName="b3-journey")
        self.assertIn(first["ClusterStatus"], ("Creating", "InService"))
        self.assertNotEqual(first["ResponseMetadata"]["RequestId"],
                            out["ResponseMetadata"]["RequestId"])

        desc = wait_cluster(sm, arn, "InService")
        self.assertEqual(desc["ClusterArn"], arn)
        self.assertEqual(desc["VpcConfig"], VPC)
        self.assertEqual(desc["NodeRecovery"], "Automatic")
        self.assertEqual(desc["CreationTime"], first["CreationTime"])
        self.assertEqual([(g["InstanceGroupName"], g["CurrentCount"], g["TargetCount"], g["Status"])
                          for g in desc["InstanceGroups"]],
                         [("controller-machine", 1, 1, "InService"), ("compute", 2, 2, "InService")])
        self.assertEqual(desc["InstanceGroups"][0]["SlurmConfig"], {"NodeType": "Controller"})

        # Tags by the cluster's ARN: CreateCluster's, added, paged (one page), deleted.
        self.assertEqual(sm.list_tags(ResourceArn=arn)["Tags"], [{"Key": "project", "Value": "e2e"}])
        self.assertEqual(sm.add_tags(ResourceArn=arn, Tags=[{"Key": "owner", "Value": "alice"}])[
            "Tags"], [{"Key": "owner", "Value": "alice"}])
        pages = list(sm.get_paginator("list_tags").paginate(ResourceArn=arn))
        self.assertEqual([t for p in pages for t in p["Tags"]],
                         [{"Key": "project", "Value": "e2e"}, {"Key": "owner", "Value": "alice"}])
        sm.delete_tags(ResourceArn=arn, TagKeys=["project"])
        self.assertEqual(sm.list_tags(ResourceArn=arn)["Tags"], [{"Key": "owner", "Value": "alice"}])
        self.client_error(sm.add_tags, "ValidationException", ResourceArn=arn,
                          Tags=[{"Key": "aws:owner", "Value": "x"}])
        self.client_error(sm.list_tags, "ResourceNotFound",
                          ResourceArn=arn[:arn.rfind("/") + 1] + "000000000000")

        nodes = sm.list_cluster_nodes(ClusterName="b3-journey",
                                      IncludeNodeLogicalIds=True)["ClusterNodeSummaries"]
        self.assertEqual(len(nodes), 3)
        for n in nodes:
            self.assertEqual(n["InstanceStatus"]["Status"], "Running")
            self.assertTrue(n["NodeLogicalId"])
            self.assertEqual(n["LaunchTime"].tzinfo is not None, True)
        ctl = next(n for n in nodes if n["InstanceGroupName"] == "controller-machine")
        by_id = sm.describe_cluster_node(ClusterName="b3-journey", NodeId=ctl["InstanceId"])
        by_logical = sm.describe_cluster_node(ClusterName=arn, NodeLogicalId=ctl["NodeLogicalId"])
        self.assertEqual(by_id["NodeDetails"], by_logical["NodeDetails"])
        self.assertEqual(by_id["NodeDetails"]["InstanceId"], ctl["InstanceId"])
        self.assertEqual(by_id["NodeDetails"]["PrivateDnsHostname"], ctl["PrivateDnsHostname"])
        self.client_error(sm.describe_cluster_node, "ValidationException", ClusterName=arn,
                          NodeId=ctl["InstanceId"], NodeLogicalId=ctl["NodeLogicalId"])
        self.client_error(sm.describe_cluster_node, "ResourceNotFound", ClusterName=arn,
                          NodeId="i-00000000000000000")

        # Scale up and down.
        self.assertEqual(sm.update_cluster(ClusterName="b3-journey",
                                           InstanceGroups=[group("compute", 5)])["ClusterArn"], arn)
        self.assertIn(sm.describe_cluster(ClusterName=arn)["ClusterStatus"],
                      ("Updating", "InService"))
        wait_cluster(sm, arn, "InService")
        nodes = sm.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]
        self.assertEqual(len(nodes), 6)
        sm.update_cluster(ClusterName=arn, InstanceGroups=[group("compute", 2)])
        desc = wait_cluster(sm, arn, "InService")
        self.assertEqual([g["CurrentCount"] for g in desc["InstanceGroups"]], [1, 2])
        self.assertEqual(len(sm.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]), 3)

        # UpdateClusterSoftware: the compute group is replaced half at a time, then the
        # controller rebooted (never replaced). This hpodd's fake nodes run no hpod
        # software: no image to compare, and nothing to roll back to.
        self.client_error(sm.update_cluster_software, "ValidationException", ClusterName=arn,
                          InstanceGroups=[{"InstanceGroupName": "no-such-group"}])
        self.client_error(sm.update_cluster_software, "ValidationException", ClusterName=arn,
                          ImageId="ami-0123456789abcdef0")
        self.client_error(sm.update_cluster_software, "ValidationException", ClusterName=arn,
                          DeploymentConfig={
                              "RollingUpdatePolicy": {"MaximumBatchSize": {
                                  "Type": "INSTANCE_COUNT", "Value": 1}},
                              "AutoRollbackConfiguration": [{"AlarmName": "hpod-node-health"}]})
        before = {n["InstanceId"]: n["InstanceGroupName"]
                  for n in sm.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]}
        out = sm.update_cluster_software(ClusterName=arn, DeploymentConfig={
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE",
                                                         "Value": 50}},
            "WaitIntervalInSeconds": 0})
        self.assertEqual(out["ClusterArn"], arn)
        desc = wait_cluster(sm, arn, "InService")
        self.assertEqual([g.get("SoftwareUpdateStatus") for g in desc["InstanceGroups"]],
                         ["Succeeded", "Succeeded"])
        after = {n["InstanceId"]: n["InstanceGroupName"]
                 for n in sm.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]}
        self.assertEqual(sorted(after.values()), sorted(before.values()))
        self.assertEqual([i for i, g in after.items() if i in before],
                         [i for i, g in before.items() if g == "controller-machine"],
                         "every compute node was replaced, the controller kept")

        # Changing a group's instance type is refused; the controller group cannot go.
        self.client_error(sm.update_cluster, "ValidationException", ClusterName=arn,
                          InstanceGroups=[group("compute", 2, instance_type="ml.m5.large")])
        self.client_error(sm.update_cluster, "ValidationException", ClusterName=arn,
                          InstanceGroupsToDelete=["controller-machine"])
        self.client_error(sm.update_cluster, "ValidationException", ClusterName=arn,
                          InstanceGroupsToDelete=["no-such-group"])

        # Add a group and delete one in the same call.
        sm.update_cluster(ClusterName=arn, InstanceGroups=[group("login", 1, "ml.m5.large")],
                          InstanceGroupsToDelete=["compute"])
        desc = wait_cluster(sm, arn, "InService")
        self.assertEqual([(g["InstanceGroupName"], g["CurrentCount"]) for g in desc["InstanceGroups"]],
                         [("controller-machine", 1), ("login", 1)])

        # BatchDeleteClusterNodes: the controller is refused, by id and by logical id.
        nodes = sm.list_cluster_nodes(ClusterName=arn,
                                      IncludeNodeLogicalIds=True)["ClusterNodeSummaries"]
        login = next(n for n in nodes if n["InstanceGroupName"] == "login")
        ctl = next(n for n in nodes if n["InstanceGroupName"] == "controller-machine")
        out = sm.batch_delete_cluster_nodes(ClusterName=arn, NodeIds=[ctl["InstanceId"]],
                                            NodeLogicalIds=[login["NodeLogicalId"]])
        self.assertNotIn("Successful", out)  # the model's list holds at least one id
        self.assertEqual([(f["NodeId"], f["Code"]) for f in out["Failed"]],
                         [(ctl["InstanceId"], "NodeIdInUse")])
        self.assertEqual(out["SuccessfulNodeLogicalIds"], [login["NodeLogicalId"]])
        self.assertNotIn("FailedNodeLogicalIds", out)
        nodes = self.wait_nodes(arn, lambda ns: len(ns) == 1)
        self.assertEqual([n["InstanceId"] for n in nodes], [ctl["InstanceId"]])
        self.client_error(sm.batch_delete_cluster_nodes, "ResourceNotFound",
                          ClusterName="no-such-cluster", NodeIds=["i-0123456789abcdef0"])

        # Delete: ResourceNotFound afterwards, for describe, update and delete alike.
        self.assertEqual(sm.delete_cluster(ClusterName=arn)["ClusterArn"], arn)
        wait_cluster(sm, arn, None)
        e = self.client_error(sm.describe_cluster, "ResourceNotFound", ClusterName=arn)
        self.assertIsInstance(e, sm.exceptions.ResourceNotFound)
        self.client_error(sm.update_cluster, "ResourceNotFound", ClusterName="b3-journey",
                          InstanceGroups=[group("login", 1, "ml.m5.large")])
        self.client_error(sm.delete_cluster, "ResourceNotFound", ClusterName="b3-journey")
        # Its events stay readable for a while (--deleted-cluster-retention-hours).
        kept = sm.list_cluster_events(ClusterName="b3-journey")["Events"]
        self.assertEqual(kept[0]["Description"], "Cluster deleted")
        self.assertEqual(sm.list_cluster_events(ClusterName=arn)["Events"], kept)
        self.client_error(sm.list_cluster_events, "ResourceNotFound", ClusterName="never-was")
        self.client_error(sm.list_tags, "ResourceNotFound", ResourceArn=arn)
        self.assertEqual(sm.list_clusters()["ClusterSummaries"], [])
        self.assertEqual(self.d.fake_nodes(), {})


class Boto3ErrorsTest(Boto3Base):
    pending_ms = 600000  # nodes stay Pending: clusters stay Creating

    def test_error_codes_and_statuses(self):
        sm = self.sm
        sm.create_cluster(ClusterName="creating", InstanceGroups=[group("g", 1)])
        e = self.client_error(sm.create_cluster, "ResourceInUse", ClusterName="creating",
                              InstanceGroups=[group("g", 1)])
        self.assertIsInstance(e, sm.exceptions.ResourceInUse)
        e = self.client_error(sm.update_cluster, "ConflictException", ClusterName="creating",
                              InstanceGroups=[group("g", 2)])
        self.assertIsInstance(e, sm.exceptions.ConflictException)
        e = self.client_error(sm.create_cluster, "ResourceLimitExceeded", ClusterName="big",
                              InstanceGroups=[group("g%d" % i, 6758) for i in range(3)])
        self.assertIsInstance(e, sm.exceptions.ResourceLimitExceeded)
        e = self.client_error(sm.create_cluster, "ValidationException", ClusterName="a" * 64,
                              InstanceGroups=[group("g", 1)])
        self.assertIn("have length less than or equal to 63", e.response["Error"]["Message"])
        e = self.client_error(sm.create_cluster, "ValidationException", ClusterName="ok",
                              InstanceGroups=[group("g", 6759)])
        self.assertIn("less than or equal to 6758", e.response["Error"]["Message"])
        e = self.client_error(sm.list_clusters, "ValidationException", SortBy="SIZE")
        self.assertIn("enum value set", e.response["Error"]["Message"])
        self.client_error(sm.create_cluster, "ValidationException", ClusterName="ok",
                          InstanceGroups=[group("g", 1), group("g", 1)])
        e = self.client_error(sm.create_cluster, "ValidationException", ClusterName="ok",
                              InstanceGroups=[group("g", 1, OnStartDeepHealthChecks=[
                                  "InstanceStress", "InstanceStress"])])
        self.assertIn("OnStartDeepHealthChecks names InstanceStress twice",
                      e.response["Error"]["Message"])
        self.client_error(sm.create_cluster, "ValidationException", ClusterName="ok",
                          InstanceGroups=[group("g", 1)], Orchestrator={"Eks": {
                              "ClusterArn": "arn:aws:eks:us-west-2:123456789012:cluster/x"}})
        self.client_error(sm.describe_cluster, "ResourceNotFound",
                          ClusterName="arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef")

        # Authentication: 403 with the AWS codes; authorization: AccessDeniedException, 400
        # as in AWS's common errors for JSON services.
        admin = hpodtest.read_profile(os.path.join(self.d.aws_dir, "credentials"), "hpod")
        bad_secret = self.client_for(admin["aws_access_key_id"], "0" * 40)
        self.client_error(bad_secret.list_clusters, "InvalidSignatureException", status=403)
        unknown = self.client_for("HPODNOSUCHKEY0000000", admin["aws_secret_access_key"])
        self.client_error(unknown.list_clusters, "UnrecognizedClientException", status=403)
        block = subprocess.run([hpodtest.HPODD_FAKE, "--data-dir", self.d.data_dir, "create-key",
                                "--role", "user"], capture_output=True, text=True, check=True).stdout
        kv = dict(re.findall(r"^(\w+) = (\S+)$", block, re.M))
        user = self.client_for(kv["aws_access_key_id"], kv["aws_secret_access_key"])
        self.assertEqual(user.describe_cluster(ClusterName="creating")["ClusterName"], "creating")
        self.assertEqual(len(user.list_clusters()["ClusterSummaries"]), 1)
        e = self.client_error(user.delete_cluster, "AccessDeniedException", ClusterName="creating")
        self.assertIn("DeleteCluster", e.response["Error"]["Message"])
        self.client_error(user.create_cluster, "AccessDeniedException", ClusterName="u",
                          InstanceGroups=[group("g", 1)])
        self.client_error(user.batch_delete_cluster_nodes, "AccessDeniedException",
                          ClusterName="creating", NodeIds=["i-0123456789abcdef0"])
        # Nothing above changed anything.
        summaries = sm.list_clusters()["ClusterSummaries"]
        self.assertEqual([(c["ClusterName"], c["ClusterStatus"]) for c in summaries],
                         [("creating", "Creating")])



class Boto3ConcurrencyTest(Boto3Base):
    pending_ms = 50

    def test_concurrent_creates_of_one_name(self):
        import concurrent.futures
        clients = [self.d.boto3() for _ in range(6)]

        def create(client):
            try:
                return client.create_cluster(ClusterName="race",
                                             InstanceGroups=[group("g", 1)])["ClusterArn"]
            except botocore.exceptions.ClientError as e:
                return e.response["Error"]["Code"]

        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(create, clients))
        arns = [r for r in results if r.startswith("arn:")]
        self.assertEqual(len(arns), 1, results)
        self.assertEqual(sorted(set(results) - set(arns)), ["ResourceInUse"], results)
        self.assertEqual(self.sm.describe_cluster(ClusterName="race")["ClusterArn"], arns[0])


class Boto3QuotaTest(Boto3Base):
    pending_ms = 50

    def test_cluster_quota(self):
        # hpodd's default quota is 100 clusters per account (ResourceLimitExceeded beyond).
        for i in range(100):
            self.sm.create_cluster(ClusterName="q%03d" % i, InstanceGroups=[group("g", 0)])
        e = self.client_error(self.sm.create_cluster, "ResourceLimitExceeded",
                              ClusterName="one-too-many", InstanceGroups=[group("g", 0)])
        self.assertIsInstance(e, self.sm.exceptions.ResourceLimitExceeded)
        pages = self.sm.get_paginator("list_clusters").paginate()
        self.assertEqual(len([c for p in pages for c in p["ClusterSummaries"]]), 100)
        # Deleting one makes room again.
        self.sm.delete_cluster(ClusterName="q000")
        wait_cluster(self.sm, "q000", None)
        self.sm.create_cluster(ClusterName="one-more", InstanceGroups=[group("g", 0)])


class Boto3PresignTest(Boto3Base):
    pending_ms = 50

    def test_presigned_request(self):
        """A request signed in the query string (SigV4 presigning) is accepted.

        botocore's presigner moves a JSON body into the query string and signs an
        empty payload, so the request carries no body (ListClusters needs none)."""
        url = self.sm.generate_presigned_url("list_clusters", Params={}, ExpiresIn=300,
                                             HttpMethod="POST")
        parts = urllib.parse.urlsplit(url)
        self.assertIn("X-Amz-Signature=", parts.query)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        try:
            conn.request("POST", parts.path + "?" + parts.query, body=b"",
                         headers={"X-Amz-Target": "SageMaker.ListClusters",
                                  "Content-Type": "application/x-amz-json-1.1"})
            resp = conn.getresponse()
            body = json.loads(resp.read())
            self.assertEqual(resp.status, 200, body)
            self.assertIn("ClusterSummaries", body)
            # The same URL with its signature altered is refused.
            bad = parts.query.replace("X-Amz-Signature=", "X-Amz-Signature=0")[:len(parts.query)]
            conn.request("POST", parts.path + "?" + bad, body=b"",
                         headers={"X-Amz-Target": "SageMaker.ListClusters",
                                  "Content-Type": "application/x-amz-json-1.1"})
            resp = conn.getresponse()
            body = json.loads(resp.read())
            self.assertEqual((resp.status, body["__type"]), (403, "InvalidSignatureException"))
        finally:
            conn.close()

    def test_presigned_request_signature_covers_the_input(self):
        """A presigned request must not run an input its signature does not cover.

        A presigner may sign UNSIGNED-PAYLOAD (the S3 convention, which hpod accepts
        for query-string signatures); botocore then puts the operation's parameters
        in the signed query string. Sending a different, unsigned body must not act
        on another resource."""
        from botocore.auth import SigV4QueryAuth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        class UnsignedPayloadQueryAuth(SigV4QueryAuth):
            def payload(self, request):
                return "UNSIGNED-PAYLOAD"

        sm = self.sm
        for name in ("presign-a", "presign-b"):
            sm.create_cluster(ClusterName=name, InstanceGroups=[group("g", 0)])
        admin = hpodtest.read_profile(os.path.join(self.d.aws_dir, "credentials"), "hpod")
        headers = {"X-Amz-Target": "SageMaker.DeleteCluster",
                   "Content-Type": "application/x-amz-json-1.1"}
        req = AWSRequest(method="POST", url=self.d.endpoint + "/",
                         data=json.dumps({"ClusterName": "presign-a"}), headers=dict(headers))
        UnsignedPayloadQueryAuth(Credentials(admin["aws_access_key_id"],
                                             admin["aws_secret_access_key"]),
                                 "sagemaker", hpodtest.REGION, expires=300).add_auth(req)
        parts = urllib.parse.urlsplit(req.url)
        self.assertIn("ClusterName=presign-a", parts.query)  # the signed input
        conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=30)
        try:
            conn.request("POST", parts.path + "?" + parts.query,
                         body=json.dumps({"ClusterName": "presign-b"}), headers=headers)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        names = sorted(c["ClusterName"] for c in sm.list_clusters()["ClusterSummaries"]
                       if c["ClusterStatus"] != "Deleting")
        self.assertIn("presign-b", names, "a URL presigned to delete presign-a deleted presign-b "
                                         "(%d %s)" % (resp.status, body))
        self.assertNotEqual(resp.status, 200, body)


class Boto3PaginationTest(Boto3Base):
    pending_ms = 50

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        sm = cls.sm
        for name in ("page-a", "page-b", "page-c", "page-d"):
            sm.create_cluster(ClusterName=name, InstanceGroups=[group("g", 0)])
        sm.create_cluster(ClusterName="page-nodes",
                          InstanceGroups=[group("alpha", 2), group("beta", 3)])
        wait_cluster(sm, "page-nodes", "InService")
        # Let the last roll-up settle, so no new event lands while a test pages.
        deadline = time.time() + 10
        while time.time() < deadline:
            before = sm.list_cluster_events(ClusterName="page-nodes")["Events"]
            time.sleep(0.6)
            if sm.list_cluster_events(ClusterName="page-nodes")["Events"] == before:
                break

    def paginate(self, op, key, **params):
        """Pages with PageSize=1; returns (items, raw NextTokens)."""
        pages = list(self.sm.get_paginator(op).paginate(PaginationConfig={"PageSize": 1},
                                                         **params))
        items, tokens = [], []
        for i, page in enumerate(pages):
            self.assertLessEqual(len(page[key]), 1)
            if i < len(pages) - 1:
                self.assertEqual(len(page[key]), 1, "a page before the last is short")
                tokens.append(page["NextToken"])
            else:
                self.assertNotIn("NextToken", page)
            items += page[key]
        self.assertEqual(len(set(tokens)), len(tokens), "a NextToken repeated")
        return items, tokens

    def test_list_clusters(self):
        all_at_once = self.sm.list_clusters(MaxResults=100)["ClusterSummaries"]
        self.assertEqual(len(all_at_once), 5)
        items, tokens = self.paginate("list_clusters", "ClusterSummaries")
        self.assertEqual(items, all_at_once)
        self.assertEqual(len(tokens), 4)
        names = lambda xs: [c["ClusterName"] for c in xs]  # noqa: E731
        items, _ = self.paginate("list_clusters", "ClusterSummaries", SortBy="NAME",
                                 SortOrder="Descending")
        self.assertEqual(names(items), ["page-nodes", "page-d", "page-c", "page-b", "page-a"])
        items, _ = self.paginate("list_clusters", "ClusterSummaries", NameContains="page-")
        self.assertEqual(len(items), 5)
        # build_full_result and MaxItems/StartingToken resume where they stopped.
        pag = self.sm.get_paginator("list_clusters")
        head = pag.paginate(PaginationConfig={"PageSize": 1, "MaxItems": 2}).build_full_result()
        self.assertEqual(names(head["ClusterSummaries"]), names(all_at_once)[:2])
        rest = pag.paginate(PaginationConfig={"PageSize": 2, "StartingToken": head["NextToken"]})
        self.assertEqual(names(rest.build_full_result()["ClusterSummaries"]),
                         names(all_at_once)[2:])

    def test_list_cluster_nodes(self):
        all_at_once = self.sm.list_cluster_nodes(ClusterName="page-nodes")["ClusterNodeSummaries"]
        self.assertEqual(len(all_at_once), 5)
        items, tokens = self.paginate("list_cluster_nodes", "ClusterNodeSummaries",
                                      ClusterName="page-nodes")
        self.assertEqual(items, all_at_once)
        self.assertEqual(len({n["InstanceId"] for n in items}), 5)
        self.assertEqual(len(tokens), 4)
        items, _ = self.paginate("list_cluster_nodes", "ClusterNodeSummaries",
                                 ClusterName="page-nodes", SortBy="NAME", SortOrder="Descending")
        self.assertEqual([n["InstanceGroupName"] for n in items], ["beta"] * 3 + ["alpha"] * 2)
        self.assertEqual({n["InstanceId"] for n in items}, {n["InstanceId"] for n in all_at_once})
        items, _ = self.paginate("list_cluster_nodes", "ClusterNodeSummaries",
                                 ClusterName="page-nodes", InstanceGroupNameContains="bet")
        self.assertEqual(len(items), 3)

    def test_list_cluster_events(self):
        all_at_once = self.sm.list_cluster_events(ClusterName="page-nodes",
                                                  MaxResults=100)["Events"]
        self.assertGreater(len(all_at_once), 5)
        self.assertLess(len(all_at_once), 100)
        items, tokens = self.paginate("list_cluster_events", "Events", ClusterName="page-nodes")
        self.assertEqual([e["EventId"] for e in items], [e["EventId"] for e in all_at_once])
        self.assertEqual(len(tokens), len(all_at_once) - 1)
        asc, _ = self.paginate("list_cluster_events", "Events", ClusterName="page-nodes",
                               SortOrder="Ascending")
        self.assertEqual([e["EventId"] for e in asc], [e["EventId"] for e in reversed(all_at_once)])
        node = self.sm.list_cluster_nodes(ClusterName="page-nodes")["ClusterNodeSummaries"][0]
        mine, _ = self.paginate("list_cluster_events", "Events", ClusterName="page-nodes",
                                NodeId=node["InstanceId"])
        self.assertTrue(mine)
        self.assertTrue(all(e.get("InstanceId") == node["InstanceId"] for e in mine))

    def test_tampered_tokens(self):
        sm = self.sm
        page = sm.list_clusters(MaxResults=1)
        token = page["NextToken"]
        self.assertEqual(sm.list_clusters(MaxResults=1, NextToken=token)["ClusterSummaries"][0]
                         ["ClusterName"], sm.list_clusters()["ClusterSummaries"][1]["ClusterName"])
        flipped = token[:5] + ("A" if token[5] != "A" else "B") + token[6:]
        for bad in (flipped, token + "x", "x" + token, "garbage", token.replace(".", "")):
            with self.subTest(token=bad):
                self.client_error(sm.list_clusters, "ValidationException", MaxResults=1,
                                  NextToken=bad)
        # A token only continues the listing it came from.
        self.client_error(sm.list_clusters, "ValidationException", MaxResults=1,
                          NextToken=token, SortBy="NAME")
        self.client_error(sm.list_cluster_nodes, "ValidationException", ClusterName="page-nodes",
                          NextToken=token)
        self.client_error(sm.list_cluster_events, "ValidationException", ClusterName="page-nodes",
                          NextToken=token)
        node_token = sm.list_cluster_nodes(ClusterName="page-nodes", MaxResults=1)["NextToken"]
        self.client_error(sm.list_cluster_nodes, "ValidationException", ClusterName="page-nodes",
                          NextToken=node_token, InstanceGroupNameContains="alpha")
        # MaxResults may change between pages of one listing.
        rest = sm.list_clusters(MaxResults=10, NextToken=token)["ClusterSummaries"]
        self.assertEqual(len(rest), 4)


if __name__ == "__main__":
    hpodtest.require_aws_clients()
    hpodtest.main()
