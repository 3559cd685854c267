"""The core elementwise primitives are declared once (rune/base/vocabulary.py) and
every layer does what the declaration says: primitives, derivatives, batching,
the eager table and codegen. `cbrt` is the example of a primitive added by its
declaration alone (its nx function binds it)."""
import types

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu.backend import CpuBackend
from rune.base import vocabulary
from rune.codegen import expressions
from rune.codegen.c import CDialect
from rune.codegen.kernel import Node
from rune.core.prims import P
from rune.core.trace import bind
from rune.core.primitive import Lowering, abstract_rules, batch_rules, jvp_rules, no_derivative, vjp_rules

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def test_every_declared_op_is_an_elementwise_primitive_with_its_rules():
    for op in vocabulary.OPS:
        prim = P[op.name]
        assert prim.lowering is Lowering.ELEMENTWISE and prim in abstract_rules and prim in batch_rules, op.name
        assert prim in jvp_rules, op.name
        # no derivative flows through a piecewise-constant op; every other one has a VJP
        assert (prim in no_derivative) == (not op.smooth), op.name
        assert op.smooth == (prim in vjp_rules), op.name
        program = rune.jit(lambda *a: bind(prim, *a)).trace(*[np.ones(2, F32)] * op.arity)
        assert program.eqns[-1].outputs[0].aval.dtype == (np.dtype(bool) if op.boolean else F32), op.name


def test_the_eager_table_computes_the_declared_array_module_function():
    integers = ("not", "and", "or", "xor", "shift_left", "shift_right")
    for op in vocabulary.OPS:
        if op.numpy is None:
            continue
        rng = np.random.default_rng(0)
        args = [rng.integers(0, 5, 6, dtype=np.int32) if op.name in integers else rng.uniform(0.2, 0.8, 6)
                for _ in range(op.arity)]
        with np.errstate(all="ignore"):
            want = getattr(np, op.numpy)(*args)
        np.testing.assert_array_equal(CpuBackend.IMPLS[op.name](*args), want, err_msg=op.name)


def _dummy(dtype):
    return types.SimpleNamespace(dtype=dtype)


def test_codegen_renders_each_declared_c_function_and_knows_the_costly_ops():
    dialect = CDialect()
    for op in vocabulary.OPS:
        assert op.name in expressions.ELEMENTWISE_OPS and expressions.ARITY[op.name] == op.arity
        assert (op.name in expressions.COSTLY_OPS) == op.costly, op.name
        if op.c is not None:   # float64 goes to the target's math library under the declared name
            node = Node(op.name, F64, [_dummy(F64)] * op.arity)
            assert f"{op.c}(" in dialect.expression(node, ["a", "b"][:op.arity]), op.name


# ---------------------------------------------------------------- cbrt, added by its declaration

def test_cbrt_is_one_primitive():
    program = rune.jit(nx.cbrt).trace(np.ones(3, np.float32))
    assert [e.prim.name for e in program.eqns] == ["cbrt"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cbrt_eager_values_and_derivatives(dtype):
    x = np.array([-27.0, -2.5, -1e-30, 0.0, 1e-30, 0.7, 8.0, 1e30, np.inf, -np.inf], dtype)
    got = np.asarray(nx.cbrt(x))
    want = np.cbrt(x.astype(np.float64))   # the float64 oracle, rounded once
    assert got.dtype == dtype
    np.testing.assert_array_max_ulp(got, want.astype(dtype), maxulp=1)
    if dtype == np.float64:   # exact cubes (NumPy's float32 cbrt, which runs eagerly, is within an ulp)
        assert np.asarray(nx.cbrt(np.array([-27.0, 8.0], dtype))).tolist() == [-3.0, 2.0]
    assert np.signbit(np.asarray(nx.cbrt(np.array(-0.0, dtype))))
    # d/dx x^(1/3) = x^(-2/3) / 3 and d2/dx2 = -2/9 x^(-5/3), by the float64 equations
    points = np.array([-8.0, -0.3, 0.5, 27.0], dtype)
    grad = rune.vmap(rune.grad(nx.cbrt))(points)
    second = rune.vmap(rune.grad(rune.grad(nx.cbrt)))(points)
    p64 = points.astype(np.float64)
    np.testing.assert_allclose(np.asarray(grad), np.cbrt(p64) ** -2 / 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(second), -2 / 9 * np.cbrt(p64) ** -5, rtol=1e-5)


@pytest.mark.cc
def test_cbrt_compiled_matches_the_float64_oracle():
    x = np.linspace(-50, 50, 101, dtype=np.float32)
    got = np.asarray(rune.jit(lambda v: nx.cbrt(v) * 2)(x))
    np.testing.assert_array_max_ulp(got, (np.cbrt(x.astype(np.float64)) * 2).astype(np.float32), maxulp=1)
