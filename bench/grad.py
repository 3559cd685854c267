"""Reverse mode: a 100-op elementwise chain on 16 floats, and an MLP's value_and_grad.

The chain measures the per-op cost of eager differentiation (recording plus
the pullback) when the arithmetic is free. The MLP (784-256-10, batch 128,
float32) measures a realistic training step's gradient, eager and compiled.
JAX runs eagerly (grad without jit: op-by-op dispatch) and jitted for
reference; PyTorch runs eager autograd; NumPy runs the chain forward only and
the MLP with a hand-written backward pass (the floor for eager).
"""
import numpy as np

import rune
from rune import nx

from . import models
from .common import Row, jax, per_call, print_table, torch


def _jax_timer(fn, *args):
    return per_call(lambda: jax.block_until_ready(fn(*args)))


def chain_rows():
    x0 = models.chain_input()
    x = nx.array(x0)
    chain = models.make_chain(nx)
    forward = {"rune": per_call(lambda: chain(x)),
               "numpy": per_call(lambda: models.make_chain(np)(x0))}
    chain_grad, compiled = rune.grad(chain), rune.jit(rune.grad(chain))
    grad = {"rune": per_call(lambda: chain_grad(x))}
    jitted = {"rune": per_call(lambda: compiled(x))}
    if jax is not None:
        jx = jax.numpy.asarray(x0)
        jchain = models.make_chain(jax.numpy)
        forward["jax"] = _jax_timer(jchain, jx)
        grad["jax"] = _jax_timer(jax.grad(jchain), jx)
        jitted["jax.jit"] = _jax_timer(jax.jit(jax.grad(jchain)), jx)
    if torch is not None:
        tx = torch.from_numpy(x0.copy())
        tchain = models.make_chain(torch)
        forward["torch"] = per_call(lambda: tchain(tx))

        def torch_grad():
            xr = tx.detach().requires_grad_()
            return torch.autograd.grad(tchain(xr), xr)
        grad["torch"] = per_call(torch_grad)
    per_op = lambda times: {k: v / models.CHAIN_OPS for k, v in times.items()}  # noqa: E731
    return [Row("chain forward (16 x f32)", "per op", per_op(forward)),
            Row("chain grad, eager", "per op", per_op(grad)),
            Row("chain grad, jit", "per op", per_op(jitted))]


def mlp_rows():
    params0, x0, y0 = models.mlp_data()
    params = tuple(nx.array(p) for p in params0)
    x, y = nx.array(x0), nx.array(y0)
    value_and_grad = rune.value_and_grad(models.mlp_loss_rune)
    compiled = rune.jit(value_and_grad)
    numpy_time = per_call(lambda: models.mlp_value_and_grad_numpy(params0, x0, y0))
    eager = {"rune": per_call(lambda: value_and_grad(params, x, y)), "numpy": numpy_time}
    jitted = {"rune": per_call(lambda: compiled(params, x, y)), "numpy": numpy_time}
    if jax is not None:
        jparams = tuple(jax.numpy.asarray(p) for p in params0)
        jx, jy = jax.numpy.asarray(x0), jax.numpy.asarray(y0)
        jvg = jax.value_and_grad(models.mlp_loss_jax)
        eager["jax"] = _jax_timer(jvg, jparams, jx, jy)
        jitted["jax.jit"] = _jax_timer(jax.jit(jvg), jparams, jx, jy)
    if torch is not None:
        tparams = tuple(torch.from_numpy(p.copy()).requires_grad_() for p in params0)
        tx, ty = torch.from_numpy(x0), torch.from_numpy(y0)

        def torch_value_and_grad():
            loss = models.mlp_loss_torch(tparams, tx, ty)
            return loss, torch.autograd.grad(loss, tparams)
        eager["torch"] = per_call(torch_value_and_grad)
    return [Row("MLP value_and_grad, eager", "per call", eager),
            Row("MLP value_and_grad, jit", "per call", jitted)]


def check_mlp_agrees():
    """rune's MLP gradient equals the hand-written one (a bench of wrong numbers is no bench)."""
    params0, x0, y0 = models.mlp_data()
    loss, grads = rune.value_and_grad(models.mlp_loss_rune)(
        tuple(nx.array(p) for p in params0), nx.array(x0), nx.array(y0))
    ref_loss, ref_grads = models.mlp_value_and_grad_numpy(params0, x0, y0)
    np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-4)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(np.asarray(g), r, rtol=1e-3, atol=1e-5)
    wrong = sorted({g.dtype.name for g in grads} - {"float32"})
    if wrong:
        print(f"warning: rune's float32 MLP gives {', '.join(wrong)} gradients "
              f"(the timings below include that wider arithmetic)")


def run():
    check_mlp_agrees()
    rows = chain_rows() + mlp_rows()
    print_table("reverse mode (grad of a 100-op chain; MLP 784-256-10, batch 128)", rows,
                note="numpy: chain forward only; MLP with a hand-written backward (same in both rows)")
    return rows


if __name__ == "__main__":
    run()
