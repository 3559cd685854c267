"""Reductions and products of float16/bfloat16 accumulate in float32 and round once.

Oracle: the float64 NumPy result (value and vector-Jacobian product) of the
same inputs, rounded to the dtype. One final rounding puts rune's answer within
one unit in the last place (ulp) of the rounded oracle, plus the float32 (or
own-dtype for float32/float64) accumulation error, which is far below a
float16/bfloat16 ulp. Accumulating in the low dtype itself misses by many ulps
(a bfloat16 sum of 10000 ones is 256), and a float16 element count above 65504
is inf (means and their gradients 0 or nan).
"""
import functools

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx

from compiled import precompiled
from op_table import BF16, F16, F32, F64, LOW_FLOATS


def _keep(v, x, axis):
    """`v`, reduced over `axis` of `x`, broadcast back to `x`'s shape."""
    return np.broadcast_to(v if axis is None else np.expand_dims(v, axis), x.shape)


def _count(x, axis):
    return x.size if axis is None else x.shape[axis]


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _lse(x, axis):
    top = x.max(axis, keepdims=True)
    out = np.log(np.exp(x - top).sum(axis, keepdims=True)) + top
    return out.reshape(()) if axis is None else np.squeeze(out, axis)


def _std_vjp(x, axis, ct):
    centered = x - x.mean(axis, keepdims=True)
    return _keep(ct / x.std(axis), x, axis) * centered / _count(x, axis)


# name -> (rune function, float64 value oracle, float64 VJP oracle (x, axis, cotangent))
REDUCTIONS = {
    "sum": (nx.sum, lambda x, a: x.sum(a), lambda x, a, ct: _keep(ct, x, a)),
    "mean": (nx.mean, lambda x, a: x.mean(a), lambda x, a, ct: _keep(ct, x, a) / _count(x, a)),
    "var": (nx.var, lambda x, a: x.var(a),
            lambda x, a, ct: _keep(ct, x, a) * 2 * (x - x.mean(a, keepdims=True)) / _count(x, a)),
    "std": (nx.std, lambda x, a: x.std(a), _std_vjp),
    "logsumexp": (nx.logsumexp, _lse, lambda x, a, ct: _keep(ct, x, a) * _softmax(x, a)),
    "softmax": (nx.softmax, _softmax,
                lambda x, a, ct: _softmax(x, a) * (ct - (ct * _softmax(x, a)).sum(a, keepdims=True))),
    "log_softmax": (nx.log_softmax, lambda x, a: x - np.expand_dims(_lse(x, a), a),
                    lambda x, a, ct: ct - _softmax(x, a) * ct.sum(a, keepdims=True)),
}
ELEMENTWISE = {"softmax", "log_softmax"}  # no axis=None: they normalize along one axis


def _assert_one_rounding(got, exact, dtype, where):
    """`got` is within one ulp of `exact` rounded to `dtype`, plus the accumulation
    error of float32 (float16/bfloat16) or of the dtype itself (float32/float64)."""
    got = np.asarray(got)
    assert got.dtype == dtype, f"{where}: dtype {got.dtype}, expected {dtype}"
    exact = np.asarray(exact, F64)
    assert got.shape == exact.shape, f"{where}: shape {got.shape}, expected {exact.shape}"
    rounded = exact.astype(dtype)
    acc = F32 if dtype in LOW_FLOATS else dtype
    slack = 64 * float(ml_dtypes.finfo(acc).eps) * float(np.abs(exact).max(initial=0))
    allowed = np.spacing(np.abs(rounded)).astype(F64) + slack
    err = np.abs(got.astype(F64) - rounded.astype(F64))
    worst = np.unravel_index(np.argmax(err - allowed), err.shape) if err.size else ()
    assert (err <= allowed).all(), (
        f"{where}: {got[worst]!r} at {worst}, the float64 oracle rounded to {dtype} gives "
        f"{rounded[worst]!r} (allowed difference {allowed[worst]:.3g})")


def _input(dtype, shape, seed):
    # In [0.25, 0.75]: sums of 70000 stay inside float16's range.
    rng = np.random.default_rng(seed)
    return rng.uniform(0.25, 0.75, shape).astype(dtype)


def _cotangent(dtype, shape, seed):
    return np.random.default_rng(seed + 1).standard_normal(shape).astype(dtype)


def _pullback(f):
    def run(x, ct):
        return rune.vjp(f, x)[1](ct)[0]
    return run


# (4, 1024) catches accumulation in the low dtype; (1, 70000) an element count
# past float16's largest finite value (65504).
SHAPES = [(4, 1024), (1, 70000)]
DTYPES = [F16, BF16, F32, F64]


def _overflow_only_matters(dtype, shape):
    return shape[1] > 65504 and dtype not in LOW_FLOATS


def _axes(name):
    return (-1,) if name in ELEMENTWISE else (None, -1)


def _case(dtype, name, shape):
    """The table's functions for `name` and the input as an Array and in float64."""
    fn, value, vjp = REDUCTIONS[name]
    a = _input(dtype, shape, seed=len(name))
    return fn, value, vjp, nx.asarray(a), a.astype(F64)


def _reduction_jit_calls():
    """The jitted calls of test_reductions_round_once_eager_jit_vjp_vmap: each reduction
    and its pullback on the test's inputs, for every axis."""
    for dtype in DTYPES:
        for name in REDUCTIONS:
            for shape in SHAPES:
                if _overflow_only_matters(dtype, shape):
                    continue
                fn, value, _, x, x64 = _case(dtype, name, shape)
                for axis in _axes(name):
                    f = functools.partial(fn, axis=axis)
                    ct = _cotangent(dtype, np.shape(value(x64, axis)), seed=len(name))
                    yield f, (x,)
                    yield _pullback(f), (x, nx.asarray(ct))


_kernels = precompiled(lambda: [*_reduction_jit_calls(), *_product_jit_calls(),
                                (nx.mean, (nx.ones(70000, dtype=nx.float16),))])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_reductions_round_once_eager_jit_vjp_vmap(dtype, name, shape):
    if _overflow_only_matters(dtype, shape):
        pytest.skip("the element count only overflows float16")
    fn, value, vjp, x, x64 = _case(dtype, name, shape)
    for axis in _axes(name):
        f = functools.partial(fn, axis=axis)
        want = value(x64, axis)
        _assert_one_rounding(f(x), want, dtype, f"{name}(axis={axis})")
        _assert_one_rounding(rune.jit(f)(x), want, dtype, f"jit {name}(axis={axis})")
        ct = _cotangent(dtype, np.shape(want), seed=len(name))
        want_ct = vjp(x64, axis, ct.astype(F64))
        _assert_one_rounding(_pullback(f)(x, nx.asarray(ct)), want_ct, dtype, f"vjp {name}(axis={axis})")
        _assert_one_rounding(rune.jit(_pullback(f))(x, nx.asarray(ct)), want_ct, dtype,
                             f"jit(vjp) {name}(axis={axis})")
        if axis is None:
            _assert_one_rounding(rune.grad(f)(x), vjp(x64, axis, np.float64(1)), dtype,
                                 f"grad {name}(axis=None)")
    # vmap over rows: each lane reduces its whole row (axis -1 of the batch).
    row = functools.partial(fn, axis=-1 if name in ELEMENTWISE else None)
    _assert_one_rounding(rune.vmap(row)(x), value(x64, -1), dtype, f"vmap {name}")
    ct = _cotangent(dtype, np.shape(value(x64, -1)), seed=7)
    _assert_one_rounding(rune.vmap(_pullback(row))(x, nx.asarray(ct)), vjp(x64, -1, ct.astype(F64)),
                         dtype, f"vmap(vjp) {name}")
    if name not in ELEMENTWISE:
        _assert_one_rounding(rune.vmap(rune.grad(row))(x), vjp(x64, -1, np.ones(shape[0])), dtype,
                             f"vmap(grad) {name}")


def test_the_reported_examples():
    ones = nx.ones(10000, dtype=nx.bfloat16)
    assert float(ones.sum()) == 9984.0  # 10000 rounded to bfloat16 (as JAX)
    assert float(ones.mean()) == 1.0 and float(ones.var()) == 0.0
    many = nx.ones(70000, dtype=nx.float16)
    assert float(many.mean()) == 1.0 and float(rune.jit(nx.mean)(many)) == 1.0
    g = rune.grad(nx.mean)(many)
    assert g.dtype == F16 and np.all(np.asarray(g) == np.float16(1 / 70000))


def _product_loss(w, x):
    return nx.sum(nx.einsum("bi,io->bo", x, w) * (x @ w))


def _product_inputs(dtype):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(dtype) for s in ((64, 8), (16, 64))]


def _product_jit_calls():
    for dtype in LOW_FLOATS:
        args = tuple(map(nx.asarray, _product_inputs(dtype)))
        yield _product_loss, args
        yield rune.grad(_product_loss), args


@pytest.mark.parametrize("dtype", LOW_FLOATS, ids=lambda d: d.name)
def test_products_and_their_gradients_keep_the_low_dtype(dtype):
    # A bfloat16 model stays bfloat16 through a training step (NumPy's bfloat16
    # matmul returns float32): values and parameter gradients, eager and jit.
    w, x = _product_inputs(dtype)
    w64, x64 = w.astype(F64), x.astype(F64)
    loss = _product_loss
    exact = np.sum((x64 @ w64) ** 2)
    # d/dw sum((x w)^2) = 2 x^T (x w): one float32 product for each matmul, rounded
    # in between, so the tolerance is a few ulps rather than one.
    want = 2 * x64.T @ (x64 @ w64)
    for run in (loss, rune.jit(loss)):
        out = run(nx.asarray(w), nx.asarray(x))
        assert out.dtype == dtype
        assert float(out) == pytest.approx(exact, rel=4 * float(ml_dtypes.finfo(dtype).eps))
    for g in (rune.grad(loss)(nx.asarray(w), nx.asarray(x)),
              rune.jit(rune.grad(loss))(nx.asarray(w), nx.asarray(x))):
        assert g.dtype == dtype and g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g).astype(F64), want,
                                   atol=8 * float(ml_dtypes.finfo(dtype).eps) * np.abs(want).max())
