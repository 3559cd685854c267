"""Runs on a pinned number of threads, and bit-for-bit comparison of results: shared by
the tests of "one result per program" (docs/design.md).

Kernels below the C dialect's parallel thresholds run on one thread whatever the
policy, so `parallel_everywhere()` renders with thresholds of one element: every loop
that may be parallel is, and a reduction to a scalar splits its blocks among the
threads. `at_threads(k, fn, *args)` pins the thread policy (rune/backends/cpu/threads.py),
BLAS's included, and the OpenMP runtime's own setting to k for one call."""
import contextlib

import numpy as np
import pytest

import rune
from rune.backends.cpu import threads
from rune.codegen.c import CDialect


@contextlib.contextmanager
def parallel_everywhere(blas=True):
    """Every loop the C dialect may run in parallel does, and (`blas`) every matrix
    product may thread. A product threaded in output tiles has bits of its own, the same
    on any number of threads but not always one BLAS call's: compare such runs with
    runs under the same setting."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("parallel_threshold", "row_parallel_threshold", "parallel_work"):
            mp.setattr(CDialect, name, 1)
        if blas:
            mp.setattr(threads, "BLAS_MIN_WORK", 1)
        yield


def at_threads(k, fn, *args):
    """The leaves of fn(*args) as NumPy arrays, with every parallel kernel and BLAS call
    on `k` threads (the OpenMP runtime's own setting raised to k for the call)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("parallel_threads", "num_threads"):
            mp.setattr(threads, name, lambda: k)
        mp.setattr(threads, "free_cpus", lambda pool=None: k)
        omp = threads._openmp
        have = omp.get() if omp else None
        if omp:
            omp.set(k)
        try:
            return [np.asarray(leaf) for leaf in rune.tree.leaves(fn(*args))]
        finally:
            if omp:
                omp.set(have)


def assert_bits_equal(got, want, what):
    """Two lists of arrays hold the same dtypes, shapes and bits; the first difference named."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs vs {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.atleast_1d(np.asarray(g)), np.atleast_1d(np.asarray(w))
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}, output {i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        diff = g.view(np.uint8).reshape(g.shape + (-1,)) != w.view(np.uint8).reshape(w.shape + (-1,))
        if diff.any():
            at = np.argwhere(diff.any(axis=-1))[0]
            raise AssertionError(f"{what}, output {i}: bits differ first at {tuple(at)} "
                                 f"({int(diff.any(axis=-1).sum())} of {g.size}): {g[tuple(at)]!r} vs {w[tuple(at)]!r}")
