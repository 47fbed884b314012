#!/usr/bin/env python3
"""The doc check: commands shown in README.md and docs/**/*.md exist, sessions run.

  check_docs.py [--root REPO] [--build DIR] [FILE.md ...]
  check_docs.py --self-test [--build DIR]

What is checked (the conventions for writers):
- Fenced blocks marked ```sh, ```bash, ```shell, ```console or left plain: every
  command line that runs hpod, hpodd, hpod-train, hpod-data (by name or path),
  `aws [global options] sagemaker <op>` or `make <target>` must name a command,
  subcommand, target and flags that exist: the built binaries' own help for hpod*,
  the compiled-in botocore model (src/api/sagemaker_cluster_model.json) for aws,
  the Makefile for make. Other fences (```text, ```json, ```python, ...) are not read.
- Inline code spans in prose that start with one of the four tools and a space.
  In plain fences and inline spans a line whose command word is an unknown word
  without a '-' (`hpodd ready on ...`) is taken for prose or output, not a command.
- ```console blocks whose lines start with "$ " are shell sessions and are RUN: each
  command in its own bash (a block's commands share a temp cwd holding a link to the
  repo's examples/; HOME a temp dir; the built binaries first on PATH; no daemon, no
  cluster; stdin empty; 60 s at most), must exit 0, and the lines shown after it
  must be its output (stdout and stderr), whitespace normalized, blank lines
  ignored, a line "..." or "…" standing for any lines.
Placeholders (<name>, …, ...) are accepted wherever a word or a value goes.
"""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ("hpod", "hpodd", "hpod-train", "hpod-data")
CHECKED_FENCES = ("", "sh", "bash", "shell", "console")
WRAPPERS = ("sudo", "env", "exec", "nohup", "time", "command")
PH = "\x00"  # stands for a placeholder inside a word
AWS_GLOBAL_VALUES = {"--profile", "--region", "--endpoint-url", "--output", "--query",
                     "--ca-bundle", "--cli-read-timeout", "--cli-connect-timeout", "--color",
                     "--cli-binary-format"}
AWS_GLOBAL_FLAGS = AWS_GLOBAL_VALUES | {
    "--debug", "--no-verify-ssl", "--no-paginate", "--version", "--no-sign-request",
    "--no-cli-pager", "--cli-auto-prompt", "--no-cli-auto-prompt", "--help"}
FLAG_RE = re.compile(r"(?<![\w-])(--[A-Za-z0-9][\w-]*|-[A-Za-z])(?![\w-])")


def clean_env(home, path_dirs=()):
    return {"PATH": ":".join(list(path_dirs) + ["/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb"}


def xform_name(name):
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1-\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", s).lower()


class Cli:
    """What the binaries, the botocore model and the Makefile accept."""

    def __init__(self, root, build):
        self.root, self.build = root, build
        self._home = tempfile.TemporaryDirectory(prefix="check-docs-home-")
        self.home = self._home.name
        for tool in TOOLS:
            if not os.access(self.path(tool), os.X_OK):
                sys.exit(f"check_docs: {self.path(tool)} is missing: build it first")
        top = self.help("hpod", "help")
        if "Commands:\n" not in top or "Global options" not in top:
            sys.exit("check_docs: `hpod help` lists no 'Commands:' or 'Global options': "
                     "update Cli in tests/docs/check_docs.py to its new format")
        section = top.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
        self.hpod_cmds = {}
        for line in section.splitlines():
            if line.strip():
                cmd = line.split()[0]
                text = synopsis(self.help("hpod", cmd, "help"))
                self.hpod_cmds[cmd] = set(FLAG_RE.findall(text))
        gl = top.split("Global options", 1)[1].split("\n\n", 1)[0]
        self.hpod_globals = set(FLAG_RE.findall(gl)) | {"--help", "-h"}
        self.hpod_global_values = set(re.findall(r"(--[\w-]+) (?:[A-Z]+|\w+(?:\|\w+)+)\b", gl))
        self.waiters = set(re.findall(r"hpod wait ([a-z-]+) --", self.help("hpod", "wait", "help")))
        self.cli11 = {t: self.cli11_tool(t) for t in ("hpodd", "hpod-data", "hpod-train")}
        self.make_targets = set()
        with open(os.path.join(root, "Makefile"), encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
                if m and not line.startswith((".", "$")):
                    self.make_targets.update(m.group(1).split())
        model = json.load(open(os.path.join(root, "src/api/sagemaker_cluster_model.json")))
        self.aws_ops = {}
        for op, spec in model["operations"].items():
            flags = {"--cli-input-json", "--cli-input-yaml", "--generate-cli-skeleton"}
            for member, ref in model["shapes"][spec["input"]].get("members", {}).items():
                flags.add("--" + xform_name(member))
                if model["shapes"][ref["shape"]]["type"] == "boolean":
                    flags.add("--no-" + xform_name(member))
            if op in model.get("paginators", {}):
                flags |= {"--starting-token", "--page-size", "--max-items"}
            self.aws_ops[xform_name(op)] = flags

    def path(self, tool):
        return os.path.join(self.build, "cmd", tool, tool)

    def help(self, tool, *args):
        p = subprocess.run([tool] + list(args), executable=self.path(tool), cwd=self.home,
                           env=clean_env(self.home), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        return p.stdout + p.stderr

    def cli11_tool(self, tool):
        """{'': (flags, value_flags), sub: (flags, value_flags)} from CLI11's help."""
        top = self.help(tool, "--help")
        out = {"": self.cli11_flags(top)}
        m = re.search(r"^(?:SUBCOMMANDS|Subcommands):\n((?:[ \t]+\S.*\n?)+)", top, re.M)
        for line in (m.group(1).splitlines() if m else []):
            if re.match(r"\s{1,4}[a-z]", line):
                sub = line.split()[0]
                out[sub] = self.cli11_flags(self.help(tool, sub, "--help"))
        return out

    @staticmethod
    def cli11_flags(text):
        """CLI11's option lines: '  -h,--help', '  --data-dir TEXT [default] ...'."""
        flags, values = set(), set()
        for m in re.finditer(r"^  (-[\w,{}!-]*)( [A-Z])?", text, re.M):
            names = set(FLAG_RE.findall(m.group(1).replace(",", " ").replace("{", " ")))
            flags |= names
            if m.group(2):
                values |= names
        return flags, values


def synopsis(help_text):
    """The SYNOPSIS section of `hpod <command> help` (its flags, not those its prose
    mentions), else the whole text."""
    m = re.search(r"^SYNOPSIS\n(.*?)(?=^\S|\Z)", help_text, re.M | re.S)
    return m.group(1) if m else help_text


def split_words(text):
    """Shell words of one logical line -> (list of simple commands, each a word list).

    Quotes, comments, separators (; && || & and | with a space on one side),
    redirections and $(...) / `...` (their commands are returned too) are understood;
    placeholders were already replaced by PH."""
    commands, words, word, i, quote, has_word = [], [], "", 0, None, False

    def end_word():
        nonlocal word, has_word
        if has_word:
            words.append(word)
        word, has_word = "", False

    def end_command():
        nonlocal words
        end_word()
        if words:
            commands.append(words)
        words = []

    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = None
            else:
                word += c
            i += 1
            continue
        if c == "\\" and i + 1 < len(text):
            word, has_word, i = word + text[i + 1], True, i + 2
            continue
        if c == "$" and text[i + 1:i + 2] == "(" or c == "`":
            close, depth, j = ("`", 0, i + 1) if c == "`" else (")", 1, i + 2)
            start = j
            while j < len(text):
                if c != "`" and text[j] == "(":
                    depth += 1
                elif text[j] == close:
                    depth -= 1
                    if depth <= 0:
                        break
                j += 1
            commands.extend(split_words(text[start:j]))
            word, has_word, i = word + PH, True, j + 1
            continue
        if quote == '"':
            if c == '"':
                quote = None
            else:
                word += c
            i += 1
            continue
        if c in "'\"":
            quote, has_word, i = c, True, i + 1
            continue
        if c.isspace():
            end_word()
        elif c == "#" and not has_word:
            break
        elif c in ";&" or (c == "|" and (text[i - 1:i].isspace() or text[i + 1:i + 2] in " |")):
            end_command()
            while i + 1 < len(text) and text[i + 1] in "|&":
                i += 1
        elif c in "<>" and not has_word or (c == ">" and word.isdigit()):
            word, has_word = "", False  # a redirection: skip it and its target
            while i + 1 < len(text) and text[i + 1] in ">&":
                i += 1
            while i + 1 < len(text) and text[i + 1].isspace():
                i += 1
            while i + 1 < len(text) and not text[i + 1].isspace() and text[i + 1] not in ";&|":
                i += 1
        else:
            word, has_word = word + c, True
        i += 1
    end_command()
    return commands


def placeholders(text):
    text = re.sub(r"<[A-Za-z][^<>\s]*>", PH, text)
    return text.replace("…", PH).replace("...", PH)


def check_line(cli, text, strict=True):
    """Problems of one logical command line (placeholders allowed). Not strict (plain
    fences, inline spans): a line whose command word is an unknown plain word
    (`hpodd ready on ...`, a quoted message) is prose or output, not a command."""
    problems = []
    for words in split_words(placeholders(text)):
        while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in WRAPPERS):
            words = words[1:]
            while words and words[0].startswith("-"):  # the wrapper's options: sudo -E
                words = words[1:]
        if not words:
            continue
        base = os.path.basename(words[0])
        if base == "srun":
            tools = [k for k, w in enumerate(words) if os.path.basename(w) in TOOLS]
            words = words[tools[0]:] if tools else []
            base = os.path.basename(words[0]) if words else ""
        if base in TOOLS:
            problems += check_tool(cli, base, words[1:], strict)
        elif base == "aws":
            problems += check_aws(cli, words[1:])
        elif base == "make" and not ({"-C", "-f"} & set(words)):
            problems += [f"make {w}: no such target in the Makefile" for w in words[1:]
                         if not w.startswith("-") and "=" not in w and PH not in w
                         and w not in cli.make_targets]
    return problems


def flag_of(word):
    """'--flag' of '[--flag', '--flag=value', '(--flag'; None for other words."""
    w = word.lstrip("[(").rstrip("]),")
    if PH in w or not re.match(r"^(--[A-Za-z0-9][\w-]*|-[A-Za-z])(=|$)", w):
        return None
    return w.split("=", 1)[0]


def check_flags(words, allowed, where, help_cmd):
    return [f"{where}: no flag {f} ({help_cmd} lists them)"
            for f in (flag_of(w) for w in words) if f and f not in allowed]


def positionals(words, value_flags):
    """The words that are not options nor option values."""
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif flag_of(w):
            skip = flag_of(w) in value_flags and "=" not in w
        elif w != "-":
            out.append(w)
    return out


def check_tool(cli, tool, args, strict):
    if tool == "hpod":
        pos = positionals(args, cli.hpod_global_values)
        if pos[:1] == ["sagemaker"]:
            pos = pos[1:]
        if not pos or PH in pos[0] or pos[0] == "help":
            return check_flags(args, cli.hpod_globals, "hpod", "hpod help")
        cmd = pos[0]
        if cmd not in cli.hpod_cmds:
            if not strict and "-" not in cmd:
                return []
            return [f"hpod {cmd}: no such command (hpod help lists them)"]
        if cmd == "wait" and len(pos) > 1 and PH not in pos[1] and pos[1] != "help" \
                and pos[1] not in cli.waiters:
            return [f"hpod wait {pos[1]}: no such waiter (hpod wait help lists them)"]
        return check_flags(args, cli.hpod_cmds[cmd] | cli.hpod_globals, "hpod " + cmd,
                           f"hpod {cmd} help")
    spec = cli.cli11[tool]
    flags, values = spec[""]
    if tool == "hpod-train":
        return check_flags(args, flags, tool, "hpod-train --help")
    pos = positionals(args, values)
    sub = pos[0] if pos and PH not in pos[0] else None
    if sub is None:
        return check_flags(args, flags, tool, tool + " --help")
    if sub not in spec:
        if not strict and "-" not in sub:
            return []
        return [f"{tool} {sub}: no such command ({tool} --help lists them)"]
    k = args.index(sub)
    return (check_flags(args[:k], flags, tool, tool + " --help") +
            check_flags(args[k + 1:], spec[sub][0], f"{tool} {sub}", f"{tool} {sub} --help"))


def check_aws(cli, args):
    pos = positionals(args, AWS_GLOBAL_VALUES)
    if len(pos) < 2 or pos[0] != "sagemaker" or PH in pos[1] or pos[1] == "help":
        return []
    op = pos[1]
    if op not in cli.aws_ops:
        return [f"aws sagemaker {op}: not an operation hpodd serves "
                "(src/api/sagemaker_cluster_model.json)"]
    return check_flags(args, cli.aws_ops[op] | AWS_GLOBAL_FLAGS, "aws sagemaker " + op,
                       "the compiled-in model")


def logical_lines(lines):
    """(index of first line, text) of each command line, '\\' continuations joined."""
    out, buf, start = [], "", None
    for k, line in enumerate(lines):
        if start is None:
            start = k
            line = re.sub(r"^\s*\$ ", "", line)
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((start, buf + line))
        buf, start = "", None
    if start is not None:
        out.append((start, buf))
    return out


def normalize(line):
    return " ".join(line.split())


def match_output(shown, actual):
    """None when the shown lines are the actual output ('...' = any lines), else the
    first shown line that does not fit."""
    shown = [normalize(s) for s in shown if normalize(s)]
    actual = [normalize(a) for a in actual if normalize(a)]

    def fits(si, ai):
        if si == len(shown):
            return ai == len(actual)
        if shown[si] in ("...", "…"):
            return any(fits(si + 1, k) for k in range(ai, len(actual) + 1))
        return ai < len(actual) and shown[si] == actual[ai] and fits(si + 1, ai + 1)

    if fits(0, 0):
        return None
    for s in shown:  # the first line shown that appears nowhere, else the first
        if s not in ("...", "…") and s not in actual:
            return s
    return shown[0] if shown else "(no output shown, but the command printed some)"


class Session:
    def __init__(self, cli):
        self.cli = cli
        self.dirs = sorted(os.path.dirname(p) for p in glob.glob(
            os.path.join(cli.build, "cmd", "*", "*")) if os.path.basename(p) ==
            os.path.basename(os.path.dirname(p)))

    def run(self, blocks):
        """blocks: [(command, shown_lines)] -> [(index, problem)]"""
        problems = []
        with tempfile.TemporaryDirectory(prefix="check-docs-") as tmp:
            os.makedirs(os.path.join(tmp, "home"))
            os.makedirs(os.path.join(tmp, "work"))
            os.symlink(os.path.join(self.cli.root, "examples"),
                       os.path.join(tmp, "work", "examples"))
            for k, (command, shown) in enumerate(blocks):
                # Its own process group, so that a timeout ends everything it started.
                p = subprocess.Popen(["bash", "-c", command], cwd=os.path.join(tmp, "work"),
                                     env=clean_env(os.path.join(tmp, "home"), self.dirs),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
                try:
                    output = p.communicate(timeout=60)[0]
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.communicate()
                    problems.append((k, "did not finish within 60 s"))
                    continue
                lines = output.splitlines()
                if p.returncode != 0:
                    last = next((x for x in reversed(lines) if x.strip()), "")
                    problems.append((k, f"exited {p.returncode}: {last.strip()[:160]}"))
                    continue
                bad = match_output(shown, lines)
                if bad is not None:
                    got = " | ".join(normalize(x) for x in lines if x.strip())[:200]
                    problems.append((k, f"shown output is not what it prints: '{bad}' "
                                        f"(it prints: {got})"))
        return problems


def inline_spans(lines):
    """(line index, code) of the inline code spans of prose lines (outside fences)."""
    out, para = [], []

    def flush():
        text = "\n".join(t for _, t in para)
        for m in re.finditer(r"(`+)(.+?)\1", text, re.S):
            k = para[text[:m.start()].count("\n")][0]
            out.append((k, " ".join(m.group(2).split())))
        para.clear()

    for k, line in lines:
        if line.strip():
            para.append((k, line))
        else:
            flush()
    flush()
    return out


def check_file(cli, session, path, display):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    problems, prose, k = [], [], 0

    def report(index, text, problem):
        short = text if len(text) < 80 else text[:77] + "..."
        if problem.startswith(("hpod", "aws", "make")):
            problems.append(f"{display}:{index + 1}: {problem}")
        else:
            problems.append(f"{display}:{index + 1}: {short}: {problem}")

    while k < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", lines[k])
        if not m:
            prose.append((k, lines[k]))
            k += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start, k = k + 1, k + 1
        while k < len(lines) and not lines[k].strip().startswith(fence):
            k += 1
        body = [line[indent:] if line[:indent].isspace() else line.lstrip()
                for line in lines[start:k]]
        k += 1
        prose.append((k - 1, ""))
        if lang not in CHECKED_FENCES:
            continue
        if lang == "console" and any(b.startswith("$ ") for b in body):
            runs = []  # (line index, command, shown output)
            for j, b in enumerate(body):
                if b.startswith("$ "):
                    runs.append([start + j, b[2:], []])
                elif runs and runs[-1][1].rstrip().endswith("\\") and not runs[-1][2]:
                    runs[-1][1] = runs[-1][1].rstrip()[:-1] + " " + re.sub(r"^> ", "", b)
                elif runs:
                    runs[-1][2].append(b)
            for index, command, _ in runs:
                for problem in check_line(cli, command):
                    report(index, command, problem)
            for j, problem in session.run([(c, shown) for _, c, shown in runs]):
                report(runs[j][0], "$ " + runs[j][1], problem)
            continue
        for j, text in logical_lines(body):
            for problem in check_line(cli, text, lang != ""):
                report(start + j, text.strip(), problem)
    for index, code in inline_spans(prose):
        if code.split(" ", 1)[0] in TOOLS and " " in code:
            for problem in check_line(cli, code, False):
                report(index, code, problem)
    return problems


def doc_files(root):
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    return [f for f in files if os.path.exists(f)]


def self_test(cli):
    """The checker fails on each kind of mistake and passes on good text."""
    session = Session(cli)
    version = cli.help("hpod", "--version").strip().splitlines()[0]
    data_help = [x for x in cli.help("hpod-data", "--help").splitlines() if x.strip()]
    plan = cli.help("hpod-train", "--model", "ci", "--data", "synthetic", "--dry-run")
    good = f"""# Good
Prose with `hpod describe-cluster --cluster-name demo` and
`hpodd --data-dir D create-key --role user`, `hpodd ready on …` (a message).
```
hpod --profile hpod list-cluster-nodes --cluster-name demo --output table   # a comment
hpod wait cluster-in-service --cluster-name demo --timeout 600
aws --profile hpod --endpoint-url http://127.0.0.1:8450 sagemaker create-cluster \\
    --cluster-name demo --instance-groups file://examples/demo-cluster.json
ID=$(hpod describe-cluster --cluster-name demo --query ClusterArn --output text | cut -d/ -f2)
HPOD_X=1 build/cmd/hpod-train/hpod-train --model ci --data synthetic --dry-run 2>&1 | head
hpod start-session --target sagemaker-cluster:<cluster-id>_<group>-<instance-id> --command "…"
hpod <command> help
make build && sudo /usr/local/bin/hpod help
scontrol update node=x state=fail   # not ours: not checked
```
```console
$ hpod --version
{version}
$ hpod-data --help
{data_help[0]}
...
$ hpod-train --model ci --data synthetic --dry-run | head -2 # a plan
{plan.splitlines()[0]}
…
```
```text
hpod no-such-command is fine in a text block
```
"""
    bad = {
        "hpod describe-clustr --cluster-name x": "hpod describe-clustr: no such command",
        "hpod describe-cluster --cluster-nam x": "hpod describe-cluster: no flag --cluster-nam",
        "hpod wait cluster-happy --cluster-name x": "no such waiter",
        "hpodd --data-dir D create-keys": "hpodd create-keys: no such command",
        "hpodd init --rol user": "hpodd init: no flag --rol",
        "hpod-train --modle ci": "hpod-train: no flag --modle",
        "hpod-data tokenise --input x": "hpod-data tokenise: no such command",
        "x=$(hpod list-clusterz)": "hpod list-clusterz: no such command",
        "aws --profile p sagemaker create-training-job": "not an operation hpodd serves",
        "aws sagemaker describe-cluster --cluster-nme x": "no flag --cluster-nme",
        "make quickstrat": "make quickstrat: no such target",
    }
    cases = [(good, None)]
    cases += [(f"```sh\n{cmd}\n```\n", want) for cmd, want in bad.items()]
    cases += [
        ("Prose: `hpod list-cluster-nodez --cluster-name demo`.\n", "no such command"),
        ("```bash\nhpod list-cluster-nodes \\\n  --cluster-name x --bogus\n```\n",
         "no flag --bogus"),
        ("```console\n$ hpod-train --model nosuch --data synthetic --dry-run\n```\n", "exited 2"),
        ("```console\n$ false\n```\n", "exited 1"),
        (f"```console\n$ hpod --version\nhpod 0.0.0-wrong\n```\n", "shown output is not"),
        (f"```console\n$ hpod-data --help\n{data_help[0]}\n```\n", "shown output is not"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, (text, want) in enumerate(cases):
            path = os.path.join(tmp, f"case{n}.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            problems = check_file(cli, session, path, f"case{n}.md")
            ok = not problems if want is None else (
                len(problems) == 1 and want in problems[0])
            if not ok:
                failures += 1
                print(f"self-test case {n} FAILED: want {want or 'no problems'}, got:\n  " +
                      "\n  ".join(problems or ["(no problems)"]) + "\n--- case:\n" + text)
    print(f"check_docs self-test: {len(cases) - failures}/{len(cases)} cases right")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="markdown files (default README.md, docs/**/*.md)")
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--build", default=None, help="build directory (default ROOT/build)")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    cli = Cli(root, os.path.abspath(args.build or os.path.join(root, "build")))
    if args.self_test:
        return self_test(cli)
    session = Session(cli)
    problems = []
    for path in args.files or doc_files(root):
        problems += check_file(cli, session, path, os.path.relpath(path, root))
    for p in problems:
        print(p)
    if problems:
        print(f"check_docs: {len(problems)} problem(s) in the docs (see tests/docs/check_docs.py "
              "for what is checked)")
        return 1
    print("check_docs: every command shown exists and every session runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
