"""Eager dispatch overhead: `x * 2 + 1` on an 8-element float32 array, per op.

The array is so small that the arithmetic is free: what is timed is the cost of
one eager operation from Python. Target: rune within 2 us of NumPy per op.
"""
import numpy as np

import rune  # noqa: F401  (rune.nx needs the package initialised)
from rune import nx

from .common import Row, jax, per_call, print_table, torch

OPS = 2  # `x * 2 + 1` is a multiply and an add


def expression(x):
    return x * 2 + 1


def inputs():
    base = np.arange(8, dtype=np.float32)
    made = {"rune": nx.array(base), "numpy": base}
    if jax is not None:
        made["jax"] = jax.device_put(jax.numpy.asarray(base))
    if torch is not None:
        made["torch"] = torch.from_numpy(base.copy())
    return made


def run():
    made = inputs()

    def timed(lib):
        x = made[lib]
        if lib == "jax":
            return per_call(lambda: expression(x).block_until_ready()) / OPS
        return per_call(lambda: expression(x)) / OPS

    rows = [Row("x * 2 + 1 (8 x f32)", "per op", {lib: timed(lib) for lib in made})]
    rune_us, numpy_us = rows[0].us["rune"], rows[0].us["numpy"]
    gap = rune_us - numpy_us
    verdict = "meets" if gap <= 2.0 else "misses"
    print_table("eager dispatch (tiny arrays)", rows,
                note=f"rune - numpy = {gap:+.2f} us per op ({verdict} the 2 us target)")
    return rows


if __name__ == "__main__":
    run()
