#!/usr/bin/env python3
"""Captures what the real AWS CLI prints and sends, for cli_test's golden checks.

Starts a loopback stub that answers SageMaker calls with the canned responses
below, runs `aws sagemaker ...` (awscli v1, with cli_timestamp_format = iso8601
and TZ=UTC so that timestamps render like CLI v2's) for each case, and writes
awscli_golden.h next to this script: the canned responses, stdout per case, and
the request bodies the CLI sent. Run it from anywhere:

    python3 src/cli/testdata/capture_awscli_golden.py
"""
import http.server
import json
import os
import subprocess
import tempfile
import threading

DESCRIBE = {
    "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/2hd31rmi9mde",
    "ClusterName": "ml-cluster", "ClusterStatus": "InService", "CreationTime": 1701040811.123,
    "InstanceGroups": [
        {"CurrentCount": 1, "TargetCount": 1, "InstanceGroupName": "controller-machine",
         "InstanceType": "ml.c5.xlarge",
         "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle-abc123/LifecycleScripts/base-config/",
                             "OnCreate": "on_create.sh"},
         "ExecutionRole": "arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole",
         "ThreadsPerCore": 1, "Status": "InService"},
        {"CurrentCount": 4, "TargetCount": 4, "InstanceGroupName": "compute-nodes",
         "InstanceType": "ml.p5.48xlarge",
         "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle-abc123/LifecycleScripts/base-config/",
                             "OnCreate": "on_create.sh"},
         "ExecutionRole": "arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole",
         "ThreadsPerCore": 1, "Status": "InService",
         "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]}],
    "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"],
                  "Subnets": ["subnet-01a2bc3456d78ef90", "subnet-02"]},
    "NodeRecovery": "Automatic", "UnmodeledKey": "dropped by botocore"}
LIST_PAGES = {
    "": {"ClusterSummaries": [
        {"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/aaaaaaaaaaaa",
         "ClusterName": "c1", "CreationTime": 1700000000.5, "ClusterStatus": "InService"},
        {"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/bbbbbbbbbbbb",
         "ClusterName": "c2", "CreationTime": 1700000001, "ClusterStatus": "Creating"}],
        "NextToken": "tok1"},
    "tok1": {"ClusterSummaries": [
        {"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/cccccccccccc",
         "ClusterName": "c3", "CreationTime": 1700000002.25, "ClusterStatus": "Failed",
         "TrainingPlanArns": ["arn:tp1"]}],
        "NextToken": "tok2"},
    "tok2": {"ClusterSummaries": [], "NextToken": ""},
}
NODES = {"NextToken": "", "ClusterNodeSummaries": [
    {"InstanceGroupName": "controller-machine", "InstanceId": "i-09e7576cbc230c181",
     "InstanceType": "ml.c5.xlarge", "LaunchTime": 1701041300.665,
     "InstanceStatus": {"Status": "Running", "Message": ""},
     "PrivateDnsHostname": "ip-10-1-4-190.us-west-2.compute.internal"},
    {"InstanceGroupName": "compute-nodes", "InstanceId": "i-0b8bc2c52dc7b1fa2",
     "InstanceType": "ml.p5.48xlarge", "LaunchTime": 1701041300,
     "InstanceStatus": {"Status": "Pending"}}]}
NODE = {"NodeDetails": {
    "InstanceGroupName": "compute-nodes", "InstanceId": "i-0b8bc2c52dc7b1fa2",
    "InstanceStatus": {"Status": "Running", "Message": ""}, "InstanceType": "ml.p5.48xlarge",
    "LaunchTime": 1701041300.665,
    "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle-abc123/LifecycleScripts/base-config/",
                        "OnCreate": "on_create.sh"},
    "ThreadsPerCore": 1, "PrivatePrimaryIp": "10.1.5.138",
    "PrivateDnsHostname": "ip-10-1-5-138.us-west-2.compute.internal",
    "Placement": {"AvailabilityZone": "us-west-2d", "AvailabilityZoneId": "usw2-az4"}}}
BATCH = {"Successful": ["i-04486002ebdb59e0a", "i-0b8bc2c52dc7b1fa2"],
         "Failed": [{"Code": "NodeIdNotFound", "Message": "no such node", "NodeId": "i-0fedcba9876543210"}]}
RECOVER = {"Successful": ["i-04486002ebdb59e0a"],
           "Failed": [{"NodeId": "i-0fedcba9876543210", "ErrorCode": "InstanceIdInUse",
                       "Message": "Node i-0fedcba9876543210 is already being recovered"},
                      {"NodeId": "i-0123456789abcdef0", "ErrorCode": "InstanceIdNotFound",
                       "Message": "no such node"}]}
ARN = {"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/2hd31rmi9mde"}
EVENTS = {"Events": [
    {"EventId": "3f2a5b6c-0000-4000-8000-000000000001", "ClusterArn": ARN["ClusterArn"],
     "ClusterName": "ml-cluster", "InstanceGroupName": "compute-nodes", "InstanceId": "i-0b8bc2c52dc7b1fa2",
     "ResourceType": "Instance", "EventTime": 1701041400, "Description": "Node replaced",
     "EventLevel": "Warn"}]}

RESPONSES = {"DescribeCluster": DESCRIBE, "ListClusterNodes": NODES, "DescribeClusterNode": NODE,
             "BatchDeleteClusterNodes": BATCH, "BatchRebootClusterNodes": RECOVER,
             "BatchReplaceClusterNodes": RECOVER, "CreateCluster": ARN, "UpdateCluster": ARN,
             "DeleteCluster": ARN, "ListClusterEvents": EVENTS}

REQUESTS = []


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        target = self.headers.get("X-Amz-Target", "").split(".")[-1]
        REQUESTS.append({"target": target, "body": body})
        if target == "ListClusters":
            resp = LIST_PAGES[body.get("NextToken", "")]
        else:
            resp = RESPONSES.get(target, {})
        data = json.dumps(resp).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


GROUP = ("InstanceGroupName={name},InstanceType=ml.c5.xlarge,InstanceCount={count},"
         "ExecutionRole=arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole,"
         "LifeCycleConfig={{SourceS3Uri=s3://sagemaker-b/p/,OnCreate=on_create.sh}},ThreadsPerCore=1")
OUTPUT_CASES = [
    ("describe", ["describe-cluster", "--cluster-name", "x"], ["json", "text", "table"]),
    ("list", ["list-clusters"], ["json", "text", "table"]),
    ("list_max1", ["list-clusters", "--max-items", "1"], ["json", "text", "table"]),
    ("list_max2", ["list-clusters", "--max-items", "2"], ["json", "text"]),
    ("list_query", ["list-clusters", "--query", "ClusterSummaries[].ClusterName"], ["json", "text", "table"]),
    ("list_nopag", ["list-clusters", "--no-paginate"], ["json", "text"]),
    ("nodes", ["list-cluster-nodes", "--cluster-name", "x"], ["json", "text", "table"]),
    ("node", ["describe-cluster-node", "--cluster-name", "x", "--node-id", "i-0b8bc2c52dc7b1fa2"],
     ["json", "text", "table"]),
    ("batch", ["batch-delete-cluster-nodes", "--cluster-name", "x", "--node-ids", "a", "b"],
     ["json", "text", "table"]),
    ("reboot", ["batch-reboot-cluster-nodes", "--cluster-name", "x", "--node-ids", "a", "b", "c"],
     ["json", "text", "table"]),
    ("replace", ["batch-replace-cluster-nodes", "--cluster-name", "x", "--node-ids", "a"],
     ["json", "text", "table"]),
    ("create", ["create-cluster", "--cluster-name", "x"], ["json", "text", "table"]),
    ("events", ["list-cluster-events", "--cluster-name", "x"], ["json", "text", "table"]),
]
REQUEST_CASES = [
    ("create_shorthand", ["create-cluster", "--cluster-name", "c",
                          "--instance-groups", GROUP.format(name="a", count=1), GROUP.format(name="b", count=4),
                          "--vpc-config", "SecurityGroupIds=sg-1,sg-2,Subnets=subnet-1",
                          "--tags", "Key=team,Value=ml", "Key=x,Value=y", "--node-recovery", "None"]),
    ("create_json", ["create-cluster", "--cluster-name", "c", "--instance-groups",
                     '[{"InstanceGroupName": "g", "InstanceCount": 2, "ExecutionRole": '
                     '"arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole", '
                     '"InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]}]',
                     "--orchestrator", "Slurm={SlurmConfigStrategy=Managed}"]),
    ("batch_delete", ["batch-delete-cluster-nodes", "--cluster-name", "c", "--node-ids", "i-1", "i-2"]),
    ("batch_reboot", ["batch-reboot-cluster-nodes", "--cluster-name", "c", "--node-ids", "i-1", "i-2"]),
    ("batch_replace", ["batch-replace-cluster-nodes", "--cluster-name", "c", "--node-ids", "i-1"]),
    ("batch_reboot_logical", ["batch-reboot-cluster-nodes", "--cluster-name", "c",
                              "--node-logical-ids", "n-1", "n-2"]),
    ("list_nodes", ["list-cluster-nodes", "--cluster-name", "c", "--include-node-logical-ids",
                    "--sort-order", "Descending", "--creation-time-after", "2023-11-26T00:00:00Z",
                    "--instance-group-name-contains", "comp", "--max-results", "5"]),
    ("list_nodes_false", ["list-cluster-nodes", "--cluster-name", "c", "--no-include-node-logical-ids",
                          "--creation-time-before", "1700000000", "--no-paginate"]),
    ("update", ["update-cluster", "--cluster-name", "c", "--instance-groups-to-delete", "g1", "g2",
                "--node-recovery", "Automatic"]),
    ("events_req", ["list-cluster-events", "--cluster-name", "c", "--event-time-before", "2023-11-26",
                    "--resource-type", "Instance", "--node-id", "i-0b8bc2c52dc7b1fa2", "--page-size", "7"]),
    ("describe_node_logical", ["describe-cluster-node", "--cluster-name", "c", "--node-logical-id", "n-1"]),
    ("describe_event", ["describe-cluster-event", "--event-id", "e-1", "--cluster-name", "c"]),
    ("delete", ["delete-cluster", "--cluster-name", "c"]),
]


def cpp_raw(s):
    assert ')golden"' not in s
    return 'R"golden(' + s + ')golden"'


def main():
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    home = tempfile.mkdtemp()
    os.makedirs(os.path.join(home, ".aws"))
    with open(os.path.join(home, ".aws", "config"), "w") as f:
        f.write("[default]\nregion = us-west-2\ncli_timestamp_format = iso8601\n")
    env = dict(os.environ, HOME=home, TZ="UTC", AWS_ACCESS_KEY_ID="AKID", AWS_SECRET_ACCESS_KEY="secret",
               AWS_MAX_ATTEMPTS="1", AWS_CONFIG_FILE=os.path.join(home, ".aws", "config"))

    def aws(args):
        cmd = ["aws", "--endpoint-url", "http://127.0.0.1:%d" % port, "sagemaker"] + args
        return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout

    outputs = []
    for name, args, formats in OUTPUT_CASES:
        for fmt in formats:
            outputs.append((name, fmt, args, aws(args + ["--output", fmt])))
    max1 = json.loads(aws(["list-clusters", "--max-items", "1"]))["NextToken"]
    outputs.append(("list_resume", "json", ["list-clusters", "--starting-token", max1, "--max-items", "1"],
                    aws(["list-clusters", "--starting-token", max1, "--max-items", "1"])))
    requests = []
    for name, args in REQUEST_CASES:
        del REQUESTS[:]
        aws(args)
        requests.append((name, args, [r["body"] for r in REQUESTS]))

    lines = ["// Generated by capture_awscli_golden.py from awscli %s; do not edit." %
             subprocess.run(["aws", "--version"], capture_output=True, text=True).stdout.split()[0],
             "#pragma once", "", "namespace hpod::cli::golden {", "",
             "struct OutputCase { const char* name; const char* format; const char* args; const char* stdout_text; };",
             "struct RequestCase { const char* name; const char* args; const char* bodies; };", "",
             "// Canned responses by operation; ListClusters pages by request NextToken (\"\" first).",
             "inline constexpr const char* kResponses = " + cpp_raw(json.dumps(RESPONSES, indent=1)) + ";",
             "inline constexpr const char* kListPages = " + cpp_raw(json.dumps(LIST_PAGES, indent=1)) + ";", "",
             "// args are JSON arrays of words.", "inline constexpr OutputCase kOutputs[] = {"]
    for name, fmt, args, out in outputs:
        lines.append("    {%s, %s, %s,\n     %s}," % (json.dumps(name), json.dumps(fmt), cpp_raw(json.dumps(args)),
                                                  cpp_raw(out)))
    lines += ["};", "", "// bodies: a JSON array of the request bodies the CLI sent.",
              "inline constexpr RequestCase kRequests[] = {"]
    for name, args, bodies in requests:
        lines.append("    {%s, %s, %s}," % (json.dumps(name), cpp_raw(json.dumps(args)), cpp_raw(json.dumps(bodies))))
    lines += ["};", "", "}  // namespace hpod::cli::golden", ""]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "awscli_golden.h"), "w") as f:
        f.write("\n".join(lines))
    server.shutdown()


if __name__ == "__main__":
    main()
