"""Run under mpiexec by tests/distributed/test_overlap_mpi.py.

A jitted data-parallel step of a two-layer MLP (the gradients' tree all-reduced,
cut into buckets by the overlap pass) and a ZeRO-2 step (`sharded(sgd)`: the
gradients reduce-scattered), 5 steps each, with communication overlapped and
with RUNE_OVERLAP=0 (the synchronous collectives): the parameters must be bit for
bit the same. The overlapped plan must have compute between a collective's start
and its wait, and a profile must show the communication on a thread of its own.
Prints "OK rank R of N overlap" at the end; a failed check raises, which aborts the run.
"""
import os

import numpy as np

os.environ.setdefault("RUNE_COMPILE_MIN_SIZE", "0")   # every stretch compiled, as in the test suite

import rune
import rune.compiler.overlap as overlap
import rune.distributed as dist
from rune import nx, optim

dist.initialize()
RANK, SIZE = dist.rank(), dist.size()
overlap.BUCKET_BYTES = 0   # a bucket per point where gradients are made: toy sizes still overlap


def loss(p, x, y):
    h = nx.tanh(x @ p["w0"] + p["b0"])
    return nx.mean((h @ p["w1"] + p["b1"] - y) ** 2)


def data_parallel(p, x, y):
    g = dist.all_reduce(rune.grad(loss)(p, x, y), "mean")
    return {k: p[k] - 0.05 * g[k] for k in p}


OPT = dist.sharded(optim.sgd(0.05), stage=2)


def zero2(p, state, x, y):
    updates, state = OPT.update(rune.grad(loss)(p, x, y), state, p)
    return optim.apply_updates(p, updates), state


def start_values():
    rng = np.random.default_rng(7)   # the same parameters on every rank
    p = {"w0": rng.standard_normal((5, 7)), "b0": np.zeros(7), "w1": rng.standard_normal((7, 3)), "b1": np.zeros(3)}
    return {k: nx.asarray(v.astype(np.float32)) for k, v in p.items()}


def batch(step):
    rng = np.random.default_rng(100 * step + RANK)   # each rank its own batch
    return (nx.asarray(rng.standard_normal((16, 5)).astype(np.float32)),
            nx.asarray(rng.standard_normal((16, 3)).astype(np.float32)))


def train(overlapped):
    os.environ["RUNE_OVERLAP"] = "1" if overlapped else "0"   # read when a plan is built: new jits
    dp, z2 = rune.jit(data_parallel), rune.jit(zero2)
    p, q = start_values(), start_values()
    state = OPT.init(q)
    for step in range(5):
        x, y = batch(step)
        p = dp(p, x, y)
        q, state = z2(q, state, x, y)
    kinds = [type(s).__name__ for s in dp.plan(p, x, y).steps]
    return p, q, kinds, dp, (p, x, y)


def compute_between(kinds):
    """Whether some collective's start and wait have a compute step between them."""
    at = kinds.index("CollectiveStart")
    end = kinds.index("CollectiveWait", at)
    return any(k not in ("CollectiveStart", "CollectiveWait", "CallbackStep") for k in kinds[at + 1:end])


p_on, q_on, kinds_on, dp, args = train(True)
p_off, q_off, kinds_off, _, _ = train(False)
assert "CollectiveStart" not in kinds_off and "CallbackStep" in kinds_off, kinds_off
assert compute_between(kinds_on), kinds_on
for k in p_on:
    assert np.asarray(p_on[k]).tobytes() == np.asarray(p_off[k]).tobytes(), f"data parallel {k} differs"
    assert np.asarray(q_on[k]).tobytes() == np.asarray(q_off[k]).tobytes(), f"zero2 {k} differs"
    # ZeRO-2 with sgd is the data-parallel step (sums in rank order): a second oracle
    assert np.asarray(q_on[k]).tobytes() == np.asarray(p_on[k]).tobytes(), f"zero2 {k} != data parallel"
# every rank holds the same parameters: rank 0's, broadcast
for k, v in p_on.items():
    assert np.asarray(dist.broadcast(v, 0)).tobytes() == np.asarray(v).tobytes(), f"{k} differs between ranks"

os.environ["RUNE_OVERLAP"] = "1"
with rune.profile() as prof:
    dp(*args)
events = prof.trace_events()
cats = {e["cat"] for e in events}
assert {"collective start", "collective wait", "communication"} <= cats, cats
main = {e["tid"] for e in events if e["cat"] == "collective start"}
assert all(e["tid"] not in main for e in events if e["cat"] == "communication"), "communication on the plan's thread"
print(f"OK rank {RANK} of {SIZE} overlap", flush=True)
