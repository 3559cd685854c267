"""CUDA kernels fed views that start off a 16-byte boundary.

Flat contiguous kernels read and write 16-byte `rn_vec`s; a misaligned vector
access is a sticky CUDA error that ends the process's CUDA context. Contiguous
views reach the kernels as they are, in three ways:

- A: a jitted call on a slice, `f(x[1:])` (or a foreign view taken by DLPack);
- B: `rune.scan` over rows whose byte length 16 does not divide (each row `x[i]`
  of 1,025 float32 starts 4 bytes further off);
- C: inside one plan, a views step between stretches: `v = tanh(x)[1:]; v @ w + v`.

Each case runs under the emulation (tests/cuda_emu, built with UBSan's alignment
check: a misaligned vector access ends the process with its report) with the
inputs as the stretch passes them, and on a GPU (`cuda`-marked).
"""
import numpy as np
import pytest

import rune
from rune import nx
from rune.codegen.cuda import CudaDialect, DeviceProps

import cuda_emu

needs_gxx = pytest.mark.skipif(cuda_emu.CXX is None, reason="no g++ to build the CUDA emulation")

# small blocks, so a few thousand elements cross blocks and still take the vector path
DIALECT = CudaDialect(DeviceProps(sm_count=2), block=64, blocks_per_sm=2)

_RNG = np.random.default_rng(7)
BIG = _RNG.standard_normal(4097).astype(np.float32)
ROWS = _RNG.standard_normal((3, 1025)).astype(np.float32)
X2, W2 = _RNG.standard_normal((100, 63)).astype(np.float32), _RNG.standard_normal((63, 63)).astype(np.float32)


def _exp_twice(x):
    return nx.exp(x) * 2.0


def _scan_rows(xs):
    # the carry starts beside the rows: a rune array is committed to its device, and
    # the default device (the host) would meet the GPU's rows in c + sum(r)
    return rune.scan(lambda c, r: (c + nx.sum(r), nx.tanh(r) * 2.0), nx.zeros((), nx.float32, device=xs.device), xs)


def _view_between_steps(x, w):
    v = nx.tanh(x)[1:]
    return v @ w + v


CASES = [("A_argument_view", _exp_twice, lambda: [BIG[1:]]),
         ("B_scan_rows", _scan_rows, lambda: [ROWS]),
         ("C_view_between_steps", _view_between_steps, lambda: [X2, W2])]


def _misaligned_by(a):
    return a.__array_interface__["data"][0] % 16


def test_the_cases_really_reach_kernels_misaligned():
    """What makes each case one: an input at 4, 8 or 12 bytes past a boundary."""
    assert _misaligned_by(BIG[1:]) == 4
    assert [_misaligned_by(ROWS[i]) for i in range(3)] == [0, 4, 8]
    assert _misaligned_by(np.tanh(X2)[1:]) == 12


@needs_gxx
@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_views_off_a_vector_boundary_take_the_scalar_loop_in_emulation(name, fn, args):
    args = args()
    plan = rune.jit(fn).plan(*args, target="cuda")
    rendered = cuda_emu.rerender(plan, DIALECT)
    # the kernels reading the views are vectorised: only the runtime test keeps them off rn_vec
    assert any("rn_vec" in text for text, _ in rendered.values()), name
    library = cuda_emu.Library(DIALECT.prelude(), list(rendered.values()))
    got = cuda_emu.run_plan(plan, args, library, rendered)
    want = [np.asarray(w) for w in rune.tree.leaves(rune.jit(fn)(*args))]
    eager = [np.asarray(w) for w in rune.tree.leaves(fn(*[nx.asarray(a) for a in args]))]
    assert len(got) == len(want)
    for g, w, e in zip(got, want, eager):
        # (the matmul of C runs on the host in one plan and as a C kernel in the other)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=f"{name} against the C kernels")
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5, err_msg=f"{name} against eager NumPy")


@needs_gxx
def test_aligned_and_misaligned_runs_of_one_kernel_agree_in_emulation():
    """The vector loop (aligned input) and its scalar fallback (the same values one
    element off) give the same bits."""
    plan = rune.jit(_exp_twice).plan(BIG[:4096], target="cuda")
    rendered = cuda_emu.rerender(plan, DIALECT)
    library = cuda_emu.Library(DIALECT.prelude(), list(rendered.values()))
    shifted = np.empty(4097, np.float32)
    shifted[1:] = BIG[:4096]
    (aligned,) = cuda_emu.run_plan(plan, [BIG[:4096].copy()], library, rendered)
    (offset,) = cuda_emu.run_plan(plan, [shifted[1:]], library, rendered)
    np.testing.assert_array_equal(aligned, offset)
    np.testing.assert_allclose(aligned, np.asarray(rune.jit(_exp_twice)(BIG[:4096])), rtol=1e-6)


# ---------------------------------------------------------------- on a GPU

def _on_gpu(host):
    return nx.asarray(host, device="cuda:0")


def _check(got, fn, host_args):
    want = [np.asarray(w) for w in rune.tree.leaves(rune.jit(fn)(*host_args))]
    got = [np.asarray(g) for g in rune.tree.leaves(got)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@pytest.mark.cuda
def test_a_jitted_call_on_a_gpu_slice_and_a_dlpack_view():
    cupy = pytest.importorskip("cupy")
    x = _on_gpu(BIG)
    _check(rune.jit(_exp_twice)(x[1:]), _exp_twice, [BIG[1:]])
    view = cupy.asarray(BIG)[1:]
    assert view.data.ptr % 16 == 4
    _check(rune.jit(_exp_twice)(nx.from_dlpack(view)), _exp_twice, [BIG[1:]])
    cupy.cuda.Device().synchronize()   # a misaligned access would surface here as a CUDA error


@pytest.mark.cuda
def test_a_scan_over_rows_of_1025_float32_on_a_gpu():
    cupy = pytest.importorskip("cupy")
    _check(rune.jit(_scan_rows)(_on_gpu(ROWS)), _scan_rows, [ROWS])
    _check(_scan_rows(_on_gpu(ROWS)), _scan_rows, [ROWS])   # eager: the body's plan per row
    cupy.cuda.Device().synchronize()


@pytest.mark.cuda
def test_a_view_between_the_steps_of_one_plan_on_a_gpu():
    cupy = pytest.importorskip("cupy")
    _check(rune.jit(_view_between_steps)(_on_gpu(X2), _on_gpu(W2)), _view_between_steps, [X2, W2])
    cupy.cuda.Device().synchronize()
