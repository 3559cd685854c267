"""Derivatives exactly at ties and kinks, where the op table's samples never land.

Expected values are JAX's conventions, stated exactly:
- maximum/minimum with equal operands give each operand half the cotangent
  (so relu written as maximum(x, 0) has derivative 0.5 at 0);
- max/min reductions split the cotangent equally among tied extrema (the
  tangent of the result is the mean of the tied tangents);
- abs has derivative 1 at 0 (and at -0.0): sign with 0 counted as positive.
Each case is checked under grad, jvp, jit(grad), jit(jvp) and vmap(grad).
"""
import numpy as np
import pytest

import rune
from rune import nx

from compiled import precompiled

THIRD = 1 / 3  # rounded to the dtype: the cotangent 1 divided by three ties


def _sum(f):
    return lambda *a: nx.sum(f(*a))


# name -> (scalar function, arguments, expected gradient of each argument)
CASES = {
    "maximum": (_sum(nx.maximum), ([1, 2, 3, -1], [1, 0, 5, -1]),
                ([0.5, 1, 0, 0.5], [0.5, 0, 1, 0.5])),
    "minimum": (_sum(nx.minimum), ([1, 2, 3, -1], [1, 0, 5, -1]),
                ([0.5, 0, 1, 0.5], [0.5, 1, 0, 0.5])),
    "relu=maximum(x,0)": (_sum(lambda x: nx.maximum(x, 0.0)), ([-1, 0, 2, 0],), ([0, 0.5, 1, 0.5],)),
    "minimum(x,0)": (_sum(lambda x: nx.minimum(x, 0.0)), ([-1, 0, 2, 0],), ([1, 0.5, 0, 0.5],)),
    "abs": (_sum(nx.abs), ([-2, 0, 3, -0.0],), ([-1, 1, 1, 1],)),
    "max two ties": (nx.max, ([1, 3, 3, 2],), ([0, 0.5, 0.5, 0],)),
    "max all tied": (nx.max, ([5, 5, 5, 5],), ([0.25] * 4,)),
    "max three ties": (nx.max, ([1, 7, 7, 7],), ([0, THIRD, THIRD, THIRD],)),
    "min two ties": (nx.min, ([2, 1, 4, 1],), ([0, 0.5, 0, 0.5],)),
    "max axis=1": (_sum(lambda x: nx.max(x, axis=1)), ([[1, 3, 3, 2], [4, 4, 4, 4]],),
                   ([[0, 0.5, 0.5, 0], [0.25] * 4],)),
    "max axis=0": (_sum(lambda x: nx.max(x, axis=0)), ([[1, 3], [1, 2], [0, 3]],),
                   ([[0.5, 0.5], [0.5, 0], [0, 0.5]],)),
    "min axis=-1": (_sum(lambda x: nx.min(x, axis=-1)), ([[2, 1, 1, 2], [0, 5, 0, 0]],),
                    ([[0, 0.5, 0.5, 0], [THIRD, 0, THIRD, THIRD]],)),
    "min keepdims": (_sum(lambda x: nx.min(x, axis=0, keepdims=True)), ([[2, 1], [2, 3]],),
                     ([[0.5, 1], [0.5, 0]],)),
}


def _setup(name, dtype):
    f, args, grads = CASES[name]
    args = tuple(np.array(a, dtype) for a in args)
    grads = tuple(np.array(g, dtype) for g in grads)  # 1/3 rounded once to the dtype
    return f, args, grads


def _tangents(args):
    # Integer tangents whose mean over any tie (2, 3 or 4 of them) is exact.
    return tuple(np.full(a.shape, 6, a.dtype) * (1 + np.arange(a.size, dtype=a.dtype).reshape(a.shape) % 2)
                 for a in args)


def _jvp(f):
    return lambda p, t: rune.jvp(f, p, t)[1]


DTYPES = [np.float32, np.float64]


def _jitted_calls():
    """The test's jit(grad) and jit(jvp) calls of every case, compiled together before it runs."""
    for name in CASES:
        for dtype in DTYPES:
            f, args, _ = _setup(name, dtype)
            xs = tuple(nx.asarray(a) for a in args)
            yield rune.grad(f, tuple(range(len(args)))), xs
            yield _jvp(f), (xs, tuple(nx.asarray(t) for t in _tangents(args)))


_kernels = precompiled(lambda: list(_jitted_calls()))


def _assert_exact(got, want, where):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{where}: {got!r} for {want!r}"
    assert np.array_equal(got, want), f"{where}: got {got.tolist()}, JAX gives {want.tolist()}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_derivatives_at_ties_and_kinks_match_jax(name, dtype):
    f, args, grads = _setup(name, dtype)
    argnums = tuple(range(len(args)))
    xs = [nx.asarray(a) for a in args]
    for how, g in (("grad", rune.grad(f, argnums)), ("jit(grad)", rune.jit(rune.grad(f, argnums)))):
        for i, (got, want) in enumerate(zip(g(*xs), grads)):
            _assert_exact(got, want, f"{how} of {name}, argument {i}")
    # Forward mode: the tangent is <gradient, t> (the mean of tied tangents for max/min).
    ts = _tangents(args)
    # Every expected gradient entry is a multiple of 1/12, so the exact tangent is
    # an integer sum divided by 12 once.
    want = np.asarray(sum(float(np.sum(np.round(g.astype(np.float64) * 12) * t)) for g, t in zip(grads, ts)) / 12,
                      dtype)
    jvp = _jvp(f)
    for how, run in (("jvp", jvp), ("jit(jvp)", rune.jit(jvp))):
        _assert_exact(run(tuple(xs), tuple(nx.asarray(t) for t in ts)), want, f"{how} of {name}")
    # vmap over two lanes: the arguments and the same flipped along their last axis.
    lanes = [np.stack([a, np.flip(a, -1)]) for a in args]
    batched = rune.vmap(rune.grad(f, argnums))(*[nx.asarray(a) for a in lanes])
    for i, (got, want) in enumerate(zip(batched, grads)):
        _assert_exact(got, np.stack([want, np.flip(want, -1)]), f"vmap(grad) of {name}, argument {i}")
