"""rune's default threads against one thread, on a quiet machine and beside a busy process.

The MLP `value_and_grad` (784-256-10, batch 128) under jit, a row softmax of
4096x1024 float32 under jit and the two examples' training steps (bench/train.py), each timed with rune's default threads ("rune")
and limited to one thread ("1 thread": threadpoolctl's limit, which rune keeps
for its kernels and BLAS calls alike), alternating the two. Then the same
while a child process spins on one core: it stops by itself after
COMPETITOR_SECONDS at most, and is ended as soon as the rows are measured.
Target: rune/1 thread at most 1.2x on every row. NumPy's time, with its own
default threads, is shown for reference.
"""
import os
import statistics
import subprocess
import sys

import numpy as np

import rune
from rune import nx

from . import models, train
from .common import Row, per_call, print_table

COMPETITOR_SECONDS = 120
ROUNDS = 5            # alternations of default / one thread; the median of each is kept

_SPIN = """
import os, sys, time
cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
if len(cpus) > 1:
    os.sched_setaffinity(0, {cpus[-1]})
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""


def _softmax(np_like, x):
    e = np_like.exp(x - np_like.max(x, axis=1, keepdims=True))
    return e / np_like.sum(e, axis=1, keepdims=True)


def _cases():
    params0, x0, y0 = models.mlp_data()
    params, x, y = tuple(nx.array(p) for p in params0), nx.array(x0), nx.array(y0)
    step = rune.jit(rune.value_and_grad(models.mlp_loss_rune))
    s = np.random.default_rng(0).standard_normal((4096, 1024)).astype(np.float32)
    rs = nx.asarray(s)
    softmax = rune.jit(lambda v: _softmax(nx, v))
    return (("MLP value_and_grad, jit", lambda: step(params, x, y),
             lambda: models.mlp_value_and_grad_numpy(params0, x0, y0)),
            ("row softmax (4096x1024 f32), jit", lambda: softmax(rs), lambda: _softmax(np, s)),
            ("digits CNN train step", train.rune_digits_step(), None),
            ("char transformer train step", train.rune_charlm_step(), None))


def _alternating(fn, limit):
    """Median seconds per call of `fn` with default threads and under `limit()` (one
    thread), measured in alternation so that a change of load hits both alike."""
    default, one = [], []
    budget = max(0.1, 3 * per_call(fn, number=1, repeat=1))   # a training step: a few calls per batch
    for _ in range(ROUNDS):
        default.append(per_call(fn, budget=budget, repeat=3))
        with limit():
            one.append(per_call(fn, budget=budget, repeat=3))
    return statistics.median(default), statistics.median(one)


def _rows(cases, limit, where):
    rows = []
    for name, fn, numpy_fn in cases:
        default, one = _alternating(fn, limit)
        times = {"rune": default, "1 thread": one}
        if numpy_fn is not None:
            times["numpy"] = per_call(numpy_fn, budget=0.1, repeat=3)
        rows.append(Row(f"{name}, {where}", "per call", times))
    return rows


def run():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print("bench threads needs threadpoolctl (pip install threadpoolctl); skipped")
        return []
    limit = lambda: threadpool_limits(1)  # noqa: E731
    cases = _cases()
    rows = _rows(cases, limit, "quiet")
    competitor = subprocess.Popen([sys.executable, "-c", _SPIN, str(COMPETITOR_SECONDS)])
    try:
        rows += _rows(cases, limit, "1 core busy")
    finally:
        competitor.kill()
        competitor.wait()
    print_table(f"threads: rune's default vs one thread (load average {os.getloadavg()[0]:.1f} "
                f"on {os.cpu_count()} CPUs)", rows,
                note="'1 core busy': a child process spins on one core meanwhile; target rune/1 thread <= 1.2x")
    return rows


if __name__ == "__main__":
    run()
