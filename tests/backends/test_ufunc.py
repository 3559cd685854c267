"""rune/backends/cpu/ufunc.py: a NumPy ufunc over a compiled C loop, made through NumPy's
C API from ctypes, on every supported Python and NumPy (ci/slice runs this file on
each); and the eager math ops' small calls through it."""
import ctypes
import os
import subprocess

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu import ufunc
from rune.backends.cpu.compiler import FLAGS

pytestmark = pytest.mark.cc
_LOADED = []

LOOP = r"""
#include <stdint.h>
void twice_plus(char **args, const int64_t *dims, const int64_t *steps, void *data) {
  (void)data;
  for (int64_t i = 0; i < dims[0]; i++)
    *(float *)(args[2] + i * steps[2]) =
        2.0f * *(const float *)(args[0] + i * steps[0]) + *(const float *)(args[1] + i * steps[1]);
}
"""


@pytest.fixture(scope="module")
def twice_plus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ufunc")
    src, lib = os.path.join(folder, "loop.c"), os.path.join(folder, "loop.so")
    with open(src, "w") as f:
        f.write(LOOP)
    subprocess.run(["cc", *FLAGS, "-o", lib, src], check=True)
    loaded = ctypes.CDLL(lib)
    _LOADED.append(loaded)   # the loop's library stays loaded while the ufunc lives
    return ufunc.make("twice_plus", ctypes.cast(loaded.twice_plus, ctypes.c_void_p).value, 2)


def test_the_ufunc_runs_the_loop_with_numpys_call_machinery(twice_plus):
    assert isinstance(twice_plus, np.ufunc)
    assert (twice_plus.nin, twice_plus.nout, twice_plus.types, twice_plus.__name__) == (2, 1, ["ff->f"], "twice_plus")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((6, 10)).astype(np.float32) for _ in range(2))
    want = np.float32(2) * a + b   # 2a is exact: one rounding either way
    np.testing.assert_array_equal(twice_plus(a, b), want)
    for x, y in ((a[:, ::2], b[:, 1::2]), (a.T, b.T)):   # strided and transposed operands
        np.testing.assert_array_equal(twice_plus(x, y), np.float32(2) * x + y)
    np.testing.assert_array_equal(twice_plus(a, b[0]), np.float32(2) * a + b[0])       # broadcast
    out = np.empty_like(a)
    assert twice_plus(a, b, out=out) is out
    np.testing.assert_array_equal(out, want)
    with pytest.raises(TypeError):   # float32 loops only: float64 does not cast down safely
        twice_plus(a.astype(np.float64), b)


def test_no_loop_no_ufunc():
    assert ufunc.make("nothing", 0, 1) is None


def test_small_eager_math_calls_go_through_a_ufunc_with_the_kernels_bits():
    from rune.backends import eager_mathlib
    x = np.linspace(-30, 30, 257, dtype=np.float32)
    got = np.asarray(nx.tanh(nx.asarray(x)))
    assert isinstance(eager_mathlib._BUILT["tanh"].ufunc, np.ufunc)
    want = np.asarray(rune.jit(nx.tanh)(nx.asarray(x)))   # the compiled kernel: the library's clones
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
