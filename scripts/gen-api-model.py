#!/usr/bin/env python3
"""Extracts the SageMaker cluster operations from botocore's service model.

hpod's API is specified by botocore's SageMaker model (service-2.json.gz). This
script copies the operations hpod serves, every shape they reach, and their
paginators into src/api/sagemaker_cluster_model.json, minus documentation. The
daemon validates requests with it and the CLI derives its flags from it, so both
stay exactly in step with the real AWS model. Re-run after a botocore upgrade:

    python3 scripts/gen-api-model.py > src/api/sagemaker_cluster_model.json
"""
import gzip
import json
import os
import sys

import botocore

OPERATIONS = [
    "CreateCluster", "DescribeCluster", "ListClusters", "DeleteCluster", "UpdateCluster",
    "ListClusterNodes", "DescribeClusterNode", "BatchDeleteClusterNodes",
    "BatchRebootClusterNodes", "BatchReplaceClusterNodes", "BatchAddClusterNodes",
    "StartClusterHealthCheck", "UpdateClusterSoftware",
    "ListClusterEvents", "DescribeClusterEvent",
    # SageMaker's tagging, served for cluster ARNs (a cluster's Tags).
    "AddTags", "ListTags", "DeleteTags",
]
KEEP_SHAPE_KEYS = {"type", "members", "required", "member", "key", "value", "min", "max",
                   "pattern", "enum", "union", "exception", "timestampFormat", "box"}
KEEP_MEMBER_KEYS = {"shape", "idempotencyToken"}


def main():
    root = os.path.join(os.path.dirname(botocore.__file__), "data", "sagemaker", "2017-07-24")
    with gzip.open(os.path.join(root, "service-2.json.gz")) as f:
        model = json.load(f)
    try:
        with gzip.open(os.path.join(root, "paginators-1.json.gz")) as f:
            paginators = json.load(f)["pagination"]
    except FileNotFoundError:
        with open(os.path.join(root, "paginators-1.json")) as f:
            paginators = json.load(f)["pagination"]

    shapes = {}

    def visit(name):
        if name in shapes:
            return
        src = model["shapes"][name]
        shape = {k: v for k, v in src.items() if k in KEEP_SHAPE_KEYS}
        shapes[name] = shape
        if "members" in shape:
            shape["members"] = {m: {k: v for k, v in spec.items() if k in KEEP_MEMBER_KEYS}
                                for m, spec in src["members"].items()}
            for spec in shape["members"].values():
                visit(spec["shape"])
        for ref in ("member", "key", "value"):
            if ref in shape:
                shape[ref] = {"shape": src[ref]["shape"]}
                visit(src[ref]["shape"])

    ops = {}
    for name in OPERATIONS:
        op = model["operations"][name]
        ops[name] = {
            "input": op["input"]["shape"],
            "output": op["output"]["shape"],
            "errors": [e["shape"] for e in op.get("errors", [])],
        }
        visit(op["input"]["shape"])
        visit(op["output"]["shape"])
        for e in op.get("errors", []):
            visit(e["shape"])

    out = {
        "source": "botocore %s sagemaker/2017-07-24/service-2.json.gz" % botocore.__version__,
        "metadata": {k: model["metadata"][k] for k in
                     ("apiVersion", "endpointPrefix", "jsonVersion", "protocol",
                      "signingName", "targetPrefix")},
        "operations": ops,
        "paginators": {k: v for k, v in paginators.items() if k in ops},
        "shapes": dict(sorted(shapes.items())),
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
