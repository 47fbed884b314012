#!/usr/bin/env python3
"""Benchmark of hpod-train against PyTorch 1.13 on the same CPU, measured in one
run and printed as ratios (never asserted):

  1. training throughput, llama2.c "15M" Llama (dim 288, 6 layers, 6 heads,
     vocab 4096, seq 256, batch 8, fp32, random tokens) with 1 and 2 threads:
     hpod-train (--matmul onednn and openblas) vs bench/train_peer.py (plain
     PyTorch, Debian's python3-torch under /usr/bin/python3), tokens/s, ratio
     hpod/peer (goal >= 2x) and hpod's effective GFLOP/s as a fraction of the
     CPU's fp32 peak, itself measured in the same run by a tiny C program (12
     independent FMA chains, -O3 -march=native, 1 and 2 threads);
  2. checkpoints on disk: hpod-train's async save throughput vs `dd bs=4M
     count=25 conv=fdatasync` into the same directory, its load (resume) vs a
     dd read of a file of the same size, both from a cold page cache
     (drop_caches, as root) and warm; and the training stall per async save as
     a fraction of the step time (goal <= 2 %).

Environment: both sides of every comparison run under the same environment,
built once by this process (one process tree). With --openblas-env unset
(default) OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed together for both
sides, as training-building-blocks.md section 3 allows for benchmarks; `given`
keeps the environment as inherited; `both` runs the whole throughput part under
each. MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ (section 4) are set for both
sides. The peer's OpenBLAS thread count is OPENBLAS_NUM_THREADS, set per run;
at 2 threads both (torch 2, OpenBLAS 1) and (torch 1, OpenBLAS 2) are measured
and the better one is the peer (torch 2 + OpenBLAS 2 oversubscribes 2 vCPUs).

Background load: /proc/stat is sampled for 1 s before and after, and around
every measured run (system busy CPU minus this benchmark's children's CPU); a
warning is printed when it exceeds 0.05 CPU. Every process it starts is waited
for (or killed by PID on Ctrl-C) and its temp directories are removed.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
PEER = os.path.join(HERE, "train_peer.py")
PEER_PYTHON = "/usr/bin/python3"  # Debian's python3-torch; not the pyenv python3
CLK_TCK = os.sysconf("SC_CLK_TCK")
BUSY_LIMIT = 0.05  # CPUs of background load above which figures are suspect
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "4294967296"}
OPENBLAS_PAIR = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

PEAK_C = r"""
/* fp32 FMA peak: 12 independent accumulator chains per thread (enough to hide
   the FMA latency on 2 pipes), AVX-512 when the compiler targets it, else AVX2. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__AVX512F__)
typedef __m512 V;
#define W 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define STORE _mm512_storeu_ps
#define ISA "avx512"
#elif defined(__FMA__)
typedef __m256 V;
#define W 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define STORE _mm256_storeu_ps
#define ISA "avx2-fma"
#else
#error "no FMA"
#endif
static long iters;
static float sink[64];
static void* run(void* arg) {
  V a = SET1(0.999999f), b = SET1(1e-7f);
  V c0 = SET1(1), c1 = SET1(2), c2 = SET1(3), c3 = SET1(4), c4 = SET1(5), c5 = SET1(6),
    c6 = SET1(7), c7 = SET1(8), c8 = SET1(9), c9 = SET1(10), c10 = SET1(11), c11 = SET1(12);
  for (long i = 0; i < iters; i++) {
    c0 = FMA(c0, a, b); c1 = FMA(c1, a, b); c2 = FMA(c2, a, b); c3 = FMA(c3, a, b);
    c4 = FMA(c4, a, b); c5 = FMA(c5, a, b); c6 = FMA(c6, a, b); c7 = FMA(c7, a, b);
    c8 = FMA(c8, a, b); c9 = FMA(c9, a, b); c10 = FMA(c10, a, b); c11 = FMA(c11, a, b);
  }
  V s = ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7)));
  s = ADD(s, ADD(ADD(c8, c9), ADD(c10, c11)));
  float out[16];
  STORE(out, s);
  sink[(long)arg % 64] = out[0];
  return NULL;
}
int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  iters = argc > 2 ? atol(argv[2]) : 100000000L;
  pthread_t t[64];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, run, (void*)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  double flops = 2.0 * W * 12 * (double)iters * threads;
  printf("{\"isa\": \"%s\", \"threads\": %d, \"seconds\": %.6f, \"gflops\": %.3f, \"sink\": %g}\n",
         ISA, threads, s, flops / s / 1e9, sink[0]);
  return 0;
}
"""

_children = set()  # PIDs of running children, killed on Ctrl-C/SIGTERM


def log(msg):
    print(msg, flush=True)


def ratio(a, b):
    if not a or not b:
        return "n/a"
    r = a / b
    return "%.2fx" % r if r >= 0.1 else "%.3fx" % r


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---------------------------------------------------------------- load accounting

def cpu_stat():
    """(busy ticks, steal ticks) of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    return user + nice + system + irq + softirq, steal


def children_ticks():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * CLK_TCK


def idle_load(seconds=1.0):
    """Busy CPUs over `seconds` while this benchmark runs nothing."""
    b0, s0 = cpu_stat()
    t0 = time.time()
    time.sleep(seconds)
    b1, s1 = cpu_stat()
    dt = time.time() - t0
    return (b1 - b0) / CLK_TCK / dt, (s1 - s0) / CLK_TCK / dt


class Meter:
    """Background load while one of our children runs: the machine's busy CPU
    minus the CPU of the children waited for in between."""

    def __enter__(self):
        self.b0, self.s0 = cpu_stat()
        self.c0 = children_ticks()
        self.t0 = time.time()
        return self

    def __exit__(self, *exc):
        b1, s1 = cpu_stat()
        dt = max(1e-6, time.time() - self.t0)
        self.background = max(0.0, (b1 - self.b0) - (children_ticks() - self.c0)) / CLK_TCK / dt
        self.steal = (s1 - self.s0) / CLK_TCK / dt
        return False


# ---------------------------------------------------------------- processes

def run(cmd, env=None, timeout=900, check=True):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    _children.add(p.pid)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(p.pid)
        p.communicate()
        raise RuntimeError("timed out after %d s: %s" % (timeout, " ".join(cmd)))
    finally:
        _children.discard(p.pid)
    if check and p.returncode != 0:
        raise RuntimeError("exit %d: %s\n%s%s" % (p.returncode, " ".join(cmd), out[-2000:],
                                                   err[-2000:]))
    return p.returncode, out, err


def kill(pid):
    try:
        os.killpg(pid, signal.SIGKILL)  # its own session: the child and what it started
    except OSError:
        pass


def fs_type(path):
    p = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return p.stdout.strip() or "?"


# ---------------------------------------------------------------- the sides

def hpod_train(binary, env, threads, matmul, steps, warmup, tmp, extra=(), env_extra=None):
    if env_extra:
        env = dict(env, **env_extra)
    summary = os.path.join(tmp, "summary-%d-%s-%d.json" % (threads, matmul, time.time_ns()))
    cmd = [binary, "--model", "15m", "--data", "synthetic", "--seq-len", "256",
           "--batch-size", "8", "--max-steps", str(steps), "--timing-warmup-steps",
           str(warmup), "--threads", str(threads), "--matmul", matmul, "--progress", "none",
           "--summary-json", summary] + list(extra)
    with Meter() as m:
        run(cmd, env=env)
    with open(summary) as f:
        s = json.load(f)
    os.unlink(summary)
    t = s["throughput"]
    return {"tokens_per_s": t["tokens_per_s"], "ms_per_step": 1e3 * t["mean_step_s"],
            "gflops_per_s": t.get("gflops_per_s"), "flops_per_token": s.get("flops_per_token"),
            "background": m.background, "steal": m.steal, "summary": s, "cmd": cmd}


def peer(env, torch_threads, blas_threads, steps, warmup, env_extra=None):
    e = dict(env, **(env_extra or {}))
    e["OPENBLAS_NUM_THREADS"] = str(blas_threads)
    cmd = [PEER_PYTHON, PEER, "--threads", str(torch_threads), "--steps", str(steps),
           "--warmup", str(warmup)]
    with Meter() as m:
        _, out, _ = run(cmd, env=e)
    r = json.loads(out.strip().splitlines()[-1])
    r["background"], r["steal"] = m.background, m.steal
    return r


def peak(tmp, env):
    """Compiles and runs the FMA peak program; {threads: best GFLOP/s of 3}."""
    src, exe = os.path.join(tmp, "peak.c"), os.path.join(tmp, "peak")
    with open(src, "w") as f:
        f.write(PEAK_C)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None, "no C compiler"
    rc, out, err = run([cc, "-O3", "-march=native", "-pthread", "-o", exe, src], check=False)
    if rc != 0:
        return None, "compile failed: " + err.strip()[-300:]
    res = {}
    isa = "?"
    for threads in (1, 2):
        best = 0.0
        for _ in range(3):
            _, out, _ = run([exe, str(threads), "50000000"], env=env)
            r = json.loads(out)
            isa = r["isa"]
            best = max(best, r["gflops"])
        res[threads] = best
    return res, isa


# ---------------------------------------------------------------- checkpoints

def dd(args):
    """Runs dd; returns MB/s (1e6 bytes) from the bytes and seconds it reports."""
    _, _, err = run(["dd"] + args)
    # GNU dd: "N bytes (...) copied, S s, R MB/s" on the last line.
    last = [l for l in err.splitlines() if "copied" in l][-1]
    nbytes = int(last.split()[0])
    secs = float(last.split("copied,")[1].split()[0])
    return nbytes / 1e6 / secs, nbytes, secs


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def checkpoint_bench(binary, env, args, tmp_parent):
    d = tempfile.mkdtemp(prefix="hpod-bench-train-ckpt-", dir=tmp_parent)
    res = {"dir": d, "fs": fs_type(d)}
    try:
        ck = os.path.join(d, "ck")
        ddfile = os.path.join(d, "dd.test")
        wargs = ["if=/dev/zero", "of=" + ddfile, "bs=4M", "count=25", "conv=fdatasync"]
        res["dd_write"] = [dd(wargs)[0]]
        steps, k = args.ckpt_steps, args.save_interval
        # The same run without checkpoints, just before: the throughput cost of saving.
        res["base_run"] = hpod_train(binary, env, args.ckpt_threads, "onednn", steps, 2, d)
        s = hpod_train(binary, env, args.ckpt_threads, "onednn", steps, 2, d,
                       ["--checkpoint-dir", ck, "--save-interval", str(k), "--keep-last", "2"])
        res["save_run"] = s
        res["dd_write"].append(dd(wargs)[0])
        os.unlink(ddfile)
        ckpt = s["summary"]["checkpoint"]
        nbytes = ckpt["saves"][-1]["bytes"] if ckpt["saves"] else 0
        # A file of the checkpoint's size for the read side, made durable first.
        rfile = os.path.join(d, "dd.read")
        dd(["if=/dev/zero", "of=" + rfile, "bs=4M", "count=%d" % nbytes,
            "iflag=count_bytes", "conv=fdatasync"])
        cold = drop_caches()
        res["cold"] = cold
        # Resume: loads the newest checkpoint (step `steps`), runs one step, saves.
        r1 = hpod_train(binary, env, args.ckpt_threads, "onednn", steps + 1, 0, d,
                        ["--checkpoint-dir", ck, "--save-interval", "0", "--keep-last", "2"])
        res["load_cold" if cold else "load_warm"] = r1["summary"]["checkpoint"]["loads"][0]
        if cold:
            drop_caches()
            res["dd_read_cold"] = dd(["if=" + rfile, "of=/dev/null", "bs=4M"])[0]
        # Warm: read again right away (the page cache now holds both files).
        dd(["if=" + rfile, "of=/dev/null", "bs=4M"])
        res["dd_read_warm"] = dd(["if=" + rfile, "of=/dev/null", "bs=4M"])[0]
        r2 = hpod_train(binary, env, args.ckpt_threads, "onednn", steps + 2, 0, d,
                        ["--checkpoint-dir", ck, "--save-interval", "0", "--keep-last", "2"])
        res["load_warm"] = r2["summary"]["checkpoint"]["loads"][0]
        res["bytes"] = nbytes
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return res


# ---------------------------------------------------------------- main

def make_env(mode):
    e = dict(os.environ)
    if mode == "unset":
        for k in OPENBLAS_PAIR:
            e.pop(k, None)
    e.update(MALLOC_ENV)
    e.pop("OPENBLAS_NUM_THREADS", None)  # set per peer run; hpod sets its own
    return e


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}


def peer_configs(t, omp_passive):
    """(label, torch threads, OpenBLAS threads, extra environment) to try at t threads."""
    if t == 1:
        return [("torch 1 + OpenBLAS 1", 1, 1, None)]
    c = [("torch %d + OpenBLAS 1" % t, t, 1, None)]
    if omp_passive:
        c.append(("torch %d + OpenBLAS 1, OMP_WAIT_POLICY=PASSIVE" % t, t, 1, PASSIVE))
    c.append(("torch 1 + OpenBLAS %d" % t, 1, t, None))
    return c


def hpod_configs(t, matmuls, omp_passive):
    """(label, --matmul, extra environment); oneDNN runs on Debian's OpenMP runtime."""
    c = [("hpod-train --matmul %s" % m, m, None) for m in matmuls]
    if omp_passive and t > 1 and "onednn" in matmuls:
        c.append(("hpod-train --matmul onednn, OMP_WAIT_POLICY=PASSIVE", "onednn", PASSIVE))
    return c


def throughput(binary, env, args, tmp, matmuls):
    """{threads: {"peer": {label: [runs]}, "hpod": {label: [runs]}}}, interleaved."""
    out = {t: {"peer": {}, "hpod": {}} for t in args.threads}
    for rep in range(args.reps):
        for t in args.threads:
            for label, tt, bt, extra in peer_configs(t, args.omp_passive):
                r = peer(env, tt, bt, args.steps, args.warmup, extra)
                out[t]["peer"].setdefault(label, []).append(r)
                log("  rep %d, %d thread(s): peer %s: %.0f tokens/s "
                    "(%.0f ms/step: fwd %.0f, bwd %.0f, opt %.0f), background %.2f CPU" % (
                        rep + 1, t, label, r["tokens_per_s"], r["ms_per_step"], r["fwd_ms"],
                        r["bwd_ms"], r["opt_ms"], r["background"]))
            for label, m, extra in hpod_configs(t, matmuls, args.omp_passive):
                r = hpod_train(binary, env, t, m, args.steps + args.warmup, args.warmup, tmp,
                               env_extra=extra)
                out[t]["hpod"].setdefault(label, []).append(r)
                log("  rep %d, %d thread(s): %s: %.0f tokens/s (%.0f ms/step), "
                    "background %.2f CPU" % (rep + 1, t, label, r["tokens_per_s"],
                                             r["ms_per_step"], r["background"]))
    return out


def report_throughput(mode, res, pk, isa, matmuls):
    log("")
    log("Training throughput, OpenBLAS environment %s; median over runs (min..max); "
        "peer = its best configuration at that thread count" % mode)
    log("| threads | side | tokens/s | ms/step | ratio hpod/peer | eff. GFLOP/s | "
        "fraction of fp32 peak (%s) | background CPU (max) |" % isa)
    log("|---:|---|---:|---:|---:|---:|---:|---:|")
    peer_fpt = next(iter(next(iter(res.values()))["peer"].values()))[0]["flops_per_token"]
    for t, r in res.items():
        best_cfg, best = None, 0
        for cfg, runs in r["peer"].items():
            v = med([x["tokens_per_s"] for x in runs])
            if v and v > best:
                best_cfg, best = cfg, v
        p_peak = pk.get(t) if pk else None
        for cfg, runs in r["peer"].items():
            tps = [x["tokens_per_s"] for x in runs]
            g = med([x["gflops_per_s"] for x in runs])
            log("| %d | PyTorch 1.13, %s%s | %.0f (%.0f..%.0f) | %.0f | | %.1f | %s | %.2f |" % (
                t, cfg, " (peer)" if cfg == best_cfg else "", med(tps), min(tps), max(tps),
                med([x["ms_per_step"] for x in runs]), g,
                "%.1f %%" % (100 * g / p_peak) if p_peak else "n/a",
                max(x["background"] for x in runs)))
        for m, runs in r["hpod"].items():
            tps = [x["tokens_per_s"] for x in runs]
            g = med(tps) * peer_fpt / 1e9  # the same FLOP count for both sides
            log("| %d | %s | %.0f (%.0f..%.0f) | %.0f | **%s** | %.1f | %s | "
                "%.2f |" % (t, m, med(tps), min(tps), max(tps),
                            med([x["ms_per_step"] for x in runs]), ratio(med(tps), best), g,
                            "%.1f %%" % (100 * g / p_peak) if p_peak else "n/a",
                            max(x["background"] for x in runs)))
    log("(goal: hpod/peer >= 2x; eff. GFLOP/s = tokens/s x %.1f MFLOP/token for both sides "
        "(6 N_matmul + 6 L T d); hpod-train's own count %s; peak %s)" % (
        peer_fpt / 1e6,
        next(iter(next(iter(res.values()))["hpod"].values()))[0]["flops_per_token"],
        ", ".join("%d thread(s) %.1f GFLOP/s" % (t, g) for t, g in pk.items()) if pk else "n/a"))


def report_ckpt(c):
    s = c["save_run"]["summary"]
    ck = s["checkpoint"]
    log("")
    cmd = c["save_run"]["cmd"]
    log("Checkpoints (dir on %s, %s), hpod-train --threads %s, %d saves of %.1f MB "
        "(--save-interval %s + the final one)" % (
            c["fs"], c["dir"], cmd[cmd.index("--threads") + 1], len(ck["saves"]),
            c["bytes"] / 1e6, cmd[cmd.index("--save-interval") + 1]))
    ddw = med(c["dd_write"])
    log("| figure | hpod-train | dd | hpod / dd |")
    log("|---|---:|---:|---:|")
    per = [x["write_mb_per_s"] for x in ck["saves"] if x.get("write_mb_per_s")]
    log("| write MB/s (all saves; per save min..max) | %.0f (%.0f..%.0f) | %.0f (%s) | **%s** |" % (
        ck["write_mb_per_s"] or 0, min(per) if per else 0, max(per) if per else 0, ddw,
        " / ".join("%.0f" % x for x in c["dd_write"]), ratio(ck["write_mb_per_s"], ddw)))
    final_step = s.get("end_step")
    asy = [x for x in ck["saves"] if x["step"] != final_step and x.get("write_s")]
    fin = [x for x in ck["saves"] if x["step"] == final_step and x.get("write_s")]
    if asy:
        mbs = sum(x["bytes"] for x in asy) / 1e6 / sum(x["write_s"] for x in asy)
        log("| write MB/s, the %d async saves (training runs beside the writer) | %.0f | %.0f | "
            "%s |" % (len(asy), mbs, ddw, ratio(mbs, ddw)))
    if fin:
        mbs = fin[0]["bytes"] / 1e6 / fin[0]["write_s"]
        log("| write MB/s, the final save (training stopped) | %.0f | %.0f | %s |" % (
            mbs, ddw, ratio(mbs, ddw)))
    if c.get("cold"):
        l = c["load_cold"]
        log("| load MB/s, cold page cache (both sides after drop_caches) | %.0f (%.3f s) | %.0f | "
            "**%s** |" % (l["load_mb_per_s"], l["load_s"], c["dd_read_cold"],
                          ratio(l["load_mb_per_s"], c["dd_read_cold"])))
    l = c["load_warm"]
    log("| load MB/s, warm page cache | %.0f (%.3f s) | %.0f | %s |" % (
        l["load_mb_per_s"], l["load_s"], c["dd_read_warm"],
        ratio(l["load_mb_per_s"], c["dd_read_warm"])))
    stalls = [x["stall_s"] for x in ck["saves"]]
    frac = ck.get("stall_fraction_of_step")
    log("| stall per async save / step time | %s (stall mean %.1f ms, max %.1f ms; step %.0f ms) "
        "| | goal <= 2 %% |" % (
            "**%.2f %%**" % (100 * frac) if frac is not None else "n/a",
            1e3 * statistics.mean(stalls) if stalls else 0, 1e3 * max(stalls) if stalls else 0,
            c["save_run"]["ms_per_step"]))
    base = c["base_run"]
    log("| tokens/s with saves vs the same run without (run just before) | %.0f vs %.0f "
        "(step %.0f vs %.0f ms) | | %s |" % (
            c["save_run"]["tokens_per_s"], base["tokens_per_s"], c["save_run"]["ms_per_step"],
            base["ms_per_step"], ratio(c["save_run"]["tokens_per_s"], base["tokens_per_s"])))
    if not c.get("cold"):
        log("(could not drop the page cache: not root; loads are warm on both sides)")
    log("(final synchronous save %.3f s; background load during the save run %.2f CPU, "
        "during the run without saves %.2f CPU)" % (
            ck.get("final_save_s") or 0, c["save_run"]["background"], base["background"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 rep, 4 timed steps, a short checkpoint run")
    ap.add_argument("--hpod-train", default=os.path.join(
        os.environ.get("HPOD_BIN_DIR", os.path.join(TOP, "build")), "cmd", "hpod-train",
        "hpod-train"), help="the hpod-train binary (default $HPOD_BIN_DIR/cmd/hpod-train/"
        "hpod-train, HPOD_BIN_DIR defaulting to build/)")
    ap.add_argument("--openblas-env", choices=["unset", "given", "both"], default="unset",
                    help="unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for both sides (default), "
                    "keep them as given, or run the throughput part under both")
    ap.add_argument("--threads", default="1,2",
                    help="thread counts (default 1,2; empty: the checkpoint part only)")
    ap.add_argument("--matmul", default="onednn,openblas", help="hpod-train --matmul values")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per run (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed first steps (default 2)")
    ap.add_argument("--reps", type=int, default=2, help="runs of each side, interleaved")
    ap.add_argument("--no-omp-passive", dest="omp_passive", action="store_false",
                    help="at 2+ threads do not also try OMP_WAIT_POLICY=PASSIVE (torch's "
                    "and oneDNN's OpenMP pools spin; on a loaded machine passive waiting wins)")
    ap.add_argument("--no-ckpt", action="store_true", help="skip the checkpoint part")
    ap.add_argument("--ckpt-parent", default=os.path.dirname(TOP),
                    help="where the checkpoint temp dir goes (a disk, not tmpfs; default the "
                    "repository's parent directory)")
    ap.add_argument("--ckpt-steps", type=int, default=16)
    ap.add_argument("--save-interval", type=int, default=4)
    ap.add_argument("--ckpt-threads", type=int, default=1)
    ap.add_argument("--wait-quiet", type=int, default=0,
                    help="wait up to S seconds for background load <= %.2f CPU first" % BUSY_LIMIT)
    args = ap.parse_args()
    args.threads = [int(x) for x in args.threads.split(",") if x]
    matmuls = [m for m in args.matmul.split(",") if m]
    if args.quick:
        args.reps, args.steps = 1, 4
        args.ckpt_steps, args.save_interval = 8, 3

    if not os.access(args.hpod_train, os.X_OK):
        log("SKIP: %s not built (make builds it)" % args.hpod_train)
        return 77
    p = subprocess.run([PEER_PYTHON, "-c", "import torch"], capture_output=True)
    if p.returncode != 0:
        log("SKIP: %s cannot import torch (Debian's python3-torch)" % PEER_PYTHON)
        return 77

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    tmp = tempfile.mkdtemp(prefix="hpod-bench-train-")
    modes = ["unset", "given"] if args.openblas_env == "both" else [args.openblas_env]
    given = {k: os.environ.get(k) for k in OPENBLAS_PAIR}
    results = {}
    try:
        if args.wait_quiet:
            deadline = time.time() + args.wait_quiet
            while time.time() < deadline and idle_load(1.0)[0] > BUSY_LIMIT:
                time.sleep(4)
        before = idle_load(1.0)
        log("== train_bench %s, %s, %d CPUs, load %s; background before: %.2f CPU busy "
            "(steal %.2f)%s" % (
                "--quick" if args.quick else "(full)",
                time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(), loadavg(),
                before[0], before[1], "  WARNING: > %.2f CPU" % BUSY_LIMIT
                if before[0] > BUSY_LIMIT else ""))
        log("hpod-train: %s; peer: %s %s; OpenBLAS variables as given: %s" % (
            args.hpod_train, PEER_PYTHON, PEER,
            ", ".join("%s=%s" % (k, v) for k, v in given.items() if v) or "none set"))
        pk, isa = peak(tmp, make_env("unset"))
        if pk:
            log("fp32 peak (%s, 12 FMA chains, -O3 -march=native): %s" % (
                isa, ", ".join("%d thread(s) %.1f GFLOP/s" % kv for kv in pk.items())))
        else:
            log("fp32 peak not measured (%s)" % isa)
        for mode in modes if args.threads else []:
            if mode == "given" and "unset" in modes and not any(given.values()):
                log("OpenBLAS environment 'given' has neither variable set: same as 'unset', "
                    "not run twice")
                continue
            log("-- throughput, OpenBLAS environment %s" % mode)
            results[mode] = throughput(args.hpod_train, make_env(mode), args, tmp, matmuls)
        ck = None
        if not args.no_ckpt:
            log("-- checkpoints")
            ck = checkpoint_bench(args.hpod_train, make_env(modes[0]), args, args.ckpt_parent)
        # Load only lowers the peak: measure it again at the end, keep the best.
        pk2, _ = peak(tmp, make_env("unset"))
        if pk and pk2:
            log("fp32 peak again at the end: %s (the best of both is used)" % ", ".join(
                "%d thread(s) %.1f GFLOP/s" % kv for kv in pk2.items()))
            pk = {t: max(pk[t], pk2[t]) for t in pk}
        after = idle_load(1.0)
    except KeyboardInterrupt:
        for pid in list(_children):
            kill(pid)
        log("interrupted; cleaned up")
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for mode, res in results.items():
        report_throughput(mode, res, pk, isa, matmuls)
    if ck:
        report_ckpt(ck)
    log("")
    log("Background load: before %.2f CPU, after %.2f CPU, during runs up to %.2f CPU "
        "(load average now %s)%s" % (
            before[0], after[0], max([x["background"] for res in results.values()
                                      for r in res.values()
                                      for side in ("peer", "hpod")
                                      for runs in r[side].values() for x in runs] +
                                     ([ck["base_run"]["background"],
                                       ck["save_run"]["background"]] if ck else []) or [0]),
            loadavg(), "  WARNING: > %.2f CPU: figures are noisy" % BUSY_LIMIT
            if max(before[0], after[0]) > BUSY_LIMIT else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
