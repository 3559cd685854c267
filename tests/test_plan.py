"""Plans: host steps registered by primitive, stretches closed per device, dead
code removed inside loop and branch bodies (effects kept), and one evaluator
for eager higher-order primitives and jit."""
import json
import os
import subprocess
import sys

import numpy as np

import rune
from rune import nx
from rune.callback import callback_p
from rune.control import cond_p, scan_p, while_p
from rune.core.prims import P
from rune.core.primitive import Primitive
from rune.compiler.plan import STEP_KINDS, _nested_plans

HERE = os.path.dirname(os.path.abspath(__file__))


def _ops(plan):
    """The names of every first-order op a plan runs, nested plans included, sorted."""
    names = []
    for step in plan.steps:
        names += [e.prim.name for e in getattr(step, "eqns", ())]
        for sub in _nested_plans(step):
            names += _ops(sub)
    return sorted(names)


def _calls():
    return rune.stats()["callbacks_run"]


def test_host_steps_are_keyed_by_primitive():
    assert all(type(k) is Primitive for k in STEP_KINDS)
    for prim in (scan_p, while_p, cond_p, callback_p, P["place"]):
        assert prim in STEP_KINDS, prim


# ---------------------------------------------------------------- dead code in bodies

def test_scan_body_drops_dead_work_unused_ys_and_carries():
    def dead(xs):
        def step(carry, x):
            c, k = carry
            waste = nx.sin(x) * 100.0  # never read
            return (c + x, k * 3.0 + waste), (c * 2.0, nx.cos(x))
        (c, _), (y, _) = rune.scan(step, (0.0, 1.0), xs)
        return c, y

    def clean(xs):
        return rune.scan(lambda c, x: (c + x, c * 2.0), 0.0, xs)

    xs = nx.asarray(np.linspace(-1, 1, 7).astype(np.float32))
    assert _ops(rune.jit(dead).plan(xs)) == _ops(rune.jit(clean).plan(xs))
    c, y = rune.jit(dead)(xs)
    ref_c, ref_y = np.float32(0), []
    for x in np.asarray(xs):
        ref_y.append(ref_c * np.float32(2))
        ref_c = ref_c + x
    np.testing.assert_allclose(np.asarray(c), ref_c, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(y), ref_y, rtol=1e-6)
    # eager scan runs the same pruned body
    np.testing.assert_allclose(np.asarray(dead(xs)[0]), ref_c, rtol=1e-6)


def test_while_body_drops_a_carry_nothing_reads():
    def dead(n):
        def body(s):
            i, acc, junk = s
            return i + 1, acc + i * 2, nx.exp(junk) + nx.sin(acc)
        i, acc, _ = rune.while_loop(lambda s: s[0] < n, body, (0, 0, 0.5))
        return acc

    def clean(n):
        return rune.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] + s[0] * 2), (0, 0))[1]

    n = nx.asarray(6)
    assert _ops(rune.jit(dead).plan(n)) == _ops(rune.jit(clean).plan(n))
    assert int(rune.jit(dead)(n)) == sum(2 * i for i in range(6)) == int(dead(n))


def test_cond_branches_drop_unused_outputs():
    def dead(p, x):
        return rune.cond(p, lambda v: (v + 1.0, nx.exp(v) * nx.sin(v)),
                         lambda v: (v - 1.0, nx.log(v)), x)[0]

    def clean(p, x):
        return rune.cond(p, lambda v: v + 1.0, lambda v: v - 1.0, x)

    x = nx.asarray(np.arange(1, 4, dtype=np.float32))
    p = nx.asarray(True)
    assert _ops(rune.jit(dead).plan(p, x)) == _ops(rune.jit(clean).plan(p, x))
    for pred, ref in ((True, np.arange(2, 5)), (False, np.arange(0, 3))):
        np.testing.assert_array_equal(np.asarray(rune.jit(dead)(nx.asarray(pred), x)), ref)


def test_effects_in_bodies_are_kept():
    seen = []

    def log(v):
        seen.append(float(v))
        return np.float32(0)

    def f(xs):
        def step(c, x):
            rune.callback(log, c, like=nx.zeros((), nx.float32))  # result unused: still runs
            return c + x, c
        return rune.scan(step, 0.0, xs)[0] * 0  # carry only reaches the callback and a zeroed output

    xs = nx.ones(4)
    before = _calls()
    rune.jit(f)(xs)
    assert _calls() - before == 4 and seen == [0.0, 1.0, 2.0, 3.0]
    assert "callback" in repr(rune.jit(f).plan(xs))


# ---------------------------------------------------------------- one evaluator

def test_eager_cond_and_custom_rules_run_their_bodies_as_plans():
    x = nx.asarray(np.arange(5, dtype=np.float32))
    rune.reset_stats()
    out = rune.cond(nx.asarray(True), lambda v: nx.sin(v) * 2.0 + 1.0, lambda v: v, x)
    # one stretch for the branch (eager ops alone launch no kernels), run op by
    # op: a branch staged for one eager call is not worth compiling
    s = rune.stats()
    assert s["kernels_launched"] == 1 and s["kernels_compiled"] == 0 and s["disk_cache_hits"] == 0
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(5)) * 2 + 1, rtol=1e-6)

    @rune.custom_vjp
    def f(v):
        return nx.exp(v) * 3.0, lambda ct: ct * nx.exp(v) * 3.0

    rune.reset_stats()
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(np.arange(5)) * 3, rtol=1e-6)
    assert rune.stats()["kernels_launched"] == 1


# ---------------------------------------------------------------- a stretch per device

_TWO_DEVICES = r"""
import json
import numpy as np
import rune
from rune import nx
from rune.compiler.plan import eqn_device

a = nx.place(nx.asarray(np.arange(4, dtype=np.float32)), "cpu:0")
b = nx.place(nx.asarray(np.arange(4, dtype=np.float32) + 10), "cpu:1")
f = rune.jit(lambda a, b: (a * 2.0 + 1.0, nx.sin(b) * 3.0, a - 1.0, b + 1.0))
plan = f.plan(a, b)
stretches = [sorted({str(eqn_device(e)) for e in s.eqns}) for s in plan.steps if hasattr(s, "eqns")]
outs = f(a, b)
print("@@RESULTS@@" + json.dumps(dict(
    stretches=stretches,
    values=[np.asarray(o).tolist() for o in outs],
    devices=[str(o.device) for o in outs])))
"""


def test_a_stretch_never_spans_two_devices():
    env = dict(os.environ, RUNE_HOST_DEVICES="2")
    env.pop("RUNE_DEFAULT_DEVICE", None)
    p = subprocess.run([sys.executable, "-c", _TWO_DEVICES], capture_output=True, text=True, env=env,
                       cwd=os.path.dirname(HERE), timeout=120)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("@@RESULTS@@")]
    assert lines, p.stdout[-2000:] + p.stderr[-3000:]
    got = json.loads(lines[0][len("@@RESULTS@@"):])
    assert got["stretches"] and all(len(d) == 1 for d in got["stretches"]), got["stretches"]
    assert {d[0] for d in got["stretches"]} == {"cpu:0", "cpu:1"}
    a, b = np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32) + 10
    for value, ref in zip(got["values"], (a * 2 + 1, np.sin(b) * 3, a - 1, b + 1)):
        np.testing.assert_allclose(value, ref, rtol=1e-6)
    assert got["devices"] == ["cpu:0", "cpu:1", "cpu:0", "cpu:1"]


def test_unused_outputs_of_inlined_calls_are_dropped():
    @rune.custom_vjp
    def pair(v):
        return (nx.sin(v) * 2.0, nx.exp(v) * nx.cos(v)), lambda ct: (ct[0] * 2.0 * nx.cos(v),)

    x = nx.asarray(np.linspace(0, 1, 5).astype(np.float32))
    f = rune.jit(lambda v: pair(v)[0])
    assert _ops(f.plan(x)) == _ops(rune.jit(lambda v: nx.sin(v) * 2.0).plan(x))
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(np.asarray(x)) * 2, rtol=1e-6)


def test_a_numpy_stretch_gives_the_same_results_on_every_run():
    # The first run calls the implementations in a loop; later runs call the
    # straight-line function written from the same ops.
    from rune.compiler.plan import Stretch

    f = rune.jit(lambda x, i: (nx.sort(x, axis=1), x[i] * 2.0))  # sort: never compiled
    x = nx.asarray(np.random.default_rng(0).normal(size=(6, 5)).astype(np.float32))
    i = nx.asarray(np.array([4, 0, 2], np.int32))
    plan = f.plan(x, i)
    stretches = [s for s in plan.steps if type(s) is Stretch]
    assert stretches and "sort" in stretches[0].source
    xh = np.asarray(x)
    for _ in range(3):
        a, g = f(x, i)
        np.testing.assert_array_equal(np.asarray(a), np.sort(xh, axis=1))
        np.testing.assert_array_equal(np.asarray(g), xh[[4, 0, 2]] * 2)
