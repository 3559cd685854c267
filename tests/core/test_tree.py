"""Tests of rune.tree: flattening, rebuilding, mapping and prefixes of pytrees."""

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

from rune import tree
from rune.errors import RuneError, TreeError


@tree.register
@dataclasses.dataclass
class Params:
    w: object
    b: object


@dataclasses.dataclass(frozen=True)
class Unregistered:
    x: object


class Point(NamedTuple):
    x: object
    y: object


class Box:
    """A custom container: `items` are children, `label` is aux data."""

    def __init__(self, label, items):
        self.label = label
        self.items = items

    def __eq__(self, other):
        return isinstance(other, Box) and (self.label, self.items) == (other.label, other.items)


tree.register(Box, lambda b: (b.items, b.label), lambda label, items: Box(label, list(items)))


def assert_same(a, b):
    """Trees equal leaf by leaf (numpy leaves compared elementwise)."""
    assert type(a) is type(b)
    la, sa = tree.flatten(a)
    lb, sb = tree.flatten(b)
    assert sa == sb
    for x, y in zip(la, lb):
        assert type(x) is type(y)
        np.testing.assert_array_equal(x, y)


def every_kind():
    return (
        1,
        [2.0, np.arange(3)],
        {"z": 3, "a": None, "m": (4,)},
        None,
        Point(x=5, y=[6]),
        Params(w=np.ones((2, 2)), b=7),
        Box("lbl", [8, {"k": 9}]),
        (),
        [],
        {},
    )


def test_round_trip_every_container_kind():
    t = every_kind()
    flat, s = tree.flatten(t)
    assert len(flat) == s.num_leaves == 11
    # Dict children come in sorted key order: 'a' (None, no leaves), 'm', 'z'.
    assert flat[:5] == [1, 2.0, flat[2], 4, 3]
    back = tree.unflatten(s, flat)
    assert_same(back, t)
    assert isinstance(back[4], Point) and isinstance(back[5], Params) and isinstance(back[6], Box)
    assert back[6].label == "lbl"
    assert back[3] is None and back[2]["a"] is None


def test_leaves_are_everything_unregistered():
    for leaf in [1, 2.5, "s", np.float32(1), np.zeros(2), Unregistered(1), {1, 2}]:
        flat, s = tree.flatten(leaf)
        assert len(flat) == 1 and flat[0] is leaf
        assert s == tree.structure(0)
        assert tree.unflatten(s, [leaf]) is leaf


def test_none_is_an_empty_container():
    assert tree.leaves(None) == []
    assert tree.leaves([None, 1, (None,)]) == [1]
    assert tree.unflatten(tree.structure(None), []) is None


def test_dict_insertion_order_does_not_matter():
    a = {"b": 1, "a": 2, "c": 3}
    b = {"c": 3, "a": 2, "b": 1}
    assert tree.leaves(a) == [2, 1, 3]
    assert tree.structure(a) == tree.structure(b)
    assert list(tree.unflatten(tree.structure(a), [0, 0, 0])) == ["a", "b", "c"]


def test_unsortable_dict_keys():
    with pytest.raises(TreeError, match="sortable"):
        tree.flatten({1: 0, "a": 0})


def test_is_leaf_stops_at_containers():
    t = {"a": (1, 2), "b": [3, (4, 5)]}
    flat, s = tree.flatten(t, is_leaf=lambda x: isinstance(x, tuple))
    assert flat == [(1, 2), 3, (4, 5)]
    assert tree.unflatten(s, flat) == t


def test_deep_tree_has_no_recursion_limit():
    t = 0
    for _ in range(5000):
        t = [t]
    flat, s = tree.flatten(t)
    assert flat == [0]
    back = tree.unflatten(s, [1])
    for _ in range(5000):
        back = back[0]
    assert back == 1


def test_structure_equality_and_hash():
    a = tree.structure((np.ones(2), {"x": 1, "y": [2, 3]}))
    b = tree.structure((5, {"y": [0, 0], "x": "leaf"}))
    assert a == b and hash(a) == hash(b)
    assert {a: "hit"}[b] == "hit"
    different = [
        tree.structure((1, {"x": 1, "y": (2, 3)})),  # list vs tuple
        tree.structure((1, {"x": 1, "z": [2, 3]})),  # key names
        tree.structure((1, {"x": 1, "y": [2, 3, 4]})),  # arity
        tree.structure([1, {"x": 1, "y": [2, 3]}]),  # root type
        tree.structure((1, {"x": None, "y": [2, 3]})),  # None vs leaf
    ]
    for other in different:
        assert a != other
    assert a != "not a structure"
    assert tree.structure(Point(1, 2)) != tree.structure((1, 2))
    assert tree.structure(Box("p", [1])) != tree.structure(Box("q", [1]))  # aux data counts


def test_structure_repr():
    s = tree.structure((1, {"b": [2, 3], "a": 4}))
    assert repr(s) == "Structure((*, {'a': *, 'b': [*, *]}))"
    assert repr(tree.structure((1,))) == "Structure((*,))"
    assert repr(tree.structure(5)) == "Structure(*)"
    assert repr(tree.structure(None)) == "Structure(None)"
    assert repr(tree.structure(Point(1, None))) == "Structure(Point(x=*, y=None))"
    assert repr(tree.structure(Params(1, 2))) == "Structure(Params(w=*, b=*))"
    assert repr(tree.structure(Box("lbl", [1]))) == "Structure(Box['lbl'](*))"


def test_structure_children():
    s = tree.structure((1, {"a": [2, 3]}, None))
    assert s.children() == [tree.structure(0), tree.structure({"a": [0, 0]}), tree.structure(None)]
    assert [c.num_leaves for c in s.children()] == [1, 2, 0]
    assert tree.structure(1).children() == []


def test_unflatten_wrong_count():
    s = tree.structure((1, [2, 3]))
    with pytest.raises(TreeError, match="expected 3 leaves, got 2"):
        s.unflatten([1, 2])
    with pytest.raises(TreeError, match="expected 3 leaves, got 4"):
        tree.unflatten(s, [1, 2, 3, 4])


def test_tree_error_is_a_value_error():
    with pytest.raises(ValueError):
        tree.unflatten(tree.structure([1]), [])
    assert issubclass(TreeError, RuneError)


def test_map_one_tree():
    t = every_kind()
    out = tree.map(lambda x: x * 2, t)
    assert tree.structure(out) == tree.structure(t)
    assert out[0] == 2 and out[4].y == [12] and out[6].items[1]["k"] == 18


def test_map_many_trees():
    a = {"w": np.ones(2), "b": [1, 2]}
    b = {"b": [10, 20], "w": np.full(2, 3.0)}
    c = {"w": 1, "b": [100, 200]}
    out = tree.map(lambda x, y, z: x + y + z, a, b, c)
    assert out["b"] == [111, 222]
    np.testing.assert_array_equal(out["w"], [5.0, 5.0])


def test_map_with_is_leaf():
    out = tree.map(len, {"a": (1, 2), "b": [(3,)]}, is_leaf=lambda x: isinstance(x, tuple))
    assert out == {"a": 2, "b": [1]}


def test_map_mismatch_names_path_and_structures():
    a = (1, {"a": 2, "b": [3, 4]})
    b = (1, {"a": 2, "b": [3, 4, 5]})
    with pytest.raises(TreeError) as info:
        tree.map(lambda x, y: x, a, b)
    message = str(info.value)
    assert "[1]['b']" in message
    assert repr(tree.structure(a)) in message and repr(tree.structure(b)) in message


def test_map_mismatch_in_later_tree_and_at_root():
    with pytest.raises(TreeError, match=r"tree 2 .*at \.y"):
        tree.map(lambda *xs: 0, Point(1, 2), Point(3, 4), Point(5, (6,)))
    with pytest.raises(TreeError, match="the root"):
        tree.map(lambda x, y: 0, [1], (1,))


def test_flatten_with_paths():
    t = ({"w": 1, "b": [2, None]}, Point(3, Params(4, 5)), Box("l", [6]), 7)
    pairs, s = tree.flatten_with_paths(t)
    assert pairs == [
        ("[0]['b'][0]", 2),
        ("[0]['w']", 1),
        ("[1].x", 3),
        ("[1].y.w", 4),
        ("[1].y.b", 5),
        ("[2][0]", 6),
        ("[3]", 7),
    ]
    assert s == tree.structure(t)
    assert tree.flatten_with_paths(5) == ([("", 5)], tree.structure(0))


def test_prefix_broadcast_leaf_prefix():
    t = (np.ones(2), {"a": 1, "b": [2, 3]})
    assert tree.prefix_broadcast(0, t, "in_axes") == [0, 0, 0, 0]
    assert tree.prefix_broadcast(None, t, "in_axes") == [None] * 4


def test_prefix_broadcast_partial_prefix():
    t = (np.ones(2), {"a": 1, "b": [2, 3]}, 4)
    assert tree.prefix_broadcast((0, None, 1), t, "in_axes") == [0, None, None, None, 1]
    assert tree.prefix_broadcast((0, {"b": 1, "a": None}, 0), t, "in_axes") == [0, None, 1, 1, 0]
    assert tree.prefix_broadcast((0, {"a": 2, "b": [3, None]}, 1), t, "in_axes") == [0, 2, 3, None, 1]


def test_prefix_broadcast_none_matches_empty_subtree():
    t = (np.ones(2), None, Point(1, 2))
    assert tree.prefix_broadcast((1, None, Point(0, None)), t, "in_axes") == [1, 0, None]
    assert tree.prefix_broadcast((1, 2, 3), t, "in_axes") == [1, 3, 3]


def test_prefix_broadcast_not_a_prefix():
    t = (1, {"a": 2, "b": [3, 4]})
    with pytest.raises(TreeError) as info:
        tree.prefix_broadcast((0, {"a": 0, "b": (0, 0)}), t, "vmap in_axes")
    message = str(info.value)
    assert "vmap in_axes" in message and "[1]['b']" in message
    with pytest.raises(TreeError, match=r"in_axes.*\[1\]"):
        tree.prefix_broadcast((0, {"a": 0}), t, "in_axes")
    with pytest.raises(TreeError, match="in_axes.*the root"):
        tree.prefix_broadcast((0, 0, 0), t, "in_axes")
    with pytest.raises(TreeError, match=r"out_axes.*\[0\]"):
        tree.prefix_broadcast(([0], 0), t, "out_axes")  # a prefix cannot be deeper than the tree


def test_register_as_decorator_returns_class():
    @dataclasses.dataclass
    class Local:
        a: object
        b: object = 0

    assert tree.register(Local) is Local
    flat, s = tree.flatten(Local(a=[1, 2], b=3))
    assert flat == [1, 2, 3]
    assert tree.unflatten(s, [4, 5, 6]) == Local(a=[4, 5], b=6)


def test_register_frozen_dataclass():
    @tree.register
    @dataclasses.dataclass(frozen=True)
    class Frozen:
        x: object

    assert tree.map(lambda v: v + 1, Frozen(1)) == Frozen(2)


def test_register_errors():
    with pytest.raises(TreeError, match="already registered"):
        tree.register(Params)
    with pytest.raises(TreeError, match="flatten and unflatten"):
        tree.register(type("Plain", (), {}))
    with pytest.raises(TreeError, match="both"):
        tree.register(type("Half", (), {}), flatten=lambda o: ((), None))

    @dataclasses.dataclass
    class Derived:
        x: object
        y: object = dataclasses.field(init=False, default=0)

    with pytest.raises(TreeError, match="init=False"):
        tree.register(Derived)


def test_unhashable_aux_data():
    class Bag:
        pass

    tree.register(Bag, lambda b: ((), ["unhashable"]), lambda aux, children: Bag())
    with pytest.raises(TreeError, match="hashable"):
        tree.flatten(Bag())


def test_subclass_of_registered_class_is_a_leaf():
    class SubParams(Params):
        pass

    sp = SubParams(1, 2)
    assert tree.leaves(sp) == [sp]


def test_leaves_and_structure_agree_with_flatten():
    t = every_kind()
    flat, s = tree.flatten(t)
    assert tree.structure(t) == s
    assert len(tree.leaves(t)) == len(flat)


# ---------------------------------------------------------------- cycles


def _cyclic_trees():
    """(tree that contains itself, path of the back reference, path of the container it repeats)."""
    lst = [1.0]
    lst.append(lst)
    dct = {"a": [2.0]}
    dct["a"].insert(0, dct)
    inner = [3.0]
    nested = {"a": inner, "b": 4.0}
    inner.append(inner)
    node = Params(w=[5.0], b=None)
    node.b = (6.0, node)
    boxed = Box("k", [7.0])
    boxed.items.append(Point(boxed, 8.0))
    return [
        (lst, "[1]", "the root"),
        (dct, "['a'][0]", "the root"),
        (nested, "['a'][1]", "['a']"),
        (node, ".b[1]", "the root"),
        (boxed, "[1].x", "the root"),
    ]


@pytest.mark.parametrize("cyclic,path,ancestor", _cyclic_trees())
def test_a_tree_that_contains_itself_is_an_error_naming_the_path(cyclic, path, ancestor):
    for fn in (tree.flatten, tree.leaves, tree.structure, lambda t: tree.map(lambda x: x, t)):
        with pytest.raises(TreeError) as info:
            fn(cyclic)
        assert f"at {path} is the one at {ancestor}" in str(info.value)
        assert isinstance(info.value, ValueError)


def test_shared_subtrees_are_not_cycles():
    shared = [1.0, (2.0,)]
    point = Point(shared, shared)
    t = {"x": shared, "y": [shared, point], "z": (None, None, (), ())}
    leaves, struct = tree.flatten(t)
    assert leaves == [1.0, 2.0] * 4
    assert struct.unflatten(leaves) == t
    # A cycle below a shared subtree is still found once the sharing was checked.
    loop = [0.0]
    loop.append(loop)
    with pytest.raises(TreeError, match=r"at \[2\]\[1\]\[1\] is the one at \[2\]\[1\]"):
        tree.flatten([shared, shared, [9.0, loop]])


def test_transformations_report_a_cyclic_argument():
    import rune
    from rune import nx

    x = nx.ones(3)
    loop = [x]
    loop.append(loop)
    entries = {
        "jit": lambda: rune.jit(lambda t: t[0])(loop),
        "grad": lambda: rune.grad(lambda t: nx.sum(t[0]))(loop),
        "vmap": lambda: rune.vmap(lambda t: t[0])(loop),
        "place": lambda: rune.place(loop, "cpu"),
        "callback": lambda: rune.callback(lambda t: t[0], loop, like=rune.Spec((3,), "float32")),
    }
    for name, call in entries.items():
        with pytest.raises(TreeError, match=r"contains itself: the container at \S*\[1\] is the one at"):
            call()


# ---------------------------------------------------------------- register_dataclass


def test_register_dataclass_infers_static_fields_as_meta():
    @tree.register_dataclass
    @dataclasses.dataclass
    class Layer:
        w: object
        activation: str = dataclasses.field(default="relu", metadata=dict(static=True))
        b: object = 0.0

    layer = Layer([1.0, 2.0], "tanh", 3.0)
    flat, s = tree.flatten(layer)
    assert flat == [1.0, 2.0, 3.0]
    assert s.unflatten([4.0, 5.0, 6.0]) == Layer([4.0, 5.0], "tanh", 6.0)
    assert s != tree.structure(Layer([1.0, 2.0], "relu", 3.0))  # meta fields are part of the structure
    assert [p for p, _ in tree.flatten_with_paths(layer)[0]] == [".w[0]", ".w[1]", ".b"]
    assert repr(s) == "Structure(Layer(w=[*, *], b=*, activation='tanh'))"


def test_register_dataclass_with_explicit_fields_and_a_plain_class():
    class Pair:
        def __init__(self, x, y, name):
            self.x, self.y, self.name = x, y, name

    assert tree.register_dataclass(Pair, data_fields=["y", "x"], meta_fields=["name"]) is Pair
    flat, s = tree.flatten(Pair(1, 2, "p"))
    assert flat == [2, 1]
    back = s.unflatten([20, 10])
    assert (back.x, back.y, back.name) == (10, 20, "p")

    @dataclasses.dataclass
    class Both:
        a: object
        b: object
        c: object = dataclasses.field(init=False, default=None)  # left to the constructor

    tree.register_dataclass(Both, ["b"], ["a"])
    assert tree.leaves(Both(1, 2)) == [2]


def test_register_dataclass_errors():
    @dataclasses.dataclass
    class D:
        a: object
        b: object

    with pytest.raises(TreeError, match="both data_fields and meta_fields"):
        tree.register_dataclass(D, data_fields=["a", "b"])
    with pytest.raises(TreeError, match="each init field"):
        tree.register_dataclass(D, data_fields=["a"], meta_fields=[])
    with pytest.raises(TreeError, match="each init field"):
        tree.register_dataclass(D, data_fields=["a", "b"], meta_fields=["a"])
    with pytest.raises(TreeError, match="needs data_fields and meta_fields, or a dataclass"):
        tree.register_dataclass(type("Plain", (), {}))
    with pytest.raises(TreeError, match="already registered"):
        tree.register_dataclass(Params)


def test_register_dataclass_meta_fields_are_static_under_jit():
    import rune
    from rune import nx

    @tree.register_dataclass
    @dataclasses.dataclass
    class Scaled:
        x: object
        power: int = dataclasses.field(metadata=dict(static=True))

    @rune.jit
    def apply(s):
        out = s.x
        for _ in range(s.power - 1):  # a Python loop over a meta field: it is not traced
            out = out * s.x
        return Scaled(out, s.power)

    x = np.array([1.0, 2.0, 3.0], np.float32)
    for power in (2, 3):
        got = apply(Scaled(nx.asarray(x), power))
        assert got.power == power
        np.testing.assert_allclose(np.asarray(got.x), x ** power)
    g = rune.grad(lambda s: nx.sum(s.x ** s.power))(Scaled(nx.asarray(x), 3))
    assert g.power == 3
    np.testing.assert_allclose(np.asarray(g.x), 3 * x ** 2)


def test_a_cycle_through_tuples_is_found_at_its_mutable_link():
    t = ([1.0],)
    t[0].append(t)
    with pytest.raises(TreeError, match=r"at \[0\]\[1\] is the one at the root"):
        tree.flatten(t)
    shared = (1.0, 2.0)
    assert tree.leaves([shared, (shared, shared)]) == [1.0, 2.0] * 3
