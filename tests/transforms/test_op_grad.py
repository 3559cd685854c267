"""Derivatives of every differentiable op of the op table (tests/op_table.py), on its
float64 (and complex128) samples away from kinks and jumps:

- jvp: the tangent matches central finite differences along random directions.
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

from op_table import F64, is_inexact, is_precise, widest
from op_table_selection import samples, to_rune


def _rng(*parts):
    return np.random.default_rng(zlib.crc32("/".join(parts).encode()))


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


@pytest.mark.parametrize("case,sample", samples(_differentiable))
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


@pytest.mark.parametrize("case,sample", samples(_second_order))
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
