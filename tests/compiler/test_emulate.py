"""`jitted.emulate(*args, target="cuda")`: a program's CUDA kernels, built for the
host and run launch by launch (rune/compiler/emulation.py), give the bits of the
C kernels jit runs on the host wherever both compute with rune's own arithmetic
(IEEE basic operations, rune's reduction order; docs/design.md). The oracle is
the second code path: the host's compiled plan of the same program, and NumPy."""
import numpy as np
import pytest

import rune
from rune import nx

pytestmark = pytest.mark.cc


def _emulation_available():
    from rune.backends.cuda.emulator import compiler
    return compiler() is not None


requires_gxx = pytest.mark.skipif(not _emulation_available(), reason="the CUDA emulation needs g++")


def _layer_norm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / nx.sqrt(var + 1e-5) * w + b


def _stats(x):
    return {"sum": (x * 1.5).sum(), "max": x.max(axis=0), "argmin": nx.argmin(x, axis=1),
            "mean": x.mean(axis=1), "var": nx.var(x)}


def _scan_with_callback(x):
    seen = []

    def step(carry, row):
        total = carry + row.sum()
        return total, rune.callback(lambda t: seen.append(float(t)) or np.float32(t) * 2,
                                    total, like=rune.Spec((), "float32"))
    return rune.scan(step, nx.zeros((), "float32"), x)


PROGRAMS = {
    "layer norm": (_layer_norm, lambda r: (r.standard_normal((64, 48)).astype(np.float32),
                                           r.standard_normal(48).astype(np.float32),
                                           r.standard_normal(48).astype(np.float32))),
    "reductions f32": (_stats, lambda r: (r.standard_normal((40, 70)).astype(np.float32),)),
    "reductions f64": (_stats, lambda r: (r.standard_normal((40, 70)),)),
    "matvec-free mlp head": (lambda x, w: nx.maximum(x * w, 0.0).sum(axis=-1),
                             lambda r: (r.standard_normal((128, 33)).astype(np.float32),
                                        r.standard_normal(33).astype(np.float32))),
    "scan with a callback": (_scan_with_callback, lambda r: (r.standard_normal((5, 40)).astype(np.float32),)),
    # rows of at least a block's 256 threads: the CUDA dialect runs each as one row group
    "softmax rows": (lambda x: rune.nn.softmax(x, axis=-1), lambda r: (r.standard_normal((40, 300)).astype(np.float32),)),
    "layer norm rows": (_layer_norm, lambda r: (r.standard_normal((3, 24, 257)).astype(np.float32),
                                                r.standard_normal(257).astype(np.float32),
                                                r.standard_normal(257).astype(np.float32))),
}


@pytest.fixture(scope="module")
def emulated_programs():
    """Every program's CUDA plan, their kernels built into one host library (one g++ run),
    and each program's outputs through it: what `jitted.emulate` does per call."""
    from rune.backends import emulator_for
    from rune.compiler import emulation
    from rune.compiler.target import dialect
    built = {}
    for name, (fn, make) in PROGRAMS.items():
        host_args = make(np.random.default_rng(len(name)))
        plan = rune.jit(fn).plan(*[nx.asarray(a) for a in host_args], target="cuda")
        built[name] = (plan, host_args, emulation.as_rendered(plan))
    units = [u for _, _, rendered in built.values() for u in rendered.values()]
    library = emulator_for("cuda")(dialect("cuda").prelude(), units)
    return {name: emulation.run_plan(plan, list(args), library, rendered)
            for name, (plan, args, rendered) in built.items()}


@requires_gxx
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_emulated_cuda_kernels_give_the_host_kernels_bits(name, emulated_programs):
    fn, make = PROGRAMS[name]
    args = [nx.asarray(a) for a in make(np.random.default_rng(len(name)))]
    host = rune.tree.leaves(rune.jit(fn)(*args))
    emulated = emulated_programs[name]
    assert len(host) == len(emulated)
    for h, e in zip(host, emulated):
        h, e = np.asarray(h), np.asarray(e)
        assert e.dtype == h.dtype and e.shape == h.shape
        np.testing.assert_array_equal(np.atleast_1d(e).view(np.uint8), np.atleast_1d(h).view(np.uint8), err_msg=name)


@requires_gxx
def test_emulate_keeps_the_output_structure_and_returns_host_arrays():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = rune.jit(lambda v: {"twice": v * 2, "rows": (v.sum(axis=1), v[0])}).emulate(nx.asarray(x))
    assert set(got) == {"twice", "rows"} and isinstance(got["rows"], tuple)
    assert all(type(a) is nx.Array and a.device == rune.devices("cpu")[0] for a in rune.tree.leaves(got))
    np.testing.assert_array_equal(np.asarray(got["twice"]), x * 2)
    np.testing.assert_array_equal(np.asarray(got["rows"][0]), x.sum(axis=1))


def test_emulate_refuses_specs_and_unknown_targets():
    jf = rune.jit(lambda v: v + 1)
    with pytest.raises(rune.ArgumentError, match="concrete arrays"):
        jf.emulate(rune.Spec((3,), "float32"))
    with pytest.raises(rune.RuneError, match="target"):
        jf.emulate(nx.ones(3), target="metal")


@pytest.mark.parametrize("shape,launches", [((16384, 4096), 1), ((4096, 64), 3), ((40, 300), 1)])
def test_cuda_row_groups_run_a_softmax_row_by_row_in_one_launch_where_rows_fill_a_block(shape, launches):
    plan = rune.jit(lambda x: rune.nn.softmax(x, axis=-1)).plan(rune.Spec(shape, "float32"), target="cuda")
    assert len(plan.kernels) == 3   # the row maxima, the sums, the quotients
    assert sum(len(k.launches) for k in plan.kernels) == launches
    if launches == 1:
        src = plan.kernels[0].source
        assert src.count("__syncthreads();  // the row's earlier parts are written") == 2, src


# the programs ci/gpu-check compares (its cost model counts their emulation builds: ci/gpu_budget.py)
GPU_PROGRAMS = ("layer norm", "reductions f32", "reductions f64", "softmax rows", "layer norm rows")


@requires_gxx
@pytest.mark.cuda
@pytest.mark.parametrize("name", GPU_PROGRAMS)
def test_a_gpu_gives_the_emulations_bits(name):
    # ci/gpu-check's comparison of a real GPU with the emulation: the same program's
    # CUDA kernels, run on the device and on the host, give the same bits.
    fn, make = PROGRAMS[name]
    host_args = make(np.random.default_rng(len(name)))
    jf = rune.jit(fn)
    on_gpu = rune.tree.leaves(jf(*[nx.asarray(a, device="cuda:0") for a in host_args]))
    emulated = rune.tree.leaves(jf.emulate(*[nx.asarray(a) for a in host_args]))
    for g, e in zip(on_gpu, emulated):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8), np.atleast_1d(e).view(np.uint8), err_msg=name)
