"""Stacks of small matrix products shared out over the OpenMP threads
(rune/backends/cpu/batched_matmul.py): the very values np.matmul gives, for
every layout BLAS reads in place, and np.matmul itself where the policy or the
layout says so."""
import numpy as np
import pytest

from rune import nx
from rune.backends.cpu import threads
from rune.backends.cpu import batched_matmul, compiler

pytestmark = pytest.mark.cc

CC = compiler.find()
needs_gemm = pytest.mark.skipif(batched_matmul._entries(CC) is None,
                                reason="NumPy's BLAS is not an ILP64 OpenBLAS with cblas gemm")


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setenv("RUNE_NUM_THREADS", "2")
    monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 8)


@pytest.fixture
def stacked_calls(monkeypatch):
    """How many stacks went through the threaded C entry."""
    calls = []
    for dtype, (fn, gemm) in list(batched_matmul._entries(CC).items()):
        def counted(*args, _fn=fn):
            calls.append(args[1])
            return _fn(*args)
        monkeypatch.setitem(batched_matmul._loaded["ready"], dtype, (counted, gemm))
    return calls


def _stacks(dtype, rng):
    a = rng.standard_normal((32, 4, 64, 16)).astype(dtype)
    b = rng.standard_normal((32, 4, 16, 64)).astype(dtype)
    yield "contiguous", a, b
    yield "transposed right", a, np.swapaxes(b.copy(), -1, -2).copy().swapaxes(-1, -2)
    yield "strided batch", np.swapaxes(np.swapaxes(a, 1, 2).copy(), 1, 2), b
    yield "transposed left", np.swapaxes(np.swapaxes(a, -1, -2).copy(), -1, -2), b


@needs_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stacked_products_are_numpys_bit_for_bit_in_every_layout(two_threads, stacked_calls, dtype):
    rng = np.random.default_rng(0)
    for name, a, b in _stacks(dtype, rng):
        np.testing.assert_array_equal(batched_matmul.matmul(a, b, CC), np.matmul(a, b), err_msg=name)
    assert len(stacked_calls) == 4


@needs_gemm
def test_numpy_multiplies_what_the_threads_would_not_pay_for_or_cannot_read(two_threads, stacked_calls, monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 4, 64, 16)).astype(np.float32)
    b = rng.standard_normal((32, 4, 16, 64)).astype(np.float32)
    cases = [(a[:2], b[:2]),                                   # too little work in all
             (a[..., ::-1, :], b),                             # rows in reverse: no unit stride BLAS reads
             (a.astype(np.int32), b.astype(np.int32)),        # not a BLAS dtype
             (a, b[:1])]                                       # a broadcast batch
    for x, y in cases:
        np.testing.assert_array_equal(batched_matmul.matmul(x, y, CC), np.matmul(x, y))
    monkeypatch.setenv("RUNE_NUM_THREADS", "1")                # the policy's one thread
    np.testing.assert_array_equal(batched_matmul.matmul(a, b, CC), np.matmul(a, b))
    assert stacked_calls == []


@needs_gemm
def test_attention_shaped_dot_generals_through_rune_match_numpy(two_threads, stacked_calls):
    rng = np.random.default_rng(2)
    q = rng.standard_normal((32, 64, 4, 16)).astype(np.float32)
    k = rng.standard_normal((32, 64, 4, 16)).astype(np.float32)
    scores = np.asarray(nx.einsum("bqhd,bkhd->bhqk", nx.asarray(q), nx.asarray(k)))
    np.testing.assert_allclose(scores, np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k), rtol=1e-4, atol=1e-4)
    assert stacked_calls, "the stack of 128 products did not go through the threads"
