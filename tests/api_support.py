"""Helpers shared by the API conformance tests (written from the documented public API; NumPy is the oracle)."""
import inspect
import json
import os
import subprocess
import sys

import numpy as np

import rune
from rune import nx


def A(x):
    return np.asarray(x)


def close(x, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(A(x), np.asarray(expected), rtol=rtol, atol=atol)


def same_bits(a, b):
    a, b = A(a), A(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def stats():
    s = rune.stats()
    return dict(s) if hasattr(s, "keys") else dict(vars(s))


def stat(fragment):
    """Sum of the counters whose name contains `fragment`."""
    s = stats()
    keys = [k for k in s if fragment in k]
    assert keys, f"no counter containing {fragment!r} in rune.stats(): {sorted(s)}"
    return sum(s[k] for k in keys)


def mentions_shape(msg, shape):
    shape = tuple(shape)
    forms = {str(shape), str(list(shape)), ",".join(map(str, shape)), ", ".join(map(str, shape))}
    return any(f in msg for f in forms)


def is_concrete(x):
    """True when x is an ordinary eager array (no trace left active)."""
    return isinstance(x, nx.Array) and isinstance(A(x), np.ndarray) and float(A(x).sum()) == float(A(x).sum())


def params(fn):
    return list(inspect.signature(fn).parameters.values())


def f32(*v):
    return nx.array(np.array(v, dtype=np.float32))


def f64(*v):
    return nx.array(np.array(v, dtype=np.float64))


def run_script(script, **env):
    e = dict(os.environ)
    e.update(env)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=e, timeout=120)
    for line in p.stdout.splitlines():
        if line.startswith("@@RESULTS@@"):
            return json.loads(line[len("@@RESULTS@@"):])
    raise AssertionError(f"subprocess failed (rc={p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")


def double_np(a):
    return np.asarray(a) * 2


def counted_square(calls):
    """x**2 by a host callback, its derivative by a second one; both counted in `calls`."""
    def fwd(a):
        calls["f"] += 1
        return np.asarray(a) ** 2
    def bwd(a, ct):
        calls["b"] += 1
        return 2 * np.asarray(a) * np.asarray(ct)
    @rune.custom_vjp
    def sq(x):
        return rune.callback(fwd, x, like=x), lambda ct: rune.callback(bwd, x, ct, like=x)
    return sq
