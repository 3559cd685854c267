"""Fusion patterns of training steps, checked against eager NumPy and the earlier formulation.

- a masked softmax (`where(mask, s, finfo.min)`, then max, exp, sum, divide): the
  op after the select runs on each arm (`fuse._through_select`), so the constant
  arm's exp is computed once per row (float64: the unrewritten kernel's bits);
- values the same along a kernel's innermost loop (a row's max, a per-row scale)
  are computed before that loop: the same bits as eager;
- reductions over leading axes (bias gradients, sums over a batch) run in the
  column form, their accuracy that of the row form;
- a stack of rows times a matrix is one product (no weight broadcast to a batch,
  no per-batch weight gradients summed afterwards);
- a cheap value a later compiled run reads is recomputed there, not stored; a long
  chain of cheap ops (a GELU's derivative) that is stored anyway is loaded by the
  reduction that reads it, not computed a second time;
- an embedding's gradient (a scatter-add of rows, repeated tokens among them) keeps
  its points in order on one thread but runs each row as vectors: the bits of a
  NumPy loop over the tokens;
- a select of floats in a loop that calls a math function is a blend of bits
  (a branch kept gcc from vectorizing such a loop): NumPy's bits, NaN payloads
  and signed zeros included;
- a compiled stretch hands out last call's output arrays again only where
  nothing holds them.
"""
import math
import re

import numpy as np
import pytest

import rune
from rune import nn, nx
from rune.backends.stretch import CompiledStretch
from rune.compiler import fuse, lower

from compiled import precompiled
from pinned_threads import at_threads, parallel_everywhere



pytestmark = pytest.mark.cc


def _sources(plan):
    return [k.source for k in plan.kernels]


def _masked_softmax(s, mask):
    return nx.softmax(nx.where(mask, s, nx.finfo(s.dtype).min), axis=-1)


def _causal(t):
    return np.tril(np.ones((t, t), bool))


# ---------------------------------------------------------------- a masked softmax

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_masked_softmax_matches_eager_and_the_unrewritten_kernel(dtype, monkeypatch):
    rng = np.random.default_rng(0)
    s = (rng.standard_normal((3, 2, 16, 16)) * 4).astype(dtype)
    s[0, 0, 3, 1] = np.nan          # a NaN among the allowed entries: its row is NaN
    s[0, 1, 5, 9] = np.nan          # a NaN in a masked entry: hidden, as eager
    mask = _causal(16)
    mask[7] = False                 # a row with nothing allowed: uniform, as eager
    args = nx.asarray(s), nx.asarray(mask)
    want = np.asarray(_masked_softmax(*args))
    got = np.asarray(rune.jit(_masked_softmax)(*args))
    np.testing.assert_allclose(got, want, rtol=8 * np.finfo(dtype).eps, atol=0, equal_nan=True)
    assert np.isnan(got[0, 0, 3]).all() and not np.isnan(got[0, 1, 5]).any()

    monkeypatch.setattr(fuse, "_through_select", lambda *a: None)
    before = np.asarray(rune.jit(lambda s, m: _masked_softmax(s, m))(*args))
    if dtype == "float64":   # libm's scalar exp: the rewrite keeps every bit
        np.testing.assert_array_equal(got, before)
    else:   # libmvec's float32 exp gives a lane its scalar fallback's bits where a vector holds a huge input
        np.testing.assert_allclose(got, before, rtol=4 * np.finfo(dtype).eps, atol=0, equal_nan=True)


def test_masked_softmax_exp_of_the_mask_constant_is_outside_the_inner_loop():
    rng = np.random.default_rng(7)
    args = nx.asarray(rng.standard_normal((2, 8, 64, 64)).astype(np.float32)), nx.asarray(_causal(64))
    hoisted = 0
    sources = _sources(rune.jit(_masked_softmax).plan(*args))
    for src in sources:
        lines = src.splitlines()
        inner = max(k for k, ln in enumerate(lines) if "for (" in ln)   # the innermost loop's header
        for k, ln in enumerate(lines):
            # the constant arm minus the row's max, and its exp: once per row
            m = re.search(r"const float (v\d+) = \(\(\(float\)-0x1\.fffffe0+p\+127\) - l\d+\);", ln)
            if m:
                uses = [j for j, other in enumerate(lines) if f"expf({m.group(1)})" in other]
                assert k < inner and uses and max(uses) < inner, src
                hoisted += 1
    # one kernel computes the exp (the sum and the division load it: on the CPU a costly
    # value two ops read is stored once, in a row group's cache-resident row)
    assert hoisted == 1 and sum("expf(" in src for src in sources) == 1


# ---------------------------------------------------------------- per-row values hoisted

def test_row_values_are_computed_before_the_inner_loop_with_eager_bits():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 7, 33)).astype(np.float32)
    row = rng.standard_normal((5, 7, 1)).astype(np.float32)
    row[1, 2] = np.nan
    f = lambda x, r: x * (r * 0.5 - 1.0) + nx.sqrt(r * r + 1.0)   # correctly rounded ops: eager's bits
    jf = rune.jit(f)
    src = "\n".join(_sources(jf.plan(nx.asarray(x), nx.asarray(row))))
    lines = src.splitlines()
    inner = max(k for k, ln in enumerate(lines) if "for (" in ln)
    assert "sqrtf(" in "\n".join(lines[:inner]) and "sqrtf(" not in "\n".join(lines[inner:]), src
    np.testing.assert_array_equal(np.asarray(jf(nx.asarray(x), nx.asarray(row))),
                                  np.asarray(f(nx.asarray(x), nx.asarray(row))))


# ---------------------------------------------------------------- column reductions

COLUMN_SUMS = [((2048, 256), (0,)), ((40, 65), (0,)), ((3, 700, 100), (0, 1)), ((33, 5, 70), (0,)),
               ((1100, 9), (0,))]


def _column_sum(axes):
    return lambda x: nx.sum(x * 2.0 - 1.0, axis=axes)


def _leading_extreme(op):
    return lambda x: getattr(nx, op)(x, axis=0)


def _leading_sum(x):
    return nx.sum(x, axis=(0, 1))


def _jitted_calls():
    """The masked softmax and leading-axis reductions of the tests below on arrays of
    their shapes and dtypes, compiled together before the file's first test."""
    calls = [(_masked_softmax, (np.zeros((3, 2, 16, 16), dt), _causal(16))) for dt in ("float32", "float64")]
    calls += [(_column_sum(axes), (np.zeros(shape, np.float32),)) for shape, axes in COLUMN_SUMS]
    calls += [(_leading_extreme(op), (np.zeros((300, 20), np.float32),)) for op in ("max", "min")]
    calls += [(_leading_sum, (np.zeros((129, 3, 17), dt),)) for dt in ("int32", "uint8", "bool")]
    return [(fn, tuple(map(nx.asarray, args))) for fn, args in calls]


_kernels = precompiled(_jitted_calls)


@pytest.mark.parametrize("shape, axes", COLUMN_SUMS)
def test_sums_over_leading_axes_run_in_the_column_form_within_the_row_forms_bound(shape, axes):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) + 3).astype(np.float32)
    jf = rune.jit(_column_sum(axes))
    assert any("io +=" in s for s in _sources(jf.plan(nx.asarray(x))))
    got = np.asarray(jf(nx.asarray(x)))
    exact = np.sum(x.astype(np.float64) * 2 - 1, axis=axes)
    n = math.prod(shape[a] for a in axes)
    # a float32 block of at most 32 values, the blocks added in double
    bound = 32 * np.finfo(np.float32).eps * np.sum(np.abs(x.astype(np.float64) * 2 - 1), axis=axes) + 1e-30
    assert np.all(np.abs(got - exact) <= bound), (np.max(np.abs(got - exact) / bound), n)


@pytest.mark.parametrize("op", ["max", "min"])
def test_extrema_over_leading_axes_keep_nan_and_exact_values(op):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 20)).astype(np.float32)
    x[17, 3] = np.nan
    x[:, 5] = -0.0
    jf = rune.jit(_leading_extreme(op))
    assert any("io +=" in s for s in _sources(jf.plan(nx.asarray(x))))
    np.testing.assert_array_equal(np.asarray(jf(nx.asarray(x))), getattr(np, op)(x, axis=0))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_integer_and_bool_sums_over_leading_axes_are_exact(dtype):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 200, (129, 3, 17)).astype(dtype)
    jf = rune.jit(_leading_sum)
    np.testing.assert_array_equal(np.asarray(jf(nx.asarray(x))), np.asarray(nx.sum(nx.asarray(x), axis=(0, 1))))


def test_bias_and_layer_norm_gradients_match_eager():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 16, 32)).astype(np.float32)
    g, b = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    loss = lambda x, g, b: nx.sum(nn.gelu(nn.layer_norm(x, g, b)) ** 2)
    args = [nx.asarray(a) for a in (x, g, b)]
    got = rune.jit(rune.grad(loss, argnums=(1, 2)))(*args)
    want = rune.grad(loss, argnums=(1, 2))(*args)
    for a, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(w), rtol=2e-5, atol=1e-5)


# ---------------------------------------------------------------- a stack of rows times a matrix

def test_rows_times_a_matrix_is_one_product_and_its_gradient_needs_no_batch_sum():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(nx.asarray(x) @ nx.asarray(w)), x @ w, rtol=1e-6)
    program = rune.trace(lambda x, w: nx.sum((x @ w) ** 2))(nx.asarray(x), nx.asarray(w))
    assert "broadcast_to" not in str(program)
    gw = rune.grad(lambda w: nx.sum((nx.asarray(x) @ w) ** 2))(nx.asarray(w))
    np.testing.assert_allclose(np.asarray(gw), 2 * np.einsum("btk,btn->kn", x, x @ w), rtol=1e-5)
    gx = rune.jit(rune.grad(lambda x: nx.sum((x @ nx.asarray(w)) ** 2)))(nx.asarray(x))
    np.testing.assert_allclose(np.asarray(gx), 2 * (x @ w) @ w.T, rtol=1e-5)


# ---------------------------------------------------------------- outputs handed out again

def test_outputs_are_reused_only_when_nothing_holds_them():
    f = rune.jit(lambda x: nx.exp(x) * 2.0)
    x = nx.asarray(np.linspace(0, 1, 5000, dtype=np.float32))
    first = f(x)
    kept = np.asarray(first).copy()
    second = f(x + 1.0)                       # `first` is held: a fresh array
    np.testing.assert_array_equal(np.asarray(first), kept)
    view = np.asarray(second)[10:20]
    held = view.copy()
    del second
    f(x + 2.0)                                # a view of the last output is held
    np.testing.assert_array_equal(view, held)
    a = f(x)
    address = np.asarray(a).ctypes.data
    del a
    b = f(x)
    assert np.asarray(b).ctypes.data == address   # nothing held it: handed out again
    np.testing.assert_allclose(np.asarray(b), np.exp(np.asarray(x)) * 2, rtol=1e-6)


# ---------------------------------------------------------------- cheap values recomputed after a matmul

def test_a_cheap_value_read_after_a_matmul_is_recomputed_there_not_stored(monkeypatch):
    rng = np.random.default_rng(8)
    x, w = (nx.asarray(rng.standard_normal((16, 16)).astype(np.float32)) for _ in range(2))

    def f(x, w):
        t = x * 3.0                  # read before the matmul and after it
        return (nx.exp(t * 0.25) @ w) * t

    jf = rune.jit(f)
    compiled = [s for s in jf.plan(x, w).steps if isinstance(s, CompiledStretch)]
    assert len(compiled) == 2 and len(compiled[0].outputs) == 1   # only exp(t / 4) crosses the matmul
    got = np.asarray(jf(x, w))
    np.testing.assert_allclose(got, np.asarray(f(x, w)), rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(lower, "_recomputed_across", lambda runs, live_out: runs)
    stored = rune.jit(lambda x, w: f(x, w))
    assert len([s for s in stored.plan(x, w).steps if isinstance(s, CompiledStretch)][0].outputs) == 2
    np.testing.assert_array_equal(got, np.asarray(stored(x, w)))   # the same ops: the same bits


def _chain(x):
    """Twenty cheap ops and no math function: as costly a point as a libm call."""
    for k in range(10):
        x = x * 1.0625 + (k - 4.5)
    return x


def test_a_long_chain_that_is_stored_is_loaded_by_its_reduction_not_computed_again():
    x = nx.asarray(np.random.default_rng(9).standard_normal((96, 40)).astype(np.float32))
    f = lambda x: (lambda y: (y, nx.sum(y, axis=0)))(_chain(x))   # noqa: E731  (a bias's gradient)
    sources = _sources(rune.jit(f).plan(x))
    assert sum(src.count("0x1.1000000000000p+0") for src in sources) == 10, sources   # the chain once
    got, want = rune.jit(f)(x), f(x)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_embedding_gradient_runs_its_rows_as_vectors_in_token_order(dtype):
    rng = np.random.default_rng(11)
    vocab, d = 50, 64
    tokens = rng.integers(-vocab, vocab, 3000).astype(np.int32)   # repeats, and from the end
    table = rng.standard_normal((vocab, d)).astype(np.float32).astype(dtype)
    upd = rng.standard_normal((tokens.size, d)).astype(np.float32).astype(dtype)
    # the gradient of an embedding lookup: the cotangent's rows added into the table's
    f = lambda t, i, u: rune.vjp(lambda t: nx.take(t, i, axis=0), t)[1](u)[0]   # noqa: E731
    args = [nx.asarray(table), nx.asarray(tokens), nx.asarray(upd)]
    want = np.zeros_like(table)
    for i, row in zip(tokens, upd):   # NumPy's rows in token order
        want[i] += row
    with parallel_everywhere(blas=False):
        jf = rune.jit(f)
        serial = [src for src in _sources(jf.plan(*args)) if "rn_from_end" in src]
        assert serial and all("omp simd" in src and "omp parallel" not in src for src in serial), serial
        for k in (1, 3):
            assert at_threads(k, jf, *args)[0].tobytes() == want.tobytes()
    assert np.asarray(f(*args)).tobytes() == want.tobytes()   # eager


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_select_beside_a_math_function_is_a_blend_with_numpys_bits(dtype):
    rng = np.random.default_rng(10)
    x = rng.standard_normal(4099).astype(np.float32)
    other = np.where(rng.random(4099) < 0.1, -0.0, rng.standard_normal(4099)).astype(np.float32)
    other[::7] = np.float32(np.nan)
    other.view(np.uint32)[::7] |= 0x50000   # NaNs with payloads (kept by bfloat16 too): copied bit for bit
    mask = rng.random(4099) < 0.5
    args = [nx.asarray(x).astype(dtype), nx.asarray(other).astype(dtype), nx.asarray(mask)]
    f = lambda x, o, m: nx.where(m, nx.exp(x), o)   # noqa: E731  (a masked softmax's loop)
    jf = rune.jit(f)
    assert any("rn_select_f32" in src for src in _sources(jf.plan(*args)))
    got, want = np.asarray(jf(*args)), np.asarray(f(*args))
    assert got.tobytes() == want.tobytes()
    o = np.asarray(args[1])
    assert got[~mask].tobytes() == o[~mask].tobytes()   # the other arm's own bits: -0.0, payloads
    plain = rune.jit(lambda x, o, m: nx.where(m, x * 2, o))   # no call in the loop: a plain select
    assert not any("rn_select_f" in src for src in _sources(plain.plan(*args)))


def test_a_stack_times_a_vector_drops_the_vector_axis_as_numpy():
    x = np.arange(10, dtype=np.float32).reshape(5, 1, 2)
    for v in (np.ones(2, np.float32), np.ones((2, 3), np.float32)):
        want = x @ v
        for f in (lambda a, b: a @ b, rune.jit(lambda a, b: a @ b)):
            got = np.asarray(f(nx.asarray(x), nx.asarray(v)))
            assert got.shape == want.shape and np.array_equal(got, want)


# ---------------------------------------------------------------- stop_gradient

def test_stop_gradient_adds_no_kernel_and_keeps_eager_bits():
    # softmax's max goes through stop_gradient: a plan computes the operand itself, so the
    # row maxima are read where they were reduced, not copied by a kernel of their own
    x = np.random.default_rng(4).standard_normal((64, 300)).astype(np.float32)
    softmax = lambda v: rune.nn.softmax(v, axis=-1)   # noqa: E731
    plain = lambda v: nx.exp(v - nx.max(v, axis=-1, keepdims=True))   # noqa: E731
    stopped = lambda v: nx.exp(v - nx.stop_gradient(nx.max(v, axis=-1, keepdims=True)))   # noqa: E731
    for target in (None, "cuda"):
        kernels = [len(rune.jit(f).plan(x, target=target).kernels) for f in (plain, stopped)]
        assert kernels[0] == kernels[1], (target, kernels)
    cuda = rune.jit(softmax).plan(rune.Spec((64, 300), np.float32), target="cuda").kernels
    assert len(cuda) == 3   # the maxima, the sums, the quotients
    for f in (softmax, stopped):
        assert np.asarray(rune.jit(f)(x)).tobytes() == np.asarray(f(nx.asarray(x))).tobytes()
    y = rune.jit(nx.stop_gradient)(nx.asarray(x))   # an output of its input alone is its own buffer
    np.testing.assert_array_equal(np.asarray(y), x)
