"""What the plan evaluator and device-made ranges cost, eagerly.

Eager `cond`, `scan` and `while_loop` run their bodies through plans (the
evaluator jit uses). What they staged is kept between calls (keyed by what the
functions read, rune/core/stage_cache.py), so a repeated call pays for the
plans' runs, not for staging. The NumPy column is the same work written as
plain Python over NumPy values of the dtypes rune computes in (the while
loop's counter is an int32, as rune's is). Targets: an eager cond within
50 us, an eager while_loop within 5x the NumPy loop. Float `arange` and
`linspace` are iota arithmetic on the device; NumPy builds them on the host
(`np.arange(...).astype(float32)`). Times are per call.
"""
import numpy as np

import rune
from rune import nx

from .common import Row, per_call, print_table

N = 100_000


def _check(got, want):
    np.testing.assert_array_equal(np.asarray(got), want)


def control_rows():
    x = nx.asarray(np.linspace(-1, 1, 8, dtype=np.float32))
    xh = np.asarray(x)
    pred = nx.asarray(True)

    def cond():
        return rune.cond(pred, lambda v: nx.sin(v) * 2.0 + 1.0, lambda v: v - 1.0, x)

    def cond_np():
        return np.sin(xh) * np.float32(2) + np.float32(1) if True else xh - np.float32(1)

    rows_x = nx.ones(50)

    def scan():
        return rune.scan(lambda c, r: (c + r, c * 2.0), 0.0, rows_x)

    def scan_np():
        c, ys = np.float32(0), []
        for r in np.ones(50, np.float32):
            ys.append(c * np.float32(2))
            c = c + r
        return c, np.stack(ys)

    def while_():
        return rune.while_loop(lambda s: s[0] < 50, lambda s: (s[0] + 1, s[1] * 1.01), (0, 1.0))

    def while_np():
        i, v = np.int32(0), np.float32(1)
        while i < np.int32(50):
            i, v = i + np.int32(1), v * np.float32(1.01)
        return i, v

    np.testing.assert_allclose(np.asarray(cond()), cond_np(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(scan()[1]), scan_np()[1], rtol=1e-6)
    np.testing.assert_allclose([np.asarray(r) for r in while_()], while_np(), rtol=1e-6)
    return [Row("eager cond, 8 floats", "call", {"rune": per_call(cond), "numpy": per_call(cond_np)}),
            Row("eager scan, 50 scalar rows", "call", {"rune": per_call(scan), "numpy": per_call(scan_np)}),
            Row("eager while_loop, 50 steps", "call", {"rune": per_call(while_), "numpy": per_call(while_np)})]


COND_US = 50.0
WHILE_RATIO = 5.0


def _verdicts(rows):
    by_case = {r.case: r for r in rows}
    cond, loop = by_case["eager cond, 8 floats"], by_case["eager while_loop, 50 steps"]
    return "\n".join([
        f"eager cond: {cond.us['rune']:.1f} us ({'meets' if cond.us['rune'] <= COND_US else 'misses'} "
        f"the {COND_US:g} us target)",
        f"eager while_loop: {loop.ratio('numpy'):.1f}x the NumPy loop "
        f"({'meets' if loop.ratio('numpy') <= WHILE_RATIO else 'misses'} the {WHILE_RATIO:g}x target)"])


def range_rows():
    def arange():
        return nx.arange(-5.0, N / 2 - 5.0, 0.5)

    def arange_np():
        return np.arange(-5.0, N / 2 - 5.0, 0.5).astype(np.float32)

    def linspace():
        return nx.linspace(-1.0, 1.0, N)

    def linspace_np():
        return np.linspace(-1.0, 1.0, N).astype(np.float32)

    _check(arange(), arange_np())
    _check(linspace(), linspace_np())
    return [Row(f"float arange, {N:,} elements", "call", {"rune": per_call(arange), "numpy": per_call(arange_np)}),
            Row(f"linspace, {N:,} elements", "call", {"rune": per_call(linspace), "numpy": per_call(linspace_np)})]


def run():
    rows = control_rows() + range_rows()
    print_table("eager control flow through plans; float ranges made on the device", rows,
                note=_verdicts(rows))
    return rows


if __name__ == "__main__":
    run()
