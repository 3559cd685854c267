"""A reduction's bits depend on its shape alone: the same on 1, 2 and 3 OpenMP threads
(3 oversubscribes a two-core machine) and in the CUDA dialect under any strategy,
grid and block size (run by the CPU emulation of CUDA). Every reduction kind and dtype
group, on sizes that cross the fixed blocks (reductions.py's REDUCE_BLOCK), against a
float64 NumPy oracle; then 20 steps of the digits CNN and of the char-LM transformer
give bit-identical parameters on 1, 2 and 3 threads.

Kernels below the renderer's parallel thresholds run on one thread whatever the
policy, so the module renders with thresholds of one element: every loop that may be
parallel is, and a reduction to a scalar splits its blocks among the threads. The
thread count is pinned by the thread policy's functions (rune/backends/cpu/threads.py), BLAS's
included."""
import importlib.util
import os
import shutil
import sys

import numpy as np
import pytest

import rune
from rune import nn, nx, optim
from rune.codegen.reductions import REDUCE_BLOCK

import pinned_threads
from pinned_threads import assert_bits_equal, at_threads

pytestmark = pytest.mark.cc

THREADS = (1, 2, 3)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module", autouse=True)
def parallel_everywhere():
    """Every loop the C dialect may run in parallel does, and every BLAS call may thread."""
    with pinned_threads.parallel_everywhere():
        yield


def _reductions(f32, f64, near1, cube, rows, c64, h16, b16, i32):
    """One of every reduction kind and dtype group (one jitted stretch: compiled once)."""
    return dict(
        sum_f64=nx.sum(f64 * 1.5),                 # the (y * 1.5).sum() of 2**22 float64
        sum_f32=nx.sum(f32), mean_f32=nx.mean(f32),
        prod_f64=nx.prod(near1), max_f32=nx.max(f32), min_f32=nx.min(f32),
        argmax=nx.argmax(f32), argmin=nx.argmin(f32),
        any=nx.any(f32 > 0.9999), all=nx.all(f32 >= 0),
        var_f32=nx.var(f32), std_f64=nx.std(f64),
        logsumexp=nx.logsumexp(f32), norm=nx.sqrt(nx.sum(f32 * f32)),
        rows_sum=nx.sum(rows, axis=1), cols_sum=nx.sum(rows, axis=0),          # each axis of a matrix
        rows_max=nx.max(rows, axis=1), cols_min=nx.min(rows, axis=0),
        softmax=nx.softmax(rows, axis=1), outer_axes=nx.sum(cube, axis=(0, 2)),
        sum_c64=nx.sum(c64), sum_f16=nx.sum(h16), sum_bf16=nx.sum(b16),
        sum_i32=nx.sum(i32, dtype=nx.int32), max_i32=nx.max(i32),
    )


def data_names():
    """The names of `_reductions`' outputs (its leaves come in their sorted order)."""
    return _reductions(**{k: nx.asarray(a) for k, a in _inputs(REDUCE_BLOCK, 7).items()}).keys()


def _inputs(n_big, n_odd):
    rng = np.random.default_rng(27)
    f32 = rng.standard_normal(n_odd).astype(np.float32)
    f32[[5, n_odd // 2]] = f32.max() + 1     # a tie for argmax: the first wins
    return dict(
        f32=f32, f64=rng.standard_normal(n_big),
        near1=(1 + 1e-4 * rng.standard_normal(n_odd)),
        cube=rng.standard_normal((9, 5, 3 * REDUCE_BLOCK + 7)).astype(np.float32),
        rows=rng.standard_normal((1100, 700)).astype(np.float32),
        c64=(rng.standard_normal(n_odd) + 1j * rng.standard_normal(n_odd)).astype(np.complex64),
        h16=rng.random(n_odd).astype(np.float16),
        b16=nx.asarray(rng.random(n_odd).astype(np.float32)).astype(nx.bfloat16),
        i32=rng.integers(-2 ** 31, 2 ** 31, n_odd, dtype=np.int64).astype(np.int32),
    )


def _oracle(v):
    """The float64 (complex128) NumPy values of `_reductions`."""
    w = {k: np.asarray(a).astype(np.complex128 if k == "c64" else np.float64) for k, a in v.items()}
    f, rows = w["f32"], w["rows"]
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    return dict(
        sum_f64=(w["f64"] * 1.5).sum(), sum_f32=f.sum(), mean_f32=f.mean(), prod_f64=w["near1"].prod(),
        max_f32=f.max(), min_f32=f.min(), argmax=np.argmax(f), argmin=np.argmin(f),
        any=(f > np.float32(0.9999)).any(), all=(f >= 0).all(), var_f32=f.var(), std_f64=w["f64"].std(),
        logsumexp=np.log(np.exp(f - f.max()).sum()) + f.max(), norm=np.sqrt((f * f).sum()),
        rows_sum=rows.sum(axis=1), cols_sum=rows.sum(axis=0), rows_max=rows.max(axis=1),
        cols_min=rows.min(axis=0), softmax=e / e.sum(axis=1, keepdims=True),
        outer_axes=w["cube"].sum(axis=(0, 2)), sum_c64=w["c64"].sum(), sum_f16=w["h16"].sum(),
        sum_bf16=w["b16"].sum(), sum_i32=v["i32"].sum(dtype=np.int32), max_i32=v["i32"].max(),
    )


def _close(got, want, name):
    got = np.asarray(got)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    rtol = {"float16": 2e-3, "bfloat16": 1e-2, "float64": 1e-12}.get(got.dtype.name, 2e-5)
    scale = np.maximum(np.abs(want), 1)    # sums of signed values: their error scales with their terms
    assert np.all(np.abs(got.astype(np.asarray(want).dtype) - want) <= rtol * scale), name


@pytest.fixture(scope="module")
def program():
    data = _inputs(1 << 22, 3 * 33_333 + 2)
    jitted = rune.jit(lambda d: _reductions(**d))
    args = {k: nx.asarray(a) for k, a in data.items()}
    assert jitted.plan(args).kernels
    return jitted, args, data


def test_every_reduction_gives_the_same_bits_on_1_2_and_3_threads(program):
    jitted, args, data = program
    results = {k: at_threads(k, jitted, args) for k in THREADS}
    for k in THREADS[1:]:
        assert_bits_equal(results[k], results[1], f"{k} threads against 1")
    names = sorted(data_names())
    want = _oracle(data)
    for name, got in zip(names, results[1]):   # the leaves of a dict come in key order
        _close(got, want[name], name)


def test_the_split_of_a_full_sum_follows_the_threads_but_the_order_does_not():
    """The issue's case: a float64 (y * 1.5).sum() of 2**22 elements split among the
    threads; each thread count gives the bits of one pairwise tree over 512-element
    blocks of 32 lanes, computed here in NumPy."""
    y = np.random.default_rng(31).standard_normal(1 << 22)
    f = rune.jit(lambda v: nx.sum(v * 1.5))
    source = "\n".join(k.source for k in f.plan(nx.asarray(y)).kernels)
    assert "omp parallel for" in source and "reduction(" not in source
    got = {k: at_threads(k, f, nx.asarray(y))[0] for k in THREADS}
    parts = (y * 1.5).reshape(-1, REDUCE_BLOCK // 32, 32)   # block, step, lane
    lanes = np.zeros((parts.shape[0], 32))
    for step in range(parts.shape[1]):   # each lane in index order
        lanes = lanes + parts[:, step]
    while lanes.shape[1] > 1:            # lane l takes lane l + s, s = 16 ... 1
        half = lanes.shape[1] // 2
        lanes = lanes[:, :half] + lanes[:, half:]
    blocks = lanes[:, 0]
    while blocks.size > 1:               # the blocks pairwise (a power of two of them here)
        blocks = blocks[0::2] + blocks[1::2]
    for k in THREADS:
        assert got[k] == blocks[0], (k, got[k], blocks[0])


# ---------------------------------------------------------------- the CUDA dialect, emulated

def _strategy_program(x, z, h):
    """Few long rows (cheap to emulate under every strategy): each kind once more."""
    return (nx.sum(x, axis=1), nx.max(x, axis=1), nx.min(x, axis=1), nx.prod(1 + x / 64, axis=1),
            nx.argmax(x, axis=1), nx.sum(z, axis=1), nx.sum(h, axis=1), nx.sum(x))


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to build the CUDA emulation")
def test_cuda_kernels_give_the_c_kernels_bits_under_every_strategy_and_launch():
    """The reductions above at emulation sizes, rendered for a small GPU and launched as
    rendered and on other grids and block sizes; then a few long rows under each
    strategy (one thread, one CUDA block, split blocks per row)."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    import cuda_emu
    from rune.codegen.cuda import CudaDialect, DeviceProps
    small = dict(device=DeviceProps(sm_count=2), block=64, blocks_per_sm=2, items_per_thread=2)
    data = _inputs(2 * REDUCE_BLOCK + 5, REDUCE_BLOCK + 77)
    data["rows"], data["cube"] = data["rows"][:3, :2 * REDUCE_BLOCK + 3], data["cube"][:2, :2, :600]
    rng = np.random.default_rng(5)
    few = [rng.standard_normal((3, 3 * REDUCE_BLOCK + 9)).astype(np.float32),
           (rng.standard_normal((3, 700)) + 1j).astype(np.complex64),
           nx.asarray(rng.random((3, 700)).astype(np.float32)).astype(nx.bfloat16)]
    runs, units = [], []
    for fn, args, strategies in ((lambda d: _reductions(**d), [data], (None,)),
                                 (_strategy_program, few, ("thread", "block", "split"))):
        want = at_threads(2, rune.jit(fn), *[rune.tree.map(nx.asarray, a) for a in args])
        plan = rune.jit(fn).plan(*[rune.tree.map(lambda a: rune.Spec(np.shape(a), nx.asarray(a).dtype), a)
                                   for a in args], target="cuda")
        flat = [np.asarray(a) for a in rune.tree.leaves(args)]
        for strategy in strategies:
            rendered = cuda_emu.rerender(plan, CudaDialect(**small, reduce_strategy=strategy))
            runs.append((strategy or "as chosen", plan, flat, rendered, want))
            units += list(rendered.values())
    library = cuda_emu.Library(CudaDialect().prelude(), units)
    names = sorted(data_names())
    # exp is each target's math library's (glibc's vector expf, CUDA's expf): those outputs are close, not equal
    libm = [names.index(n) for n in ("logsumexp", "softmax")]

    def check(got, want, what):
        keep = [i for i in range(len(want)) if len(want) != len(names) or i not in libm]
        assert_bits_equal([got[i] for i in keep], [want[i] for i in keep], what)
        for i in set(range(len(want))) - set(keep):
            np.testing.assert_allclose(got[i], want[i], rtol=1e-6, atol=1e-9, err_msg=f"{what}: {names[i]}")
    for what, plan, flat, rendered, want in runs:
        check(cuda_emu.run_plan(plan, flat, library, rendered), want, f"CUDA {what}")
    what, plan, flat, rendered, want = runs[0]
    for grid, block in ((1, 32), (3, 96)):   # who folds what changes, the order does not
        check(cuda_emu.run_plan(plan, flat, _Relaunched(library, grid, block), rendered), want,
              f"CUDA on grid {grid}, block {block}")


class _Relaunched:
    """An emulated library whose launches all run on one grid and block size."""

    def __init__(self, library, grid, block):
        self.library, self.grid, self.block = library, grid, block

    def __getattr__(self, name):
        return getattr(self.library, name)

    def launch(self, launch, grid, block, buffers):
        self.library.launch(launch, self.grid, self.block, buffers)


# ---------------------------------------------------------------- training loops

def _example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(REPO, "examples", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _same_training_on_every_thread_count(make, batches):
    """20 steps of (model, opt_state, step) = make() on `batches` at 1, 2 and 3 threads:
    the parameters, bit for bit."""
    def train():
        model, opt_state, step = make()
        for batch in batches:
            model, opt_state, _ = step(model, opt_state, *batch)
        return model
    first = at_threads(1, train)
    assert all(np.isfinite(p).all() for p in first)
    for k in THREADS[1:]:
        assert_bits_equal(at_threads(k, train), first, f"parameters after {len(batches)} steps on {k} threads against 1")


def test_twenty_digits_cnn_steps_give_the_same_parameters_on_1_2_and_3_threads():
    digits = _example("train_digits")
    rng = np.random.default_rng(1)
    batches = [(nx.asarray(rng.random((32, 8, 8, 1), dtype=np.float32)),
                nx.asarray(rng.integers(0, 10, 32).astype(np.int32))) for _ in range(20)]
    optimizer = optim.adam(2e-3)
    step = digits.make_step(optimizer)

    def make():
        model = digits.DigitsCNN(nx.random.key(0))
        return model, optimizer.init(model), step
    _same_training_on_every_thread_count(make, batches)


def test_twenty_char_lm_steps_give_the_same_parameters_on_1_2_and_3_threads():
    charlm = _example("train_charlm")
    rng = np.random.default_rng(2)
    vocab, seq = 40, 32
    batches = [(nx.asarray(rng.integers(0, vocab, (8, seq + 1)).astype(np.int32)),) for _ in range(20)]
    optimizer, _ = charlm.make_optimizer(3e-3, 20, 0.01)
    step = charlm.make_step(optimizer)

    def make():
        model = charlm.CharTransformer(nx.random.key(0), vocab, seq, d_model=32, heads=2, layers=2)
        model = nn.Policy(param="float32", compute="float32", output="float32").apply(model)
        return model, optimizer.init(model), step
    _same_training_on_every_thread_count(make, batches)
