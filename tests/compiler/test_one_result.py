"""One result per program (docs/design.md): whole programs give the same bits eagerly;
under jit with RUNE_COMPILE_MIN_SIZE at its default (small stretches op by op on
NumPy) and at 0 (every stretch compiled); on 1, 2 and 3 threads; and through their
CUDA kernels run by the host emulation (`jitted.emulate(*args, target="cuda")`), which
is how CI without a GPU checks a GPU's bits. Each path is the others' oracle; the
reductions among them are checked against NumPy's float64 values too.

Programs with float32 transcendental functions (softmax, the training steps' losses)
compare the eager path only where the eager table runs rune's math library
(rune/backends/eager_mathlib.py; NumPy's SIMD exp has other bits): the compiled
paths, the threads and the emulated CUDA kernels all do."""
import importlib.util
import os

import numpy as np
import pytest

import rune
from rune import nn, nx, optim
from rune.compiler.lower import DEFAULT_MIN_SIZE

from compiled import numpy_stretches
from pinned_threads import assert_bits_equal, at_threads, parallel_everywhere

pytestmark = pytest.mark.cc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THREADS = (1, 2, 3)
# sizes below RUNE_COMPILE_MIN_SIZE's default, above it, and above 2**16
SIZES = (1000, 5000, 70_001)


def _emulation_available():
    from rune.backends.cuda.emulator import compiler
    return compiler() is not None


def _statistics(*xs):
    """The sum, mean and variance of each input; the first's standard deviation, row
    sums and a product too."""
    out = [dict(sum=nx.sum(x * 1.5), mean=nx.mean(x), var=nx.var(x)) for x in xs]
    x = xs[0]
    out[0].update(std=nx.std(x), rows=nx.sum(nx.reshape(x[:x.size - x.size % 10], (10, -1)), axis=1),
                  prod=nx.prod(1 + x[:300] / 64))
    return out


def _stat_inputs(dtype):
    def make(rng):
        return tuple((rng.standard_normal(n) * 3 + 0.25).astype(dtype) for n in SIZES)
    return make


def _layer_norm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / nx.sqrt(var + 1e-5) * w + b


def _scan_with_callback(x):
    def step(carry, row):
        total = carry + row.sum()
        return total, rune.callback(lambda t: np.float32(t) * 2, total, like=rune.Spec((), "float32"))
    return rune.scan(step, nx.zeros((), "float32"), x)


def _softmax(x):
    return nx.softmax(x, axis=-1), nx.logsumexp(x[:, :8], axis=0)


def _f32(*shape):
    return lambda rng: (rng.standard_normal(shape).astype(np.float32),)


# name: (program, inputs from a Generator, whether it calls float32 transcendental functions)
PROGRAMS = {
    "float32 statistics": (_statistics, _stat_inputs(np.float32), False),
    "float64 statistics": (_statistics, _stat_inputs(np.float64), False),
    "layer norm": (_layer_norm, lambda r: (r.standard_normal((16, 48)).astype(np.float32),
                                           r.standard_normal(48).astype(np.float32),
                                           r.standard_normal(48).astype(np.float32)), False),
    "scan with a callback": (_scan_with_callback, _f32(5, 700), False),
    "softmax": (_softmax, _f32(16, 300), True),
}


def _leaves(tree):
    return [np.asarray(a) for a in rune.tree.leaves(tree)]


def _eager_runs_rune_math():
    """Whether eager float32 exp is rune's math library's (as the kernels'), not NumPy's."""
    from rune.backends import backend_for, eager_mathlib
    host = rune.devices("cpu")[0]
    return backend_for(host).impls(host)["exp"].__module__ == eager_mathlib.__name__


def _every_path(fn, args, emulated, eager=True):
    """{path: the leaves of fn(*args)} on every path of the module docstring (eager
    only where `eager`); `emulated`: the CUDA kernels' leaves (`emulated_cuda`), or None."""
    out = {"eager": _leaves(fn(*args))} if eager else {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNE_COMPILE_MIN_SIZE", str(DEFAULT_MIN_SIZE))
        small = rune.jit(fn)
        out[f"jit, RUNE_COMPILE_MIN_SIZE={DEFAULT_MIN_SIZE}"] = _leaves(small(*args))
        mp.setenv("RUNE_COMPILE_MIN_SIZE", "0")
        # products keep their size class (tiled, they have bits of their own: pinned_threads);
        # their thread counts are tests/codegen/test_reduction_determinism.py's
        with parallel_everywhere(blas=False):
            for k in THREADS:
                out[f"jit, RUNE_COMPILE_MIN_SIZE=0, {k} threads"] = at_threads(k, rune.jit(fn), *args)
    if emulated is not None:
        out["emulated CUDA kernels"] = emulated
    return out


def _assert_one_result(results):
    first, want = next(iter(results.items()))
    for path, got in results.items():
        assert_bits_equal(got, want, f"{path} against {first}")


def _program(name):
    """(fn, args) of PROGRAMS[name]."""
    fn, make, _ = PROGRAMS[name]
    return fn, [nx.asarray(a) for a in make(np.random.default_rng(len(name)))]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_path_gives_the_same_bits(name, emulated_cuda):
    fn, args = _program(name)
    eager = not PROGRAMS[name][2] or _eager_runs_rune_math()
    _assert_one_result(_every_path(fn, args, emulated_cuda.get(name), eager=eager))


def _scaled_sum(x):
    return (x * 1.5).sum()


def test_small_stretches_run_op_by_op_at_the_default_size_and_compiled_at_0(monkeypatch):
    """The paths above are distinct: at the default RUNE_COMPILE_MIN_SIZE a 1,000-element
    sum runs on NumPy, at 0 it is a C kernel."""
    x = nx.asarray(np.linspace(-3, 3, SIZES[0], dtype=np.float32))
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", str(DEFAULT_MIN_SIZE))
    plan = rune.jit(_scaled_sum).plan(x)
    assert numpy_stretches(plan) and not plan.kernels
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "0")
    plan = rune.jit(_scaled_sum).plan(x)
    assert plan.kernels and not numpy_stretches(plan)


def _issue():
    return _scaled_sum, [nx.asarray(np.linspace(-3, 3, 1000, dtype=np.float32))]


def test_the_issues_float32_sum_of_1000_elements(emulated_cuda):
    """(x * 1.5).sum() of linspace(-3, 3, 1000) in float32: NumPy's pairwise sum gives
    -0.00024414; rune's order (blocks of 32 lanes, their trees, the blocks in double)
    gives 0.0 on every path."""
    results = _every_path(*_issue(), emulated_cuda.get("the issue's sum"))
    _assert_one_result(results)
    assert results["eager"][0] == np.float32(0.0)


def _float64_statistics(w, first):
    """NumPy's float64 values of `_statistics` for one input, each with the size its
    rounding error scales with (the sum of its terms' magnitudes)."""
    a, rows = np.abs(w), w[:w.size - w.size % 10].reshape(10, -1)
    out = dict(sum=((w * 1.5).sum(), (a * 1.5).sum()), mean=(w.mean(), a.mean()), var=(w.var(), w.var()))
    if first:
        prod = (1 + w[:300] / 64).prod()
        out.update(std=(w.std(), w.std()), rows=(rows.sum(axis=1), np.abs(rows).sum(axis=1)), prod=(prod, abs(prod)))
    return out


def test_statistics_are_close_to_float64():
    """The shared bits are also the right values: NumPy's float64 statistics."""
    for dtype, rtol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        xs = _stat_inputs(dtype)(np.random.default_rng(3))
        got = _statistics(*(nx.asarray(x) for x in xs))
        for i, x in enumerate(xs):
            for key, (value, scale) in _float64_statistics(x.astype(np.float64), i == 0).items():
                error = np.abs(np.asarray(got[i][key], np.float64) - value)
                assert np.all(error <= rtol * scale), f"{np.dtype(dtype)} {key} of {x.size}: off by {error}"


# ---------------------------------------------------------------- training steps

def _example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(REPO, "examples", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digits_step():
    digits = _example("train_digits")
    rng = np.random.default_rng(1)
    optimizer = optim.adam(2e-3)
    model = digits.DigitsCNN(nx.random.key(0))
    args = (model, optimizer.init(model), nx.asarray(rng.random((4, 8, 8, 1), dtype=np.float32)),
            nx.asarray(rng.integers(0, 10, 4).astype(np.int32)))
    return digits.make_step(optimizer).__wrapped__, args


def _char_lm_step():
    charlm = _example("train_charlm")
    rng = np.random.default_rng(2)
    vocab, seq = 20, 8
    optimizer, _ = charlm.make_optimizer(3e-3, 20, 0.01)
    model = charlm.CharTransformer(nx.random.key(0), vocab, seq, d_model=16, heads=2, layers=1)
    model = nn.Policy(param="float32", compute="float32", output="float32").apply(model)
    args = (model, optimizer.init(model), nx.asarray(rng.integers(0, vocab, (2, seq + 1)).astype(np.int32)))
    return charlm.make_step(optimizer).__wrapped__, args


TRAINING_STEPS = {"digits": _digits_step, "char transformer": _char_lm_step}


@pytest.mark.parametrize("name", list(TRAINING_STEPS))
def test_a_training_step_gives_the_same_parameters_on_every_path(name, emulated_cuda):
    fn, args = TRAINING_STEPS[name]()
    _assert_one_result(_every_path(fn, args, emulated_cuda.get(name), eager=_eager_runs_rune_math()))


# ---------------------------------------------------------------- compiled ahead, in batches

def _all_programs():
    """{name: (fn, args)} of every program the tests above run on every path."""
    programs = {name: _program(name) for name in PROGRAMS}
    programs["the issue's sum"] = _issue()
    programs.update((name, make()) for name, make in TRAINING_STEPS.items())
    return programs


@pytest.fixture(scope="module", autouse=True)
def c_kernels_compiled_together():
    """Every program's C kernels under both jit settings of `_every_path` planned first
    and compiled in one batch (compile_pending): each path's own jit then finds its
    kernels built (by their source), where it compiled them one program and setting at a
    time."""
    from rune.backends import compile_pending
    plans = []   # held until compiled: a plan nobody holds is not compiled
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNE_COMPILE_MIN_SIZE", str(DEFAULT_MIN_SIZE))
        plans += [rune.jit(fn).plan(*args) for fn, args in _all_programs().values()]
        mp.setenv("RUNE_COMPILE_MIN_SIZE", "0")
        with parallel_everywhere(blas=False):
            plans += [rune.jit(fn).plan(*args) for fn, args in _all_programs().values()]
    compile_pending()


# ---------------------------------------------------------------- the CUDA kernels, emulated

@pytest.fixture(scope="module")
def emulated_cuda():
    """{name: the leaves of fn(*args)} for every program above, computed by its CUDA
    kernels under the host emulation as `jitted.emulate(*args, target="cuda")` runs them
    (rune/compiler/emulation.py: the plan for "cuda", its kernels built by g++ and run
    launch by launch); the kernels of all the programs in one g++ build, not one each
    (each build parses the emulation's header first, ~0.3 s). Empty without g++."""
    if not _emulation_available():
        return {}
    from rune.backends import emulator_for, kernel_dialect
    from rune.compiler import emulation
    planned = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNE_COMPILE_MIN_SIZE", "0")
        for name, (fn, args) in _all_programs().items():
            plan = rune.jit(fn).plan(*args, target="cuda")
            planned[name] = (plan, [np.asarray(leaf) for leaf in rune.tree.leaves(args)], emulation.as_rendered(plan))
    units = [unit for _, _, rendered in planned.values() for unit in rendered.values()]
    library = emulator_for("cuda")(kernel_dialect("cuda").prelude(), units)
    return {name: emulation.run_plan(plan, host, library, rendered) for name, (plan, host, rendered) in planned.items()}
