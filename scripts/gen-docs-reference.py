#!/usr/bin/env python3
"""Generate docs/reference/api.md and docs/reference/cli.md from the code.

api.md: every operation hpodd serves, from the compiled-in models
(src/api/sagemaker_cluster_model.json, src/api/hpod_extensions_model.json),
who may call it (the read-only set in src/controlplane/cluster_api.cc) and the
shapes its members use. The botocore model compiled in has no documentation, so
the purposes of SageMaker's operations and members come from
docs/reference/sagemaker-docs.json, extracted once from botocore (the same
version as the model) by --refresh-docs.

cli.md: the built binaries' own help (hpod, hpodd, hpod-train, hpod-data), run
with a clean environment so that the output does not depend on the machine.

  scripts/gen-docs-reference.py [--build DIR]        rewrite docs/reference/*.md
  scripts/gen-docs-reference.py --check [--build DIR]  exit 1 when they are stale
  scripts/gen-docs-reference.py --refresh-docs        re-extract sagemaker-docs.json
                                                      (needs botocore)
"""
import argparse
import difflib
import html
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SM_MODEL = "src/api/sagemaker_cluster_model.json"
HPOD_MODEL = "src/api/hpod_extensions_model.json"
READ_ONLY_SOURCE = "src/controlplane/cluster_api.cc"
DOCS_JSON = "docs/reference/sagemaker-docs.json"

# hpod's own operations have no botocore text; their purpose is written here
# (or, once the model carries one, in its "documentation" field).
HPOD_PURPOSE = {
    "HpodStartSession": "Opens a shell or runs one command on a cluster node: returns a session "
    "id, a stream URL and a token for the WebSocket that carries the terminal (what `aws ssm "
    "start-session` does on a HyperPod node). `hpod start-session` calls it.",
    "HpodGetNodeLogs": "Returns a node's lifecycle-script output (LifecycleConfig) or its agent's "
    "log (Agent), from an offset, for `hpod logs`.",
    "HpodListSlurmNodes": "Returns the controller's Slurm node table (hostname, state, reason) "
    "joined to the cluster's nodes, for `hpod list-cluster-nodes --with-slurm`.",
    "HpodInjectFault": "Breaks a launched node on purpose (kill-node, kill-agent, kill-slurmd, "
    "partition, hang, disk-full, gpu-xid, flag-file) to test how the cluster recovers; every "
    "injection is a node event. `hpod inject-fault` calls it.",
    "HpodDescribeRecovery": "Returns one node recovery: what found the fault, the action "
    "(Reboot or Replace), each step with its time, and the outcome. `hpod describe-recovery` "
    "calls it.",
    "HpodListRecoveries": "Returns a cluster's node recoveries, oldest first.",
    "HpodDescribeJobGoodput": "Returns an `--auto-resume` Slurm job's goodput: useful step time "
    "over wall time from hpod-train's ledger, the steps re-run, and the seconds each node failure "
    "cost. `hpod describe-job-goodput` calls it.",
    "HpodGetCallerIdentity": "Returns the access key that signed the request and its role "
    "(admin or user), so that a client offers only what the key may do.",
    "HpodListTrainingRuns": "Lists the TensorBoard directories and metrics JSONL files under a "
    "cluster's /fsx, newest first (read by a node's agent: hpodd does not see /fsx).",
    "HpodGetTrainingMetrics": "Returns one training run's scalars (loss, learning rate, ...) by "
    "step, downsampled to at most MaxPoints with the first and last kept.",
}
ENUM_INLINE = 10  # longer enums are listed once, in the shapes section


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def xform_name(name):
    """botocore's xform_name with '-': CreateCluster -> create-cluster."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1-\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", s).lower()


def strip_html(text):
    text = re.sub(r"<code>(.*?)</code>", r"`\1`", text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\s+", " ", html.unescape(text)).strip()
    return re.sub(r" ([.,;:)])", r"\1", text)


def first_paragraph(doc):
    m = re.search(r"<p>(.*?)</p>", doc, re.S)
    return strip_html(m.group(1) if m else doc)


def first_sentence(doc):
    text = first_paragraph(doc)
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return m.group(1) if m else text


def refresh_docs():
    """Extract the documentation of the operations and members hpod serves."""
    from botocore.loaders import Loader  # only here: generation needs no botocore
    full = Loader().load_service_model("sagemaker", "service-2")
    ours = json.loads(read(SM_MODEL))
    out = {"source": ours["source"], "operations": {}, "members": {}}
    for op in sorted(ours["operations"]):
        out["operations"][op] = first_paragraph(full["operations"][op].get("documentation", ""))
    for name in sorted(ours["shapes"]):
        for member, ref in full["shapes"].get(name, {}).get("members", {}).items():
            if member in ours["shapes"][name].get("members", {}) and ref.get("documentation"):
                out["members"][name + "." + member] = first_sentence(ref["documentation"])
    with open(os.path.join(ROOT, DOCS_JSON), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def refused_members():
    """{shape: {member: why}} from cluster_api.cc's kUnsupported*Members tables."""
    src, out = read(READ_ONLY_SOURCE), {}
    for table, shapes in (("kUnsupportedClusterMembers",
                           ("CreateClusterRequest", "UpdateClusterRequest")),
                          ("kUnsupportedGroupMembers", ("ClusterInstanceGroupSpecification",))):
        m = re.search(table + r"\[\]\s*=\s*\{(.*?)\n\};", src, re.S)
        if not m:
            sys.exit(f"gen-docs-reference: no {table} in {READ_ONLY_SOURCE}")
        for member, literals in re.findall(r'\{"(\w+)",\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\}',
                                           m.group(1)):
            why = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', literals))
            for shape in shapes:
                out.setdefault(shape, {})[member] = why
    return out


def read_only_ops():
    src = read(READ_ONLY_SOURCE)
    m = re.search(r"kReadOnly\s*=\s*\{(.*?)\};", src, re.S)
    if not m:
        sys.exit(f"gen-docs-reference: no kReadOnly set in {READ_ONLY_SOURCE}")
    return set(re.findall(r'"(\w+)"', m.group(1)))


class Models:
    def __init__(self):
        self.sm = json.loads(read(SM_MODEL))
        self.hpod = json.loads(read(HPOD_MODEL))
        self.shapes = dict(self.sm["shapes"])
        self.shapes.update(self.hpod["shapes"])
        self.docs = json.loads(read(DOCS_JSON))
        self.read_only = read_only_ops()
        self.refused = refused_members()

    def type_of(self, shape_name):
        s = self.shapes[shape_name]
        if s["type"] == "list":
            return "list of " + self.type_of(s["member"]["shape"])
        if s["type"] == "map":
            return f"map {self.type_of(s['key']['shape'])} → {self.type_of(s['value']['shape'])}"
        if s["type"] == "structure" or len(s.get("enum", [])) > ENUM_INLINE:
            return f"[{shape_name}](#{shape_name.lower()})"
        return s["type"]

    def constraints(self, shape_name):
        s = self.shapes[shape_name]
        if s["type"] == "list":
            inner = self.constraints(s["member"]["shape"])
            own = self.range(s, "items")
            return "; ".join(x for x in (own, ("each: " + inner) if inner else "") if x)
        parts = []
        what = {"string": "length", "list": "items", "map": "entries"}.get(s["type"], "range")
        if self.range(s, what):
            parts.append(self.range(s, what))
        if s.get("pattern"):
            parts.append("pattern `" + s["pattern"].replace("|", "\\|") + "`")
        enum = s.get("enum", [])
        if enum and len(enum) <= ENUM_INLINE:
            parts.append("one of " + ", ".join("`" + e + "`" for e in enum))
        elif enum:
            parts.append(f"one of {len(enum)} values")
        return "; ".join(parts)

    @staticmethod
    def range(s, what):
        if "min" not in s and "max" not in s:
            return ""
        return f"{what} {s.get('min', '')}..{s.get('max', '')}"

    def member_rows(self, shape_name):
        """A markdown table of the members (no Description column when none has one)."""
        s = self.shapes[shape_name]
        required = set(s.get("required", []))
        rows = []
        for member, ref in s.get("members", {}).items():
            doc = self.docs["members"].get(shape_name + "." + member, "")
            why = self.refused.get(shape_name, {}).get(member)
            if why:
                doc = f"**Refused by hpod**: {why}. " + doc
            rows.append([member, self.type_of(ref["shape"]), "yes" if member in required else "",
                         self.constraints(ref["shape"]), doc.replace("|", "\\|")])
        if not rows:
            return ["(no members)"]
        head = ["Member", "Type", "Required", "Constraints", "Description"]
        if not any(r[4] for r in rows):
            head, rows = head[:4], [r[:4] for r in rows]
        return ["| " + " | ".join(r) + " |" for r in [head, ["---"] * len(head)] + rows]

    def reachable(self, names):
        seen, todo = [], list(names)
        while todo:
            n = todo.pop(0)
            if n in seen:
                continue
            seen.append(n)
            s = self.shapes[n]
            refs = [r["shape"] for r in s.get("members", {}).values()]
            refs += [s[k]["shape"] for k in ("member", "key", "value") if k in s]
            todo += refs
        return seen


def api_md(models):
    sm_ops = sorted(models.sm["operations"])
    hpod_ops = sorted(models.hpod["operations"])
    paginators = models.sm.get("paginators", {})
    out = ["# API reference", "",
           "<!-- Generated by scripts/gen-docs-reference.py from src/api/*.json and "
           "src/controlplane/cluster_api.cc; do not edit. -->", "",
           "hpodd serves SageMaker's cluster API on one endpoint (default "
           "`http://127.0.0.1:8450`): AWS JSON 1.1, `POST /` with `X-Amz-Target: "
           "SageMaker.<Operation>`, SigV4-signed with an hpod access key. The SageMaker "
           "operations have botocore's shapes, limits, patterns, enums, pagination and "
           "errors (" + models.sm["source"] + "); hpod's own operations (names starting "
           "with `Hpod`) use the same protocol and keys. The purposes and member "
           "descriptions of SageMaker's operations are AWS's own (botocore's), first "
           "paragraph or sentence. Where hpod differs, on purpose:", "",
           "- Unknown request members are refused with `ValidationException` (AWS ignores "
           "them), so a typo is never silently dropped; members hpod cannot honour are "
           "refused with the reason, marked **Refused by hpod** below (from "
           "`src/controlplane/cluster_api.cc`).",
           "- `LifeCycleConfig.SourceS3Uri` also accepts `file://` (scripts from a local "
           "directory).",
           "- Provisioning is all-or-nothing, as HyperPod's default: one failed node fails a "
           "create (`Failed` with HyperPod's `FailureMessage`) and rolls back an update.",
           "- A node that fails later is `Failure` and its group `Degraded` while the cluster "
           "stays `InService`; with `NodeRecovery=Automatic` it is rebooted or replaced.", "",
           "More in [compatibility.md](../compatibility.md).", "",
           "## Who may call what", "",
           "An `admin` key may call every operation. A `user` key "
           "(`hpodd create-key --role user`) may call only: " +
           ", ".join("`" + o + "`" for o in sorted(models.read_only)) +
           "; anything else answers `AccessDeniedException`.", "",
           "## Errors every operation may return", "",
           "Besides those listed with each operation: "
           "`ValidationException` (a request that does not fit the model or that hpod cannot "
           "honour), `AccessDeniedException`, `UnrecognizedClientException` / "
           "`InvalidSignatureException` / `MissingAuthenticationTokenException` (credentials), "
           "`ConflictException`, `ServiceUnavailable`, `InternalFailure`. The body is "
           "`{\"__type\": ..., \"message\": ...}` as AWS sends it.", "",
           "## Operations", ""]
    for title, ops in (("SageMaker operations", sm_ops), ("hpod operations", hpod_ops)):
        out.append(f"- {title}: " + ", ".join(f"[{o}](#{o.lower()})" for o in ops))
    out.append("")
    for title, ops, model in (("SageMaker operations", sm_ops, models.sm),
                              ("hpod operations", hpod_ops, models.hpod)):
        out += [f"## {title}", ""]
        for op in ops:
            spec = model["operations"][op]
            out += [f"### {op}", ""]
            if op in models.docs["operations"]:
                purpose = models.docs["operations"][op]
            else:
                purpose = spec.get("documentation") or HPOD_PURPOSE.get(op)
                purpose = strip_html(purpose) if purpose else \
                    "(undocumented: add it to HPOD_PURPOSE in scripts/gen-docs-reference.py)"
            out += [purpose, ""]
            who = "admin and user keys" if op in models.read_only else "admin keys only"
            cli = f"`hpod {xform_name(op)}`"
            if model is models.sm:
                cli += f", `aws sagemaker {xform_name(op)}`"
            out += [f"Called by: {who}. CLI: {cli}.", ""]
            if op in paginators:
                p = paginators[op]
                out += [f"Paginated: `{p['input_token']}` / `{p['limit_key']}` in, "
                        f"`{p['output_token']}` and `{p['result_key']}` out.", ""]
            out += [f"Request (`{spec['input']}`):", ""]
            out += models.member_rows(spec["input"]) + [""]
            out += [f"Response (`{spec['output']}`):", ""]
            out += models.member_rows(spec["output"]) + [""]
            errors = [e["shape"] if isinstance(e, dict) else e for e in spec.get("errors", [])]
            common = "[the common ones](#errors-every-operation-may-return)"
            out += [("Errors: " + ", ".join("`" + e + "`" for e in errors) + ", besides " +
                     common if errors else "Errors: only " + common) + ".", ""]
    out += ["## Shapes", "",
            "Every structure the requests and responses above use, and the enums too long to "
            "list inline.",
            ""]
    roots = []
    for model in (models.sm, models.hpod):
        for op in sorted(model["operations"]):
            roots += [model["operations"][op]["input"], model["operations"][op]["output"]]
    for name in sorted(models.reachable(roots)):
        s = models.shapes[name]
        if name in roots:  # a request or response: shown with its operation
            continue
        if s["type"] == "structure" and not s.get("exception"):
            note = " (exactly one member: a union)" if s.get("union") else ""
            out += [f"### {name}", "", f"A structure{note}.", ""]
            out += models.member_rows(name) + [""]
        elif len(s.get("enum", [])) > ENUM_INLINE:
            out += [f"### {name}", "", f"A string, one of {len(s['enum'])} values:", "",
                    ", ".join("`" + e + "`" for e in s["enum"]), ""]
    return "\n".join(out).rstrip() + "\n"


# --- cli.md ---------------------------------------------------------------


def run_help(build, name, args):
    """The help text of build/cmd/<name>/<name> run with a clean environment."""
    path = os.path.join(build, "cmd", name, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"gen-docs-reference: {path} is missing: build it first "
                 f"(cmake --build {build} --target {name})")
    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
               "HPOD_DATA_DIR": "/var/lib/hpod"}
        p = subprocess.run([name] + args, executable=path, env=env, cwd=home,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    text = (p.stdout + p.stderr).replace(home, "$HOME")
    if name == "hpod-data":  # its --threads default is the machine's CPU count
        text = re.sub(r"^(  --threads .*=)\d+$", r"\1<nproc>", text, flags=re.M)
    return text.rstrip() + "\n"


def hpod_commands(top_help):
    if "Commands:\n" not in top_help:
        sys.exit("gen-docs-reference: `hpod help` has no 'Commands:' list to read")
    section = top_help.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in section.splitlines() if line.strip()]


def subcommands(help_text):
    """CLI11's 'SUBCOMMANDS:' (or 'Subcommands:') section: the first word of each line."""
    m = re.search(r"^(?:SUBCOMMANDS|Subcommands):\n((?:[ \t]+\S.*\n?)+)", help_text, re.M)
    if not m:
        return []
    return [line.split()[0] for line in m.group(1).splitlines()
            if re.match(r"\s{1,4}[a-z]", line)]


def cli_md(build):
    def block(title, text):
        return [title, "", "```text", text.rstrip("\n"), "```", ""]

    out = ["# CLI reference", "",
           "<!-- Generated by scripts/gen-docs-reference.py from the built binaries' help; "
           "do not edit. -->", "",
           "The help each binary prints, verbatim: `hpod` (the cluster CLI, mirroring "
           "`aws sagemaker`), `hpodd` (the control plane), `hpod-train` (the trainer) and "
           "`hpod-data` (its data tool). Every `hpod` command also answers "
           "`hpod <command> help`.", "",
           "- [hpod](#hpod)", "- [hpodd](#hpodd)", "- [hpod-train](#hpod-train)",
           "- [hpod-data](#hpod-data)", ""]
    # A session the doc check runs (tests/docs/check_docs.py): what works with no daemon.
    plan = run_help(build, "hpod-train", ["--model", "ci", "--data", "synthetic", "--dry-run"])
    out += ["What works without a daemon, as a session (`...` stands for lines left out):", "",
            "```console", "$ hpod --version", run_help(build, "hpod", ["--version"]).rstrip(),
            "$ hpod-train --model ci --data synthetic --dry-run"]
    out += plan.splitlines()[:3] + ["...", "```", "", "## hpod", ""]
    top = run_help(build, "hpod", ["help"])
    out += block("### hpod help", top)
    seen = {}  # help text -> the command that printed it first (aliases print the same)
    for cmd in hpod_commands(top):
        text = run_help(build, "hpod", [cmd, "help"])
        if text in seen:
            out += [f"### hpod {cmd}", "", f"The same as [hpod {seen[text]}](#hpod-{seen[text]}).",
                    ""]
        else:
            seen[text] = cmd
            out += block(f"### hpod {cmd}", text)
    for tool in ("hpodd", "hpod-data"):
        out += [f"## {tool}", ""]
        top = run_help(build, tool, ["--help"])
        out += block(f"### {tool} --help", top)
        for sub in subcommands(top):
            out += block(f"### {tool} {sub}", run_help(build, tool, [sub, "--help"]))
        if tool == "hpodd":
            out += ["## hpod-train", ""]
            out += block("### hpod-train --help", run_help(build, "hpod-train", ["--help"]))
    return "\n".join(out).rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="the build directory holding cmd/<name>/<name> (default build/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "reference"))
    ap.add_argument("--check", action="store_true",
                    help="compare with the files in --out instead of writing them")
    ap.add_argument("--refresh-docs", action="store_true",
                    help=f"re-extract {DOCS_JSON} from the installed botocore")
    args = ap.parse_args()
    if args.refresh_docs:
        refresh_docs()
    files = {"api.md": api_md(Models()), "cli.md": cli_md(os.path.abspath(args.build))}
    stale = []
    for name, text in files.items():
        path = os.path.join(args.out, name)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if args.check:
            if old != text:
                stale.append(name)
                diff = difflib.unified_diff(old.splitlines(), text.splitlines(),
                                            "committed/" + name, "generated/" + name,
                                            lineterm="", n=1)
                sys.stderr.write("\n".join(list(diff)[:12]) + "\n")
        elif old != text:
            os.makedirs(args.out, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {os.path.relpath(path)}")
    if stale:
        print(f"docs/reference/{', '.join(stale)} out of date: run scripts/gen-docs-reference.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
