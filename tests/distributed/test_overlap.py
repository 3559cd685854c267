"""Collectives overlapped with compute (rune/compiler/overlap.py): a plan splits each
collective into a start and a wait with compute between them, keeps effects in
program order, and gives the same bits as the synchronous plan (RUNE_OVERLAP=0).
In one process every collective is the identity, so these check the plan; the
communication thread runs in tests/distributed/test_overlap_mpi.py."""
import numpy as np
import pytest

import rune
import rune.compiler.overlap as overlap
import rune.distributed as dist
from rune import nx
from rune.compiler.control_steps import CallbackStep
from rune.compiler.overlap import CollectiveStart, CollectiveWait

pytestmark = pytest.mark.cc


def loss(p, x, y):
    h = nx.tanh(x @ p["w0"] + p["b0"])
    return nx.mean((h @ p["w1"] + p["b1"] - y) ** 2)


def per_layer(p, x, y):
    """A data-parallel step, each layer's gradients all-reduced by a call of their own."""
    g = rune.grad(loss)(p, x, y)
    g1 = dist.all_reduce({"w1": g["w1"], "b1": g["b1"]}, "mean")
    g0 = dist.all_reduce({"w0": g["w0"], "b0": g["b0"]}, "mean")
    g = {**g0, **g1}
    return {k: p[k] - 0.1 * g[k] for k in p}


def whole_tree(p, x, y):
    """A data-parallel step, the gradients' tree all-reduced by one call."""
    g = dist.all_reduce(rune.grad(loss)(p, x, y), "mean")
    return {k: p[k] - 0.1 * g[k] for k in p}


def values():
    rng = np.random.default_rng(3)
    p = {"w0": rng.standard_normal((5, 7)), "b0": rng.standard_normal(7), "w1": rng.standard_normal((7, 3)),
         "b1": rng.standard_normal(3)}
    p = {k: nx.asarray(v.astype(np.float32)) for k, v in p.items()}
    return p, nx.asarray(rng.standard_normal((16, 5)).astype(np.float32)), \
        nx.asarray(rng.standard_normal((16, 3)).astype(np.float32))


def kinds(plan):
    return [type(s) for s in plan.steps]


def overlapped(plan):
    """How many collectives have a compute step between their start and their wait."""
    steps, count = plan.steps, 0
    for k, s in enumerate(steps):
        if type(s) is CollectiveStart:
            end = next(j for j in range(k + 1, len(steps)) if type(steps[j]) is CollectiveWait)
            count += any(type(t) not in (CollectiveStart, CollectiveWait) for t in steps[k + 1:end])
    return count


def numpy_step(p, x, y):
    """The step in float64 NumPy (size 1: the mean over ranks is the local gradient)."""
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    h = np.tanh(x @ p["w0"] + p["b0"])
    r = 2 * (h @ p["w1"] + p["b1"] - y) / y.size
    dh = (r @ p["w1"].T) * (1 - h ** 2)
    g = {"w1": h.T @ r, "b1": r.sum(0), "w0": x.T @ dh, "b0": dh.sum(0)}
    return {k: p[k] - 0.1 * g[k] for k in p}


@pytest.mark.parametrize("step, bucket", [(per_layer, overlap.BUCKET_BYTES), (whole_tree, 0)])
def test_compute_runs_between_a_collectives_start_and_wait(monkeypatch, step, bucket):
    monkeypatch.setattr(overlap, "BUCKET_BYTES", bucket)   # 0: a bucket per point where gradients are made
    args = values()
    monkeypatch.setenv("RUNE_OVERLAP", "0")
    sync = rune.jit(step)
    want = sync(*args)
    assert CallbackStep in kinds(sync.plan(*args)) and CollectiveStart not in kinds(sync.plan(*args))
    monkeypatch.setenv("RUNE_OVERLAP", "1")
    fast = rune.jit(step)
    got = fast(*args)
    plan = fast.plan(*args)
    assert CallbackStep not in kinds(plan)
    assert overlapped(plan) >= 1, plan
    for k in want:   # bit for bit the synchronous plan's, and the float64 equations' to rounding
        assert np.asarray(got[k]).tobytes() == np.asarray(want[k]).tobytes(), k
        np.testing.assert_allclose(np.asarray(got[k]), numpy_step(*args)[k], rtol=1e-5, atol=1e-6)


def test_a_tree_of_gradients_is_cut_into_buckets_by_when_they_are_made(monkeypatch):
    args = values()
    monkeypatch.setattr(overlap, "BUCKET_BYTES", 0)
    plan = rune.jit(whole_tree).plan(*args)
    starts = [s for s in plan.steps if type(s) is CollectiveStart]
    assert len(starts) > 1 and sum(len(s.ins) for s in starts) == 4
    monkeypatch.setattr(overlap, "BUCKET_BYTES", 1 << 20)   # toy gradients fit one bucket
    plan = rune.jit(whole_tree).plan(*args)
    assert [len(s.ins) for s in plan.steps if type(s) is CollectiveStart] == [4]


def test_effects_keep_their_order(monkeypatch):
    """A wait does not move past a callback, nor a start before one: every rank issues
    collectives and runs callbacks in program order."""
    monkeypatch.setattr(overlap, "BUCKET_BYTES", 0)
    seen = []

    def note(v):
        seen.append(float(np.asarray(v).sum()))
        return v

    def step(p, x, y):
        g = rune.grad(loss)(p, x, y)
        g1 = dist.all_reduce(g["w1"], "sum")
        mark = rune.callback(note, g["b0"], like=g["b0"])
        g0 = dist.all_reduce(g["w0"] + mark, "sum")
        return g0, g1

    plan = rune.jit(step).plan(*values())
    order = [type(s) for s in plan.steps if type(s) in (CollectiveStart, CollectiveWait, CallbackStep)]
    assert order == [CollectiveStart, CollectiveWait, CallbackStep, CollectiveStart, CollectiveWait]


def test_the_trace_names_the_start_and_the_wait(monkeypatch):
    monkeypatch.setenv("RUNE_OVERLAP", "1")
    f = rune.jit(per_layer)
    args = values()
    f(*args)
    with rune.profile() as prof:
        f(*args)
    names = [(e["cat"], e["name"]) for e in prof.trace_events()]
    assert ("collective start", "collective start all_reduce(op='mean') (2 in)") in names
    assert ("collective wait", "collective wait all_reduce(op='mean') (2 out)") in names
    assert any(cat == "kernel" for cat, _ in names)


class Compute:
    """A compute step of the step protocol that reads and writes the given slots."""
    plans = kernels = ()
    takes_donations = False

    def __init__(self, name, reads=(), writes=()):
        self.name, self._reads, self._writes = name, tuple(reads), tuple(writes)

    def reads(self):
        return self._reads

    def writes(self):
        return self._writes


class StartableFn:
    name = "fake"
    in_avals = ()

    def start(self, arrays):
        raise AssertionError("not run here")


def collective(ins, outs):
    step = object.__new__(CallbackStep)
    step.fn, step.in_devices, step.ins, step.outs = StartableFn(), [None] * len(ins), tuple(ins), tuple(outs)
    return step


def names(steps):
    return [getattr(s, "name", type(s).__name__) for s in steps]


def test_a_wait_stops_before_a_step_that_reads_its_results_or_writes_its_inputs():
    slots = iter(range(100, 200))
    steps = [Compute("make", writes=[1]), Compute("other", writes=[2]), collective([1], [3]),
             Compute("free", reads=[2], writes=[4]), Compute("reads input", reads=[1], writes=[5]),
             Compute("overwrites input", writes=[1]), Compute("uses", reads=[3], writes=[6])]
    out = overlap.split_collectives(steps, lambda: next(slots))
    # the start right after `make`; the wait past steps that only read the input, up to the overwrite
    assert names(out) == ["make", "CollectiveStart", "other", "free", "reads input", "CollectiveWait",
                          "overwrites input", "uses"]
    steps[5] = Compute("unrelated", writes=[7])
    out = overlap.split_collectives(steps, lambda: next(slots))
    assert names(out) == ["make", "CollectiveStart", "other", "free", "reads input", "unrelated",
                          "CollectiveWait", "uses"]


def test_overlap_off_keeps_the_step(monkeypatch):
    monkeypatch.setenv("RUNE_OVERLAP", "0")
    steps = [Compute("make", writes=[1]), collective([1], [3]), Compute("uses", reads=[3])]
    assert overlap.split_collectives(steps, lambda: 9) == steps
