"""Debian's python3-tqdm as the oracle for progress_test.

stdin: {"meters": [case, ...], "bars": [run, ...]}; stdout: {"version", "meters":
[str, ...], "bars": [str, ...]}. Exit 3 when tqdm is not installed (the test skips).

case: {"n", "total" (or null), "elapsed", "rate" (or null), "desc", "postfix",
       "ascii", "ncols" (or null)} -> tqdm.format_meter, the postfix built by
       tqdm.set_postfix from an ordered dict (keys keep their order).
run:  {"total" (or null), "initial", "desc", "ascii", "ncols" (or null),
       "lightning", "ops": [{"advance", "inc", "postfix" (or null), "desc" (or
       null)}, ...], "close_advance"} -> everything a tqdm bar writes to a file
       under a fake clock: mininterval 0.1, miniters 1, no monitor thread, then
       close(). "lightning" uses PyTorch Lightning's Tqdm.format_num.
postfix: [[key, {"d": "%.17g"} | {"i": int} | {"s": str}], ...]. Floats travel as
strings so that nan/inf need no JSON extension.
"""
import collections
import io
import json
import sys

try:
    import tqdm as tqdm_module
    import tqdm.std
    from tqdm import tqdm
except ImportError:
    sys.exit(3)

_PAD_SIZE = 5


class LightningTqdm(tqdm):
    # pytorch_lightning/callbacks/progress/tqdm_progress.py, verbatim.
    @staticmethod
    def format_num(n):
        should_be_padded = isinstance(n, (float, str))
        if not isinstance(n, str):
            n = tqdm.format_num(n)
            assert isinstance(n, str)
        if should_be_padded and "e" not in n:
            if "." not in n and len(n) < _PAD_SIZE:
                try:
                    _ = float(n)
                except ValueError:
                    return n
                n += "."
            n += "0" * (_PAD_SIZE - len(n))
        return n


def value(v):
    if "d" in v:
        return float(v["d"])
    if "i" in v:
        return int(v["i"])
    return v["s"]


def postfix_dict(items):
    return collections.OrderedDict((k, value(v)) for k, v in items)


def meter(c, formatter):
    formatter.set_postfix(postfix_dict(c["postfix"]), refresh=False)
    return tqdm.format_meter(c["n"], c["total"], c["elapsed"], ncols=c["ncols"],
                             prefix=c["desc"], ascii=c["ascii"], rate=c["rate"],
                             postfix=formatter.postfix)


class FakeTime:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def bar(run):
    clock = FakeTime()
    tqdm_module.std.time = clock  # tqdm binds self._time = time at construction
    out = io.StringIO()
    cls = LightningTqdm if run["lightning"] else tqdm
    b = cls(total=run["total"], initial=run["initial"], desc=run["desc"], ascii=run["ascii"],
            ncols=run["ncols"], file=out, mininterval=0.1, miniters=1, smoothing=0.3)
    for op in run["ops"]:
        clock.now += op["advance"]
        if op.get("postfix") is not None:
            b.set_postfix(postfix_dict(op["postfix"]), refresh=False)
        if op.get("desc") is not None:
            b.set_description_str(op["desc"], refresh=False)
        b.update(op["inc"])
    clock.now += run["close_advance"]
    b.close()
    return out.getvalue()


def main():
    tqdm.monitor_interval = 0  # no TMonitor thread refreshing behind our back
    request = json.load(sys.stdin)
    formatter = tqdm(disable=True)  # only for set_postfix's formatting
    meters = [meter(c, formatter) for c in request.get("meters", [])]
    bars = [bar(r) for r in request.get("bars", [])]
    json.dump({"version": tqdm_module.__version__, "meters": meters, "bars": bars}, sys.stdout)


main()
