"""rune's public API against its documented public API (README, docs/): pytrees.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import dataclasses
from typing import NamedTuple

import rune

from api_support import f32, f64


# ---------------------------------------------------------------- pytrees

class Pair(NamedTuple):
    a: object
    b: object


@dataclasses.dataclass
class Params:
    w: object
    b: object


try:  # registered at import time as a decorator; a failure here must not hide the other tests
    _REGISTERED = rune.tree.register(Params)
except Exception as _e:  # pragma: no cover
    _REGISTERED = _e


def test_tree_leaves_order_and_none():
    t = {"b": 1, "a": [2, None, (3, 4)]}
    assert rune.tree.leaves(t) == [2, 3, 4, 1]


def test_tree_flatten_unflatten_roundtrip():
    t = {"x": (1, 2), "y": [3, {"z": 4}], "n": None}
    leaves, td = rune.tree.flatten(t)
    assert leaves == [1, 2, 3, 4]
    assert rune.tree.unflatten(td, [10, 20, 30, 40]) == {"x": (10, 20), "y": [30, {"z": 40}], "n": None}


def test_tree_structure_compare():
    assert rune.tree.structure((1, [2, 3])) == rune.tree.structure((5, [6, 7]))
    assert rune.tree.structure((1, [2, 3])) != rune.tree.structure((1, (2, 3)))
    assert rune.tree.structure((1, 2)) == rune.tree.flatten((8, 9))[1]


def test_tree_map_multiple_trees():
    out = rune.tree.map(lambda a, b: a + b, {"p": 1, "q": (2, 3)}, {"p": 10, "q": (20, 30)})
    assert out == {"p": 11, "q": (22, 33)}


def test_tree_map_keeps_none():
    assert rune.tree.map(lambda a: a * 2, (1, None, [3])) == (2, None, [6])


def test_tree_namedtuple():
    out = rune.tree.map(lambda a: a + 1, Pair(1, 2))
    assert isinstance(out, Pair) and out == Pair(2, 3)
    assert rune.tree.leaves(Pair(a=5, b=[6])) == [5, 6]


def test_tree_register_dataclass_decorator_returns_class():
    assert _REGISTERED is Params, _REGISTERED
    p = Params(w=1, b=2)
    assert rune.tree.leaves(p) == [1, 2]
    q = rune.tree.map(lambda v: v * 10, p)
    assert isinstance(q, Params) and q.w == 10 and q.b == 20


def test_tree_register_plain_call():
    @dataclasses.dataclass
    class Box:
        inner: object
    rune.tree.register(Box)
    assert rune.tree.leaves(Box([1, 2])) == [1, 2]


def test_grad_on_namedtuple_and_dataclass():
    g = rune.grad(lambda p: (p.a * p.b).sum())(Pair(f64(2.0), f64(3.0)))
    assert isinstance(g, Pair) and g.a.tolist() == [3.0] and g.b.tolist() == [2.0]
    gp = rune.grad(lambda p: (p.w ** 2).sum() + p.b.sum())(Params(f64(1.0, 2.0), f64(5.0)))
    assert isinstance(gp, Params) and gp.w.tolist() == [2.0, 4.0] and gp.b.tolist() == [1.0]


def test_grad_with_none_in_tree():
    g = rune.grad(lambda t: (t["x"] ** 2).sum())({"x": f64(3.0), "n": None})
    assert g["n"] is None and g["x"].tolist() == [6.0]


def test_jit_pytree_in_out():
    g = rune.jit(lambda t: {"s": t["a"] + t["b"][0], "n": None, "p": Pair(t["a"], t["a"] * 2.0)})
    out = g({"a": f32(1.0), "b": (f32(2.0),)})
    assert out["s"].tolist() == [3.0] and out["n"] is None and isinstance(out["p"], Pair)
    assert out["p"].b.tolist() == [2.0]


def test_vmap_over_dataclass():
    out = rune.vmap(lambda p: p.w * p.b)(Params(f32(1.0, 2.0), f32(3.0, 4.0)))
    assert out.tolist() == [3.0, 8.0]
