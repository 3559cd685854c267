"""Kernel lowering keyed by `Primitive` and decided by the target's renderer.

A primitive declares how it lowers (rune/core/primitive.py, `declare_lowering`);
the planner asks the target's codegen dialect whether it renders each node
(rune/compiler/fuse.py, `lowerable`), so a function of the standard library
(log2, hypot, ...) fuses with its neighbours, and a node a target cannot render
is planned op by op for it instead of failing (or being caught) when rendering.
"""
import numpy as np
import pytest

import rune
from rune import nx
from rune.codegen.c import CDialect
from rune.codegen.cuda import CudaDialect
from rune.compiler import fuse
from rune.compiler.plan import Stretch
from rune.compiler.target import TargetStretch
from rune.core.primitive import Lowering
from rune.core import prims
from rune.core.prims import P

from compiled import numpy_stretches

N = 10_000


def _positive(n=N, seed=0):
    return np.random.default_rng(seed).uniform(0.25, 2.0, n).astype(np.float32)


def _chain(fn):
    """exp(fn(...) * 2 + 1) + 3: one elementwise chain around `fn`."""
    return lambda *xs: nx.exp(fn(*xs) * 2.0 + 1.0) + 3.0


def _numpy_chain(fn, *xs):
    return np.exp(fn(*xs) * np.float32(2.0) + np.float32(1.0)) + np.float32(3.0)


# (nx function, NumPy oracle, arity)
FUNCTIONS = {
    "log2": (nx.log2, np.log2, 1),
    "log10": (nx.log10, np.log10, 1),
    "trunc": (nx.trunc, np.trunc, 1),
    "hypot": (nx.hypot, np.hypot, 2),
}


@pytest.mark.cc
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_chain_around_a_math_function_is_one_compiled_step(name):
    fn, oracle, arity = FUNCTIONS[name]
    args = [_positive(seed=k) * (3.0 if name == "trunc" else 1.0) for k in range(arity)]
    jitted = rune.jit(_chain(fn))
    plan = jitted.plan(*[nx.asarray(a) for a in args])
    assert len(plan.steps) == 1 and not numpy_stretches(plan), plan
    assert len(plan.kernels) == 1, plan
    got = np.asarray(jitted(*[nx.asarray(a) for a in args]))
    np.testing.assert_allclose(got, _numpy_chain(oracle, *args), rtol=2e-6)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_chain_around_a_math_function_is_one_cuda_stretch(name):
    # Planning for a target needs neither its device nor a compiler: the CUDA dialect decides.
    fn, _, arity = FUNCTIONS[name]
    args = [nx.asarray(_positive(seed=k)) for k in range(arity)]
    plan = rune.jit(_chain(fn)).plan(*args, target="cuda")
    assert [type(s) for s in plan.steps] == [TargetStretch], plan
    assert name in plan.steps[0].describe()


def test_a_node_the_target_cannot_render_is_planned_op_by_op(monkeypatch):
    # A dialect without a rule for tanh: the planner asks it first, so tanh runs op by op
    # between two fused runs and the dialect is never asked to render a tanh node.
    can_render, expression = CudaDialect.can_render, CudaDialect.expression
    rendered = []

    def without_tanh(self, op, in_dtypes, out_dtype):
        return op != "tanh" and can_render(self, op, in_dtypes, out_dtype)

    def recording(self, node, args):
        rendered.append(node.op)
        return expression(self, node, args)

    monkeypatch.setattr(CudaDialect, "can_render", without_tanh)
    monkeypatch.setattr(CudaDialect, "expression", recording)
    x = nx.asarray(_positive())
    plan = rune.jit(lambda x: nx.tanh(nx.sin(x) * 2.0) + 1.0).plan(x, target="cuda")
    assert [type(s) for s in plan.steps] == [TargetStretch, Stretch, TargetStretch], plan
    assert [e.prim for e in plan.steps[1].eqns] == [P["tanh"]]
    assert "sin" in rendered and "tanh" not in rendered


@pytest.mark.cc
def test_the_host_plan_asks_the_host_dialect(monkeypatch):
    # The same refusal in the host's C dialect: the host plan splits there, and the
    # result is still NumPy's.
    can_render = CDialect.can_render
    monkeypatch.setattr(CDialect, "can_render",
                        lambda self, op, ins, out: op != "sin" and can_render(self, op, ins, out))
    a = _positive()
    jitted = rune.jit(lambda x: nx.sin(x + 1.0) * 3.0)
    plan = jitted.plan(nx.asarray(a))
    assert [e.prim for st in numpy_stretches(plan) for e in st.eqns] == [P["sin"]], plan
    assert len(plan.kernels) == 2, plan   # the add before sin and the mul after it
    np.testing.assert_allclose(np.asarray(jitted(nx.asarray(a))), np.sin(a + np.float32(1.0)) * np.float32(3.0),
                               rtol=1e-6)


def test_lowerable_asks_the_renderer_it_is_given():
    # One equation, two renderers: lowered for the one that renders it, not for the other.
    class Refusing:
        def can_render(self, op, in_dtypes, out_dtype):
            return False

    (eqn,) = rune.jit(nx.log).trace(nx.asarray(_positive(8))).eqns
    assert fuse.lowerable(eqn, renderer=CudaDialect())
    assert not fuse.lowerable(eqn, renderer=Refusing())


def test_core_primitives_declare_how_they_lower():
    elementwise = prims.UNARY + prims.BINARY + prims.COMPARE + prims.PREDICATE + ("select", "convert")
    assert {P[n].lowering for n in elementwise} == {Lowering.ELEMENTWISE}
    assert all(P[n].ir_op == n for n in elementwise)   # each an IR op of its own name
    assert {P[n].lowering for n in prims.REDUCE + ("argmax", "argmin")} == {Lowering.REDUCE}
    assert P["dot_general"].lowering is Lowering.LIBRARY
    assert P["place"].lowering is None   # a copy between devices: never lowered
