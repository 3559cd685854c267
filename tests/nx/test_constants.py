"""Constants made on the device: `full` and `iota` primitives, so that no
transformation builds an O(size) array on the host and no staged program
captures one."""
import numpy as np
import pytest

import rune
from rune import nx
from rune.core.prims import P
from rune.core.trace import bind

N = 1000


def _largest_const(program):
    return max((int(np.prod(getattr(c, "shape", ()))) for c in program.consts), default=0)


def _prims(program):
    return {e.prim.name for e in program.eqns}


def test_zeros_plus_one_captures_no_constant():
    program = rune.trace(lambda: nx.zeros((N,)) + 1)()
    assert program.consts == [] and "full" in _prims(program)


def test_creation_functions_stage_no_constant():
    def make():
        return (nx.ones((N,)), nx.full((N,), 3.5), nx.arange(N), nx.arange(3, 3 * N, 3),
                nx.eye(40), nx.zeros_like(nx.ones(3)), nx.ones_like(nx.ones(3), dtype=nx.int32))
    program = rune.trace(make)()
    assert _largest_const(program) < N
    for got, want in zip(make(), (np.ones(N), np.full(N, 3.5), np.arange(N), np.arange(3, 3 * N, 3),
                                  np.eye(40), np.zeros(3), np.ones(3))):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_at_add_stages_no_positions_constant():
    idx, v = nx.array([1, 5, -1]), nx.ones(3)
    program = rune.trace(lambda x: x.at[idx].add(v))(nx.zeros(N))
    assert _largest_const(program) <= 3  # only the closed-over idx and v


def test_vmap_of_a_gather_stages_no_constant():
    program = rune.trace(rune.vmap(lambda row, i: row[i]))(nx.ones((N, 8)), nx.zeros((N, 2), nx.int32))
    assert program.consts == []


def test_jacrev_stages_no_one_hots():
    program = rune.trace(rune.jacrev(nx.sin))(nx.ones(40))
    assert program.consts == [] and "iota" in _prims(program)


def test_grad_seed_is_made_on_the_device():
    program = rune.trace(rune.grad(lambda x: (x * x).sum()))(nx.ones(N))
    assert program.consts == []


@pytest.mark.parametrize("prim", ["iota", "full"])
def test_rules_of_a_traced_operand(prim):
    device = nx.zeros(1).device
    params = dict(shape=(2, 3), device=device, **({"dimension": 1} if prim == "iota" else {}))
    f = lambda s: bind(P[prim], s, **params)
    index = np.arange(3.0) if prim == "iota" else 0.0
    np.testing.assert_array_equal(np.asarray(f(nx.array(2.0))), np.broadcast_to(2.0 + index, (2, 3)))
    _, tangent = rune.jvp(f, (nx.array(1.0),), (nx.array(0.5),))
    np.testing.assert_array_equal(np.asarray(tangent), np.full((2, 3), 0.5))
    assert float(rune.grad(lambda s: f(s).sum())(nx.array(1.0))) == 6.0
    batched = rune.vmap(f)(nx.array([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(batched),
                                  np.stack([np.broadcast_to(s + index, (2, 3)) for s in (1.0, 2.0)]))


def test_fill_values_convert_as_numpy_full():
    assert nx.full(3, 1.5, dtype=nx.int32).tolist() == [1, 1, 1]
    assert nx.full((2,), True).dtype == nx.bool_
    with pytest.raises(OverflowError):
        nx.full(3, 300, dtype=nx.uint8)
    np.testing.assert_array_equal(np.asarray(nx.full((2, 3), [1, 2, 3])), np.full((2, 3), [1, 2, 3]))


def test_constants_are_strong_arrays():
    for x in (nx.ones(3, dtype=nx.float16), nx.zeros(2), nx.full(2, 1.0), nx.arange(3), nx.eye(2)):
        assert not x.weak
