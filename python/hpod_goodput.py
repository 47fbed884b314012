"""hpod's goodput ledger for any training script, in a line or two.

    import hpod_goodput
    ledger = hpod_goodput.Ledger()           # rank 0 writes; other ranks no-op
    ledger.start(resumed_step=step, world_size=world)
    ...  ledger.step(step, step_seconds)      # after each optimizer step
    ...  ledger.checkpoint(step, save_seconds)  # once a checkpoint is durable
    ledger.end(step)                          # "completed" (or "interrupted", "failed")

It appends the same JSON lines hpod-train writes (src/base/goodput.h): one
object a line, each with "event" and "time" (Unix seconds), one write(2) per
line on an O_APPEND file, so a process killed mid-run leaves whole lines and a
retry appends after them. Under `srun --auto-resume=N` the supervisor names the
file (HPOD_GOODPUT_FILE) and reports the summary to hpod when the job ends:
`hpod describe-job-goodput` then splits each failure into detection,
replacement, restart, rendezvous, checkpoint load and steps re-run.

The ledger is a measurement: a file that cannot be written costs one warning
on stderr, never the training run. Standard library only.
"""
import json
import os
import sys
import time

__all__ = ["Ledger", "process_start_time"]


def process_start_time(pid="self"):
    """When this process began (Unix seconds), from /proc; now if unreadable.
    The start event records it, so interpreter and import time count as restart
    time, as hpod-train's main() start does."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of proc(5); 2 fields precede this slice
        with open("/proc/stat") as f:
            btime = next(int(l.split()[1]) for l in f if l.startswith("btime "))
        return btime + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def _env_int(name, default=0):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class Ledger:
    """Appends goodput events for rank 0 of a job. Not thread-safe: use it from
    the training loop's thread."""

    def __init__(self, path=None, rank=None):
        if rank is None:
            rank = _env_int("RANK", _env_int("SLURM_PROCID", 0))
        self.path = path or os.environ.get("HPOD_GOODPUT_FILE") or None
        self._fd = None
        self._ended = False
        self._started = False
        if rank != 0 or not self.path:
            return
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                               0o644)
            # A writer cut off mid-line (a full disk) leaves a torn line: end it,
            # so the next event is a line of its own.
            size = os.fstat(self._fd).st_size
            if size > 0:
                with open(self.path, "rb") as f:
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        os.write(self._fd, b"\n")
        except OSError as e:
            self._warn("cannot open %s: %s" % (self.path, e))
            self._fd = None

    @property
    def enabled(self):
        return self._fd is not None

    def _warn(self, text):
        sys.stderr.write("hpod_goodput: warning: %s; no goodput ledger for this run\n" % text)

    def _write(self, event, **fields):
        if self._fd is None:
            return
        line = json.dumps(dict({"event": event, "time": round(time.time(), 3)}, **fields),
                          separators=(",", ":")) + "\n"
        try:
            os.write(self._fd, line.encode())
        except OSError as e:
            self._warn("writing %s: %s" % (self.path, e))
            os.close(self._fd)
            self._fd = None

    def start(self, resumed_step=0, world_size=None, checkpoint_load_s=0.0, rendezvous_s=0.0,
              process_start=None):
        """Once, when training is about to take its first step (after the
        process group is up and a checkpoint, if any, is loaded)."""
        self._started = True
        if world_size is None:
            world_size = _env_int("WORLD_SIZE", _env_int("SLURM_NTASKS", 1))
        self._write("start", process_start=round(process_start or process_start_time(), 3),
                    job_id=os.environ.get("SLURM_JOB_ID", ""),
                    restart=_env_int("SLURM_RESTART_COUNT"),
                    attempt=_env_int("HPOD_AUTO_RESUME_ATTEMPT"), world_size=int(world_size),
                    resumed_step=int(resumed_step),
                    checkpoint_load_s=round(float(checkpoint_load_s), 6),
                    rendezvous_s=round(float(rendezvous_s), 6))

    def step(self, step, step_s):
        """After each optimizer step: the step just done and its wall time."""
        self._write("step", step=int(step), step_s=round(float(step_s), 6))

    def checkpoint(self, step, save_s):
        """After a checkpoint of `step` became durable."""
        self._write("checkpoint", step=int(step), save_s=round(float(save_s), 6))

    def end(self, step, status="completed"):
        """When the process ends: "completed", "interrupted" or "failed". Once;
        nothing before start()."""
        if self._ended or not self._started:
            return
        if status not in ("completed", "interrupted", "failed"):
            raise ValueError("status must be completed, interrupted or failed, not %r" % status)
        self._ended = True
        self._write("end", step=int(step), status=status)

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
