"""The kernel compiler: jit stretches run as fused C kernels with eager's results.

The oracle is the eager NumPy backend (every primitive bound outside jit).
Integer and boolean results are bit-exact; correctly rounded float operations
(+ - * / sqrt, comparisons, casts, min/max, floor/ceil/round, floordiv/rem)
are bit-exact too, float16/bfloat16 included (each operation rounds to its
format as eager does); transcendental functions use libm / libmvec (<= 4 ulp)
where NumPy uses its own SIMD routines, so they are compared within 8 ulp of
the result's dtype.
"""
import functools
import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rune
from rune import nx
from rune.core.prims import BINARY, COMPARE, P, PREDICATE, UNARY
from rune.core.trace import bind
from rune.compiler import fuse
from rune.backends.stretch import CompiledStretch, compile_pending

from compiled import assert_compiled_where_lowerable, numpy_stretches, precompiled

BF16 = np.dtype(ml_dtypes.bfloat16)
pytestmark = pytest.mark.cc
INTS = [np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")]
FLOATS = [np.dtype("float16"), BF16, np.dtype("float32"), np.dtype("float64")]
ALL = [np.dtype(bool)] + INTS + FLOATS
EXACT_FLOAT_OPS = {"neg", "abs", "sqrt", "floor", "ceil", "round", "sign", "add", "sub", "mul",
                   "div", "floordiv", "rem", "max", "min", "stop_gradient", "rsqrt"}
ULPS = 8
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository


def _values(dtype, shape, rng):
    """Samples with the edge cases of `dtype`: NaN, infinities, -0.0, extremes, halves."""
    n = int(np.prod(shape))
    if dtype == np.dtype(bool):
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        special = [v for v in (0, 1, -1, 2, -2, 7, -7, info.min, info.max, info.min + 1, 3, 100)
                   if info.min <= v <= info.max]
        special = np.array(special, dtype=dtype)
        vals = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
        pick = rng.random(n) < 0.5
        vals[pick] = rng.choice(special, size=int(pick.sum()))
        return vals.reshape(shape)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0,
                        1e30, -1e30, 65504.0, 3e9, -7.25, 1e-5])
    vals = rng.standard_normal(n) * rng.choice([1, 10, 1000], size=n)
    pick = rng.random(n) < 0.4
    vals[pick] = rng.choice(special, size=int(pick.sum()))
    with np.errstate(all="ignore"):
        return vals.astype(dtype).reshape(shape)


def _close(got, want, exact):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind not in "fV" and want.dtype != BF16 or exact:
        if want.dtype.kind in "fV" or want.dtype == BF16:
            g, w = got.astype(np.float64), want.astype(np.float64)
            same = (g == w) | (np.isnan(g) & np.isnan(w))
            assert same.all() and (np.signbit(g) == np.signbit(w))[~np.isnan(w)].all(), (
                f"not bit-exact:\n got {got[~same]}\nwant {want[~same]}")
        else:
            np.testing.assert_array_equal(got, want)
        return
    eps = float(ml_dtypes.finfo(want.dtype).eps)
    tiny = float(ml_dtypes.finfo(want.dtype).smallest_normal)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=ULPS * eps, atol=ULPS * tiny, equal_nan=True)


def _compiled_plan(jf, *args):
    plan = jf.plan(*args)
    assert plan.kernels, f"no C kernel in the plan:\n{plan!r}"
    assert all(k.target == "c" for k in plan.kernels)
    assert_compiled_where_lowerable(plan)
    return plan


# ---------------------------------------------------------------- every elementwise primitive, every dtype

def _cases():
    out = []
    for name in UNARY + PREDICATE:
        for dt in ALL:
            out.append((name, (dt,)))
    for name in BINARY + COMPARE:
        for dt in ALL:
            out.append((name, (dt, dt)))
    for dt in ALL:
        out.append(("select", (np.dtype(bool), dt, dt)))
    for src in ALL:
        for dst in ALL:
            out.append(("convert", (src, dst)))
    return out


def _bind(name, args, dst=None):
    if name == "convert":
        return bind(P["convert"], args[0], dtype=dst)
    return bind(P[name], *args)


def _eager_or_none(name, arrays, dst):
    try:
        with np.errstate(all="ignore"):
            return _bind(name, arrays, dst)
    except Exception:
        return None


@pytest.fixture(scope="module")
def elementwise_plans():
    """Every (primitive, dtypes) case eager can run, planned under jit, then compiled in batches."""
    rng = np.random.default_rng(0)
    built = []
    for name, dts in _cases():
        dst = dts[1] if name == "convert" else None
        ins = dts[:1] if name == "convert" else dts
        shapes = [(4, 33), (33,), (4, 1)][:len(ins)]
        raws = [_values(dt, s, rng) for dt, s in zip(ins, shapes)]
        arrays = [nx.asarray(r) for r in raws]
        want = _eager_or_none(name, arrays, dst)
        if want is None:
            continue
        jf = rune.jit(lambda *a, name=name, dst=dst: _bind(name, a, dst))
        plan = jf.plan(*arrays)
        built.append((name, dts, jf, arrays, want, plan))
    compile_pending()
    return built


def test_every_elementwise_primitive_and_dtype_matches_eager(elementwise_plans):
    compiled_ops = set()
    for name, dts, jf, arrays, want, plan in elementwise_plans:
        got = jf(*arrays)
        exact = name in EXACT_FLOAT_OPS or name == "convert" or name in COMPARE or name == "select"
        try:
            _close(got, want, exact)
        except AssertionError as e:
            raise AssertionError(f"{name} on {[d.name for d in dts]}: {e}\n{plan!r}") from None
        assert_compiled_where_lowerable(plan)
        if plan.kernels:
            compiled_ops.add(name)
    # every elementwise primitive goes through the compiler for at least its common dtypes
    assert compiled_ops >= set(UNARY + BINARY + COMPARE + PREDICATE + ("select", "convert")), (
        set(UNARY + BINARY + COMPARE + PREDICATE) - compiled_ops)


def test_lowered_dtypes_cover_the_table(elementwise_plans):
    lowered = {(n, tuple(d.name for d in dts)) for n, dts, *_, plan in elementwise_plans if plan.kernels}
    # all 13 dtypes, through arithmetic and casts in both directions
    for dt in ALL:
        assert ("convert", (dt.name, "float32")) in lowered and ("convert", ("float32", dt.name)) in lowered
        assert ("max", (dt.name, dt.name)) in lowered and ("eq", (dt.name, dt.name)) in lowered


# ---------------------------------------------------------------- the semantic traps, one by one

FLOAT_NAMES = ["float32", "float64", "float16", "bfloat16"]
INT_NAMES = [d.name for d in INTS]


def _run(fn, *raws):
    arrays = [nx.asarray(r) for r in raws]
    jf = rune.jit(fn)
    _compiled_plan(jf, *arrays)
    with np.errstate(all="ignore"):
        want = fn(*arrays)
    got = jf(*arrays)
    return np.asarray(got), np.asarray(want)


def _binary(op):
    return lambda x, y: bind(P[op], x, y)


def _convert(dst):
    return lambda v: bind(P["convert"], v, dtype=dst)


def _max_min_inputs(dt):
    return (np.array([np.nan, 1.0, -0.0, 0.0, np.nan, 2.0], dt),
            np.array([1.0, np.nan, 0.0, -0.0, np.nan, -np.inf], dt))


def _int_div_inputs(dt):
    info = np.iinfo(dt)
    a = np.array([7, info.max, 0, info.min, 5, 6, info.min, 100] * 3, dt)
    b = np.array([0, 0, 0, 0, 3, 4, 1, 7] * 3, dt)
    if info.min < 0:
        a[-8:] = np.array([-7, 7, -7, info.min, -1, 5, info.min, -100], dt)
        b[-8:] = np.array([2, -2, -2, -1, -1, -3, 0, 7], dt)
    return a, b


def _float_div_inputs(dt):
    return (np.array([7.5, -7.5, 7.5, -7.5, 1.0, -1.0, 0.0, -0.0, np.inf, 5.0, np.nan, 3.0], dt),
            np.array([2.0, 2.0, -2.0, -2.0, 0.0, 0.0, 0.0, 3.0, 2.0, np.inf, 1.0, -0.0], dt))


def _float_to_int_input(src):
    vals = np.array([np.nan, -np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 300.7, -300.7,
                     70000.0, -70000.0, 5e9, 2.5, -2.5, 0.0] * 4, np.float64)
    with np.errstate(all="ignore"):
        return vals.astype(src)


def _shift_inputs(dt):
    bits = 8 * np.dtype(dt).itemsize
    info = np.iinfo(dt)
    a = np.array([1, 1, 1, info.max, info.min, info.min, 5, 5] * 2, dt)
    amounts = [0, bits - 1, bits, bits + 3, 1, bits, 2, min(100, info.max)]
    b = np.array(amounts * 2, dt)
    if info.min < 0:
        b[-1] = -1
    return a, b


def _trap_calls():
    """(function, raw arguments) of every trap test's jitted call."""
    for dt in FLOAT_NAMES:
        for op in ("max", "min"):
            yield _binary(op), _max_min_inputs(dt)
        for op in ("floordiv", "rem"):
            yield _binary(op), _float_div_inputs(dt)
        for dst in INTS:
            yield _convert(dst), (_float_to_int_input(dt),)
    for dt in INT_NAMES:
        for op in ("floordiv", "rem"):
            yield _binary(op), _int_div_inputs(dt)
        for op in ("shift_left", "shift_right"):
            yield _binary(op), _shift_inputs(dt)


@pytest.mark.parametrize("dt", FLOAT_NAMES)
def test_max_min_propagate_nan_and_order_signed_zeros_as_numpy(dt):
    for op in ("max", "min"):
        got, want = _run(_binary(op), *_max_min_inputs(dt))
        _close(got, want, True)
        assert np.isnan(got.astype(np.float64)[[0, 1, 4]]).all()


@pytest.mark.parametrize("dt", INT_NAMES)
def test_integer_division_and_remainder_by_zero_and_signs(dt):
    for op in ("floordiv", "rem"):
        got, want = _run(_binary(op), *_int_div_inputs(dt))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", FLOAT_NAMES)
def test_float_floordiv_and_remainder_have_python_signs(dt):
    for op in ("floordiv", "rem"):
        got, want = _run(_binary(op), *_float_div_inputs(dt))
        _close(got, want, True)


@pytest.mark.parametrize("src", FLOAT_NAMES)
def test_float_to_int_casts_of_nan_inf_and_out_of_range_match_eager(src):
    x = _float_to_int_input(src)
    for dst in INTS:
        got, want = _run(_convert(dst), x)
        np.testing.assert_array_equal(got, want, err_msg=f"{src} -> {dst}")
        if dst == np.dtype("int32"):
            assert got[0] == 0  # NaN -> 0 X, not x86's INT32_MIN


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 1e300, np.nan, -0.0], np.float64)
    got, want = _run(lambda v: bind(P["round"], v), x)
    _close(got, want, True)
    np.testing.assert_array_equal(got[:7], [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 4.0])


def test_bfloat16_and_float16_round_to_nearest_even_on_every_operation():
    rng = np.random.default_rng(3)
    a32 = (rng.standard_normal(4096) * 100).astype(np.float32)
    b32 = (rng.standard_normal(4096) * 100).astype(np.float32)
    for dt in ("bfloat16", "float16"):
        a, b = a32.astype(dt), b32.astype(dt)
        got, want = _run(lambda x, y: (x * y + x) / (y - 1.0) - x * x, a, b)
        _close(got, want, True)
    # ties: 1 + 2**-8 is halfway between two bfloat16 values and rounds to the even one
    x = np.array([1.00390625, 1.01171875, 3.4e38, np.nan], np.float32)
    got, want = _run(lambda v: bind(P["convert"], v, dtype=BF16), x)
    assert got.view(np.uint16).tolist()[:3] == want.view(np.uint16).tolist()[:3] == [16256, 16258, 32640]


@pytest.mark.parametrize("dt", INT_NAMES)
def test_shifts_wider_than_the_type(dt):
    for op in ("shift_left", "shift_right"):
        got, want = _run(_binary(op), *_shift_inputs(dt))
        np.testing.assert_array_equal(got, want)


def test_negative_zero_survives_fusion():
    x = np.array([-0.0, 0.0, -1.0], np.float32)
    got, want = _run(lambda v: v * 0.0 - 0.0, x)
    _close(got, want, True)
    assert np.signbit(got[0]) and np.signbit(got[2])


# ---------------------------------------------------------------- fusion and movement

def test_elementwise_chain_fuses_into_one_kernel_with_broadcasting():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    row = np.arange(6, dtype=np.float32)
    f = lambda x, r: nx.sin(x) * nx.exp(-x * x) + 0.5 * nx.tanh(x) - x / (1 + x * x) + r
    jf = rune.jit(f)
    plan = _compiled_plan(jf, nx.asarray(x), nx.asarray(row))
    assert len(plan.kernels) == 1, plan
    _close(jf(nx.asarray(x), nx.asarray(row)), f(nx.asarray(x), nx.asarray(row)), False)


@st.composite
def _broadcast_case(draw):
    """An output shape, three operand shapes that broadcast to (a suffix of) it, with
    unit axes and fewer axes (0-d included; None: a Python scalar), and where the
    first is broadcast explicitly: "none", "input" (the argument) or "computed"."""
    out = tuple(draw(st.lists(st.integers(1, 4), max_size=4)))
    shapes = []
    for k in range(3):
        form = draw(st.sampled_from(["array", "array", "0-d"] + (["scalar"] if k else [])))
        if form == "scalar":
            shapes.append(None)
            continue
        rank = 0 if form == "0-d" else draw(st.integers(0, len(out)))
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in out[len(out) - rank:]))
    return out, shapes, draw(st.sampled_from(["none", "input", "computed"]))


def _broadcast_fn(out, shapes, explicit, xp):
    """(a, b, c) -> (a * 2 + 1) * b - c, with a broadcast to `out` as asked, over the
    array operands (the scalar ones are Python floats)."""
    def f(*arrays):
        it = iter(arrays)
        a, b, c = (next(it) if s is not None else 1.5 + k for k, s in enumerate(shapes))
        if explicit == "input":
            a = xp.broadcast_to(a, out)
        t = a * 2.0 + 1.0   # a computed value with a's unit axes
        if explicit == "computed":
            t = xp.broadcast_to(t, out)
        return t * b - c
    return f


@settings(max_examples=12, deadline=None)
@given(st.lists(_broadcast_case(), min_size=4, max_size=4))
def test_compiled_broadcasts_match_numpy(cases):
    # Operands with leading and inner unit axes, scalars and 0-d arrays meeting in
    # higher ranks, and values (inputs or computed) broadcast into them, compiled
    # (every op in a C kernel) and compared with NumPy's own broadcasting.
    runs = []
    for out, shapes, explicit in cases:
        raws = [np.arange(int(np.prod(s)), dtype=np.float32).reshape(s) * (k + 1) - 3 * k
                for k, s in enumerate(shapes) if s is not None]
        jf = rune.jit(_broadcast_fn(out, shapes, explicit, nx))
        arrays = [nx.asarray(r) for r in raws]
        plan = _compiled_plan(jf, *arrays)
        assert not numpy_stretches(plan), plan
        runs.append((jf, arrays, raws, out, shapes, explicit, plan))
    compile_pending()   # the four cases in one compiler run
    for jf, arrays, raws, out, shapes, explicit, plan in runs:
        want = _broadcast_fn(out, shapes, explicit, np)(*raws)
        got = np.asarray(jf(*arrays))
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, plan)
        np.testing.assert_array_equal(got, want, err_msg=f"{out} {shapes} {explicit}\n{plan!r}")


def test_movement_ops_are_index_arithmetic_on_loads():
    x = np.arange(60, dtype=np.int32).reshape(3, 4, 5)

    def f(x):
        t = nx.transpose(x, (2, 0, 1))[:, ::2, ::-1]     # strided, reversed view
        return t * 3 + nx.flip(t, axis=0) + nx.broadcast_to(x[0, 0, :5].reshape(5, 1, 1), t.shape)

    jf = rune.jit(f)
    plan = _compiled_plan(jf, nx.asarray(x))
    assert len(plan.kernels) == 1, plan
    np.testing.assert_array_equal(np.asarray(jf(nx.asarray(x))), np.asarray(f(nx.asarray(x))))


def test_movement_of_a_computed_value_and_reshape_of_a_view():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    f = lambda x: (nx.transpose(x * 2.0) + 1.0).reshape(3, 8) - nx.transpose(x).reshape(3, 8)
    jf = rune.jit(f)
    _compiled_plan(jf, nx.asarray(x))
    _close(jf(nx.asarray(x)), f(nx.asarray(x)), True)


def test_pad_is_a_guarded_load_through_other_movement_and_reductions():
    x = nx.asarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    cases = [lambda v: nx.pad(v, ((1, 2), (0, 3)), constant_values=-1) * 2,
             lambda v: nx.sum(nx.pad(v, ((1, 0), (2, 2)), constant_values=5), axis=1),
             lambda v: nx.pad(v, 1)[::-1, 1:5:2].T + 1,
             lambda v: nx.broadcast_to(nx.pad(v, ((0, 0), (1, 1)))[:, ::3], (2, 3, 2))]
    jitted = [rune.jit(f) for f in cases]
    for jf in jitted:
        plan = _compiled_plan(jf, x)
        assert len(plan.kernels) == 1 and not numpy_stretches(plan), plan
    g = rune.jit(rune.grad(lambda u: nx.sum(u[1:, ::2] ** 2)))   # slice's VJP pads
    u = nx.asarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    assert not numpy_stretches(g.plan(u))
    compile_pending()   # every case's kernels in one compiler run
    for f, jf in zip(cases, jitted):
        np.testing.assert_array_equal(np.asarray(jf(x)), np.asarray(f(x)))
    np.testing.assert_array_equal(np.asarray(g(u)), np.asarray(rune.grad(lambda u: nx.sum(u[1:, ::2] ** 2))(u)))


def test_concatenate_adds_guarded_loads_exactly():
    x = nx.asarray(np.array([[-0.0, 1, np.nan], [2, -3, np.inf]], np.float32))
    y = nx.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    cases = [lambda a, b: nx.concatenate([a, b], axis=0) * 2,
             lambda a, b: nx.concatenate([a, b * 2, a], axis=1),
             lambda a, b: nx.sum(nx.concatenate([a, b], axis=1), axis=1),
             lambda a, b: nx.concatenate([a[:, :0], b], axis=1),
             lambda a, b: nx.concatenate([nx.pad(a, 1), nx.pad(b, 1)], axis=0).T]
    jitted = [rune.jit(f) for f in cases]
    for jf in jitted:
        plan = _compiled_plan(jf, x, y)
        assert not numpy_stretches(plan), plan
    compile_pending()   # every case's kernels in one compiler run
    for f, jf in zip(cases, jitted):
        _close(jf(x, y), f(x, y), True)   # -0.0, NaN and inf kept exactly


def test_unlowered_primitives_split_the_stretch_with_identical_results():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    f = lambda x: nx.exp(nx.argsort(nx.sin(x) * 2.0, axis=1).astype(nx.float32)) + 1.0
    jf = rune.jit(f)
    plan = _compiled_plan(jf, nx.asarray(x))
    assert numpy_stretches(plan), "argsort runs on NumPy"
    _close(jf(nx.asarray(x)), f(nx.asarray(x)), False)


# ---------------------------------------------------------------- reductions

REDUCTIONS = ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"]


def _reduction_cases(op):
    """(dtype, shape, axes, raw input, function) of every case of `op`."""
    rng = np.random.default_rng(5)
    for dt in ALL:
        for shape, axes in [((5, 7), (1,)), ((5, 7), (0,)), ((3, 4, 6), (0, 2)), ((129,), (0,)),
                            ((2, 0, 3), (1,)), ((4, 3), (0, 1))]:
            if op in ("reduce_max", "reduce_min") and 0 in [shape[a] for a in axes]:
                continue
            raw = _values(dt, shape, rng)
            if op == "reduce_prod" and dt.kind == "f":
                raw = np.where(np.abs(raw.astype(np.float64)) > 4, 1.5, raw).astype(dt)
            yield dt, shape, axes, raw, lambda v, dt=dt, axes=axes: bind(P[op], v * v if dt != np.dtype(bool) else v,
                                                                         axes=axes)


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions_of_every_dtype_match_eager(op):
    cases = []
    for dt, shape, axes, raw, fn in _reduction_cases(op):
        jf = rune.jit(fn)
        _compiled_plan(jf, nx.asarray(raw))
        cases.append((dt, shape, axes, raw, fn, jf))
    compile_pending()   # one batched compiler run for every case (none left when precompiled)
    for dt, shape, axes, raw, fn, jf in cases:
        with np.errstate(all="ignore"):
            want = np.asarray(fn(nx.asarray(raw)))
        got = np.asarray(jf(nx.asarray(raw)))
        exact = dt.kind not in "fV" and dt != BF16 or op in ("reduce_max", "reduce_min")
        if exact:
            g, w = got.astype(np.float64), want.astype(np.float64)
            assert ((g == w) | (np.isnan(g) & np.isnan(w))).all(), (op, dt, shape, axes, got, want)
        else:  # the summation order differs from NumPy's pairwise sums
            eps = float(ml_dtypes.finfo(dt).eps)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=4 * eps * max(shape), atol=eps, equal_nan=True,
                                       err_msg=f"{op} {dt} {shape} {axes}")


def test_reduction_absorbs_prologue_and_epilogue_in_one_kernel():
    x = nx.asarray(np.linspace(-2, 2, 4096, dtype=np.float32).reshape(64, 64))
    f = lambda v: nx.sqrt(nx.sum(v * v, axis=1)) * 2.0 + 1.0
    jf = rune.jit(f)
    plan = _compiled_plan(jf, x)
    assert len(plan.kernels) == 1, plan
    _close(jf(x), f(x), False)


def test_sibling_reductions_share_one_pass():
    x = nx.asarray(np.random.default_rng(1).standard_normal((32, 50)).astype(np.float64))
    f = lambda v: (nx.sum(v, axis=0), nx.sum(v * v, axis=0), nx.max(v, axis=0))
    jf = rune.jit(f)
    plan = _compiled_plan(jf, x)
    assert len(plan.kernels) == 1, plan
    for g, w in zip(jf(x), f(x)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-13)


def test_softmax_mean_and_var_compile_and_match():
    x = nx.asarray(np.random.default_rng(2).standard_normal((16, 300)).astype(np.float32))

    def softmax(v):
        e = nx.exp(v - nx.max(v, axis=1, keepdims=True))
        return e / nx.sum(e, axis=1, keepdims=True)

    cases = (softmax, lambda v: (nx.mean(v, axis=0), nx.var(v, axis=1), nx.sum(v * v)))
    jitted = [rune.jit(f) for f in cases]
    for jf in jitted:
        _compiled_plan(jf, x)
    compile_pending()   # both in one compiler run
    for f, jf in zip(cases, jitted):
        got, want = jf(x), f(x)
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)


def test_max_of_nothing_raises_as_eager():
    x = nx.asarray(np.zeros((3, 0), np.float32))
    with pytest.raises(Exception) as eager:
        nx.max(x, axis=1)
    with pytest.raises(type(eager.value)):
        rune.jit(lambda v: nx.max(v, axis=1))(x)


def test_outputs_are_fresh_arrays_and_intermediates_do_not_leak():
    jf = rune.jit(lambda x: (x + 1.0, (x + 1.0) * 2.0))
    x = nx.asarray(np.ones((5,), np.float32))
    a1, b1 = jf(x)
    a2, b2 = jf(x)
    assert np.asarray(a1).ctypes.data != np.asarray(a2).ctypes.data
    np.testing.assert_array_equal(np.asarray(b1), np.full(5, 4.0, np.float32))


def test_size_zero_and_size_one_axes():
    f = lambda v: nx.sqrt(v) * 2.0 + v
    jf = rune.jit(f)
    xs = [nx.asarray(np.ones(shape, np.float32)) for shape in [(0,), (3, 0), (1, 1), (1, 5), ()]]
    for x in xs:
        jf.plan(x)
    compile_pending()   # every shape's kernels in one compiler run
    for x in xs:
        _close(jf(x), f(x), True)


def test_scan_body_is_compiled():
    xs = nx.asarray(np.arange(6, dtype=np.float64))
    f = lambda xs: rune.scan(lambda c, x: (c * 0.5 + nx.sin(x), c), 0.0, xs)
    jf = rune.jit(f)
    assert jf.plan(xs).kernels
    got, want = jf(xs), f(xs)
    _close(got[0], want[0], False)
    _close(got[1], want[1], False)


# ---------------------------------------------------------------- inspection

def test_plan_prints_each_kernel_source_and_lists_kernels():
    jf = rune.jit(lambda x: nx.sin(x) * 2.0 + 1.0)
    plan = jf.plan(nx.asarray(np.ones(8, np.float32)))
    text = repr(plan)
    k, = plan.kernels
    assert k.target == "c" and k.name in text
    assert all(line.strip() in text for line in k.source.splitlines())
    assert "sinf(" in k.source and "#pragma omp" in k.source


# ---------------------------------------------------------------- fallback, compiler choice and errors

def _script(body, **env):
    code = "import json, numpy as np, rune\nfrom rune import nx\n" + textwrap.dedent(body)
    e = dict(os.environ, **env)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


_W1 = """
f = rune.jit(lambda x: nx.sin(x) * nx.exp(-x * x) + 0.5 * nx.tanh(x) - x / (1 + x * x))
x = nx.asarray(np.linspace(-4, 4, 1000, dtype=np.float32))
y = np.asarray(f(x))
print(json.dumps({"stats": rune.stats(), "kernels": len(f.plan(x).kernels), "y": y[::97].tolist()}))
"""


def test_second_process_compiles_nothing_and_corrupt_entries_are_rebuilt(tmp_path):
    env = {"RUNE_CACHE_DIR": str(tmp_path), "RUNE_CACHE": "1"}
    first = _script(_W1, **env)
    # two compiler runs: the kernel, then the math library's sin, exp and tanh that it
    # calls (rune/backends/cpu/math_library.py), four units in the cache
    assert first["stats"]["kernels_compiled"] == 2 and first["kernels"] == 1
    second = _script(_W1, **env)
    assert second["stats"]["kernels_compiled"] == 0 and second["stats"]["disk_cache_hits"] == 4
    assert second["y"] == first["y"]
    kdir = tmp_path / "kernels"
    for lib in kdir.glob("lib-*.so"):
        lib.write_bytes(lib.read_bytes()[:100])      # truncated library
    third = _script(_W1, **env)
    assert third["stats"]["kernels_compiled"] == 2 and third["y"] == first["y"]
    for entry in kdir.glob("*.json"):
        entry.write_text("{not json")                 # corrupt entry
    fourth = _script(_W1, **env)
    assert fourth["stats"]["kernels_compiled"] == 2 and fourth["y"] == first["y"]


def test_two_processes_racing_on_one_cold_key_both_succeed(tmp_path):
    env = dict(os.environ, RUNE_CACHE_DIR=str(tmp_path), RUNE_CACHE="1")
    code = "import json, numpy as np, rune\nfrom rune import nx\n" + _W1
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["y"] == results[1]["y"]
    assert not list(tmp_path.glob("kernels/.tmp-*"))
    again = _script(_W1, **{"RUNE_CACHE_DIR": str(tmp_path)})
    assert again["stats"]["kernels_compiled"] == 0


def test_cache_off_and_no_compiler_fallback(tmp_path):
    off = _script(_W1, RUNE_CACHE_DIR=str(tmp_path), RUNE_CACHE="0")
    assert off["stats"]["kernels_compiled"] >= 1 and not list(tmp_path.rglob("*"))
    none = _script(_W1, RUNE_CC="none", RUNE_CACHE_DIR=str(tmp_path))
    assert none["kernels"] == 0 and none["stats"]["kernels_compiled"] == 0
    np.testing.assert_allclose(none["y"], off["y"], rtol=1e-6, atol=1e-7)
    gcc = _script(_W1, RUNE_CC="/usr/bin/cc", RUNE_CACHE_DIR=str(tmp_path))
    assert gcc["kernels"] == 1 and gcc["y"] == off["y"]


def test_a_compile_failure_names_the_kernel_and_shows_source_and_message(tmp_path):
    bad = tmp_path / "badcc"
    bad.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo badcc 1.0; exit 0; fi\n"
                   "echo 'unit.c:1: error: this compiler rejects everything' >&2\nexit 1\n")
    bad.chmod(0o755)
    code = textwrap.dedent("""
        import rune, numpy as np
        from rune import nx
        try:
            rune.jit(lambda x: nx.cos(x) + 1.0)(nx.asarray(np.ones(3, np.float32)))
        except rune.RuneError as e:
            print(str(e))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, RUNE_CC=str(bad), RUNE_CACHE_DIR=str(tmp_path)))
    assert "rejects everything" in out.stdout and "cosf(" in out.stdout and "_k0" in out.stdout, out


@pytest.mark.cc
def test_tiny_stretches_run_on_numpy_unless_asked(monkeypatch):
    # A compiled call's fixed cost exceeds a few NumPy calls on tiny arrays, so by
    # default only stretches with a large value (or many ops) are compiled.
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "4096")
    f = rune.jit(lambda x: nx.exp(x) * 2 + 1)
    small, large = nx.ones(8), nx.ones(4096)
    assert numpy_stretches(f.plan(small)) and not f.plan(small).kernels
    assert not numpy_stretches(f.plan(large)) and len(f.plan(large).kernels) == 1
    np.testing.assert_allclose(np.asarray(f(small)), np.exp(np.ones(8, np.float32)) * 2 + 1, rtol=1e-6)
    chain = rune.jit(lambda x: functools.reduce(lambda acc, _: nx.sin(acc), range(16), x))
    assert chain.plan(small).kernels  # many ops: worth one call even on 8 elements


# ---------------------------------------------------------------- index arithmetic, indexed loads and updates

def _exact(got, want):
    got, want = np.asarray(got), np.asarray(want)
    _close(got, want, True)


_DEFERRED = []


def _all_compiled(fn, *raws, kernels=None):
    """`fn` planned under jit: every op compiled (no NumPy stretch). Its run is
    checked bit-exact against eager by `_verify()`, after one batched compile of
    everything the test planned (a compiler run per case would cost ~0.1 s each)."""
    arrays = [nx.asarray(r) for r in raws]
    jf = rune.jit(fn)
    plan = _compiled_plan(jf, *arrays)
    assert not numpy_stretches(plan), plan
    if kernels is not None:
        assert len(plan.kernels) == kernels, plan
    _DEFERRED.append((fn, jf, arrays, plan))
    return plan


def _verify():
    compile_pending()
    cases, _DEFERRED[:] = list(_DEFERRED), []
    for fn, jf, arrays, plan in cases:
        with np.errstate(all="ignore"):
            want = fn(*arrays)
        got = jf(*arrays)
        for g, w in zip(got if isinstance(got, (tuple, list)) else [got],
                        want if isinstance(want, (tuple, list)) else [want]):
            try:
                _exact(g, w)
            except AssertionError as e:
                raise AssertionError(f"{e}\n{plan!r}") from None


IOTA_NAMES = ["int8", "uint16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _iota_cases(dt):
    x = np.ones((3, 1, 5), dt)
    for dim, start in ((0, 0), (2, 3), (1, -2 if dt[0] != "u" else 2)):
        yield lambda v, dim=dim, start=start: v * bind(P["iota"], np.asarray(start, dt), shape=(3, 4, 5),
                                                       dimension=dim, device=None), (x,)


@pytest.mark.parametrize("dt", IOTA_NAMES)
def test_iota_is_index_arithmetic_without_a_load(dt):
    for f, raws in _iota_cases(dt):
        plan = _all_compiled(f, *raws, kernels=1)
        k, = plan.kernels
        assert len(k.loads) == 1, k   # x only: the index is computed, never read
    _verify()


def _integer_pow_cases(dt):
    info = np.iinfo(dt)
    base = np.array([0, 1, 2, 3, 7, info.max, info.min, 100] + ([-1, -2, -3, -7] if info.min else []), dt)
    for e in (0, 1, 2, 3, 13, 64):
        yield lambda v, e=e: v ** np.asarray(e, dt) + v, (base,)
    exps = nx.asarray(np.array([0, 1, 2, 5] * 3, dt)[:len(base)])
    yield lambda v: bind(P["pow"], v, exps), (base,)   # a constant array of exponents


@pytest.mark.parametrize("dt", INT_NAMES)
def test_integer_pow_is_exact_and_wraps_as_numpy(dt):
    for f, raws in _integer_pow_cases(dt):
        _all_compiled(f, *raws, kernels=1)
    _verify()


def test_integer_pow_with_a_negative_or_runtime_exponent_raises_or_runs_as_eager():
    base = nx.asarray(np.array([2, 3], np.int32))
    for run in (lambda: base ** -1, lambda: rune.jit(lambda v: v ** -1)(base)):
        with pytest.raises(Exception, match="negative integer powers"):
            run()
    jf = rune.jit(lambda v, e: v ** e)    # a runtime exponent may be negative: eager's path
    e = nx.asarray(np.array([3, 0], np.int32))
    assert [s.eqns[0].prim.name for s in numpy_stretches(jf.plan(base, e))] == ["pow"]
    np.testing.assert_array_equal(np.asarray(jf(base, e)), [8, 1])


def _arg_extreme_cases(op):
    rng = np.random.default_rng(7)
    fn = getattr(nx, op)
    for dt in ALL:
        for shape, axis in [((6, 9), 1), ((6, 9), 0), ((3, 4, 5), 1), ((40,), 0), ((5, 1), 1)]:
            raw = _values(dt, shape, rng)
            if dt.kind in "iu":
                raw = (raw % 4).astype(dt)   # ties: the first extreme wins
            if dt.kind == "f" and raw.size > 3:
                raw.reshape(-1)[[1, 2]] = np.nan   # two NaNs: the first wins
            prologue = (lambda v: v) if dt == np.dtype(bool) else (lambda v: v * v - v)
            yield lambda v, prologue=prologue, axis=axis: fn(prologue(v), axis=axis) * 2 + 1, (raw,)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_first_extreme_first_nan_with_prologue_and_epilogue(op):
    for f, raws in _arg_extreme_cases(op):
        plan = _all_compiled(f, *raws, kernels=1)
        assert op in plan.kernels[0].source or "arg0" in plan.kernels[0].source
    _verify()


RANDOM_WIDTHS = [8, 16, 32, 64]
RANDOM_KEYS = np.array([[0, 0], [1, 2], [0xdeadbeef, 0xffffffff]], np.uint32)


def _random_bits(width):
    return lambda k: bind(P["random_bits"], k, shape=(4, 33), width=width)


def _uniform(k):
    return nx.random.uniform(k, (1000,)) * 2 - 1


@pytest.mark.parametrize("width", RANDOM_WIDTHS)
def test_random_bits_is_inline_threefry_bit_identical_to_eager(width):
    keys = RANDOM_KEYS
    plan = _all_compiled(_random_bits(width), keys, kernels=1)
    assert "rn_threefry" in plan.kernels[0].source
    key = nx.asarray(keys[2])
    u = rune.jit(_uniform)
    assert not numpy_stretches(u.plan(key))
    _exact(u(key), _uniform(key))
    _verify()


def test_gather_and_dynamic_slice_clamp_runtime_indices_as_eager():
    x = np.arange(60, dtype=np.float32).reshape(4, 3, 5) - 30
    idx = np.array([[0, -1, 4], [2, -9, 99]], np.int64)
    for axis in (0, 1, 2):
        _all_compiled(lambda v, i, axis=axis: bind(P["gather"], v * 2, i, axis=axis) + 1, x, idx)
        _all_compiled(lambda v, i, axis=axis: bind(P["gather"], v, i.astype(nx.int8), axis=axis), x, idx)
    _all_compiled(lambda v: bind(P["gather"], v, np.int32(-2), axis=1), x, kernels=1)
    for s0, s1 in ((0, 0), (3, -1), (-9, 7), (1, 2)):
        # the starts are runtime values (no host read), clamped so the window fits
        _all_compiled(lambda v, a, b: nx.dynamic_slice(v + 1, (a, b, 1), (2, 2, 3)) * v[:2, :2, :3],
                      x, np.int32(s0), np.int64(s1))
        _all_compiled(lambda v, s0=s0, s1=s1: nx.dynamic_slice(v, (s0, s1, 0), (3, 1, 5)), x, kernels=1)
    _verify()
    jf = rune.jit(lambda v, a: nx.dynamic_slice(v, (a, 0, 0), (2, 3, 5)))
    before = rune.stats()["scalar_reads"]
    jf(nx.asarray(x), nx.asarray(np.int32(1)))
    assert rune.stats()["scalar_reads"] == before


SCATTER_MODES = ["set", "add", "mul", "min", "max"]


def _scatter_cases(mode):
    """(function, raw arguments, whether its indices are an argument) of `mode`'s cases."""
    rng = np.random.default_rng(11)
    for dt in (np.dtype("float32"), np.dtype("int32"), np.dtype("float16"), np.dtype("uint8"), np.dtype(bool)):
        if dt == np.dtype(bool) and mode in ("mul",):
            continue
        x = _values(dt, (4, 6), rng)
        idx = np.array([[1, 1, -1], [5, 9, -7]], np.int32)    # repeats, from the end, dropped
        upd = _values(dt, (4, 2, 3), rng)
        yield (lambda v, i, u, dt=dt: bind(P["scatter"], v, i, u, axis=1, mode=mode)
               if dt == np.dtype(bool) else bind(P["scatter"], v + v, i, u * u, axis=1, mode=mode) - v,
               (x, idx, upd), True)
        yield (lambda v, u: bind(P["scatter"], v, nx.asarray(np.array([3, 3, 0, -4, 4])), u, axis=0, mode=mode),
               (x[:, 0], upd.reshape(-1)[:5]), False)


@pytest.mark.parametrize("mode", SCATTER_MODES)
def test_scatter_is_a_kernel_with_repeated_and_dropped_indices_as_eager(mode):
    for f, raws, indexed in _scatter_cases(mode):
        plan = _all_compiled(f, *raws)
        if indexed:
            assert any("if (" in k.source and "rn_from_end" in k.source for k in plan.kernels)
    _verify()


def test_dynamic_update_slice_copies_and_updates_in_its_own_kernel():
    x = np.arange(30, dtype=np.int16).reshape(5, 6)
    u = np.full((2, 3), -1, np.int16)
    for s0, s1 in ((0, 0), (4, 5), (-1, 2), (-9, 9)):
        _all_compiled(lambda v, w, a, b: nx.dynamic_update_slice(v * 2, w + v[:2, :3], (a, b)) + 1,
                      x, u, np.int32(s0), np.int64(s1))
    _verify()
    # a + b after the update reads it back; the update itself writes a fresh output
    jf = rune.jit(lambda v, w: nx.dynamic_update_slice(v, w, (1, 1)))
    a = jf(nx.asarray(x), nx.asarray(u))
    np.testing.assert_array_equal(np.asarray(x)[0], np.arange(6))   # the input is untouched
    _exact(a, nx.dynamic_update_slice(nx.asarray(x), nx.asarray(u), (1, 1)))


def test_matmul_is_a_library_call_and_its_epilogue_one_kernel():
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 5), (5,)))
    f = lambda x, w, b: nx.maximum(x @ w + b, 0.0)
    jf = rune.jit(f)
    plan = _compiled_plan(jf, *map(nx.asarray, (x, w, b)))
    assert [type(s).__name__ for s in plan.steps] == ["LibraryCall", "CompiledStretch"], plan
    g = rune.jit(lambda x, w: (x.T @ w).T)   # transposes feeding and leaving a matmul stay views
    assert not g.plan(nx.asarray(w), nx.asarray(w)).kernels
    _exact(g(nx.asarray(w), nx.asarray(w)), (nx.asarray(w).T @ nx.asarray(w)).T)
    assert len(plan.kernels) == 1
    before = rune.stats()["kernels_launched"]
    _exact(jf(*map(nx.asarray, (x, w, b))), f(*map(nx.asarray, (x, w, b))))
    assert rune.stats()["kernels_launched"] - before == 2   # one matmul, one kernel


def test_outputs_that_view_one_buffer_are_all_written():
    x = nx.asarray(np.arange(6, dtype=np.float32))
    for f in (lambda v: (lambda y: (y, y.reshape(3, 2), y.reshape(2, 3)))(v * 2),
              lambda v: (lambda s: (s, s.reshape(2, 3), s + 1))(nx.dynamic_update_slice(v, v[:2] * 0, (1,)))):
        got = rune.jit(f)(x)
        for g, w in zip(got, f(x)):   # none is a fresh array the kernels never wrote
            _exact(g, w)


# ---------------------------------------------------------------- complex64 / complex128

COMPLEX = [np.dtype("complex64"), np.dtype("complex128")]


def _complex_values(dtype, shape, rng):
    """Complex samples whose parts carry the float edge cases (NaN, infinities, -0.0)."""
    part = np.dtype(np.float32 if dtype == np.dtype("complex64") else np.float64)
    out = np.empty(shape, dtype)
    out.real, out.imag = _values(part, shape, rng), _values(part, shape, rng)
    return out


def _parts_exact(got, want):
    """Bit-exact complex results: both parts, the signs of zeros, NaN where NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        _close(np.ascontiguousarray(g), np.ascontiguousarray(w), True)


def _complex_cases():
    out = []
    for dt in COMPLEX:
        out += [(name, lambda x, y, name=name: bind(P[name], x, y), (dt, dt)) for name in ("add", "sub", "mul", "div")]
        out += [(name, lambda x, name=name: bind(P[name], x), (dt,))
                for name in ("neg", "conj", "real", "imag", "isnan", "isfinite", "stop_gradient")]
        out += [(name, lambda x, y, name=name: bind(P[name], x, y), (dt, dt)) for name in ("eq", "ne")]
        out.append(("select", lambda c, x, y: bind(P["select"], c, x, y), (np.dtype(bool), dt, dt)))
        for src in COMPLEX + [np.dtype(t) for t in ("bool", "int8", "int64", "uint64", "float16", "float32",
                                                    "float64")]:
            out.append(("convert", lambda x, dt=dt: bind(P["convert"], x, dtype=dt), (src,)))
    for part in ("float32", "float64"):
        out.append(("complex", lambda x, y: bind(P["complex"], x, y), (np.dtype(part),) * 2))
    return out


def test_complex_elementwise_ops_compile_and_match_eager_bit_for_bit():
    rng = np.random.default_rng(7)
    built = []
    for name, fn, dts in _complex_cases():
        shapes = [(4, 33), (33,), (4, 1)][:len(dts)]
        raws = [_complex_values(dt, s, rng) if dt.kind == "c" else _values(dt, s, rng)
                for dt, s in zip(dts, shapes)]
        arrays = [nx.asarray(r) for r in raws]
        with np.errstate(all="ignore"):
            want = fn(*arrays)
        jf = rune.jit(fn)
        built.append((name, dts, jf, arrays, want, jf.plan(*arrays)))
    compile_pending()
    for name, dts, jf, arrays, want, plan in built:
        where = f"{name} on {[d.name for d in dts]}"
        assert plan.kernels and not numpy_stretches(plan), f"{where} was not compiled:\n{plan!r}"
        with np.errstate(all="ignore"):
            got = jf(*arrays)
        if np.asarray(want).dtype.kind == "c":
            _parts_exact(got, want)
        else:
            _close(got, want, True)


def test_complex_ops_without_a_rule_stay_on_numpy_between_compiled_ones():
    """sin, prod and the rest run on NumPy; the ops around them compile, mul, div,
    exp and abs (hypot of the parts) among them (tests/nx/test_complex.py)."""
    rng = np.random.default_rng(8)
    x, y = (nx.asarray(_complex_values(np.dtype("complex128"), (5, 9), rng)) for _ in range(2))
    f = lambda a, b: (nx.abs((a + b) * b) - 1, nx.sin(a - b) / b, nx.prod(a + 1, axis=1))  # noqa: E731
    jf = rune.jit(f)
    plan = _compiled_plan(jf, x, y)
    left = {e.prim.name for st in numpy_stretches(plan) for e in st.eqns}
    assert {"sin", "reduce_prod"} <= left and not left & {"add", "sub", "mul", "div", "hypot"}, left
    with np.errstate(all="ignore"):
        for g, w in zip(jf(x, y), f(x, y)):
            _parts_exact(g, w) if np.asarray(w).dtype.kind == "c" else _close(g, w, True)


@pytest.mark.parametrize("dt", ["complex64", "complex128"])
def test_complex_signed_zeros_and_conj_of_zero_match_eager(dt):
    z = np.array([complex(a, b) for a in (0.0, -0.0) for b in (0.0, -0.0)], dt)
    x, y = nx.asarray(z), nx.asarray(z[::-1].copy())
    f = lambda a, b: (a + b, a - b, -a, nx.conj(a), nx.conj(-a), a + (-0.0 - 0.0j),  # noqa: E731
                      a.astype(nx.complex64), nx.real(a) + 0 * nx.imag(b))
    jf = rune.jit(f)
    _compiled_plan(jf, x, y)
    assert not numpy_stretches(jf.plan(x, y))
    for g, w in zip(jf(x, y), f(x, y)):
        _parts_exact(g, w)


@pytest.mark.parametrize("dt", ["complex64", "complex128"])
def test_complex_inf_and_nan_parts_match_eager_around_mul_and_div(dt):
    """inf/nan parts: compiled add/sub/neg/conj/eq/mul/div give eager's parts (no C99
    Annex G recovery of infinities)."""
    big, tiny = (1e38, 1e-40) if dt == "complex64" else (1e300, 3e-310)   # near overflow, subnormal
    vals = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, big, tiny]
    grid = np.array([complex(a, b) for a in vals for b in vals], dt)
    x = nx.asarray(np.repeat(grid, grid.size))
    y = nx.asarray(np.tile(grid, grid.size))
    f = lambda a, b: (a / b - b, (a * b) + a, nx.conj(a - b), -b, nx.where(a == b, a, b))  # noqa: E731
    jf = rune.jit(f)
    plan = _compiled_plan(jf, x, y)
    assert not numpy_stretches(plan), plan
    with np.errstate(all="ignore"):
        for g, w in zip(jf(x, y), f(x, y)):
            _parts_exact(g, w)


def test_complex_movement_pad_fill_and_concatenate_move_values_exactly():
    rng = np.random.default_rng(9)
    x = _complex_values(np.dtype("complex64"), (6, 7), rng)
    y = _complex_values(np.dtype("complex64"), (6, 3), rng)
    f = lambda a, b: (nx.pad(a, ((1, 2), (0, 3)), constant_values=-1.5 + 2j) + 1j,  # noqa: E731
                      nx.concatenate([a.T[::-1], -b.T], axis=0)[:, 1:] - a[0, 2:],
                      nx.broadcast_to(b[:, :1], (6, 5)) + a[:, 2:])
    jf = rune.jit(f)
    plan = _compiled_plan(jf, nx.asarray(x), nx.asarray(y))
    assert not numpy_stretches(plan), plan
    for g, w in zip(jf(nx.asarray(x), nx.asarray(y)), f(nx.asarray(x), nx.asarray(y))):
        _parts_exact(g, w)


@pytest.mark.parametrize("dt", ["complex64", "complex128"])
def test_complex_sums_fuse_prologue_and_epilogue_within_the_float_bound(dt):
    """A complex sum is two float sums: within the float sums' bound of a float64 sum."""
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((9, 1500)) + 1j * rng.standard_normal((9, 1500))).astype(dt)
    y = (rng.standard_normal((9, 1)) + 1j * rng.standard_normal((9, 1))).astype(dt)
    f = lambda a, b: (nx.sum(a - b, axis=1) + b[:, 0], nx.real(nx.sum(nx.conj(a), axis=0)), nx.sum(a))  # noqa: E731
    jf = rune.jit(f)
    plan = _compiled_plan(jf, nx.asarray(x), nx.asarray(y))
    assert not numpy_stretches(plan) and any(k.reduce_shape for k in plan.kernels)
    with_y = (x - y).astype(np.complex256)
    exact = (with_y.sum(axis=1) + y[:, 0], np.conj(x).astype(np.complex256).sum(axis=0).real,
             x.astype(np.complex256).sum())
    # |error| <= n * eps * sum |terms| for a sum of n terms in any order (each part alike)
    mass = (np.abs(with_y).sum(axis=1) + np.abs(y[:, 0]), np.abs(x.real).sum(axis=0), np.abs(x).sum())
    n = (x.shape[1], x.shape[0], x.size)
    eps = float(np.finfo(np.dtype(dt)).eps)
    for g, e, m, k in zip(jf(nx.asarray(x), nx.asarray(y)), exact, mass, n):
        g = np.asarray(g)
        assert g.dtype in (np.dtype(dt), np.finfo(np.dtype(dt)).dtype) and g.shape == e.shape
        assert np.all(np.abs(g.astype(np.complex256) - e) <= k * eps * m), (g, e)


def test_a_compiled_stretch_speaks_the_step_protocol():
    """The one CompiledStretch class answers the plan's step protocol from its unit;
    a host stretch takes no donated buffers (a buffer offered is not written)."""
    x = nx.asarray(np.linspace(-1, 1, 300, dtype=np.float32).reshape(20, 15))
    f = rune.jit(lambda v: (nx.exp(v) * 2.0, nx.sum(v * v, axis=0)))
    plan = f.plan(x)
    (step,) = [s for s in plan.steps if type(s) is CompiledStretch]
    assert step.reads() == tuple(dict.fromkeys(s for _, s in step.unit.inputs))
    assert step.writes() == tuple(s for _, s in step.unit.outputs)
    assert set(step.writes()) == set(plan.out_slots)
    assert type(step.kernels) is tuple and step.kernels and step.plans == ()
    assert step.profile_kind == "kernel" and not step.takes_donations
    assert not step.writes_in_place(step.reads()[0], step.writes()[0])
    text = step.describe()
    assert text.startswith(f"compiled stretch {step.name} of ") and all(k.name in text for k in step.kernels)
    env = list(plan.template)
    env[plan.in_slots[0]] = np.asarray(x)
    offered = {s: np.full(plan.avals[s].shape, -7.0, plan.avals[s].dtype) for s in step.writes()}
    step.run(env, {s: b for s, b in offered.items()})
    eager = (np.exp(np.asarray(x)) * np.float32(2.0), np.sum(np.asarray(x) ** 2, axis=0))
    for s in step.writes():
        assert env[s] is not offered[s] and (offered[s] == -7.0).all()
        np.testing.assert_allclose(env[s], eager[plan.out_slots.index(s)], rtol=1e-6)


# ---------------------------------------------------------------- the kernels of the tests above, compiled in batches

def _jitted_calls():
    """The jitted calls of the trap, reduction, iota, integer-pow, arg-extreme, random-bits
    and scatter tests, compiled before the file's first test in a few batched compiler
    runs (one run per test would cost ~0.1 s each). The tests of compiling itself (the
    disk cache, processes, a failing compile) are not among them."""
    calls = [*_trap_calls(), *((_random_bits(w), (RANDOM_KEYS,)) for w in RANDOM_WIDTHS), (_uniform, (RANDOM_KEYS[2],))]
    calls += [(fn, (raw,)) for op in REDUCTIONS for _, _, _, raw, fn in _reduction_cases(op)]
    calls += [case for dt in IOTA_NAMES for case in _iota_cases(dt)]
    calls += [case for dt in INT_NAMES for case in _integer_pow_cases(dt)]
    calls += [case for op in ("argmax", "argmin") for case in _arg_extreme_cases(op)]
    calls += [(fn, raws) for mode in SCATTER_MODES for fn, raws, _ in _scatter_cases(mode)]
    return [(fn, tuple(nx.asarray(r) for r in raws)) for fn, raws in calls]


_kernels = precompiled(_jitted_calls)
