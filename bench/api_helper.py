#!/usr/bin/env python3
"""Helpers for bench/api_latency.sh and bench/api_tls.sh (not a benchmark by itself).

Everything here talks to 127.0.0.1 only, with the credentials `hpodd init` wrote;
botocore is used for SigV4 signing and for the CreateCluster/DescribeCluster calls,
never for anything that could leave loopback (explicit keys, IMDS disabled).

  freeport                         print a free loopback TCP port
  converge  ENDPOINT AWS_DIR PID   create cluster 'bench' and wait for InService
  sign      ENDPOINT AWS_DIR OP BODY OUTDIR [--expect FILE] [--cafile CA]
                                   sign one request, send it once, keep the exact
                                   response body (OUTDIR/OP.response), write a wrk
                                   Lua script that replays the same request bytes
                                   (OUTDIR/OP.lua) and the request (OUTDIR/OP.request)
  replay    ENDPOINT REQUEST --expect FILE [--cafile CA]
                                   send a saved OP.request again (same bytes, same
                                   signature); fail unless the status is 200 and the
                                   body equals FILE byte for byte
  tlsinfo   ENDPOINT CAFILE        one line: TLS version, cipher, the certificate's
                                   names (verified against CAFILE for 127.0.0.1) and
                                   whether a second connection resumed the session
  report    RESULTS_DIR            print the figures table from the wrk results
                                   (RESULTS_DIR/runs lists "<id>\t<title>"; each run
                                   has <id>.{hpodd,nginx}.{json,cpu} and <id>.drain)
  report-tls RESULTS_DIR           the same for api_tls.sh: servers hpodd, hpodd-tls,
                                   nginx, nginx-tls per run, and the TLS ratios
"""
import http.client
import json
import os
import socket
import ssl
import sys
import time

REGION = "us-west-2"
CLUSTER = "bench"
MAX_PER_GROUP = 6758  # InstanceCount's documented maximum


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def read_profile(aws_dir):
    values, current = {}, None
    with open(os.path.join(aws_dir, "credentials")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                current = line.strip("[]")
            elif "=" in line and current == "hpod":
                k, v = line.split("=", 1)
                values[k.strip()] = v.strip()
    return values["aws_access_key_id"], values["aws_secret_access_key"]


def client(endpoint, aws_dir):
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    import boto3
    import botocore.config
    key, secret = read_profile(aws_dir)
    session = boto3.session.Session(aws_access_key_id=key, aws_secret_access_key=secret,
                                    region_name=REGION)
    return session.client("sagemaker", endpoint_url=endpoint, config=botocore.config.Config(
        retries={"max_attempts": 1}, connect_timeout=10, read_timeout=60))


def proc_status(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def group(name, count):
    return {"InstanceGroupName": name, "InstanceType": "ml.c5.xlarge", "InstanceCount": count,
            "LifeCycleConfig": {"SourceS3Uri": "s3://hpod-bench/lifecycle/",
                                "OnCreate": "on_create.sh"},
            "ExecutionRole": "arn:aws:iam::123456789012:role/r"}


def cmd_converge(endpoint, aws_dir, pid, nodes=10000, timeout=900.0):
    """CreateCluster with a 1-node controller group plus workers totalling `nodes`,
    then poll DescribeCluster until InService. Live progress on stderr; one JSON line
    with the figures on stdout."""
    c = client(endpoint, aws_dir)
    k = max(1, -(-nodes // MAX_PER_GROUP))  # worker groups, split evenly
    groups = [group("controller", 1)] + [
        group("workers-%d" % (i + 1), nodes // k + (1 if i < nodes % k else 0)) for i in range(k)]
    log("create-cluster %s: %s" % (CLUSTER, " + ".join(
        "%s=%d" % (g["InstanceGroupName"], g["InstanceCount"]) for g in groups)))
    t0 = time.monotonic()
    c.create_cluster(ClusterName=CLUSTER, InstanceGroups=groups)
    create_s = time.monotonic() - t0
    tty = sys.stderr.isatty()
    last_print, status, slowest_describe = 0.0, "?", 0.0
    target = sum(g["InstanceCount"] for g in groups)
    while True:
        t1 = time.monotonic()
        d = c.describe_cluster(ClusterName=CLUSTER)
        slowest_describe = max(slowest_describe, time.monotonic() - t1)
        status = d["ClusterStatus"]
        current = sum(g.get("CurrentCount", 0) for g in d.get("InstanceGroups", []))
        elapsed = time.monotonic() - t0
        mem = proc_status(pid)
        line = "  converging: %6.1fs  status=%-10s nodes %5d/%d  hpodd RSS %.0f MiB" % (
            elapsed, status, current, target, mem.get("VmRSS", 0) / 1024.0)
        done = status != "Creating"
        if tty:
            sys.stderr.write("\r" + line + "\033[K" + ("\n" if done else ""))
            sys.stderr.flush()
        elif done or elapsed - last_print >= 5:
            log(line)
            last_print = elapsed
        if done:
            break
        if elapsed > timeout:
            if tty:
                sys.stderr.write("\n")
            log("FAIL: cluster still %s after %.0fs" % (status, elapsed))
            break
        time.sleep(0.25)
    mem = proc_status(pid)
    print(json.dumps({"status": status, "seconds": round(elapsed, 2),
                      "create_call_s": round(create_s, 3),
                      "slowest_describe_s": round(slowest_describe, 3),
                      "nodes": target, "rss_kib": mem.get("VmRSS"), "hwm_kib": mem.get("VmHWM")}))
    return 0 if status == "InService" else 1


def lua_string(data):
    """A Lua string literal holding exactly these bytes."""
    out = []
    for b in data:
        ch = chr(b)
        if 32 <= b < 127 and ch not in '"\\':
            out.append(ch)
        else:
            out.append("\\%03d" % b)
    return '"' + "".join(out) + '"'


LUA_DONE = r'''
-- One JSON line with the run's figures, for bench/api_helper.py report.
function done(summary, latency, requests)
  local path = os.getenv("WRK_RESULT")
  if path == nil then return end
  local f = io.open(path, "w")
  local e = summary.errors
  f:write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"mean":%.1f,"max":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.mean, latency.max))
  f:close()
end
'''


def tls_context(cafile):
    """Verifies hpodd's certificate against its own CA, for the name 127.0.0.1."""
    return ssl.create_default_context(cafile=cafile)


def send(endpoint, headers, body_bytes, cafile=None):
    """POSTs these exact headers and body once; returns (status, response body)."""
    scheme, host = endpoint.split("://", 1)
    hostname, port = host.rsplit(":", 1)
    if scheme == "https":
        conn = http.client.HTTPSConnection(hostname, int(port), timeout=60,
                                           context=tls_context(cafile))
    else:
        conn = http.client.HTTPConnection(hostname, int(port), timeout=60)
    conn.putrequest("POST", "/", skip_host=True, skip_accept_encoding=True)
    for k, v in headers.items():
        conn.putheader(k, v)
    conn.endheaders(body_bytes)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def cmd_sign(endpoint, aws_dir, op, body, outdir, expect=None, cafile=None):
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    key, secret = read_profile(aws_dir)
    body_bytes = body.encode()
    req = AWSRequest(method="POST", url=endpoint + "/", data=body_bytes, headers={
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "SageMaker." + op,
    })
    SigV4Auth(Credentials(key, secret), "sagemaker", REGION).add_auth(req)
    prepared = req.prepare()
    headers = dict(prepared.headers.items())
    host = endpoint.split("://", 1)[1]
    headers["Host"] = host  # what botocore signed; wrk would send the same
    headers["Content-Length"] = str(len(body_bytes))
    # Send the exact request once: it must succeed, and its body is the peer's file.
    status, data = send(endpoint, headers, body_bytes, cafile)
    if status != 200:
        log("FAIL: %s returned %d: %s" % (op, status, data[:500]))
        return 1
    resp_path = os.path.join(outdir, op + ".response")
    if expect and os.path.exists(expect):
        with open(expect, "rb") as f:
            if f.read() != data:
                log("WARN: %s response body changed since it was captured for the peer" % op)
    with open(resp_path, "wb") as f:
        f.write(data)
    with open(os.path.join(outdir, op + ".request"), "w") as f:
        json.dump({"headers": headers, "body": body}, f)
    lines = ["-- %s against hpodd, signed once by botocore SigV4Auth at %s." % (
        op, headers.get("X-Amz-Date", "?")),
        "-- wrk sends these exact bytes on every request.",
        'wrk.method = "POST"',
        "wrk.body = " + lua_string(body_bytes)]
    for k, v in headers.items():
        lines.append("wrk.headers[%s] = %s" % (lua_string(k.encode()), lua_string(v.encode())))
    with open(os.path.join(outdir, op + ".lua"), "w") as f:
        f.write("\n".join(lines) + "\n" + LUA_DONE)
    log("  %s: request %d B signed, response %d B captured" % (op, len(body_bytes), len(data)))
    return 0


def cmd_replay(endpoint, request, expect, cafile=None):
    with open(request) as f:
        r = json.load(f)
    status, data = send(endpoint, r["headers"], r["body"].encode(), cafile)
    with open(expect, "rb") as f:
        want = f.read()
    if status != 200 or data != want:
        log("FAIL: %s answered %d with %d B, not the %d B captured before%s" % (
            endpoint, status, len(data), len(want),
            "" if status != 200 else " (the bodies differ)"))
        return 1
    log("  %s: status 200, the same %d B as captured" % (endpoint, len(data)))
    return 0


def cmd_tlsinfo(endpoint, cafile):
    """Handshakes twice with Python's ssl (OpenSSL), the second time offering the
    first connection's session: what a client that keeps its session (as wrk does,
    SSL_clear keeps it) gets on a new connection."""
    hostname, port = endpoint.split("://", 1)[1].rsplit(":", 1)
    ctx = tls_context(cafile)
    session, out = None, {}
    for attempt in (1, 2):
        with socket.create_connection((hostname, int(port)), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=hostname, session=session) as s:
                if attempt == 1:
                    cert = s.getpeercert()
                    out["names"] = ",".join(v for _, v in cert.get("subjectAltName", ()))
                    out["version"], out["cipher"] = s.version(), s.cipher()[0]
                # TLS 1.3 sends its session tickets after the handshake: a request
                # and its answer let them arrive before the session is taken.
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                          % hostname.encode())
                try:
                    while s.recv(65536):
                        pass
                except (socket.timeout, ssl.SSLError, OSError):
                    pass  # no close_notify, or the server kept the connection open
                if attempt == 2:
                    out["resumed"] = s.session_reused
                session = s.session
    print("%s %s, certificate for %s (verified against %s), new connection resumes the "
          "session: %s" % (out["version"], out["cipher"], out["names"],
                           os.path.basename(cafile), "yes" if out["resumed"] else "no"))
    return 0


def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def cmd_report(results):
    """Table of hpodd vs nginx for each run found in RESULTS_DIR (files written by
    api_latency.sh: <run>.<server>.json from wrk's done(), <run>.<server>.cpu)."""
    runs = []
    with open(os.path.join(results, "runs")) as f:
        for line in f:
            if line.strip():
                runs.append(line.split("\t"))

    def fig(name, a, b, fmt):
        ratio = "%.3gx" % (a / b) if b else "-"
        print("  %-28s %12s %12s %8s" % (name, fmt % a, fmt % b, ratio))

    print("%-30s %12s %12s %8s" % ("", "hpodd", "nginx", "ratio"))
    for run_id, title in [(r[0], r[1].strip()) for r in runs]:
        h = load(os.path.join(results, run_id + ".hpodd.json"))
        n = load(os.path.join(results, run_id + ".nginx.json"))
        if not h or not n:
            print("%s: missing results" % title)
            continue
        print(title)
        rps = lambda r: r["requests"] / (r["duration_us"] / 1e6)
        fig("p50 latency (ms)", h["p50"] / 1000.0, n["p50"] / 1000.0, "%.3f")
        fig("p99 latency (ms)", h["p99"] / 1000.0, n["p99"] / 1000.0, "%.3f")
        fig("max latency (ms)", h["max"] / 1000.0, n["max"] / 1000.0, "%.1f")
        fig("requests/s", rps(h), rps(n), "%.0f")
        fig("requests completed", h["requests"], n["requests"], "%d")
        hc = load(os.path.join(results, run_id + ".hpodd.cpu"))
        nc = load(os.path.join(results, run_id + ".nginx.cpu"))
        if hc is not None and nc is not None and h["requests"] and n["requests"]:
            fig("server CPU us/request", hc * 1e6 / h["requests"], nc * 1e6 / n["requests"],
                "%.1f")
        try:
            with open(os.path.join(results, run_id + ".drain")) as f:
                drain = f.read().strip()
            print("  %-28s %12s" % ("hpodd busy after wrk (s)", drain))
        except OSError:
            pass
        for r, who in ((h, "hpodd"), (n, "nginx")):
            sock = r["connect"] + r["read"] + r["write"] + r["timeout"]
            print("  %-28s non-2xx %d, socket errors %d (connect %d, read %d, write %d, "
                  "timeout %d)" % (who + " errors", r["status"], sock, r["connect"], r["read"],
                                   r["write"], r["timeout"]))
    return 0


TLS_SERVERS = ("hpodd", "hpodd-tls", "nginx", "nginx-tls")


def cmd_report_tls(results):
    """Table of api_tls.sh: per run (RESULTS_DIR/runs: "<id>\t<title>\t<conns>"),
    hpodd and nginx over plain HTTP and over TLS, and the ratios hpodd-TLS /
    hpodd-HTTP, hpodd-TLS / nginx-TLS, nginx-TLS / nginx-HTTP, hpodd-HTTP / nginx-HTTP."""
    runs = []
    with open(os.path.join(results, "runs")) as f:
        for line in f:
            if line.strip():
                runs.append(line.rstrip("\n").split("\t"))
    heads = [("hpodd", "HTTP"), ("hpodd", "TLS"), ("nginx", "HTTP"), ("nginx", "TLS"),
             ("hpodd TLS", "/hpodd HTTP"), ("hpodd TLS", "/nginx TLS"),
             ("nginx TLS", "/nginx HTTP"), ("hpodd HTTP", "/nginx HTTP")]
    w = 12
    for row in (0, 1):
        print("  %-34s" % "" + "".join("%*s" % (w, h[row]) for h in heads))

    def ratio(a, b):
        return "%.3gx" % (a / b) if a is not None and b else "-"

    def line(name, v, fmt, ratios=True):
        hp, ht, np_, nt = v
        cells = [fmt % x if x is not None else "-" for x in v]
        if ratios:
            cells += [ratio(ht, hp), ratio(ht, nt), ratio(nt, np_), ratio(hp, np_)]
        print("  %-34s" % name + "".join("%*s" % (w, c) for c in cells))

    for run_id, title, conns in runs:
        r = {s: load(os.path.join(results, "%s.%s.json" % (run_id, s))) for s in TLS_SERVERS}
        cpu = {s: load(os.path.join(results, "%s.%s.cpu" % (run_id, s))) for s in TLS_SERVERS}
        print(title)
        if not all(r.values()):
            print("  missing results: %s" % " ".join(s for s in TLS_SERVERS if not r[s]))
            continue
        rps = [x["requests"] / (x["duration_us"] / 1e6) for x in r.values()]
        line("requests/s", rps, "%.0f")
        line("p50 latency (ms)", [x["p50"] / 1000.0 for x in r.values()], "%.3f")
        line("p99 latency (ms)", [x["p99"] / 1000.0 for x in r.values()], "%.3f")
        # wrk starts a request's clock when it writes the request, after connect and
        # the TLS handshake; Little's law gives the whole cycle, connect included.
        line("conns / (req/s) (ms)", [int(conns) * 1000.0 / x if x else None for x in rps],
             "%.3f")
        per_req = [cpu[s] * 1e6 / r[s]["requests"] if cpu[s] is not None and r[s]["requests"]
                   else None for s in TLS_SERVERS]
        line("server CPU us/request", per_req, "%.1f")
        hp, ht, np_, nt = per_req
        if None not in per_req:
            added_h, added_n = ht - hp, nt - np_
            cells = ["", "%.1f" % added_h, "", "%.1f" % added_n]
            print("  %-34s" % "CPU added by TLS (us/request)" +
                  "".join("%*s" % (w, c) for c in cells) +
                  "   hpodd / nginx: %s" % (
                      ratio(added_h, added_n) if added_h > 0 and added_n > 0 else "-"))
        errs = ["%d/%d" % (x["status"], x["connect"] + x["read"] + x["write"] + x["timeout"])
                for x in r.values()]
        print("  %-34s" % "errors (non-2xx/socket)" + "".join("%*s" % (w, e) for e in errs))
    return 0


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "freeport":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])
        s.close()
        return 0
    if cmd == "converge":
        return cmd_converge(args[0], args[1], int(args[2]), int(args[3]), float(args[4]))
    opt = lambda name: args[args.index(name) + 1] if name in args else None
    if cmd == "sign":
        return cmd_sign(args[0], args[1], args[2], args[3], args[4], opt("--expect"),
                        opt("--cafile"))
    if cmd == "replay":
        return cmd_replay(args[0], args[1], opt("--expect"), opt("--cafile"))
    if cmd == "tlsinfo":
        return cmd_tlsinfo(args[0], args[1])
    if cmd == "report":
        return cmd_report(args[0])
    if cmd == "report-tls":
        return cmd_report_tls(args[0])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
