"""nx.fft's transforms against NumPy's pocketfft, their derivatives against
finite differences (JAX's convention for complex numbers), vmap against a
loop, and jit against eager."""
import numpy as np
import pytest

import rune
from rune import nx

RNG = np.random.default_rng(12)
Z = RNG.standard_normal((4, 6)) + 1j * RNG.standard_normal((4, 6))
R = RNG.standard_normal((4, 7))

# (function name, input, keyword arguments)
CASES = [
    ("fft", Z, {}), ("fft", Z, dict(n=4)), ("fft", Z, dict(n=9, axis=0, norm="ortho")),
    ("ifft", Z, {}), ("ifft", Z, dict(n=5, norm="forward")), ("fft", R, {}),
    ("rfft", R, {}), ("rfft", R, dict(n=6, axis=0, norm="ortho")), ("rfft", R, dict(n=10, norm="forward")),
    ("irfft", Z, {}), ("irfft", Z, dict(n=7)), ("irfft", Z, dict(n=4, axis=0, norm="ortho")),
    ("hfft", Z, {}), ("hfft", Z, dict(n=5, norm="forward")), ("ihfft", R, {}),
    ("ihfft", R, dict(n=4, norm="ortho")),
    ("fftn", Z, {}), ("fftn", Z, dict(s=(3, 8), axes=(1, 0))), ("ifftn", Z, dict(norm="ortho")),
    ("ifftn", Z, dict(s=(5,), axes=(0,))), ("rfftn", R, {}), ("rfftn", R, dict(s=(6, 3), axes=(1, 0))),
    ("irfftn", Z, {}), ("irfftn", Z, dict(s=(3, 9), axes=(0, 1), norm="forward")), ("fftn", Z, dict(axes=())),
]
IDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)]


@pytest.mark.parametrize("name, x, kw", CASES, ids=IDS)
def test_matches_numpy(name, x, kw):
    want = getattr(np.fft, name)(x, **kw)
    got = getattr(nx.fft, name)(nx.asarray(x), **kw)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_single_precision_stays_single():
    assert nx.fft.fft(nx.asarray(Z.astype(np.complex64))).dtype == nx.complex64
    assert nx.fft.rfft(nx.asarray(R.astype(np.float32))).dtype == nx.complex64
    assert nx.fft.irfft(nx.asarray(Z.astype(np.complex64))).dtype == nx.float32
    got = nx.fft.fft(nx.asarray(Z.astype(np.complex64)))
    np.testing.assert_allclose(np.asarray(got), np.fft.fft(Z), rtol=1e-5, atol=1e-5)


def test_bad_arguments_say_what_was_expected():
    with pytest.raises(rune.DTypeError, match="real-valued"):
        nx.fft.rfft(nx.asarray(Z))
    with pytest.raises(rune.ArgumentError, match="positive int"):
        nx.fft.fft(nx.asarray(Z), n=0)
    with pytest.raises(rune.ArgumentError, match="norm"):
        nx.fft.fft(nx.asarray(Z), norm="sideways")


def _loss(name, kw, x, weights):
    """A real-valued function of the transform: sum(real(w * out)) (w complex, so
    both parts of the output matter)."""
    out = getattr(nx.fft, name)(x, **kw)
    return nx.sum(nx.real(nx.multiply(out, nx.asarray(weights[tuple(slice(0, d) for d in out.shape)]))))


def _fd_grad(f, x, h=1e-6):
    """JAX's convention: df/dx for real inputs, df/dx - i df/dy for complex ones."""
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = 1
        out[i] = (f(x + h * e) - f(x - h * e)) / (2 * h)
        if np.iscomplexobj(x):
            out[i] -= 1j * (f(x + 1j * h * e) - f(x - 1j * h * e)) / (2 * h)
    return out


WEIGHTS = RNG.standard_normal((12, 12)) + 1j * RNG.standard_normal((12, 12))


@pytest.mark.parametrize("name, x, kw", CASES, ids=IDS)
def test_vjp_matches_finite_differences(name, x, kw):
    x = x[:3, :5]
    f = lambda v: float(_loss(name, kw, nx.asarray(v), WEIGHTS))
    got = rune.grad(lambda v: _loss(name, kw, v, WEIGHTS))(nx.asarray(x))
    np.testing.assert_allclose(np.asarray(got), _fd_grad(f, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name, x, kw", CASES[::3], ids=IDS[::3])
def test_jvp_matches_finite_differences(name, x, kw):
    x = x[:3, :5]
    t = np.asarray(RNG.standard_normal(x.shape) + (1j * RNG.standard_normal(x.shape) if np.iscomplexobj(x) else 0))
    f = getattr(nx.fft, name)
    _, tan = rune.jvp(lambda v: f(v, **kw), (nx.asarray(x),), (nx.asarray(t),))
    h = 1e-6
    fd = (np.asarray(f(nx.asarray(x + h * t), **kw)) - np.asarray(f(nx.asarray(x - h * t), **kw))) / (2 * h)
    np.testing.assert_allclose(np.asarray(tan), fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name, x, kw", [c for c in CASES if "axis" not in c[2] and "axes" not in c[2]][::2])
def test_vmap_matches_loop_and_jit_matches_eager(name, x, kw):
    f = getattr(nx.fft, name)
    batch = np.stack([x, 2 * x, x[::-1]])
    got = rune.vmap(lambda v: f(v, **kw))(nx.asarray(batch))
    want = np.stack([np.asarray(f(nx.asarray(b), **kw)) for b in batch])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(rune.jit(lambda v: f(v * 2, **kw))(nx.asarray(x))),
                               np.asarray(f(nx.asarray(x * 2), **kw)), rtol=1e-12, atol=1e-12)
