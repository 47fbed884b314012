#!/usr/bin/env python3
"""Writes botocore_vectors.json: SigV4 requests signed by botocore, the reference
client hpod must interoperate with (the AWS CLI and SDK for Python use it).

Run from anywhere with the image's python3 (botocore installed):
    python3 src/auth/testdata/gen_botocore_vectors.py
The output is committed; sigv4_botocore_test.cc reads it. Regenerate only when
adding vectors: timestamps are fixed, so the output is deterministic.

Before writing, the script also signs the requests of the published AWS SigV4
test suite with botocore and checks the published signatures, so the constants
in sigv4_test.cc are known to agree with botocore too.
"""

import datetime
import hashlib
import json
import os
import sys
from unittest import mock

import botocore
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "botocore_vectors.json")

SUITE_KEY = ("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
# Fake credentials in AWS's documented example format; not real secrets.
KEY = ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
TOKEN = ("IQoJb3JpZ2luX2VjEXAMPLEtoken//////////wEaCXVzLXdlc3QtMiJHMEUCIQD"
         "example+session/token==")

# (name, method, target, headers, body, published signature) from the AWS SigV4
# test suite (aws-sig-v4-test-suite, 2015-08-30T12:36:00Z, us-east-1, "service").
# Targets are as on the wire except get-vanilla-utf8-query, whose suite request
# carries the raw UTF-8 key; botocore signs the query as given, so it gets the
# encoded form here.
SUITE = [
    ("get-vanilla", "GET", "/", {}, b"",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("get-vanilla-query-order-key-case", "GET", "/?Param2=value2&Param1=value1", {}, b"",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("get-vanilla-empty-query-key", "GET", "/?Param1=value1", {}, b"",
     "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"),
    ("get-vanilla-query-unreserved", "GET",
     "/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
     "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", {}, b"",
     "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
    ("get-vanilla-utf8-query", "GET", "/?%E1%88%B4=bar", {}, b"",
     "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
    ("get-utf8", "GET", "/\u1234", {}, b"",
     "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
    ("get-space", "GET", "/example space/", {}, b"",
     "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
    ("get-relative-relative", "GET", "/example1/example2/../..", {}, b"",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("get-slash-dot-slash", "GET", "/./", {}, b"",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("get-slashes", "GET", "//example//", {}, b"",
     "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"),
    ("get-header-value-trim", "GET", "/",
     {"My-Header1": " value1", "My-Header2": ' "a   b   c"'}, b"",
     "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
    ("post-vanilla", "POST", "/", {}, b"",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ("post-vanilla-query", "POST", "/?Param1=value1", {}, b"",
     "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"),
    ("post-header-key-sort", "POST", "/", {"My-Header1": "value1"}, b"",
     "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"),
    ("post-header-value-case", "POST", "/", {"My-Header1": "VALUE1"}, b"",
     "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"),
    ("post-x-www-form-urlencoded", "POST", "/",
     {"Content-Type": "application/x-www-form-urlencoded"}, b"Param1=value1",
     "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
]


def at(*args):
    """Patches botocore's clock to a fixed UTC instant."""
    return mock.patch("botocore.auth.get_current_datetime",
                      return_value=datetime.datetime(*args))


class Recorder:
    """Mixin that keeps botocore's canonical request and string to sign."""

    def string_to_sign(self, request, canonical_request):
        sts = super().string_to_sign(request, canonical_request)
        self.recorded = (canonical_request, sts)
        return sts


class RecordingSigV4Auth(Recorder, SigV4Auth):
    pass


class RecordingSigV4QueryAuth(Recorder, SigV4QueryAuth):
    pass


def check_suite():
    creds = Credentials(*SUITE_KEY)
    with at(2015, 8, 30, 12, 36, 0):
        for name, method, target, headers, body, want in SUITE:
            request = AWSRequest(method=method, url="https://example.amazonaws.com" + target,
                                 headers=dict(headers), data=body)
            SigV4Auth(creds, "service", "us-east-1").add_auth(request)
            got = request.headers["Authorization"].rsplit("Signature=", 1)[1]
            if got != want:
                sys.exit(f"suite vector {name}: botocore signs {got}, published {want}")


def host_of(url):
    return url.split("://", 1)[1].split("/", 1)[0]


def target_of(url):
    rest = url.split("://", 1)[1]
    return "/" + rest.split("/", 1)[1] if "/" in rest else "/"


def header_vector(name, when, creds, region, method, url, headers, body,
                  service="sagemaker"):
    """Signs in header form. `headers` exclude Host: botocore derives it from the
    URL, and the HTTP client sends it first on the wire."""
    request = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    signer = RecordingSigV4Auth(creds, service, region)
    with at(*when):
        signer.add_auth(request)
    unsigned = [["Host", host_of(url)]] + [[k, v] for k, v in headers.items()]
    signed = [["Host", host_of(url)]] + [[k, v] for k, v in request.headers.items()]
    canonical_request, string_to_sign = signer.recorded
    return {
        "name": name,
        "kind": "header",
        "access_key_id": creds.access_key,
        "secret_access_key": creds.secret_key,
        "session_token": creds.token or "",
        "region": region,
        "service": service,
        "epoch_seconds": int(datetime.datetime(*when, tzinfo=datetime.timezone.utc).timestamp()),
        "method": method,
        "target": target_of(url),
        "headers": unsigned,
        "body": body.decode("utf-8"),
        "signed_headers": signed,
        "authorization": request.headers["Authorization"],
        "canonical_request": canonical_request,
        "string_to_sign": string_to_sign,
    }


def presigned_vector(name, when, creds, region, method, url, expires, sign_payload,
                     service="sagemaker"):
    """Signs in query form. With sign_payload=False botocore hashes the payload as
    UNSIGNED-PAYLOAD, which is what hpod's PresignTarget does; with True it hashes
    the (empty) body, which is what botocore's generic presigner does by default."""
    request = AWSRequest(method=method, url=url, headers={})
    request.context["payload_signing_enabled"] = sign_payload
    signer = RecordingSigV4QueryAuth(creds, service, region, expires=expires)
    with at(*when):
        signer.add_auth(request)
    canonical_request, string_to_sign = signer.recorded
    return {
        "name": name,
        "kind": "presigned",
        "access_key_id": creds.access_key,
        "secret_access_key": creds.secret_key,
        "session_token": creds.token or "",
        "region": region,
        "service": service,
        "epoch_seconds": int(datetime.datetime(*when, tzinfo=datetime.timezone.utc).timestamp()),
        "method": method,
        "target": target_of(url),
        "headers": [["Host", host_of(url)]],
        "body": "",
        "expires": expires,
        "payload_signed": sign_payload,
        "signed_target": target_of(request.url),
        "canonical_request": canonical_request,
        "string_to_sign": string_to_sign,
    }


def json_body(obj):
    # botocore's JSON serializer: compact separators, UTF-8, non-ASCII kept.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sagemaker(operation, extra=None):
    headers = {
        "X-Amz-Target": f"SageMaker.{operation}",
        "Content-Type": "application/x-amz-json-1.1",
        # Not signed: botocore leaves user-agent out of the signature.
        "User-Agent": f"aws-cli/2.15.0 botocore/{botocore.__version__} md/command#sagemaker",
    }
    headers.update(extra or {})
    return headers


def build():
    creds = Credentials(*KEY)
    with_token = Credentials(*KEY, token=TOKEN)
    west = "https://api.sagemaker.us-west-2.amazonaws.com/"
    when = (2023, 11, 26, 0, 25, 0)
    create_cluster = {
        "ClusterName": "équipe-llm-🚀",
        "InstanceGroups": [{
            "InstanceGroupName": "worker-群",
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 4,
            "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle/",
                                "OnCreate": "on_create.sh"},
            "ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole",
        }],
        "Tags": [{"Key": "Ωwner", "Value": "naïve café — “quotes” \\ back\"slash\n\ttab"}],
    }
    return [
        header_vector("create-cluster-unicode", when, creds, "us-west-2", "POST", west,
                      sagemaker("CreateCluster"), json_body(create_cluster)),
        header_vector("describe-cluster", when, creds, "us-west-2", "POST", west,
                      sagemaker("DescribeCluster"), json_body({"ClusterName": "my-cluster"})),
        header_vector("list-clusters-empty-object", (2024, 2, 29, 23, 59, 59), creds,
                      "us-west-2", "POST", west, sagemaker("ListClusters"), b"{}"),
        header_vector("delete-cluster-session-token", when, with_token, "us-west-2", "POST",
                      west, sagemaker("DeleteCluster"), json_body({"ClusterName": "c1"})),
        header_vector("update-cluster-eu-odd-headers", (2025, 1, 1, 0, 0, 0), creds,
                      "eu-central-1", "POST", "https://api.sagemaker.eu-central-1.amazonaws.com/",
                      sagemaker("UpdateClusterSoftware",
                                {"X-Hpod-Note": "  spaced   out\tvalue  ",
                                 "x-amz-client-context": "MiXeD Case"}),
                      json_body({"ClusterName": "big", "Padding": "x" * 5000})),
        header_vector("get-with-query-and-encoded-path", when, creds, "us-west-2", "GET",
                      "https://api.sagemaker.us-west-2.amazonaws.com/clusters/my%3Acluster/"
                      "nodes?max-results=10&b=%2Fslash&a=x%20y&Empty=&a=first",
                      {"Accept": "application/json"}, b""),
        presigned_vector("presigned-unsigned-payload", when, creds, "us-west-2", "GET",
                         "https://api.sagemaker.us-west-2.amazonaws.com/console/login"
                         "?cluster=c1&x=a%20b", 300, sign_payload=False),
        presigned_vector("presigned-session-token", when, with_token, "us-west-2", "GET",
                         "https://api.sagemaker.us-west-2.amazonaws.com/", 604800,
                         sign_payload=False),
        presigned_vector("presigned-signed-empty-payload", when, creds, "us-west-2", "GET",
                         "https://api.sagemaker.us-west-2.amazonaws.com/stream?node=i-0abc", 3600,
                         sign_payload=True),
    ]


def main():
    check_suite()
    vectors = build()
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"generator": "gen_botocore_vectors.py",
                   "botocore_version": botocore.__version__,
                   "vectors": vectors}, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(vectors)} vectors to {OUT}")


if __name__ == "__main__":
    main()
