"""Float `arange` and `linspace` made on the device (iota arithmetic, no host
constant), value for value what NumPy returns, across dtypes and signs."""
import random

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx

DTYPES = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16, np.int32]

_rng = random.Random(9)
ARANGE = [(0.0, 1.0, 0.1), (1.0, 0.0, -0.1), (0.1, 2.3, 0.2), (-3.0, 3.0, 0.7), (0, 5, 0.5),
          (5.5, -2, -0.25), (1e-3, 1.0, 1e-3), (0.3, 0.3, 0.1), (10.0, 0.0, -3.3), (2.0, 1.0, 0.5),
          (0.0, 1e-307, 1e-308), (-0.0, 1.0, 0.5), (1e16, 1e16 + 64, 8.0)]
for _ in range(40):
    a, st = _rng.uniform(-100, 100), _rng.choice([-1, 1]) * _rng.uniform(1e-3, 10)
    ARANGE.append((a, a + st * _rng.randint(0, 300) + _rng.uniform(-1, 1) * st, st))

LINSPACE = [(0.0, 1.0, 5, True), (1.0, -1.0, 7, False), (0, 1, 1, True), (0, 1, 0, True), (3.0, 3.0, 4, True),
            (-2.5, 1e-3, 2, False), (0.0, 1e-320, 3, True)]
for _ in range(40):
    LINSPACE.append((_rng.uniform(-50, 50), _rng.uniform(-50, 50), _rng.randint(0, 60), _rng.random() < 0.5))


def _same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 1e16 cast to float16 / int32, in NumPy as here
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_float_arange_matches_numpy(dtype):
    for start, stop, step in ARANGE:
        _same(nx.arange(start, stop, step, dtype=dtype), _cast(np.arange(start, stop, step), dtype))


def _cast(x, dtype):
    """NumPy's cast, except float -> int32 saturating as rune converts (these values are finite)."""
    return np.clip(x, -2 ** 31, 2 ** 31 - 1).astype(dtype) if np.dtype(dtype) == np.int32 else x.astype(dtype)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # float16 overflows, in NumPy as here
def test_arange_of_numpy_scalars_matches_numpy():
    for start, stop, step in ARANGE[:20]:
        for t in (np.float32, np.float16):
            a, b, s = t(start), t(stop), t(step)
            try:
                want = np.arange(a, b, s)
            except (ValueError, ZeroDivisionError) as e:
                with pytest.raises(type(e)):
                    nx.arange(a, b, s)
                continue
            _same(nx.arange(a, b, s, dtype=want.dtype), want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_linspace_matches_numpy(dtype):
    for start, stop, num, endpoint in LINSPACE:
        _same(nx.linspace(start, stop, num, endpoint=endpoint, dtype=dtype),
              np.linspace(start, stop, num, endpoint=endpoint).astype(dtype))


def test_linspace_of_mixed_scalars_matches_numpy():
    for start, stop, num, endpoint in LINSPACE[:20]:
        for a, b in ((np.float32(start), stop), (start, np.float16(stop)), (int(start), np.float32(stop))):
            want = np.linspace(a, b, num, endpoint=endpoint)
            _same(nx.linspace(a, b, num, endpoint=endpoint, dtype=want.dtype), want)


def test_defaults_and_errors_are_numpy_s():
    assert nx.arange(0.0, 1.0, 0.25).dtype == nx.float32 and nx.linspace(0, 1).dtype == nx.float32
    for dtype in (np.int64, np.int32):  # integer ranges beyond int32 stay integers
        _same(nx.arange(-2**40, 2**40, 2**38, dtype=dtype), np.arange(-2**40, 2**40, 2**38).astype(dtype))
    for args in ((0.0, 1.0, 0.0), (0.0, float("inf"), 1.0)):
        with pytest.raises(Exception) as want:
            np.arange(*args)
        with pytest.raises(type(want.value)):
            nx.arange(*args)


def test_jit_makes_the_same_values():
    cases = [ARANGE[1], ARANGE[2], ARANGE[5], ARANGE[20]]
    lin = [LINSPACE[1], LINSPACE[20]]

    def make():
        return ([nx.arange(a, b, s, dtype=nx.float32) for a, b, s in cases] +
                [nx.arange(a, b, s, dtype=nx.float16) for a, b, s in cases] +
                [nx.linspace(a, b, n, endpoint=e, dtype=nx.bfloat16) for a, b, n, e in lin] +
                [nx.linspace(a, b, n, endpoint=e, dtype=nx.float64) for a, b, n, e in lin])

    want = ([np.arange(a, b, s).astype(np.float32) for a, b, s in cases] +
            [np.arange(a, b, s).astype(np.float16) for a, b, s in cases] +
            [np.linspace(a, b, n, endpoint=e).astype(ml_dtypes.bfloat16) for a, b, n, e in lin] +
            [np.linspace(a, b, n, endpoint=e) for a, b, n, e in lin])
    for got, ref in zip(rune.jit(make)(), want):
        _same(got, ref)


def test_float_ranges_stage_no_constant():
    program = rune.trace(lambda: (nx.arange(0.5, 1000.5, 1.0), nx.arange(10.0, -90.0, -0.1),
                                  nx.linspace(-1.0, 1.0, 1000)))()
    assert program.consts == [] and "iota" in {e.prim.name for e in program.eqns}
