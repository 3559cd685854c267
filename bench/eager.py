"""Dispatch overhead: eager `x * 2 + 1` and `exp(x)` on an 8-element float32 array, per
op, and a cached `rune.jit` call of `x + 1` (the row `callbacks` also reports).

The arrays are so small that the arithmetic is free: what is timed is the cost
of one eager operation, or of one call of compiled code, from Python. Targets:
rune within 1.2 us of NumPy's own call per eager op, and a cached jit call
within 1.5x NumPy's call of the same op (`base + 1`). rune's float32 exp is its own
correctly rounded function (a C call through ctypes: rune/backends/eager_mathlib.py),
NumPy's its SIMD routine; the exp row shows what that call costs over the `x * 2` gap. Other processes on the
machine swing both; the rune - numpy gap and ratio, measured side by side in
one process, are steadier than either time.
"""
import numpy as np

import rune  # noqa: F401  (rune.nx needs the package initialised)
from rune import nx

from .callbacks import dispatch_row
from .common import Row, jax, per_call, print_table, torch

OPS = 2  # `x * 2 + 1` is a multiply and an add
EAGER_GAP_US = 1.2
JIT_CALL_RATIO = 1.5


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

    def exp_timed(lib):
        x = made[lib]
        if lib == "jax":
            return per_call(lambda: jax.numpy.exp(x).block_until_ready())
        return per_call(lambda f={"rune": nx.exp, "numpy": np.exp}.get(lib) or torch.exp: f(x))

    rows = [Row("x * 2 + 1 (8 x f32)", "per op", {lib: timed(lib) for lib in made}),
            Row("exp(x) (8 x f32)", "per op", {lib: exp_timed(lib) for lib in made}), dispatch_row()]
    gap = rows[0].us["rune"] - rows[0].us["numpy"]
    exp_gap = rows[1].us["rune"] - rows[1].us["numpy"]
    call, ratio = rows[2].us["rune"], rows[2].ratio("numpy")
    print_table("dispatch: eager ops and a cached jit call (tiny arrays)", rows, note="\n".join([
        f"eager: rune - numpy = {gap:+.2f} us per op ({_verdict(gap, EAGER_GAP_US)} the {EAGER_GAP_US} us target)",
        f"eager exp: rune - numpy = {exp_gap:+.2f} us",
        f"cached jit call: {call:.2f} us, {ratio:.2f}x NumPy's call ({_verdict(ratio, JIT_CALL_RATIO)} "
        f"the {JIT_CALL_RATIO}x target)"]))
    return rows


def _verdict(value, target):
    return "meets" if value <= target else "misses"


if __name__ == "__main__":
    run()
