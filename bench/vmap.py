"""Per-example gradients of the MLP: vmap(grad) against a Python loop of grad.

`rune.vmap(rune.grad(loss), in_axes=(None, 0, 0))` over a batch of 128
examples (784-256-10, float32), against a Python loop calling `rune.grad` once
per example and stacking, and against `jax.vmap(jax.grad)` (eager and jitted)
and `torch.func.vmap(torch.func.grad)` when installed. Times are per example.
"""
import numpy as np

import rune
from rune import nx

from . import models
from .common import Row, jax, per_call, print_table, torch

IN_AXES = (None, 0, 0)


def _per_example(fn):
    return per_call(fn, repeat=3, budget=1.0) / models.BATCH


def _stack(grads):
    """Per-example gradient tuples stacked leaf by leaf along a new leading axis."""
    return tuple(nx.stack(list(leaf)) for leaf in zip(*grads))


def rune_rows(params, x, y):
    grad = rune.grad(models.mlp_loss_rune)

    def loop():
        return _stack([grad(params, x[i], y[i]) for i in range(models.BATCH)])

    loop_time = _per_example(loop)
    vmap = getattr(rune, "vmap", None)
    if vmap is None:
        print("rune.vmap not available: only the loop of rune.grad is timed")
        return {"vmap, eager": None, "vmap, jit": None}, loop_time
    batched = vmap(grad, in_axes=IN_AXES)
    compiled = rune.jit(batched)
    expected = loop()
    for got in (batched(params, x, y), compiled(params, x, y)):
        for g, e in zip(got, expected):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-6)
    return {"vmap, eager": _per_example(lambda: batched(params, x, y)),
            "vmap, jit": _per_example(lambda: compiled(params, x, y))}, loop_time


def jax_times(params0, x0, y0):
    if jax is None:
        return {}
    params = tuple(jax.numpy.asarray(p) for p in params0)
    x, y = jax.numpy.asarray(x0), jax.numpy.asarray(y0)
    batched = jax.vmap(jax.grad(models.mlp_loss_jax), in_axes=IN_AXES)
    compiled = jax.jit(batched)
    return {"vmap, eager": _per_example(lambda: jax.block_until_ready(batched(params, x, y))),
            "vmap, jit": _per_example(lambda: jax.block_until_ready(compiled(params, x, y)))}


def torch_times(params0, x0, y0):
    if torch is None:
        return {}
    params = tuple(torch.from_numpy(p.copy()) for p in params0)
    x, y = torch.from_numpy(x0), torch.from_numpy(y0)
    batched = torch.func.vmap(torch.func.grad(models.mlp_loss_torch), in_dims=IN_AXES)
    return {"vmap, eager": _per_example(lambda: batched(params, x, y))}


def run():
    params0, x0, y0 = models.mlp_data()
    params = tuple(nx.array(p) for p in params0)
    rune_vmap, loop_time = rune_rows(params, nx.array(x0), nx.array(y0))
    others = {"jax": jax_times(params0, x0, y0), "torch": torch_times(params0, x0, y0)}
    rows = []
    for case in ("vmap, eager", "vmap, jit"):
        times = {"rune": rune_vmap[case]}
        for lib, found in others.items():
            if case in found:
                times[lib] = found[case]
        rows.append(Row(f"per-example MLP grads, {case}", "per example", times))
    rows.append(Row("per-example MLP grads, loop of grad", "per example", {"rune": loop_time}))
    speedup = ("" if rune_vmap["vmap, eager"] is None else
               f"; rune vmap is {loop_time / rune_vmap['vmap, eager']:.1f}x the loop")
    print_table(f"per-example gradients (MLP 784-256-10, batch {models.BATCH})", rows,
                note=f"loop of rune.grad: {loop_time * 1e6:.0f} us per example{speedup}")
    return rows


if __name__ == "__main__":
    run()
