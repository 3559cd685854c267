"""Every op of the op table (tests/op_table.py) under jit, vmap, jvp and vjp.

- jit: the compiled plan gives the eager result (same dtype, same values) with
  the shapes and dtypes of its traced program.
- vmap: mapping over a stacked batch gives the per-lane results of a Python loop,
  for every layout (ranks, unit and empty axes, static arguments) and every dtype
  combination of each op's samples (`covering`: samples that repeat both are left out).
- jvp: the tangent matches central finite differences along random directions
  (float64 samples of differentiable ops).
- vjp: <v, J u> computed by the pullback equals the one computed by jvp, for a
  non-uniform cotangent v: reverse mode agrees with forward mode and so with
  the finite differences.
- second order: Hessian-vector products (jvp of grad) against finite
  differences of the gradient, for a representative subset.
"""
import zlib

import numpy as np
import pytest

import rune
from rune import nx

from compiled import assert_compiled_where_lowerable
from op_table import F64, TABLE, assert_traced_avals, is_inexact, is_precise, widest


def to_rune(args):
    return [nx.asarray(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in args]


def _rng(*parts):
    return np.random.default_rng(zlib.crc32("/".join(parts).encode()))


def _samples(select=lambda case, sample: True):
    return [pytest.param(c, s, id=f"{c.name}:{s.id}") for c in TABLE for s in c.samples
            if not s.bug and select(c, s)]


def _close(case, got, want):
    if isinstance(want, (list, tuple)):  # split, broadcast_arrays
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            _close(case, g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if is_inexact(want.dtype):
        rtol, atol = case.tolerance(want.dtype)
        wide = widest(want.dtype)
        np.testing.assert_allclose(got.astype(wide), want.astype(wide), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- jit

@pytest.fixture(scope="module")
def compiled_table():
    """Plan every jit case first and compile all their kernels in a few batched
    compiler runs (one run per test would cost ~0.1 s each)."""
    from rune.backends import compile_pending
    plans = []  # held until compiled: a plan nobody holds is not compiled
    for param in _samples():
        case, sample = param.values
        try:
            plans.append(rune.jit(lambda *a: case.fn(*a, **sample.kwargs)).plan(*to_rune(sample.args)))
        except Exception:
            pass  # the test itself reports it
    compile_pending()


def _as_jit_sees(args):
    """The arguments as a jitted function sees them: a Python float argument is a
    weak float32 value there (rounded at the call, as JAX's without x64), where an
    eager op takes the exact literal (int32 + 0.8 computes in float64)."""
    return [float(np.float32(a)) if type(a) is float else a for a in args]


@pytest.mark.parametrize("case,sample", _samples())
def test_jit_matches_eager(case, sample, compiled_table):
    args = to_rune(sample.args)
    eager = case.fn(*_as_jit_sees(args), **sample.kwargs)
    fn = lambda *a: case.fn(*a, **sample.kwargs)  # noqa: E731
    if not case.traced:  # a data-dependent shape: refused under jit, pointing to where/size=
        with pytest.raises(rune.ConcretizationError, match="where"):
            rune.jit(fn)(*args)
        return
    jf = rune.jit(fn)
    compiled = jf(*args)
    assert_traced_avals(fn, args, compiled, "jit")
    _close(case, compiled, eager)
    assert_compiled_where_lowerable(jf.plan(*args))


# ---------------------------------------------------------------- vmap

def _has_array(case, sample):
    return any(isinstance(a, np.ndarray) for a in sample.args)


def _lanes(a):
    """Three lanes made of `a`'s own values (so index arguments stay in range)."""
    return [a, np.flip(a).copy(), np.roll(a, 1)]


def vmap_features(case, sample):
    """What vmapping `sample` checks: a batching rule sees each argument's rank, unit
    and empty axes and the static arguments (the layout), and the dtypes only through
    promotion (the dtype combination). Two samples alike in both check the same thing."""
    def dtype(a):
        return a.dtype.name if isinstance(a, (np.ndarray, np.generic)) else type(a).__name__

    def layout(a):
        return a.shape if isinstance(a, np.ndarray) else "scalar"
    static = repr(sorted(sample.kwargs.items()))
    return {(case.name, "dtypes", tuple(map(dtype, sample.args)), static),
            (case.name, "layout", tuple(map(layout, sample.args)), static)}


def covering(params, features):
    """The params, in order, that each add a feature none before them has: every
    feature of the whole list stays checked, repeats of the same check go."""
    seen, kept = set(), []
    for p in params:
        new = features(*p.values) - seen
        if new:
            seen |= new
            kept.append(p)
    return kept


VMAP = covering(_samples(lambda c, s: c.traced and _has_array(c, s)), vmap_features)
VMAP_EVERY = covering(_samples(lambda c, s: c.traced and sum(isinstance(a, np.ndarray) for a in s.args) > 1),
                      vmap_features)


def test_the_vmap_samples_cover_every_layout_and_dtype_combination_of_the_table():
    for selected, full in ((VMAP, _samples(lambda c, s: c.traced and _has_array(c, s))),
                           (VMAP_EVERY, _samples(lambda c, s: c.traced and
                                                 sum(isinstance(a, np.ndarray) for a in s.args) > 1))):
        everything = set().union(*(vmap_features(*p.values) for p in full))
        checked = set().union(*(vmap_features(*p.values) for p in selected))
        assert checked == everything
        assert {p.values[0].name for p in selected} == {p.values[0].name for p in full}
        assert len(selected) < len(full)


@pytest.mark.parametrize("case,sample", VMAP)
def test_vmap_matches_a_loop(case, sample):
    args = list(sample.args)
    k = next(i for i, a in enumerate(args) if isinstance(a, np.ndarray))
    lanes = _lanes(args[k])

    def f(x):
        full = to_rune(args)
        full[k] = x
        return case.fn(*full, **sample.kwargs)

    want = _stack([f(nx.asarray(lane)) for lane in lanes])
    batch = np.stack(lanes)
    _close(case, rune.vmap(f)(nx.asarray(batch)), want)
    if batch.ndim > 1:  # the mapped axis last, results mapped to the last axis
        moved = np.moveaxis(batch, 0, -1)
        got = rune.vmap(f, in_axes=-1, out_axes=-1)(nx.asarray(moved))
        _close(case, got, rune.tree.map(lambda w: np.moveaxis(w, 0, -1) if w.ndim > 1 else w, want))


@pytest.mark.parametrize("case,sample", VMAP_EVERY)
def test_vmap_of_every_array_argument_matches_a_loop(case, sample):
    mapped = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
    lanes = {i: _lanes(sample.args[i]) for i in mapped}

    def f(*xs):
        full = to_rune(sample.args)
        for i, x in zip(mapped, xs):
            full[i] = x
        return case.fn(*full, **sample.kwargs)

    want = _stack([f(*[nx.asarray(lanes[i][b]) for i in mapped]) for b in range(3)])
    got = rune.vmap(f)(*[nx.asarray(np.stack(lanes[i])) for i in mapped])
    _close(case, got, want)


def _stack(results):
    """Per-lane results (arrays, or lists of arrays) stacked along a new leading axis."""
    if isinstance(results[0], (list, tuple)):
        return [np.stack([np.asarray(r[j]) for r in results]) for j in range(len(results[0]))]
    return np.stack([np.asarray(r) for r in results])


# ---------------------------------------------------------------- derivatives

def _as_function(case, sample):
    args = to_rune(sample.args)

    def f(*diff):
        full = list(args)
        for i, d in zip(case.diff_argnums, diff):
            full[i] = d
        return case.fn(*full, **sample.kwargs)

    return f, [args[i] for i in case.diff_argnums]


def _differentiable(case, sample):
    """Float64 samples of differentiable ops where a derivative exists to compare:
    finite inputs and outputs, float outputs, away from jumps the table marks."""
    if not (case.grad and sample.fd and all(
            i < len(sample.args) and isinstance(sample.args[i], np.ndarray) and is_precise(sample.args[i].dtype)
            for i in case.diff_argnums)):
        return False
    if case.name == "std" and sample.args[0].size == 1:
        return False  # the std of one element is sqrt(0): no derivative (nan, as in JAX)
    f, primals = _as_function(case, sample)
    outs = rune.tree.leaves(f(*primals))
    return (all(np.isfinite(np.asarray(p)).all() for p in primals)
            and all(is_inexact(o.dtype) and np.isfinite(np.asarray(o)).all() for o in outs))


# Finite-difference step and tolerance by output dtype (the output's precision
# bounds how well a difference quotient can be computed).
FD = {"float64": (1e-6, 1e-5), "float32": (1e-3, 2e-3), "float16": (0.1, 0.1), "bfloat16": (0.1, 0.1),
      "complex128": (1e-6, 1e-5)}


def _direction(rng, like):
    """A random direction shaped like `like`: complex (both parts) for complex values."""
    u = rng.standard_normal(like.shape)
    if like.dtype.kind == "c":
        u = u + 1j * rng.standard_normal(like.shape)
    return np.asarray(u).astype(like.dtype)


def _pairing(a, b):
    """sum(a * b), real part: the pairing under which JAX's complex VJP (a transpose,
    never conjugated) is the adjoint of the JVP."""
    return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


def _finite_difference(f, primals, us, eps):
    plus = rune.tree.leaves(f(*[p + eps * u for p, u in zip(primals, us)]))
    minus = rune.tree.leaves(f(*[p - eps * u for p, u in zip(primals, us)]))
    return [(np.asarray(a).astype(widest(a.dtype)) - np.asarray(b).astype(widest(a.dtype))) / (2 * eps)
            for a, b in zip(plus, minus)]


@pytest.mark.parametrize("case,sample", _samples(_differentiable))
def test_jvp_and_vjp_match_finite_differences(case, sample):
    f, primals = _as_function(case, sample)
    out = f(*primals)
    out_leaves = rune.tree.leaves(out)
    rng = _rng(case.name, sample.id)
    eps, tol = FD[out_leaves[0].dtype.name]
    for _ in range(2):
        us = [nx.asarray(_direction(rng, p)) for p in primals]
        _, tangent = rune.jvp(f, primals, us)
        for t, fd in zip(rune.tree.leaves(tangent), _finite_difference(f, primals, us, eps)):
            np.testing.assert_allclose(np.asarray(t).astype(widest(t.dtype)), fd, rtol=tol, atol=tol)

        vs = [nx.asarray(_direction(rng, o)) for o in out_leaves]
        _, pullback = rune.vjp(f, *primals)
        cts = pullback(rune.tree.unflatten(rune.tree.structure(out), vs))
        assert len(cts) == len(primals)
        for c, p in zip(cts, primals):
            assert c.shape == p.shape and c.dtype == p.dtype
        forward = sum(_pairing(v, t) for v, t in zip(vs, rune.tree.leaves(tangent)))
        reverse = sum(_pairing(c, u) for c, u in zip(cts, us))
        agree = 1e-9 if is_precise(out_leaves[0].dtype) else tol  # rounding of lower-precision outputs
        assert reverse == pytest.approx(forward, rel=agree, abs=agree)


SECOND_ORDER = {"exp", "log", "sin", "tanh", "sqrt", "sigmoid", "multiply", "divide", "power",
                "logsumexp", "softmax", "matmul", "prod", "max", "var", "einsum"}


def _second_order(case, sample):
    # Real samples only: the scalar below is real-valued only for real outputs.
    return (case.name in SECOND_ORDER and _differentiable(case, sample)
            and all(sample.args[i].dtype == F64 for i in case.diff_argnums))


@pytest.mark.parametrize("case,sample", _samples(_second_order))
def test_hessian_vector_products_match_finite_differences(case, sample):
    f, primals = _as_function(case, sample)
    rng = _rng("hvp", case.name, sample.id)
    out = f(*primals)
    w = nx.asarray(rng.standard_normal(out.shape))
    scalar = lambda *p: nx.sum(f(*p) * w)  # noqa: E731
    grad = rune.grad(scalar, argnums=tuple(range(len(primals))))
    us = [nx.asarray(rng.standard_normal(p.shape)) for p in primals]
    _, hvp = rune.jvp(grad, primals, us)
    eps = 1e-5
    plus = grad(*[p + eps * u for p, u in zip(primals, us)])
    minus = grad(*[p - eps * u for p, u in zip(primals, us)])
    for h, a, b in zip(hvp, plus, minus):
        np.testing.assert_allclose(np.asarray(h), (np.asarray(a) - np.asarray(b)) / (2 * eps),
                                   rtol=1e-5, atol=1e-6)
