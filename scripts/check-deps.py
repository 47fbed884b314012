#!/usr/bin/env python3
"""Checks the dependency rule of docs/architecture.md against the code.

Every `#include "hpod/<module>/..."` in src/ and cmd/, and every hpod_* library a
CMake target links, is an edge from the including module to the included one.
An edge the rule below does not allow fails the check, naming the file and line,
so a layering mistake is caught by `make test` and not in review.

The rule here and the table in docs/architecture.md change together, with the reason.
Three edges the original sketch did not spell out are legitimate and allowed:
  agent -> slurm         the agent renders its node's Slurm files and parses
                         `scontrol show node` (pure functions, no I/O in slurm/);
  controlplane -> slurm  hpodd plans slurm.conf and reads the controller's
                         scontrol output the agent relays;
  cmd/hpodd -> store     `hpodd create-key` opens the store directly.
  slurm -> container     spank_hpod.so checks --container-image/--container-mounts
                         with container/'s parsers where srun parses them.

Usage: check-deps.py [repo root]   (exit 0: clean; 1: violations listed)
       check-deps.py --self-test     (the check catches a bad include and a bad link)
"""

import os
import re
import sys

# module -> modules it may include. Every module may include itself.
ALLOWED = {
    "base": set(),
    "api": {"base"},
    "auth": {"base"},
    "http": {"base"},
    "store": {"base"},
    "provider": {"base", "api"},
    "provider/local": {"base", "api", "provider"},
    "provider/fake": {"base", "api", "provider"},
    "slurm": {"base", "api", "container"},
    "container": {"base"},
    "controlplane": {"base", "api", "auth", "store", "http", "provider", "slurm"},
    "agent": {"base", "api", "auth", "http", "slurm"},
    "cli": {"base", "api", "auth", "http", "slurm"},
    "train/comm": {"base"},
    "train/model": {"base"},
    "train/data": {"base"},
    "train/ckpt": {"base"},
    "train/trainer": {"base", "train/model", "train/data", "train/comm", "train/ckpt"},
    # Mains pick implementations: flags -> Options -> Run().
    "cmd/hpodd": {"base", "controlplane", "provider", "provider/local", "store"},
    "cmd/hpod": {"base", "cli"},
    "cmd/hpod-agent": {"base", "agent"},
    "cmd/hpod-node-init": {"base", "provider/local"},
    "cmd/hpod-train": {"base", "train/trainer"},
    "cmd/hpod-data": {"base", "train/data"},
    "cmd/hpod-container": {"base", "container"},
    "cmd/hpod-deep-check": {"base", "agent", "train/comm"},
}

# Tests may also use the fakes of what they test against.
TEST_EXTRA = {
    "controlplane": {"provider/fake"},
}

# CMake target -> module.
TARGET_MODULE = {
    "hpod_base": "base", "hpod_api": "api", "hpod_auth": "auth", "hpod_http": "http",
    "hpod_store": "store", "hpod_provider": "provider", "hpod_provider_local": "provider/local",
    "hpod_provider_fake": "provider/fake", "hpod_slurm": "slurm",
    "hpod_controlplane": "controlplane", "hpod_agent": "agent", "hpod_cli": "cli",
    "hpod_train_comm": "train/comm", "hpod_train_model": "train/model",
    "hpod_train_data": "train/data", "hpod_train_ckpt": "train/ckpt",
    "hpod_train_trainer": "train/trainer", "hpodd_main": "cmd/hpodd",
    "hpod_container": "container",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"hpod/([^"]+)"')
SOURCE_EXT = (".h", ".cc", ".c", ".cpp")


def module_of(rel):
    """The module a path under the repository belongs to, or None."""
    parts = rel.split("/")
    if parts[0] == "cmd" and len(parts) > 2:
        return "cmd/" + parts[1]
    if parts[0] != "src" or len(parts) < 3:
        return None
    if parts[1] in ("train", "provider") and len(parts) > 3:
        return parts[1] + "/" + parts[2]
    return parts[1]


def included_module(path):
    """The module of an "hpod/..." include path (hpod/ maps to src/)."""
    return module_of("src/" + path)


def allowed(frm, to, is_test):
    if frm == to or to is None:
        return True
    ok = ALLOWED.get(frm)
    if ok is None:
        return False
    return to in ok or (is_test and to in TEST_EXTRA.get(frm, set()))


def check_includes(root, errors):
    for top in ("src", "cmd"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                frm = module_of(rel)
                if frm is None:
                    continue
                if frm not in ALLOWED:
                    errors.append("%s: module '%s' is not in the dependency rule" % (rel, frm))
                    continue
                is_test = name.endswith(("_test.cc", "_test.h", "test_util.h",
                                         "test_harness.h", "fake_transport.h"))
                with open(full, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        to = included_module(m.group(1))
                        if not allowed(frm, to, is_test):
                            errors.append("%s:%d: %s may not include %s (\"hpod/%s\")" %
                                          (rel, lineno, frm, to, m.group(1)))


LIBRARY = re.compile(r"hpod_library\(\s*(\w+)(.*?)\)", re.S)
LINK = re.compile(r"target_link_libraries\(\s*([\w-]+)(.*?)\)", re.S)


def check_cmake(root, errors):
    for top in ("src", "cmd"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            full = os.path.join(dirpath, "CMakeLists.txt")
            rel = os.path.relpath(full, root)
            text = re.sub(r"#[^\n]*", "", open(full, encoding="utf-8").read())
            edges = []
            for m in LIBRARY.finditer(text):
                deps = re.search(r"DEPS(.*)", m.group(2), re.S)
                edges.append(("hpod_" + m.group(1), deps.group(1).split() if deps else []))
            for m in LINK.finditer(text):
                edges.append((m.group(1), m.group(2).split()))
            for target, deps in edges:
                frm = TARGET_MODULE.get(target)
                if frm is None:
                    continue  # tests, benches and executables are checked by their includes
                for dep in deps:
                    to = TARGET_MODULE.get(dep)
                    if to is not None and not allowed(frm, to, False):
                        errors.append("%s: %s (%s) may not link %s (%s)" %
                                      (rel, target, frm, dep, to))


def self_test():
    """A check that cannot fail is no check: plant one bad edge of each kind."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        def put(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        put("src/base/status.h", "#pragma once\n")
        put("src/train/comm/store.cc", '#include "hpod/base/status.h"\n')
        put("src/train/comm/CMakeLists.txt", "hpod_library(train_comm SRCS store.cc DEPS hpod_base)\n")
        errors = []
        check_includes(root, errors)
        check_cmake(root, errors)
        if errors:
            print("self-test: a clean tree was refused: %s" % errors)
            return 1
        put("src/train/comm/store.cc", '#include "hpod/base/status.h"\n#include "hpod/store/store.h"\n')
        put("src/train/comm/CMakeLists.txt",
            "hpod_library(train_comm SRCS store.cc\n  DEPS hpod_base # why\n  hpod_controlplane)\n")
        check_includes(root, errors)
        check_cmake(root, errors)
        want = ["src/train/comm/store.cc:2: train/comm may not include store",
                "hpod_train_comm (train/comm) may not link hpod_controlplane"]
        missing = [w for w in want if not any(w in e for e in errors)]
        if missing or len(errors) != 2:
            print("self-test: expected %s, got %s" % (want, errors))
            return 1
    print("dependency rule self-test: both planted edges caught")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    errors = []
    check_includes(root, errors)
    check_cmake(root, errors)
    for e in errors:
        print("dependency rule: " + e)
    if errors:
        print("%d edge(s) break the dependency rule in docs/architecture.md; move the code to the "
              "right layer, or change the rule there and in scripts/check-deps.py with the reason"
              % len(errors))
        return 1
    print("dependency rule: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
