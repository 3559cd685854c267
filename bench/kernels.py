"""The kernel compiler against hand-written C (same compiler and flags), NumPy and JAX.

- W1 `sin(x)*exp(-x*x) + 0.5*tanh(x) - x/(1+x*x)`, 1e7 float32: target within
  1.5x of the hand-written C loop (both write a fresh output).
- `sum(x*x)` over 1e7, `mean(axis=1)` of 4096x4096 (target within 1.5x of a
  hand-written OpenMP reduction) and row softmax of 4096x1024 (under 0.6x of
  NumPy).
- the jit grad chain (100 elementwise ops on 16 floats) and the MLP
  `value_and_grad` (784-256-10, batch 128) under jit against `jax.jit`.
- first call in a fresh process, W1 at 1e6 (targets 0.5 s cold, 0.05 s warm)
  and the MLP step (1.5 s cold, 0.15 s warm): cold disk cache vs warm. The
  processes run with Python's bytecode cache on (a private prefix, filled by
  one process first), as an installed package runs.
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import rune
from rune import nx
from rune.backends.cpu import threads
from rune.backends.cpu import compiler as cc

from . import models
from .common import Row, jax, per_call, print_table

HAND_C = r"""
#include <math.h>
#pragma omp declare simd notinbranch
float sinf(float);
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
float tanhf(float);
void w1(const float *restrict x, float *restrict y, long n) {
  #pragma omp parallel for simd
  for (long i = 0; i < n; i++) {
    float v = x[i];
    y[i] = sinf(v) * expf(-v * v) + 0.5f * tanhf(v) - v / (1.0f + v * v);
  }
}
float sumsq(const float *restrict x, long n) {
  float s = 0;
  #pragma omp parallel for simd reduction(+:s)
  for (long i = 0; i < n; i++) s += x[i] * x[i];
  return s;
}
void rowmean(const float *restrict x, float *restrict y, long r, long c) {
  #pragma omp parallel for
  for (long i = 0; i < r; i++) {
    float s = 0;
    #pragma omp simd reduction(+:s)
    for (long j = 0; j < c; j++) s += x[i * c + j];
    y[i] = s / c;
  }
}
"""


def _hand_library():
    comp = cc.find()
    if comp is None:
        return None
    tmp = tempfile.mkdtemp(prefix="rune-bench-")
    src, lib = os.path.join(tmp, "hand.c"), os.path.join(tmp, "hand.so")
    with open(src, "w") as f:
        f.write(HAND_C)
    subprocess.run([comp.path, *cc.FLAGS, "-o", lib, src, *cc.LIBS], check=True)
    return threads.load_kernel_library(lib)   # with the OpenMP settings rune's own kernels get


def _w1(np_like, x):
    return np_like.sin(x) * np_like.exp(-x * x) + 0.5 * np_like.tanh(x) - x / (1 + x * x)


def _softmax(np_like, x):
    e = np_like.exp(x - np_like.max(x, axis=1, keepdims=True))
    return e / np_like.sum(e, axis=1, keepdims=True)


def run():
    hand = _hand_library()
    rows = []
    x = np.linspace(-4, 4, 10_000_000, dtype=np.float32)
    rx = nx.asarray(x)
    jw1 = rune.jit(lambda v: _w1(nx, v))
    times = {"rune": per_call(lambda: jw1(rx)), "numpy": per_call(lambda: _w1(np, x))}
    if hand is not None:
        def hand_w1():
            y = np.empty_like(x)
            hand.w1(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_long(x.size))
            return y
        times["hand C"] = per_call(hand_w1)
    if jax is not None:
        jx = jax.numpy.asarray(x)
        jf = jax.jit(lambda v: _w1(jax.numpy, v))
        times["jax.jit"] = per_call(lambda: jf(jx).block_until_ready())
    rows.append(Row("W1 chain (1e7 x f32)", "per call", times))

    jsum = rune.jit(lambda v: nx.sum(v * v))
    times = {"rune": per_call(lambda: jsum(rx)), "numpy": per_call(lambda: np.sum(x * x))}
    if hand is not None:
        hand.sumsq.restype = ctypes.c_float
        times["hand C"] = per_call(lambda: hand.sumsq(ctypes.c_void_p(x.ctypes.data), ctypes.c_long(x.size)))
    rows.append(Row("sum(x*x) (1e7 x f32)", "per call", times))

    m = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    rm = nx.asarray(m)
    jmean = rune.jit(lambda v: nx.mean(v, axis=1))
    times = {"rune": per_call(lambda: jmean(rm)), "numpy": per_call(lambda: m.mean(axis=1))}
    if hand is not None:
        def hand_mean():
            y = np.empty(4096, np.float32)
            hand.rowmean(ctypes.c_void_p(m.ctypes.data), ctypes.c_void_p(y.ctypes.data),
                         ctypes.c_long(4096), ctypes.c_long(4096))
            return y
        times["hand C"] = per_call(hand_mean)
    rows.append(Row("mean(axis=1) (4096x4096 f32)", "per call", times))

    s = m[:, :1024].copy()
    rs = nx.asarray(s)
    jsm = rune.jit(lambda v: _softmax(nx, v))
    times = {"rune": per_call(lambda: jsm(rs)), "numpy": per_call(lambda: _softmax(np, s))}
    if jax is not None:
        js = jax.numpy.asarray(s)
        jf = jax.jit(lambda v: _softmax(jax.numpy, v))
        times["jax.jit"] = per_call(lambda: jf(js).block_until_ready())
    rows.append(Row("row softmax (4096x1024 f32)", "per call", times))

    rows += _one_thread_rows(jsm, rs, s)
    rows += _grad_rows()
    for name, script in (("W1 1e6", _FIRST), ("MLP value_and_grad step", _FIRST_MLP)):
        cold, warm = _first_calls(script)
        rows.append(Row(f"{name} first call, cold disk cache", "per process", {"rune": cold}))
        rows.append(Row(f"{name} first call, warm disk cache", "per process", {"rune": warm}))
    print_table("kernel compiler (jit) vs hand-written C, NumPy, JAX", rows,
                note="'hand C': the same loop written by hand, compiled with rune's compiler and flags")
    return rows


def _one_thread_rows(jsm, rs, s):
    """Softmax again with one OpenMP thread: on a shared machine, threads waiting
    at each parallel loop's barrier for a descheduled sibling dominate."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return []
    with threadpool_limits(1, user_api="openmp"):
        times = {"rune": per_call(lambda: jsm(rs)), "numpy": per_call(lambda: _softmax(np, s))}
    return [Row("row softmax, 1 OpenMP thread", "per call", times)]


def _grad_rows():
    """The jit grad chain and the jit MLP value_and_grad, beside jax.jit."""
    x0 = models.chain_input()
    chain = models.make_chain(nx)
    jchain_grad = rune.jit(rune.grad(chain))
    x = nx.array(x0)
    chain_times = {"rune": per_call(lambda: jchain_grad(x))}
    params0, xb, yb = models.mlp_data()
    params, bx, by = tuple(nx.array(p) for p in params0), nx.array(xb), nx.array(yb)
    step = rune.jit(rune.value_and_grad(models.mlp_loss_rune))
    mlp_times = {"rune": per_call(lambda: step(params, bx, by))}
    if jax is not None:
        jx = jax.numpy.asarray(x0)
        jg = jax.jit(jax.grad(models.make_chain(jax.numpy)))
        chain_times["jax.jit"] = per_call(lambda: jax.block_until_ready(jg(jx)))
        jp = tuple(jax.numpy.asarray(p) for p in params0)
        jb, jy = jax.numpy.asarray(xb), jax.numpy.asarray(yb)
        jvg = jax.jit(jax.value_and_grad(models.mlp_loss_jax))
        mlp_times["jax.jit"] = per_call(lambda: jax.block_until_ready(jvg(jp, jb, jy)))
    rows = [Row("grad chain, jit (100 ops, 16 x f32)", "per call", chain_times),
            Row("MLP value_and_grad, jit", "per call", mlp_times)]
    try:   # OpenBLAS's threads spin against each other when other processes share the cores
        from threadpoolctl import threadpool_limits
    except ImportError:
        return rows
    with threadpool_limits(1, user_api="blas"):
        one = {"rune": per_call(lambda: step(params, bx, by))}
        if jax is not None:
            one["jax.jit"] = per_call(lambda: jax.block_until_ready(jvg(jp, jb, jy)))
    return rows + [Row("MLP value_and_grad, jit, 1 BLAS thread", "per call", one)]


_FIRST = """
import time, json, numpy as np
t0 = time.perf_counter()
import rune
from rune import nx
x = nx.asarray(np.linspace(-4, 4, 1_000_000, dtype=np.float32))
t1 = time.perf_counter()
rune.jit(lambda v: nx.sin(v) * nx.exp(-v * v) + 0.5 * nx.tanh(v) - v / (1 + v * v))(x)
print(json.dumps({"first_call": time.perf_counter() - t1}))
"""


_FIRST_MLP = """
import time, json, numpy as np
import rune
from rune import nx
from bench import models
params0, xb, yb = models.mlp_data()
params, x, y = tuple(nx.array(p) for p in params0), nx.array(xb), nx.array(yb)
t1 = time.perf_counter()
loss, grads = rune.jit(rune.value_and_grad(models.mlp_loss_rune))(params, x, y)
np.asarray(loss)
print(json.dumps({"first_call": time.perf_counter() - t1}))
"""


def _first_calls(script):
    """Seconds of the first jit call in a fresh process: cold, then warm disk cache."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, RUNE_CACHE_DIR=os.path.join(d, "kernels"), RUNE_CACHE="1",
                   PYTHONPYCACHEPREFIX=os.path.join(d, "pycache"), PYTHONPATH=root)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        warm_bytecode = "import importlib, rune, bench.models; importlib.import_module('rune.compiler.lower')"
        subprocess.run([sys.executable, "-c", warm_bytecode], env=dict(env, RUNE_CACHE="0"), check=True, cwd=root)
        out = []
        for _ in range(2):
            p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                               check=True, cwd=root)
            out.append(json.loads(p.stdout.strip().splitlines()[-1])["first_call"])
    return out


if __name__ == "__main__":
    run()
