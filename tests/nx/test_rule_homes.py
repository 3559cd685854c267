"""One home per primitive: the module that defines a primitive holds all of its
rules (abstract, JVP, VJP, batching), as JAX's lax/linalg.py does; only the
core first-order primitives split theirs over three modules."""
import functools
import inspect
import pathlib

import rune
import rune.distributed  # noqa: F401  (its collectives are primitives too)
from rune.base import vocabulary
from rune.transforms.autodiff.vjp import vjp_forward
from rune.core.primitive import abstract_rules, batch_rules, jvp_rules, no_derivative, vjp_rules

ROOT = pathlib.Path(rune.__file__).parent

# The core first-order primitives (rune/core/prims.py): their abstract rules are
# there, their derivatives in rune/transforms/autodiff/rules.py and their batching rules in
# rune/transforms/batching.py, the layers that run them, because every other rule is
# written in terms of them.
# The elementwise ones are those declared in rune/base/vocabulary.py.
CORE_FIRST_ORDER = frozenset(vocabulary.BY_NAME) | frozenset("""
    reduce_sum reduce_max reduce_min reduce_prod argmax argmin
    select convert broadcast_to reshape transpose slice rev pad concatenate gather scatter
    dynamic_slice dynamic_update_slice dot_general random_bits place iota full
""".split())
CORE_HOMES = {"abstract": "rune.core.prims", "jvp": "rune.transforms.autodiff.rules", "vjp": "rune.transforms.autodiff.rules",
              "batch": "rune.transforms.batching"}


def _module(rule):
    while isinstance(rule, functools.partial):   # a partial is defined where its function is
        rule = rule.func
    return inspect.getmodule(rule).__name__


def _rule_modules(prim):
    """The module defining each of `prim`'s rules, by kind (kinds it lacks left out)."""
    rules = {"abstract": abstract_rules[prim], "jvp": jvp_rules.get(prim), "vjp": vjp_rules.get(prim),
             "batch": batch_rules.get(prim)}
    if prim in vjp_forward:   # higher-order primitives: a forward pass emitting residuals
        rules["vjp"] = vjp_forward[prim][0]
    return {kind: _module(rule) for kind, rule in rules.items() if rule is not None}


def _primitives():
    return sorted({*abstract_rules, *jvp_rules, *vjp_rules, *batch_rules}, key=lambda p: p.name)


def test_every_rule_of_a_primitive_is_defined_in_one_module():
    split = {}
    for prim in _primitives():
        if prim.name in CORE_FIRST_ORDER:
            continue
        modules = _rule_modules(prim)
        if len(set(modules.values())) != 1:
            split[prim.name] = modules
    assert not split, split


def test_core_first_order_primitives_keep_their_three_homes():
    names = {p.name for p in _primitives()}
    assert CORE_FIRST_ORDER <= names, CORE_FIRST_ORDER - names
    wrong = {}
    for prim in _primitives():
        if prim.name in CORE_FIRST_ORDER:
            modules = _rule_modules(prim)
            if any(CORE_HOMES[kind] != module for kind, module in modules.items()):
                wrong[prim.name] = modules
    assert not wrong, wrong


def test_every_primitive_has_an_abstract_rule_and_a_way_through_each_transformation():
    # A primitive without a JVP fails under jvp; one without a VJP (and not marked
    # as carrying no derivative) fails under grad; batching falls back to a loop.
    missing = {}
    for p in _primitives():
        has = {"abstract": p in abstract_rules, "jvp": p in jvp_rules,
               "vjp": p in vjp_rules or p in vjp_forward or p in no_derivative}
        if not all(has.values()):
            missing[p.name] = [kind for kind, ok in has.items() if not ok]
    assert not missing, missing


def test_the_family_modules_are_the_homes_of_their_primitives():
    expected = {"linalg_cholesky": "rune.nx.linalg", "linalg_svd": "rune.nx.linalg", "fft": "rune.nx.fft",
                "conv": "rune.nx.convolution", "reduce_window": "rune.nx.convolution", "argsort": "rune.nx.sorting",
                "log2": "rune.nx.mathfuncs", "hypot": "rune.nx.mathfuncs", "trunc": "rune.nx.mathfuncs",
                "real": "rune.nx.complex", "complex": "rune.nx.complex", "scan": "rune.transforms.control",
                "callback": "rune.transforms.callback"}
    by_name = {p.name: p for p in _primitives()}
    homes = {name: set(_rule_modules(by_name[name]).values()) for name in expected}
    assert homes == {name: {module} for name, module in expected.items()}


def test_the_check_sees_a_rule_registered_from_another_module():
    # A rule written outside the primitive's module (as the root *_rules.py files did) is caught.
    prim = next(p for p in _primitives() if p.name == "argsort")
    saved = batch_rules[prim]
    batch_rules[prim] = _module   # any function of this test module
    try:
        assert set(_rule_modules(prim).values()) == {"rune.nx.sorting", __name__}
    finally:
        batch_rules[prim] = saved


def test_no_root_rules_modules_and_no_side_effect_imports():
    assert sorted(p.name for p in ROOT.glob("*_rules.py")) == []
    assert sorted(p.name for p in (ROOT / "nx").glob("*_prims.py")) == []
    assert "noqa: F401" not in (ROOT / "__init__.py").read_text()
