"""Statistics of the NumPy surface at 1e6 elements: rune eager and jitted beside NumPy and jax.jit.

- median and percentile([5, 50, 95]) of 1e6 float32 (a sort and a gather);
- histogram with 64 equal bins (the bin of each value, then a scatter-add);
- unique of 1e6 int32 in [0, 1000) (size=1000 under jit, as jax.numpy needs);
- cov of 10 variables x 100k observations (a centred matmul);
- convolve of 1e6 float32 with a 15-tap kernel, mode "same" (the conv primitive).
Times are per call; the eager rows compare with NumPy, the jit rows with jax.jit.
"""
import numpy as np

import rune
from rune import nx

from .common import Row, jax, per_call, print_table

N = 1_000_000


def _data():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal(N).astype(np.float32), "ints": rng.integers(0, 1000, N).astype(np.int32),
            "m": rng.standard_normal((10, N // 10)).astype(np.float32),
            "k": rng.standard_normal(15).astype(np.float32)}


# name -> (function of the module `xp` and the data, which data)
CASES = {
    "median": (lambda xp, x: xp.median(x), ("x",)),
    "percentile": (lambda xp, x: xp.percentile(x, np.array([5.0, 50.0, 95.0], np.float32)), ("x",)),
    "histogram": (lambda xp, x: xp.histogram(x, bins=64), ("x",)),
    "unique": (lambda xp, v, **kw: xp.unique(v, **kw), ("ints",)),
    "cov": (lambda xp, m: xp.cov(m), ("m",)),
    "convolve": (lambda xp, x, k: xp.convolve(x, k, mode="same"), ("x", "k")),
}
JIT_KW = {"unique": {"size": 1000}}


def _check(name, got, want):
    got, want = rune.tree.leaves(got), (list(want) if isinstance(want, tuple) else [want])
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2e-3, atol=2e-3,
                                   err_msg=name)


def rune_times(data):
    out = {}
    for name, (fn, keys) in CASES.items():
        args = [nx.asarray(data[k]) for k in keys]
        kw = JIT_KW.get(name, {})
        jitted = rune.jit(lambda *a, fn=fn, kw=kw: fn(nx, *a, **kw))
        _check(name, jitted(*args), fn(np, *[data[k] for k in keys]))
        out[name + ", eager"] = per_call(lambda fn=fn, args=args: rune.tree.map(np.asarray, fn(nx, *args)))
        out[name + ", jit"] = per_call(lambda jitted=jitted, args=args: rune.tree.map(np.asarray, jitted(*args)))
    return out


def numpy_times(data):
    return {name + ", eager": per_call(lambda fn=fn, keys=keys: fn(np, *[data[k] for k in keys]))
            for name, (fn, keys) in CASES.items()}


def jax_times(data):
    if jax is None:
        return {}
    jnp, done = jax.numpy, jax.block_until_ready
    out = {}
    for name, (fn, keys) in CASES.items():
        args = [jnp.asarray(data[k]) for k in keys]
        kw = JIT_KW.get(name, {})
        compiled = jax.jit(lambda *a, fn=fn, kw=kw: fn(jnp, *a, **kw))
        out[name + ", jit"] = per_call(lambda compiled=compiled, args=args: done(compiled(*args)))
    return out


def run():
    data = _data()
    found = {"rune": rune_times(data), "numpy": numpy_times(data), "jax": jax_times(data)}
    rows = []
    for case in found["rune"]:
        times = {lib: t[case] for lib, t in found.items() if case in t}
        rows.append(Row(f"statistics {case}", "per call", times))
    print_table(f"statistics at {N:,} elements (eager rows against NumPy, jit rows against jax.jit)", rows)
    return rows


if __name__ == "__main__":
    run()
