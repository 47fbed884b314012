"""A real, throw-away S3 server for e2e tests: OpenStack Swift with s3api.

SwiftS3 starts a Swift all-in-one on loopback inside one temp dir: an account,
a container and an object server (one ring each, one replica, one device dir)
and a proxy with the s3api and tempauth middlewares. S3 credentials are
access key `test:tester`, secret `testing`, region us-east-1, path-style
addressing. Nothing outside the temp dir is written: swift.conf, the rings and
the device dir live there, and each server process is told to read swift.conf
from there (Swift otherwise hard-codes /etc/swift/swift.conf).

Buckets and objects are created with a small SigV4 signer (sign_v4/request
below) so the fixture does not need boto3; tests may use the same helpers for
raw S3 requests.

Thread contract: a SwiftS3 instance is used by one thread at a time; the
module-level request helpers are stateless and thread-safe.
"""
import datetime
import hashlib
import hmac
import http.client
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse

# Swift's own servers are scripts for the distribution's python (the test
# driver may be another interpreter, e.g. pyenv's, without swift).
SWIFT_PROXY_SCRIPT = "/usr/bin/swift-proxy-server"

# Runs one swift WSGI server in the foreground (workers = 0, so exactly one
# process per server) with swift.conf read from our temp dir. SWIFT_CONF_FILE
# must be set before swift.common.wsgi imports storage_policy/constraints,
# which read it at import time. Syslog is replaced by a null handler: there is
# no /dev/log here and Swift would otherwise spray UDP at localhost:514; the
# console handler (verbose) writes the log to our per-server log file instead.
# The eventlet monkey-patch is the one swift applies in run_wsgi, done first
# and with one gc.collect() instead of eventlet's one per existing RLock
# (about 18 full collections, 1-2 s of CPU per server); the collections only
# drop garbage before eventlet looks up each lock's referrers, and no garbage
# is made between them.
_SERVER_MAIN = r"""
import gc
import eventlet.patcher
gc.collect()
_collect, gc.collect = gc.collect, lambda *a: 0
try:
    eventlet.patcher.monkey_patch(all=False, socket=True, select=True, thread=True)
finally:
    gc.collect = _collect
import logging, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # for hpod_swift_cache
import swift.common.utils as u
u.SWIFT_CONF_FILE = sys.argv[1]
u.ThreadSafeSysLogHandler = lambda *a, **k: logging.NullHandler()
from swift.common import storage_policy
assert storage_policy.POLICIES.default.name == 'hpod-e2e', 'swift.conf not ours'
from swift.common.wsgi import run_wsgi
sys.exit(run_wsgi(sys.argv[2], sys.argv[3], verbose=True))
"""

# tempauth insists on a memcache client in env['swift.cache'] and there is no
# memcached here, so the proxy gets this in-process stand-in (the proxy is one
# process, so a dict is a faithful cache). Values are JSON round-tripped like
# MemcacheRing's serialisation, so callers never share mutable objects.
_CACHE_MODULE = r"""
import json
import time as _time


class DictCache(object):
    def __init__(self):
        self.data = {}

    def _live(self, key):
        item = self.data.get(key)
        if item is not None and item[1] and item[1] < _time.time():
            del self.data[key]
            item = None
        return item

    def get(self, key, *args, **kwargs):
        item = self._live(key)
        return None if item is None else json.loads(item[0])

    def set(self, key, value, serialize=True, time=0, *args, **kwargs):
        expires = _time.time() + time if time else 0
        self.data[key] = (json.dumps(value), expires)

    def incr(self, key, delta=1, time=0, *args, **kwargs):
        value = int(self.get(key) or 0) + int(delta)
        self.set(key, value, time=time)
        return value

    def decr(self, key, delta=1, time=0, *args, **kwargs):
        return self.incr(key, -delta, time=time)

    def delete(self, key, *args, **kwargs):
        self.data.pop(key, None)

    def set_multi(self, mapping, server_key=None, serialize=True, time=0, *args, **kwargs):
        for key, value in mapping.items():
            self.set(key, value, time=time)

    def get_multi(self, keys, server_key=None, *args, **kwargs):
        return [self.get(key) for key in keys]


def filter_factory(global_conf, **local_conf):
    cache = DictCache()

    def make(app):
        def middleware(env, start_response):
            env['swift.cache'] = cache
            return app(env, start_response)
        return middleware
    return make
"""

_SWIFT_CONF = """\
[swift-hash]
swift_hash_path_suffix = {suffix}
swift_hash_path_prefix = {prefix}

[storage-policy:0]
name = hpod-e2e
default = yes

[swift-constraints]
"""

_DEFAULT_SECTION = """\
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
workers = 0
user = {user}
swift_dir = {root}
devices = {devices}
mount_check = false
disable_fallocate = true
log_level = INFO
log_name = {name}
"""

_STORAGE_CONF = _DEFAULT_SECTION + """
[pipeline:main]
pipeline = healthcheck {name}

[filter:healthcheck]
use = egg:swift#healthcheck

[app:{name}]
use = egg:swift#{kind}
"""

# s3api must precede tempauth; slo lets s3api offer multipart uploads; `cache`
# is _CACHE_MODULE. versioned_writes is listed because the proxy would insert
# it anyway (and log that it modified the pipeline).
_PROXY_CONF = _DEFAULT_SECTION + """
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo versioned_writes proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:cache]
paste.filter_factory = hpod_swift_cache:filter_factory

[filter:versioned_writes]
use = egg:swift#versioned_writes

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:s3api]
use = egg:swift#s3api
location = {region}

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo
"""

_STORAGE_KINDS = ("account", "container", "object")
_available_cache = None


def _swift_python():
    """The interpreter named by the swift scripts' shebang (None if absent)."""
    try:
        with open(SWIFT_PROXY_SCRIPT) as f:
            line = f.readline()
    except OSError:
        return None
    if not line.startswith("#!"):
        return None
    exe = line[2:].strip().split()[0]
    return exe if os.access(exe, os.X_OK) else None


def _swift_env():
    """Environment for swift's python. Start-up is mostly imports: every host
    is an IP literal, so eventlet's green DNS resolver (dnspython) is not
    needed, and setuptools' distutils shim (pulled in via eventlet) costs more
    than stdlib's distutils."""
    return dict(os.environ, EVENTLET_NO_GREENDNS="yes", SETUPTOOLS_USE_DISTUTILS="stdlib")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# SigV4 ------------------------------------------------------------------------

def _quote(s, safe="-_.~"):
    return urllib.parse.quote(s, safe=safe)


def sign_v4(method, url, headers, body, access_key, secret_key, region,
            service="s3", now=None):
    """Returns `headers` plus Host, X-Amz-Date, X-Amz-Content-Sha256 and an
    AWS4-HMAC-SHA256 Authorization for the request (path-style URL whose path
    and query are already percent-encoded as they will be sent)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    u = urllib.parse.urlsplit(url)
    payload_hash = hashlib.sha256(body or b"").hexdigest()
    out = dict(headers or {})
    out["Host"] = u.netloc
    out["X-Amz-Date"] = amz_date
    out["X-Amz-Content-Sha256"] = payload_hash
    signed = sorted((k.lower(), " ".join(str(v).strip().split())) for k, v in out.items())
    canonical_headers = "".join("%s:%s\n" % kv for kv in signed)
    signed_names = ";".join(k for k, _ in signed)
    query = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
    canonical_query = "&".join(
        "%s=%s" % (_quote(k), _quote(v)) for k, v in sorted(query))
    canonical_request = "\n".join([method, u.path or "/", canonical_query, canonical_headers,
                                   signed_names, payload_hash])
    scope = "%s/%s/%s/aws4_request" % (day, region, service)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical_request.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        access_key, scope, signed_names, signature)
    return out


def object_url(endpoint, bucket, key="", query=None):
    """Path-style URL: endpoint/bucket[/key][?query], key encoded keeping '/'."""
    url = "%s/%s" % (endpoint.rstrip("/"), bucket)
    if key:
        url += "/" + _quote(key, safe="-_.~/")
    if query:
        url += "?" + "&".join("%s=%s" % (_quote(k), _quote(str(v)))
                              for k, v in sorted(query.items()))
    return url


def request(method, url, access_key, secret_key, region, body=b"", headers=None, timeout=30):
    """Sends one SigV4-signed request; returns (status, {lowercase header: value}, body)."""
    u = urllib.parse.urlsplit(url)
    h = sign_v4(method, url, headers, body, access_key, secret_key, region)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        path = u.path + ("?" + u.query if u.query else "")
        conn.request(method, path, body=body or None, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


# The server -------------------------------------------------------------------

class SwiftS3:
    """A self-contained Swift + s3api on loopback; start() ... stop() (or `with`)."""

    access_key = "test:tester"
    secret_key = "testing"
    region = "us-east-1"

    def __init__(self, start_timeout=60):
        self.start_timeout = start_timeout
        self.root = None
        self.port = None
        self.procs = {}  # server name -> Popen
        self._logs = {}  # server name -> open log file

    @staticmethod
    def available():
        """True when the swift servers, s3api and the ring builder are installed."""
        global _available_cache
        if _available_cache is None:
            py = _swift_python()
            ok = py is not None
            if ok:
                p = subprocess.run(
                    [py, "-c", "import swift.common.middleware.s3api.s3api, swift.common.ring, "
                     "swift.proxy.server, swift.account.server, "
                     "swift.container.server, swift.obj.server"],
                    capture_output=True, timeout=60, env=_swift_env())
                ok = p.returncode == 0
            _available_cache = ok
        return _available_cache

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        """Builds the temp dir, starts the four servers and waits until all
        answer /healthcheck; raises RuntimeError (with the logs) otherwise.
        Free ports are picked before the servers bind them, so a lost race is
        retried once with fresh ports."""
        if not self.available():
            raise RuntimeError("swift (proxy/account/container/object, s3api) is not installed")
        for attempt in range(2):
            try:
                self._start_once()
                return self
            except Exception as e:  # whatever failed, nothing may be left running
                log = self.log_tail()
                self.stop()
                if attempt == 1 or "Address already in use" not in log:
                    raise RuntimeError("swift did not start: %s\n--- swift logs ---\n%s" % (
                        e, log)) from e
        return self  # unreachable

    def _start_once(self):
        self.root = tempfile.mkdtemp(prefix="hpod-swift-")
        devices = os.path.join(self.root, "node")
        os.makedirs(os.path.join(devices, "d1"))
        with open(os.path.join(self.root, "swift.conf"), "w") as f:
            f.write(_SWIFT_CONF.format(suffix=secrets.token_hex(8), prefix=secrets.token_hex(8)))
        with open(os.path.join(self.root, "hpod_swift_cache.py"), "w") as f:
            f.write(_CACHE_MODULE)
        ports = {kind: _free_port() for kind in _STORAGE_KINDS}
        self.port = _free_port()
        params = dict(root=self.root, devices=devices, region=self.region,
                      user=pwd.getpwuid(os.geteuid()).pw_name)
        confs = {}
        py = _swift_python()
        self._build_rings(py, ports)
        for kind in _STORAGE_KINDS:
            name = "%s-server" % kind
            confs[name] = self._write_conf(name, _STORAGE_CONF.format(
                port=ports[kind], name=name, kind=kind, **params))
        confs["proxy-server"] = self._write_conf("proxy-server", _PROXY_CONF.format(
            port=self.port, name="proxy-server", **params))

        swift_conf = os.path.join(self.root, "swift.conf")
        env = _swift_env()
        for name, conf in confs.items():
            log = open(os.path.join(self.root, name + ".log"), "ab")
            self._logs[name] = log
            self.procs[name] = subprocess.Popen(
                [py, "-c", _SERVER_MAIN, swift_conf, conf, name],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.root, env=env)
        ports["proxy"] = self.port
        self._wait_ready({"%s-server" % k: p for k, p in ports.items()})

    def _write_conf(self, name, text):
        path = os.path.join(self.root, name + ".conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def _build_rings(self, py, ports):
        """Writes <kind>.ring.gz for each storage server in one interpreter
        (swift-ring-builder would cost a python start-up per step): 2^4
        partitions, 1 replica, one device d1 on the server's port."""
        code = (
            "import sys\n"
            "from swift.common.ring import RingBuilder\n"
            "root = sys.argv[1]\n"
            "for arg in sys.argv[2:]:\n"
            "    kind, port = arg.split('=')\n"
            "    b = RingBuilder(4, 1, 1)\n"
            "    b.add_dev({'id': 0, 'region': 1, 'zone': 1, 'ip': '127.0.0.1',\n"
            "               'port': int(port), 'device': 'd1', 'weight': 100})\n"
            "    b.rebalance()\n"
            "    b.get_ring().save('%s/%s.ring.gz' % (root, kind))\n")
        p = subprocess.run([py, "-c", code, self.root] +
                           ["%s=%d" % kv for kv in sorted(ports.items())],
                           capture_output=True, text=True, timeout=60, cwd=self.root,
                           env=_swift_env())
        if p.returncode != 0:
            raise RuntimeError("building the swift rings failed (%d): %s%s" % (
                p.returncode, p.stdout, p.stderr))

    def _wait_ready(self, ports):
        deadline = time.monotonic() + self.start_timeout
        pending = dict(ports)
        while pending:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError("swift %s exited with %d during start-up" % (
                        name, proc.returncode))
            for name, port in list(pending.items()):
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    conn.request("GET", "/healthcheck")
                    resp = conn.getresponse()
                    ok = resp.status == 200 and resp.read() == b"OK"
                    conn.close()
                except (OSError, http.client.HTTPException):
                    ok = False
                if ok:
                    del pending[name]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("swift not ready after %gs (waiting for %s)" % (
                    self.start_timeout, ", ".join(sorted(pending))))
            time.sleep(0.1)

    def pids(self):
        """PIDs of the server processes started (alive or not)."""
        return [p.pid for p in self.procs.values()]

    def stop(self):
        """SIGTERM (then SIGKILL after 10 s) every server by PID, reaps them and
        removes the temp dir. Safe to call twice."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.procs = {}
        for log in self._logs.values():
            log.close()
        self._logs = {}
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def log_tail(self, lines=40):
        """The last `lines` lines of each server's log, for failure messages."""
        if not self.root:
            return "(swift not running)"
        out = []
        for name in ("proxy-server",) + tuple("%s-server" % k for k in _STORAGE_KINDS):
            path = os.path.join(self.root, name + ".log")
            try:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", "replace").splitlines()
            except OSError:
                continue
            out.append("== %s ==" % name)
            out.extend(text[-lines:])
        return "\n".join(out)

    # S3 helpers ----------------------------------------------------------------
    def request(self, method, bucket, key="", query=None, body=b"", headers=None,
                secret_key=None):
        """One signed S3 request; returns (status, headers, body)."""
        return request(method, object_url(self.endpoint, bucket, key, query),
                       self.access_key, secret_key or self.secret_key, self.region,
                       body=body, headers=headers)

    def create_bucket(self, name):
        status, _, body = self.request("PUT", name)
        if status != 200:
            raise RuntimeError("CreateBucket %s: HTTP %d %s\n%s" % (
                name, status, body.decode(errors="replace"), self.log_tail()))

    def put(self, bucket, key, data):
        status, _, body = self.request("PUT", bucket, key, body=data)
        if status != 200:
            raise RuntimeError("PutObject %s/%s: HTTP %d %s\n%s" % (
                bucket, key, status, body.decode(errors="replace"), self.log_tail()))
