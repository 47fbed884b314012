#!/usr/bin/env python3
"""Compiles annotated code with clang's thread-safety analysis as errors.

The project builds with GCC, which ignores the annotations of
src/base/thread_annotations.h. This runs `clang++ -fsyntax-only -Wthread-safety
-Werror=thread-safety` over every translation unit of the build
(compile_commands.json) that includes that header, itself or through its own
header, so GUARDED_BY, REQUIRES and EXCLUDES are checked on every `make test`.
It compiles only those files and emits no code, so it costs seconds, not a
second build.

HPOD_TSA_JOBS=N runs N compilers at once (default 1).

Usage: check-thread-safety.py BUILD_DIR [PATH_PART...]  (exit 0 clean; 1 findings;
                                    PATH_PART limits the check to matching files)
       check-thread-safety.py --self-test      (a planted unguarded read fails)
"""

import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

HEADER = '"hpod/base/thread_annotations.h"'
FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]
# GCC-only flags of the build that clang refuses or that point at GCC's PCH.
DROP = re.compile(r"^(-Winvalid-pch|-fno-fat-lto-objects|-fconcepts-diagnostics-depth=.*)$")


def clang():
    for name in ("clang++", "clang++-14"):
        path = shutil.which(name)
        if path:
            return path
    return None


def includes_annotations(path, seen=None):
    """Whether `path` includes the header directly or through a hpod header
    of its own folder (the class declarations live there)."""
    seen = seen if seen is not None else set()
    if path in seen or not os.path.exists(path):
        return False
    seen.add(path)
    text = open(path, encoding="utf-8", errors="replace").read()
    if HEADER in text:
        return True
    folder = os.path.dirname(path)
    for m in re.finditer(r'#include "hpod/[^"]*/([^"/]+\.h)"', text):
        sibling = os.path.join(folder, m.group(1))
        if includes_annotations(sibling, seen):
            return True
    return False


def clang_args(entry, compiler):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = [compiler]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o",):
            skip = True
            continue
        if a == "-include" or a == "-Xclang":
            skip = True  # GCC's precompiled header
            continue
        if a == "-c" or DROP.match(a):
            continue
        out.append(a)
    return out + FLAGS


def check(entries, compiler, jobs=2):
    def run(entry):
        r = subprocess.run(clang_args(entry, compiler), cwd=entry["directory"],
                           capture_output=True, text=True)
        return entry["file"], r.returncode, r.stderr

    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for file, rc, err in pool.map(run, entries):
            if rc != 0:
                failures.append((file, err))
    return failures


def self_test(compiler):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "planted.cc")
        with open(src, "w") as f:
            f.write('#include "hpod/base/thread_annotations.h"\n'
                    "struct Counter {\n"
                    "  hpod::Mutex mu;\n"
                    "  int n GUARDED_BY(mu) = 0;\n"
                    "  int Good() { hpod::MutexLock l(mu); return n; }\n"
                    "  int Bad() { return n; }\n"
                    "};\n")
        entry = {"directory": tmp, "file": src,
                 "arguments": ["c++", "-std=c++20", "-I" + os.path.join(tmp, "include"),
                               "-c", src]}
        os.makedirs(os.path.join(tmp, "include", "hpod", "base"))
        shutil.copy(os.path.join(root, "src", "base", "thread_annotations.h"),
                    os.path.join(tmp, "include", "hpod", "base"))
        failures = check([entry], compiler, jobs=1)
        if len(failures) != 1 or "requires holding mutex 'mu'" not in failures[0][1]:
            print("self-test: the planted unguarded read was not refused: %s" % failures)
            return 1
        if "planted.cc:6:" not in failures[0][1] or "planted.cc:5:" in failures[0][1]:
            print("self-test: expected only line 6 (the unguarded read) refused: %s" % failures[0][1])
            return 1
    print("thread-safety self-test: the planted unguarded read was refused")
    return 0


def main():
    compiler = clang()
    if compiler is None:
        print("thread-safety: clang++ not found (scripts/install-deps.sh installs clang)")
        return 1
    if sys.argv[1:] == ["--self-test"]:
        return self_test(compiler)
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    db = json.load(open(os.path.join(build, "compile_commands.json")))
    # Tests are left out: they hold no annotated state of their own, and clang
    # refuses some of their gtest/json comparisons that GCC accepts.
    entries = [e for e in db
               if e["file"].endswith(".cc") and not e["file"].endswith("_test.cc") and
               includes_annotations(e["file"])]
    if len(sys.argv) > 2:
        entries = [e for e in entries if any(p in e["file"] for p in sys.argv[2:])]
    if not entries:
        print("thread-safety: no translation unit includes %s" % HEADER)
        return 1
    # One compiler at a time: ctest runs this beside the other tests on CI's two
    # cores, and some of those (e2e training, collectives) must not be starved.
    failures = check(entries, compiler, jobs=int(os.environ.get("HPOD_TSA_JOBS", "1")))
    for file, err in failures:
        print(err.rstrip())
    if failures:
        print("thread-safety: %d of %d annotated files fail clang's analysis" %
              (len(failures), len(entries)))
        return 1
    print("thread-safety: %d annotated files clean" % len(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
