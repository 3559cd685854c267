"""Eager float32 transcendental functions on 1e6 elements: rune's own correctly rounded
library (rune/codegen/c_src/rn_math.h, a compiled one-op loop on the threads rune's
policy gives it; exp, log and tanh through their fast paths, rn_math_fast.h) against NumPy's SIMD routines, JAX (`jax.jit` of the function) and
PyTorch, each on its own default threads.

Target: rune within 1.5x NumPy for exp, log and tanh. NumPy's and JAX's float32 routines
are not correctly rounded (a few ulps), rune's are, on every input (docs/numerics.md).
"""
import numpy as np

import rune  # noqa: F401  (rune.nx needs the package initialised)
from rune import nx

from .common import Row, jax, per_call_each, print_table, torch

N = 1_000_000
TARGET = 1.5
FUNCTIONS = ("exp", "log", "tanh", "sin")


def _argument(name):
    x = np.random.default_rng(0).uniform(-5, 5, N).astype(np.float32)
    return np.abs(x) + np.float32(0.1) if name == "log" else x


def _calls(name):
    x = _argument(name)
    calls = {"rune": lambda f=getattr(nx, name), a=nx.asarray(x): f(a),
             "numpy": lambda f=getattr(np, name): f(x)}
    if jax is not None:
        calls["jax.jit"] = lambda f=jax.jit(getattr(jax.numpy, name)), a=jax.device_put(x): f(a).block_until_ready()
    if torch is not None:
        calls["torch"] = lambda f=getattr(torch, name), a=torch.from_numpy(x.copy()): f(a)
    return calls


def run():
    rows = [Row(f"{name} (1e6 x f32)", "per call", per_call_each(_calls(name), settle=0.02))
            for name in FUNCTIONS]
    notes = [f"{r.case.split()[0]}: {r.ratio('numpy'):.2f}x NumPy "
             f"({'meets' if r.ratio('numpy') <= TARGET else 'misses'} the {TARGET}x target)"
             for r in rows if r.case.split()[0] != "sin"]
    print_table("eager float32 functions (rune: correctly rounded)", rows, note="\n".join(notes))
    return rows


if __name__ == "__main__":
    run()
