"""Signal state of a live process, read from /proc, and a signal storm.

The invariant hpod keeps (src/base/signals.h): no asynchronous signal is ever
delivered to a thread, so a signal can never interrupt library code (oneDNN's
JIT GEMM points rsp into the heap; a handler's frame would land there). On a
live process that reads as:
  - every signal the process acts on is blocked in every one of its threads
    (it is read by one watcher thread through signalfd);
  - no asynchronous signal has a handler (SigCgt), unless every thread blocks it.
"""
import os
import signal
import threading
import time

# Signals the kernel raises in the thread that caused them: they cannot be
# blocked meaningfully, and a handler for them is not "asynchronous delivery".
SYNCHRONOUS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP,
               signal.SIGSYS}
# glibc's own (SIGCANCEL, SIGSETXID: 32, 33): sent by glibc to one of its own
# threads for pthread_cancel and setuid, never by anyone else.
GLIBC_INTERNAL = set(range(32, signal.SIGRTMIN))


def _mask(value):
    bits = int(value, 16)
    return {n + 1 for n in range(64) if bits >> n & 1}


def _status(path):
    out = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def threads(pid):
    """{tid: (thread name, set of blocked signals)} of every thread of `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            st = _status(f"/proc/{pid}/task/{tid}/status")
        except FileNotFoundError:
            continue  # the thread ended meanwhile
        out[int(tid)] = (st["Name"], _mask(st["SigBlk"]))
    return out


def caught(pid):
    """Signals with a handler installed (process-wide)."""
    return _mask(_status(f"/proc/{pid}/status")["SigCgt"])


def problems(pid, acted_on):
    """What breaks the invariant in `pid` now, as readable lines (empty: none).

    `acted_on`: the signals the program handles (they must be blocked in every
    thread)."""
    found = []
    ts = threads(pid)
    for sig in sorted(set(acted_on)):
        open_in = [f"{name}/{tid}" for tid, (name, blocked) in ts.items() if sig not in blocked]
        if open_in:
            found.append(f"{signal.Signals(sig).name} is not blocked in thread(s) {open_in}")
    for sig in sorted(caught(pid) - SYNCHRONOUS - GLIBC_INTERNAL):
        open_in = [f"{name}/{tid}" for tid, (name, blocked) in ts.items() if sig not in blocked]
        if open_in:
            found.append(f"{_name(sig)} has a handler and can interrupt thread(s) {open_in}")
    return found


def _name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def wait_blocked(pid, signals, timeout=30):
    """Waits until `pid`'s main thread blocks all of `signals`: before that, a
    signal takes its default action (the dynamic loader is still mapping
    libraries; no program can act on a signal then)."""
    deadline = time.time() + timeout
    want = set(signals)
    while time.time() < deadline:
        try:
            if want <= _mask(_status(f"/proc/{pid}/status")["SigBlk"]):
                return True
        except FileNotFoundError:
            return False
        time.sleep(0.001)
    return False


class Storm:
    """Sends `signals` round-robin to `pid` every `interval` seconds from a
    thread until stopped or the process has ended. Use as a context manager.

    Signals go through a pidfd, so a storm that outlives its process can never
    hit another process that reuses the pid."""

    def __init__(self, pid, signals, interval=0.001):
        self.signals, self.interval = list(signals), interval
        self.sent = 0
        self._pidfd = os.pidfd_open(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        while not self._stop.is_set():
            try:
                signal.pidfd_send_signal(self._pidfd, self.signals[i % len(self.signals)])
            except ProcessLookupError:
                return  # exited (a zombie still takes signals; a reaped one not)
            self.sent += 1
            i += 1
            if self.interval:
                time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
