"""Complex numbers and FFTs: rune against NumPy (and JAX when installed).

- elementwise: sum(real(exp(z) * conj(z))) of 100k complex64 values, eager and jitted
  (under jit one C kernel: complex exp, conj, mul and the sum, rune/codegen/complexc.py);
- fft / rfft of a (64, 4096) float32 signal along its last axis (pocketfft: rune's
  cost over NumPy's is the dispatch);
- grad of a spectral loss sum(|rfft(x)|^2 * w) (the rfft transpose rule).
Times are per call.
"""
import numpy as np

import rune
from rune import nx

from .common import Row, jax, per_call, print_table

N = 100_000
SIGNAL = (64, 4096)


def _data():
    rng = np.random.default_rng(0)
    z = (rng.standard_normal(N) + 1j * rng.standard_normal(N)).astype(np.complex64)
    x = rng.standard_normal(SIGNAL).astype(np.float32)
    w = rng.uniform(0, 1, (SIGNAL[1] // 2 + 1,)).astype(np.float32)
    return z, x, w


def _elementwise_rune(z):
    return nx.sum(nx.real(nx.exp(z) * nx.conj(z)))


def _spectral_rune(x, w):
    return nx.sum(nx.square(nx.abs(nx.fft.rfft(x))) * w)


def rune_times(z0, x0, w0):
    z, x, w = nx.asarray(z0), nx.asarray(x0), nx.asarray(w0)
    jitted = rune.jit(_elementwise_rune)
    grad = rune.grad(_spectral_rune)
    want = np.sum(np.real(np.exp(z0) * np.conj(z0)))
    np.testing.assert_allclose(float(jitted(z)), want, rtol=1e-3)
    np.testing.assert_allclose(np.asarray(grad(x, w)), numpy_spectral_grad(x0, w0), rtol=1e-3, atol=1e-2)
    return {"elementwise, eager": per_call(lambda: _elementwise_rune(z)),
            "elementwise, jit": per_call(lambda: jitted(z)),
            "fft": per_call(lambda: nx.fft.fft(x)), "rfft": per_call(lambda: nx.fft.rfft(x)),
            "grad of rfft loss": per_call(lambda: grad(x, w))}


def numpy_spectral_grad(x, w):
    """The gradient of sum(w |rfft(x)|^2) by hand: n irfft(2 w X v), v = 1/2 but at
    the zero and Nyquist frequencies (irfft counts the others twice)."""
    n = x.shape[-1]
    v = np.full(n // 2 + 1, 0.5, np.float32)
    v[0] = 1
    if n % 2 == 0:
        v[-1] = 1
    return np.fft.irfft(np.fft.rfft(x) * (2 * w * v), n=n) * n


def numpy_times(z, x, w):
    return {"elementwise, eager": per_call(lambda: np.sum(np.real(np.exp(z) * np.conj(z)))),
            "fft": per_call(lambda: np.fft.fft(x)), "rfft": per_call(lambda: np.fft.rfft(x)),
            "grad of rfft loss": per_call(lambda: numpy_spectral_grad(x, w))}


def jax_times(z0, x0, w0):
    if jax is None:
        return {}
    jnp = jax.numpy
    z, x, w = jnp.asarray(z0), jnp.asarray(x0), jnp.asarray(w0)
    elementwise = lambda v: jnp.sum(jnp.real(jnp.exp(v) * jnp.conj(v)))  # noqa: E731
    compiled = jax.jit(elementwise)
    grad = jax.grad(lambda v, u: jnp.sum(jnp.abs(jnp.fft.rfft(v)) ** 2 * u))
    done = jax.block_until_ready
    return {"elementwise, eager": per_call(lambda: done(elementwise(z))),
            "elementwise, jit": per_call(lambda: done(compiled(z))),
            "fft": per_call(lambda: done(jnp.fft.fft(x))), "rfft": per_call(lambda: done(jnp.fft.rfft(x))),
            "grad of rfft loss": per_call(lambda: done(grad(x, w)))}


def run():
    z, x, w = _data()
    found = {"rune": rune_times(z, x, w), "numpy": numpy_times(z, x, w), "jax": jax_times(z, x, w)}
    rows = []
    for case in found["rune"]:
        times = {lib: t[case] for lib, t in found.items() if case in t}
        rows.append(Row(f"complex {case}", "per call", times))
    print_table(f"complex numbers ({N} complex64) and FFTs of a {SIGNAL} float32 signal", rows)
    return rows


if __name__ == "__main__":
    run()
