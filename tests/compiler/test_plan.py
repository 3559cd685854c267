"""Plans: host steps registered by primitive, one step protocol, plans built from
(program, target, device) and kept by the compiler, stretches closed per device,
dead code removed inside loop and branch bodies (effects kept), and one
evaluator for eager higher-order primitives and jit."""
import json
import os
import subprocess
import sys

import numpy as np

import rune
from rune import nx
from rune.backends.cpu import compiler
from rune.transforms.callback import callback_p
from rune.transforms.control import cond_p, scan_p, while_p
from rune.core.prims import P
from rune.core.primitive import Primitive
from rune.compiler.control_steps import STEP_KINDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository


def _ops(plan):
    """The names of every first-order op a plan runs, nested plans included, sorted."""
    names = []
    for step in plan.steps:
        names += [e.prim.name for e in getattr(step, "eqns", ())]
        for sub in step.plans:
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
            return i + 1, acc + i * 2, nx.exp(junk) + nx.sin(acc).astype(junk.dtype)   # sin(int32) is float64
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
from rune.compiler.steps import eqn_device
from rune.core.devices import current_default

a = nx.place(nx.asarray(np.arange(4, dtype=np.float32)), "cpu:0")
b = nx.place(nx.asarray(np.arange(4, dtype=np.float32) + 10), "cpu:1")
f = rune.jit(lambda a, b: (a * 2.0 + 1.0, nx.sin(b) * 3.0, a - 1.0, b + 1.0))
plan = f.plan(a, b)
stretches = [sorted({str(eqn_device(e, current_default())) for e in s.eqns})
             for s in plan.steps if hasattr(s, "eqns")]
outs = f(a, b)
print("@@RESULTS@@" + json.dumps(dict(
    stretches=stretches,
    values=[np.asarray(o).tolist() for o in outs],
    devices=[str(o.device) for o in outs])))
"""


def _with_two_host_devices(script):
    """The JSON `script` prints after @@RESULTS@@, run in a process with two host devices."""
    env = dict(os.environ, RUNE_HOST_DEVICES="2")
    env.pop("RUNE_DEFAULT_DEVICE", None)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=120)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("@@RESULTS@@")]
    assert lines, p.stdout[-2000:] + p.stderr[-3000:]
    return json.loads(lines[0][len("@@RESULTS@@"):])


def test_a_stretch_never_spans_two_devices():
    got = _with_two_host_devices(_TWO_DEVICES)
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
    from rune.compiler.steps import Stretch

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


# ---------------------------------------------------------------- plans from explicit inputs

_PLANNED_FOR_CUDA_RUN_ON_CPU1 = r"""
import json
import numpy as np
import rune
from rune import nx
from rune.compiler.target import TargetStretch

xs = np.linspace(-1.0, 1.0, 6).astype(np.float32)


def step(c, x):
    w = nx.arange(2.0)   # made in the body: lies on the default device
    return c * 0.5 + nx.sin(x), (c + x, w * x)


def loop(xs):
    return rune.scan(step, 0.0, xs)


# Planned for CUDA under either default device: the bodies hold CUDA stretches,
# kept by the compiler with the very body programs eager calls reuse below.
cuda_bodies = []
for where in ("cpu:0", "cpu:1"):
    with rune.default_device(where):
        plan = rune.jit(loop).plan(nx.asarray(xs), target="cuda")
    cuda_bodies.append(any(type(s) is TargetStretch for st in plan.steps for sub in st.plans
                           for s in sub.steps))
runs = []
with rune.default_device("cpu:1"):
    for _ in range(3):   # the first run op by op, the later ones through the kept plans
        c, (ys, ws) = loop(nx.asarray(xs))
        runs.append(dict(values=[np.asarray(v).tolist() for v in (c, ys, ws)],
                         devices=[str(v.device) for v in (c, ys, ws)]))
    jc, (jys, jws) = rune.jit(loop)(nx.asarray(xs))
    runs.append(dict(values=[np.asarray(v).tolist() for v in (jc, jys, jws)],
                     devices=[str(v.device) for v in (jc, jys, jws)]))
print("@@RESULTS@@" + json.dumps(dict(cuda_bodies=cuda_bodies, runs=runs)))
"""


def test_a_scan_planned_for_cuda_runs_eagerly_on_the_default_device():
    got = _with_two_host_devices(_PLANNED_FOR_CUDA_RUN_ON_CPU1)
    assert got["cuda_bodies"] == [True, True]
    xs = np.linspace(-1.0, 1.0, 6).astype(np.float32)
    c, ys, ws = np.float32(0), [], []
    for x in xs:
        ys.append(c + x)
        ws.append(np.arange(2, dtype=np.float32) * x)
        c = c * np.float32(0.5) + np.sin(x)
    for run in got["runs"]:
        assert run["devices"] == ["cpu:1"] * 3
        for value, ref in zip(run["values"], (c, ys, ws)):
            np.testing.assert_allclose(value, ref, rtol=1e-6, atol=1e-7)


def _walk(plan):
    yield plan
    for step in plan.steps:
        for sub in step.plans:
            yield from _walk(sub)


def test_every_step_follows_the_step_protocol():
    from rune.compiler.plan import Plan

    seen = []

    def log(v):
        seen.append(float(v))
        return np.float32(0)

    def f(x, w, p):
        y = nx.tanh(x @ w).T                                             # library call, kernels, views
        y = nx.sort(y, axis=0)                                           # op by op
        s, ys = rune.scan(lambda c, r: (c + r.sum(), c * 2.0), 0.0, y)   # a loop with a body plan
        t = rune.while_loop(lambda k: k < 3.0, lambda k: k + 1.0, s * 0.0)
        u = rune.cond(p, lambda v: v * 2.0, lambda v: v - 1.0, ys)       # a branch per plan
        rune.callback(log, t, like=nx.zeros((), nx.float32))
        return u + t

    rng = np.random.default_rng(3)
    x = nx.asarray(rng.normal(size=(5, 4)).astype(np.float32))
    w = nx.asarray(rng.normal(size=(4, 3)).astype(np.float32))
    p = nx.asarray(True)
    kinds = set()
    for plan in _walk(rune.jit(f).plan(x, w, p)):
        assert isinstance(plan, Plan)
        known = set(plan.in_slots) | set(plan.constants)   # slots holding a value so far
        for step in plan.steps:
            kinds.add(step.profile_kind)
            # every slot a step reads was written before it: reads() and writes() are its dataflow
            assert set(step.reads()) <= known, (step.describe(), sorted(step.reads()), sorted(known))
            known.update(step.writes())
            assert isinstance(step.plans, tuple) and all(isinstance(q, Plan) for q in step.plans)
            assert len(tuple(step.kernels)) >= 0 and isinstance(step.describe(), str)
            assert step.takes_donations in (True, False)
            assert not step.takes_donations or callable(step.writes_in_place)
        assert set(plan.out_slots) <= known
    assert {"numpy", "scan", "while", "cond", "callback"} <= kinds, kinds
    if compiler.find() is not None:   # with a C compiler: compiled stretches, a BLAS call, views
        assert {"kernel", "library", "views"} <= kinds, kinds
    # and the plan computes what NumPy does
    xh, wh = np.asarray(x), np.asarray(w)
    y = np.sort(np.tanh(xh @ wh).T, axis=0)
    ys = np.concatenate([[0.0], np.cumsum(y.sum(axis=1))[:-1]]) * 2.0
    np.testing.assert_allclose(np.asarray(rune.jit(f)(x, w, p)), ys * 2.0 + 3.0, rtol=1e-5)
    assert seen == [3.0]


def test_plans_are_kept_by_the_compiler_per_program_target_and_device():
    import gc
    import weakref

    from rune.compiler.plan import KEPT, plan_for
    from rune.core.program import Program
    from rune.core.devices import current_default

    assert "_plan" not in Program.__slots__   # not on the IR
    program = rune.trace(lambda v: nx.sin(v) * 2.0 + 1.0)(nx.ones(4))
    device = current_default()
    host = plan_for(program, None, device)
    assert plan_for(program, None, device) is host
    cuda = plan_for(program, "cuda", device)
    assert cuda is not host and cuda.target == "cuda" and host.target is None
    assert plan_for(program, "cuda", device) is cuda
    np.testing.assert_allclose(host.run([np.ones(4, np.float32)])[0], np.sin(1.0) * 2 + 1, rtol=1e-6)
    gone = weakref.ref(host)
    key = id(program)
    del program, host, cuda
    gc.collect()
    assert gone() is None and key not in KEPT   # dropped with the program


def test_a_plan_passes_donated_buffers_as_a_run_argument():
    """The donation path of `Plan.run`, on the host: a step that takes donated
    buffers (`takes_donations`) gets {output slot: buffer}."""
    from rune.compiler import donation

    class InPlace:
        """The plan's one stretch, run as a device stretch would: into the donated buffer."""
        profile_kind, kernels, plans, takes_donations = "kernel", (), (), True

        def __init__(self, stretch):
            self.stretch, self.given = stretch, []

        def reads(self):
            return self.stretch.reads()

        def writes(self):
            return self.stretch.writes()

        def writes_in_place(self, slot, out_slot):
            return True

        def describe(self):
            return "in place " + self.stretch.describe()

        def run(self, env, donated=None):
            self.given.append(donated)
            self.stretch.run(env)
            for s in self.writes():
                if donated and s in donated:
                    donated[s][...] = env[s]
                    env[s] = donated[s]

    x = np.arange(6, dtype=np.float64)
    plan = rune.jit(lambda v: nx.exp(v), device="cpu").plan(nx.asarray(x))
    plan = type(plan)(plan.program, None, plan.device, compiled=False)   # one NumPy stretch
    (only,) = plan.steps
    step = InPlace(only)
    plan.steps, plan.straight = [step], False   # no longer a plan of NumPy stretches only
    reuse = donation.reuse_plan(plan, [plan.in_slots[0]])
    assert reuse == {(id(step), plan.out_slots[0]): plan.in_slots[0]}
    buffer = x.copy()
    (out,) = plan.run([buffer], donation.by_step(reuse, {plan.in_slots[0]: buffer}))
    assert out is buffer and step.given == [{plan.out_slots[0]: buffer}]
    np.testing.assert_allclose(out, np.exp(x))
    (fresh,) = plan.run([x])   # no donation: a fresh array, the argument untouched
    assert fresh is not x and step.given[-1] is None
    np.testing.assert_allclose(fresh, np.exp(x))
    np.testing.assert_array_equal(x, np.arange(6))


def test_the_transformations_import_nothing_of_the_compiler():
    """autodiff, batching, control and callback sit below the compiler: no import of
    rune.compiler, inside a function or not; the compiler installs the eager
    evaluation of their higher-order primitives."""
    import ast
    import pathlib

    from rune.core.primitive import eval_rules

    root = pathlib.Path(rune.__file__).parent / "transforms"
    files = sorted(root.rglob("*.py"))
    assert len(files) > 5, files   # autodiff/, batching, control, callback
    found = []
    for path in files:
        package = ["rune"] + list(path.relative_to(root.parent).parent.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                module = base + node.module.split(".") if node.module else base
                names = [".".join(module + ([] if node.module else [a.name])) for a in node.names]
            else:
                continue
            found += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("rune.compiler")]
    assert not found, found
    for prim in (scan_p, while_p, cond_p):
        assert eval_rules[prim].__module__ == "rune.compiler.eager"
