"""The CUDA kernels, checked without a GPU.

- NVRTC: every CUDA kernel the test-suite's jitted programs generate (the op
  table under jit, the fuzzed programs, the compositions, the seed
  walk-through) compiles for sm_90, a sample for sm_80, many units to one
  NVRTC program (NVRTC's fixed cost is ~0.1 s a program).
- Emulation: kernels rendered with small blocks and grids (so small inputs
  cross blocks, end in a partial block and reduce across blocks) run on the
  CPU under tests/cuda_emu/cuda_emu.h and must give what the C kernels and
  NumPy give: elementwise, movement (broadcast, transpose, slices, pad guards,
  concatenate), every reduction under each strategy (argmax/argmin with ties
  and NaNs across blocks), 16-bit floats, iota and Threefry bits, gathers and
  dynamic slices at runtime indices, scatter in every mode (sorted by target,
  each target's updates folded in order; one thread as the second path; past
  65,536 index points too) and dynamic_update_slice.
- Planning: `plan(..., target="cuda")` from arrays or Specs, index widths,
  errors.
"""
import contextlib
import importlib.util
import io
import math
import os
import pathlib
import runpy
import sys
import threading

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cuda import nvrtc
from rune.codegen.cuda import CudaDialect, DeviceProps
from rune.core.prims import P
from rune.core.trace import bind
from rune.errors import ArgumentError, UsageError
from rune.codegen.kernel import Buffer, Kernel
from rune.compiler.target import TargetStretch

import cuda_emu

BF16 = np.dtype(ml_dtypes.bfloat16)
SEED = pathlib.Path(__file__).resolve().parents[3] / "shared" / "seed" / "callbacks.py"

needs_gxx = pytest.mark.skipif(cuda_emu.CXX is None, reason="no g++ to build the CUDA emulation")


def target_stretches(plan):
    out = [s for s in plan.steps if type(s) is TargetStretch]
    for step in plan.steps:
        for sub in step.plans:
            out.extend(target_stretches(sub))
    return out


# ---------------------------------------------------------------- planning

def test_plan_for_cuda_from_specs_matches_plan_from_arrays_and_leaves_host_plans_alone():
    def f(x, y):
        return nx.sum(nx.exp(x) * y, axis=1), x.T + 1

    x, y = np.random.default_rng(0).random((6, 5), np.float32), np.ones(5, np.float32)
    jf = rune.jit(f)
    from_arrays = jf.plan(x, y, target="cuda")
    from_specs = jf.plan(rune.Spec((6, 5), "float32"), rune.Spec((5,), "float32"), target="cuda")
    assert [k.source for k in from_arrays.kernels] == [k.source for k in from_specs.kernels]
    assert from_specs.kernels and all(k.target == "cuda" for k in from_specs.kernels)
    for k in from_specs.kernels:
        assert f'extern "C" __global__ void {k.name}(' in k.source
        assert k.launches[0].name == k.name and all(ln.block % 32 == 0 for ln in k.launches)
    # the host plan is its own, with C kernels, and still runs
    host = jf.plan(x, y)
    assert all(k.target == "c" for k in host.kernels)
    got = jf(x, y)
    np.testing.assert_allclose(np.asarray(got[0]), (np.exp(x) * y).sum(1), rtol=1e-6)
    with pytest.raises(UsageError, match="inspection"):
        from_specs.run([x, y])
    with pytest.raises(ArgumentError, match="target='tpu'"):
        jf.plan(x, y, target="tpu")


def test_loop_bodies_are_planned_for_cuda_too():
    def f(c, xs):
        return rune.scan(lambda c, x: (c + nx.sin(x) * 2, c * 3), c, xs)

    plan = rune.jit(f).plan(rune.Spec((7,), "float32"), rune.Spec((4, 7), "float32"), target="cuda")
    assert plan.kernels and all(k.target == "cuda" for k in plan.kernels)
    assert any("sinf(" in k.source for k in plan.kernels)


def test_index_width_follows_the_extents():
    small = rune.jit(lambda x: x * 2).plan(rune.Spec((1000,), "float32"), target="cuda").kernels[0]
    big = rune.jit(lambda x: x * 2).plan(rune.Spec((2 ** 31 + 7,), "int8"), target="cuda").kernels[0]
    assert "int64_t" not in small.source and "int32_t t" in small.source
    assert "int64_t t" in big.source and "< 2147483655" in big.source


def test_launch_shapes_follow_the_device():
    x = rune.Spec((1 << 24,), "float32")
    h200 = rune.jit(lambda v: v + 1).plan(x, target="cuda").kernels[0].launches[0]
    assert (h200.grid, h200.block) == (132 * 8, 256)   # a full H200 (sm_90 defaults)
    k = rune.jit(lambda v: v + 1).plan(x, target="cuda").kernels[0]
    small = CudaDialect(DeviceProps(sm_count=10), block=128, blocks_per_sm=4)
    _, _, (copy,) = small.render_unit([k])
    assert (copy.launches[0].grid, copy.launches[0].block) == (40, 128)
    with pytest.raises(ArgumentError, match="multiple of 32"):
        CudaDialect(block=100)


def test_flat_contiguous_kernels_use_aligned_vector_accesses():
    def source(f, *specs):
        (k,) = rune.jit(f).plan(*[rune.Spec(*sp) for sp in specs], target="cuda").kernels
        return k.source, k.launches[0].grid

    src, grid = source(lambda x, y: x[4:] * y + 1, ((4100,), "float32"), ((4096,), "float32"))
    assert "rn_vec<float, 4>" in src and "(p0 + base + 4)" in src and grid == 4   # 1024 vectors of 4
    # only where every vector-accessed pointer is aligned to its vector; else the scalar loop does all
    assert "const bool vectors = (((unsigned long long)p0 | (unsigned long long)p1 | (unsigned long long)p2) " \
           "& 15) == 0;" in src and "(vectors ? 4096 : 0) + " in src
    src, _ = source(lambda x: x.astype(nx.float64) * 2, ((4096,), "float32"))
    assert "rn_vec<double, 2>" in src and "rn_vec<float, 2>" in src   # the widest element sets the width
    assert "(((unsigned long long)p0) & 7) == 0 && (((unsigned long long)p1) & 15) == 0" in src
    for f, spec in ((lambda x: x[1:] * 2, ((4097,), "float32")),        # a misaligned offset
                    (lambda x: x.T * 2, ((64, 64), "float32")),          # not contiguous
                    (lambda x: x * 2, ((100,), "float32"))):             # too little work
        assert "rn_vec" not in source(f, spec)[0]


def test_reduction_strategy_follows_rows_and_length():
    def f(x):
        return nx.sum(x, axis=1)

    def strategy(shape):
        return rune.jit(f).plan(rune.Spec(shape, "float32"), target="cuda").kernels[0].strategy

    assert strategy((100000, 8)) == "thread"      # short rows: one thread each
    assert strategy((100000, 512)) == "block"     # many rows: one block each
    assert strategy((4, 1 << 20)) == "split"      # few long rows: blocks per row, then a finishing kernel
    k = rune.jit(f).plan(rune.Spec((4, 1 << 20), "float32"), target="cuda").kernels[0]
    assert [ln.name for ln in k.launches] == [k.name, k.name + "_finish"]
    assert k.scratch and k.args[-len(k.scratch):] == [("scratch", i) for i in range(len(k.scratch))]


def test_a_node_without_a_cuda_rule_is_named():
    k = Kernel("k", (4,))
    b0, b1 = Buffer(0, np.dtype("float32"), (4,), "in"), Buffer(1, np.dtype("float32"), (4,), "out")
    k.store(b1, k.node("frobnicate", np.float32, [k.load(b0, (1,), 0)]))
    with pytest.raises(NotImplementedError, match="frobnicate"):
        CudaDialect().render_unit([k])
    r = Kernel("r", (), (4,))
    r.store(b1, r.node("reduce_frobnicate", np.float32, [r.load(b0, (1,), 0, inner=True)]))
    with pytest.raises(NotImplementedError, match="reduce_frobnicate"):
        CudaDialect().render_unit([r])


# ---------------------------------------------------------------- NVRTC

def _compile_all(stretches, arch, syntax_only=False, batch=400):
    """Compile the distinct units of `stretches` for `arch`, `batch` units to an NVRTC
    program: to a cubin, or through NVRTC's front end only (parsing, overloads, types:
    what a kernel's text can get wrong) with `syntax_only`. Returns the unit count."""
    units = list({s.name: s for s in stretches}.values())
    prelude = CudaDialect().prelude()
    options = ("-fdevice-syntax-only",) if syntax_only else ("--Ofast-compile=max",)
    for j in range(0, len(units), batch):
        part = units[j:j + batch]
        nvrtc.compile_unit(prelude + "\n\n".join(s.text for s in part), arch=arch, ptx=syntax_only,
                           kernels=[k.name for s in part for k in s.kernels], options=options)
    return len(units)


def _op_table_stretches():
    """The op table's samples as tests/transforms/test_op_jit.py runs them (its covering
    selection: every dtype combination and layout of each op), planned for CUDA."""
    from op_table_selection import covering, samples, to_rune
    out = []
    for param in covering(samples(lambda case, sample: case.traced)):
        case, sample = param.values
        try:
            plan = rune.jit(lambda *a: case.fn(*a, **sample.kwargs)).plan(*to_rune(sample.args), target="cuda")
        except NotImplementedError:
            raise  # a kernel the CUDA dialect cannot render
        except Exception:
            continue  # what jit rejects, test_op_jit reports
        out += target_stretches(plan)
    return out


def _fuzz_stretches(n):
    from test_fuzz_kernels import RngChoices, generate, program_fn
    out = []
    for seed in range(n):
        inputs, steps, outs = generate(RngChoices(seed))
        specs = [rune.Spec(s, d) for s, d in inputs]
        try:
            plan = rune.jit(program_fn(steps, outs)).plan(*specs, target="cuda")
        except NotImplementedError:
            raise  # a kernel the CUDA dialect cannot render
        except Exception:
            continue  # e.g. NumPy's boolean subtract, which eager rejects too
        out += target_stretches(plan)
    return out


def _test_module(folder, name):
    """The test module tests/<folder>/<name>.py (a folder of tests/ that is not on
    the path unless pytest collected it), as pytest imported it if it did."""
    if name in sys.modules:
        return sys.modules[name]
    path = pathlib.Path(__file__).resolve().parents[1] / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _composition_stretches():
    """Each composition of tests/transforms/test_compositions.py (its tables of jit/grad/vmap/jvp
    nestings), jitted whole, on the first of the argument lists its tests use that fits."""
    tc = _test_module("transforms", "test_compositions")
    w, v = np.asarray(tc.W), np.asarray(tc.V)
    arg_lists = [(w,), (w[0],), (w, v), (w[0], v[0])]
    out = []
    for value in vars(tc).values():
        if not (isinstance(value, dict) and value and all(callable(m) for m in value.values())):
            continue
        for make in value.values():
            for args in arg_lists:
                try:
                    out += target_stretches(rune.jit(make()).plan(*args, target="cuda"))
                    break
                except NotImplementedError:
                    raise
                except Exception:
                    continue  # arguments this composition does not take
    return out


def _seed_stretches():
    """The seed walk-through's jitted step (none where the project's shared/ folder is absent)."""
    if not SEED.exists():
        return []
    with contextlib.redirect_stdout(io.StringIO()):
        g = runpy.run_path(str(SEED), run_name="seed")
    return target_stretches(g["step"].plan(g["thetas"], target="cuda"))


@pytest.fixture(scope="module")
def suite_stretches():
    from test_fuzz_kernels import N_PROGRAMS  # the programs test_fuzz_kernels.py runs (RUNE_FUZZ_PROGRAMS)
    return {"op table": _op_table_stretches(), "fuzz": _fuzz_stretches(N_PROGRAMS),
            "compositions": _composition_stretches(), "seed": _seed_stretches()}


@pytest.mark.nvrtc
def test_nvrtc_accepts_every_kernel_of_the_suite_for_sm_90(suite_stretches):
    assert len(suite_stretches["op table"]) > 300
    from test_fuzz_kernels import N_PROGRAMS
    assert len(suite_stretches["fuzz"]) > 0.5 * N_PROGRAMS
    assert suite_stretches["compositions"] and (suite_stretches["seed"] or not SEED.exists())
    everything = [s for v in suite_stretches.values() for s in v]
    assert _compile_all(everything, "sm_90", syntax_only=True) == len({s.name for s in everything})


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch,every", [("sm_90", 30), ("sm_80", 80)])
def test_nvrtc_compiles_a_sample_to_cubins(suite_stretches, arch, every):
    """A sample of every source, through code generation and ptxas to a cubin."""
    sample = [s for v in suite_stretches.values() for s in v[::every]]
    assert _compile_all(sample, arch) > 20


@pytest.mark.nvrtc
def test_nvrtc_failure_names_the_kernel_with_source_and_log():
    bad = 'extern "C" __global__ void rn_broken(float *p) { p[0] = undefined_name; }'
    with pytest.raises(nvrtc.NvrtcError) as e:
        nvrtc.compile_unit(bad, kernels=["rn_broken"])
    msg = str(e.value)
    assert "rn_broken" in msg and "undefined_name" in msg and "identifier" in msg and "sm_90" in msg
    # in a long unit, the source shown is the part around the error
    filler = "\n".join(f"// line {i}" for i in range(1000))
    with pytest.raises(nvrtc.NvrtcError) as e:
        nvrtc.compile_unit(filler + "\n" + bad + "\n" + filler, kernels=["rn_broken"])
    msg = str(e.value)
    assert " 1001 " + bad in msg and "// line 975" in msg and "// line 900\n" not in msg


@pytest.mark.nvrtc
def test_nvrtc_writes_only_into_buffers_rune_owns():
    """A clean compile's log is one byte (its NUL). Read into `b" " * 1`, it would land
    in CPython's shared one-byte bytes object: from then on `" ".encode()` is NUL in
    the whole process. Checked through values that cannot be that shared object."""
    space = int("20", 16)
    for ptx in (False, True):
        out = nvrtc.compile_unit('extern "C" __global__ void rn_k(float *p) { p[0] = 1.0f; }', ptx=ptx)
        assert type(out) is bytes and len(out) > 100
        assert " ".encode()[0] == space and bytes([space]).hex() == "20"
        assert "a b".encode().split(chr(space).encode()) == ["a".encode(), "b".encode()]
    # a log longer than its NUL (a warning) still reaches the caller's error text intact
    with pytest.raises(nvrtc.NvrtcError, match="rn_bad"):
        nvrtc.compile_unit('extern "C" __global__ void rn_bad(float *p) { p[0] = nope; }', kernels=["rn_bad"])
    assert bytes([space]).hex() == "20"


@pytest.mark.nvrtc
def test_nvrtc_gives_ptx_and_cubin():
    k = rune.jit(lambda x: nx.tanh(x) * 2).plan(rune.Spec((100,), "float16"), target="cuda").kernels[0]
    src = CudaDialect().prelude() + k.source
    ptx = nvrtc.compile_unit(src, ptx=True).decode(errors="replace")
    assert f".entry {k.name}(" in ptx and ".target sm_90" in ptx
    assert nvrtc.compile_unit(src)[:4] == b"\x7fELF"   # a cubin is an ELF image


# ---------------------------------------------------------------- emulation

EMU = dict(device=DeviceProps(sm_count=2), block=64, blocks_per_sm=2, serial_reduce_limit=4,
           items_per_thread=2)
STRATEGY_DIALECTS = {s: CudaDialect(**EMU, reduce_strategy=s) for s in ("thread", "block", "split")}
DEFAULT_DIALECT = CudaDialect(**EMU)


def _rng(k):
    return np.random.default_rng(1000 + k)


def _floats(k, shape, dtype=np.float32, nan=False):
    x = _rng(k).standard_normal(shape).astype(dtype)
    if nan and x.size:
        x.reshape(-1)[::17] = np.nan
    return x


def _complex(k, shape, dtype=np.complex64):
    """Complex samples; a few parts are -0.0, infinite or NaN."""
    part = np.float32 if dtype == np.complex64 else np.float64
    z = np.empty(shape, dtype)
    z.real, z.imag = _floats(k, shape, part), _floats(k + 500, shape, part)
    if z.size:
        z.reshape(-1)[::13] = complex(-0.0, np.inf)
        z.reshape(-1)[5::31] = complex(np.nan, -0.0)
    return z


def _ints(k, shape, dtype=np.int32, lo=-50, hi=50):
    return _rng(k).integers(lo, hi, shape).astype(dtype)


KEY = np.array([0xdeadbeef, 7], np.uint32)
# argmax/argmin rows across blocks: ties of the extreme far apart, NaNs (the first
# wins) in later blocks, a row of -inf only, a row with a single NaN at its end
ARG_FLOATS = np.round(_floats(45, (6, 700)) * 2) / 2
ARG_FLOATS[0, [90, 650]] = 9.0
ARG_FLOATS[1, [500, 130, 600]] = np.nan, -9.0, np.nan
ARG_FLOATS[2] = -np.inf
ARG_FLOATS[3, 699] = np.nan
ARG_FLOATS[4, [3, 200]] = -9.0
# scatter indices: repeats, counted from the end, out of range (dropped)
SCATTER_INDEX = np.tile(np.array([1, 1, -1, 69, 70, -71, -70, 5, 5, 1], np.int32), 30).reshape(2, 150)

# (id, function, arguments, reduction?) -- shapes chosen so grids of 4 blocks of 64
# threads stride over the data, end in partial blocks and reduce across blocks.
PROGRAMS = [
    ("flat", lambda x, y: (x * y - 1.5) / (nx.abs(y) + 1), (_floats(0, 1001), _floats(1, 1001)), False),
    ("int_exact", lambda a, b: (a // b, a % b, a << (b & 7), nx.maximum(a, b) ^ b),
     (_ints(2, (33, 31)), _ints(3, (33, 31))), False),
    ("casts", lambda x: (x.astype(nx.int32), x.astype(nx.uint8), (x * 300).astype(nx.int16)),
     (np.concatenate([_floats(4, 300) * 1e3, [np.nan, np.inf, -np.inf, 3e9]]).astype(np.float32),), False),
    ("broadcast_transpose", lambda x, y, z: x.T * y + z, (_floats(5, (29, 37)), _floats(6, (37, 1)),
                                                          _floats(7, (29,))), False),
    ("slice_rev", lambda x: x[1::2, ::-1] * 2 + x[:50, 3:40:3][:, ::-1].sum() * 0,
     (_floats(8, (101, 40)),), False),
    ("pad_guard", lambda x: nx.pad(x, ((2, 3), (1, 4)), constant_values=-7.0) * 3,
     (_floats(9, (21, 19)),), False),
    ("concatenate", lambda x, y: nx.concatenate([x, y * 2, x], axis=1) + 1,
     (_floats(10, (23, 5)), _floats(11, (23, 9))), False),
    ("vector_offset", lambda x, y, s: (x[4:] * y + s, x[1:] * 2),
     (_floats(29, 1004), _floats(30, 1000), np.float32(0.5)), False),
    ("vector_mixed", lambda x, b: (x.astype(nx.float64) * 3, nx.where(b, x, -x)),
     (_floats(31, 777), _ints(32, 777) > 0), False),
    ("float16", lambda x, y: (x * y + x, nx.sqrt(nx.abs(x)) - y),
     (_floats(12, 555, np.float16), _floats(13, 555, np.float16)), False),
    ("bfloat16", lambda x, y: (x * y + x, nx.maximum(x, y) / 3),
     (_floats(14, 555, BF16, nan=True), _floats(15, 555, BF16)), False),
    ("f16_from_f64", lambda x: x.astype(nx.float16), (_floats(16, 300, np.float64) * 1e4,), False),
    ("sum_rows", lambda x, y: (nx.sum(x, axis=1), nx.sum(y, axis=0)),
     (_floats(20, (6, 301)), _floats(19, (150, 5))), True),
    ("max_min_nan", lambda x, y: (nx.max(x, axis=1), nx.min(y, axis=0), nx.max(x)),
     (_floats(21, (9, 500), nan=True), _floats(18, (200, 7), nan=True)), True),
    ("int_reductions", lambda a, b: (nx.sum(b, axis=0), nx.max(a, axis=1), nx.min(a), nx.prod(a % 3 + 1, axis=1)),
     (_ints(22, (11, 130), np.int64), _ints(17, (130, 6), np.int64)), True),
    ("bool_reductions", lambda a, b: (nx.any(a > 40, axis=1), nx.all(b > -45, axis=0)),
     (_ints(23, (7, 90)), _ints(16, (90, 5))), True),
    ("prologue_epilogue", lambda x, y: nx.exp(x - nx.max(x, axis=1, keepdims=True)) /
     nx.sum(nx.exp(x - nx.max(x, axis=1, keepdims=True)), axis=1, keepdims=True) + y,
     (_floats(24, (13, 333)), _floats(25, (13, 1))), True),
    ("padded_reduction", lambda x: nx.sum(nx.pad(x, ((0, 0), (5, 7)), constant_values=1.0), axis=1),
     (_floats(26, (17, 200)),), True),
    ("low_precision_sums", lambda x, y: (nx.sum(x, axis=1), nx.max(y, axis=0)),
     (_floats(27, (12, 400), np.float16), _floats(28, (300, 7), BF16, nan=True)), True),
    ("empty_rows", lambda x: nx.sum(x, axis=1), (np.zeros((6, 0), np.float32),), True),
    ("iota_random", lambda k, x: (nx.random.uniform(k, (37, 29)),
                                  bind(P["random_bits"], k, shape=(3, 300), width=64),
                                  bind(P["random_bits"], k, shape=(700,), width=8),
                                  x * nx.arange(1001, dtype=nx.float32)),
     (KEY, _floats(33, 1001)), False),
    ("random_key_batch", lambda ks: (bind(P["random_bits"], ks, shape=(4, 130), width=32), nx.random.split(ks[1], 300)),
     (np.array([[0, 0], [1, 2], [0xdeadbeef, 0xffffffff]], np.uint32),), False),
    ("random_reduced", lambda k: (nx.sum(nx.random.uniform(k, (5, 300)), axis=1),
                                  nx.argmax(bind(P["random_bits"], k, shape=(5, 300), width=8), axis=1)), (KEY,), True),
    ("argmax_ties_nan", lambda x, a, b: (nx.argmax(x, axis=1), nx.argmin(x * 2 - 1, axis=1) * 2 + 1,
                                         nx.argmin(a, axis=0), nx.argmax(b, axis=1), nx.argmax(x[0])),
     (ARG_FLOATS, _ints(34, (300, 6), lo=-3, hi=3), _ints(35, (7, 400), lo=-2, hi=1) > -1), True),
    ("indexed_reduction", lambda x, i, a: (nx.sum(bind(P["gather"], x, i, axis=0) * 2, axis=1),
                                           nx.argmax(nx.dynamic_slice(x, (a, 1), (20, 290)), axis=1)),
     (_floats(47, (30, 300), nan=True), _ints(48, 9, lo=-40, hi=40), np.int32(7)), True),
    ("argmin_low_precision", lambda x, y: (nx.argmin(x, axis=1), nx.argmax(y, axis=0)),
     (ARG_FLOATS.astype(np.float16), ARG_FLOATS.T.astype(BF16)), True),
    ("complex_elementwise", lambda x, y, w: (nx.conj(x + y) - x, -y + nx.real(x), x == y, x != nx.conj(x),
                                             nx.where(nx.real(x) > 0, x, y), nx.imag(w) + nx.real(w),
                                             x.astype(nx.complex128) + w, nx.real(y) + x),
     (_complex(49, 1001), _complex(50, 1001), _complex(51, 1001, np.complex128)), False),
    ("complex_sums", lambda x, y: (nx.sum(x, axis=1), nx.sum(nx.conj(y) - 1j, axis=0), nx.sum(x)),
     (_complex(52, (6, 301)), _complex(53, (150, 5), np.complex128)), True),
    ("int_pow", lambda a: (a ** np.int32(3), (a % 5) ** np.int32(13) + a), (_ints(36, 999, lo=-9, hi=9),), False),
    ("gather_dynamic_slice", lambda x, i, a, b: (bind(P["gather"], x * 2, i, axis=1) + 1,
                                                 bind(P["gather"], x, i, axis=0),
                                                 nx.dynamic_slice(x + 1, (a, b), (17, 40)) * x[:17, :40]),
     (_floats(37, (30, 70)), _ints(38, (3, 30), lo=-80, hi=80), np.int32(-5), np.int64(99)), False),
    ("scatter_every_mode", lambda x, i, u: tuple(bind(P["scatter"], x + 1, i, u * 2, axis=1, mode=m) - x
                                                 for m in ("set", "add", "mul", "min", "max")),
     (_floats(39, (9, 70)), SCATTER_INDEX, _floats(40, (9, 2, 150))), False),
    ("scatter_ints", lambda x, i, u, w: (bind(P["scatter"], x, i, u, axis=0, mode="add"),
                                         bind(P["scatter"], x, i, u, axis=0, mode="set"),
                                         bind(P["scatter"], x, i, u * 3, axis=0, mode="mul"),
                                         bind(P["scatter"], x.astype(nx.int64) * 99999999, i, w, axis=0, mode="min"),
                                         bind(P["scatter"], x.astype(nx.uint32), i, w.astype(nx.uint32), axis=0,
                                              mode="max"),
                                         bind(P["scatter"], x.astype(nx.uint32), i, w.astype(nx.uint32), axis=0,
                                              mode="add"),
                                         bind(P["scatter"], x.astype(nx.int16), i, u.astype(nx.int16), axis=0,
                                              mode="add")),
     (_ints(41, 500), SCATTER_INDEX.reshape(-1), _ints(42, 300), _ints(46, 300, np.int64, -2 ** 40, 2 ** 40)), False),
    ("dynamic_update_slice", lambda v, w, a, b: nx.dynamic_update_slice(v * 2, w + v[:11, :23], (a, b)) + 1,
     (_floats(43, (30, 40)), _floats(44, (11, 23)), np.int32(-3), np.int64(99)), False),
]


def _dialects(reduces):
    return STRATEGY_DIALECTS if reduces else {"default": DEFAULT_DIALECT}


@pytest.fixture(scope="module")
def emulated():
    """Every program's plan rendered under each dialect, all built into one library."""
    built = {}
    for pid, fn, args, reduces in PROGRAMS:
        plan = rune.jit(fn).plan(*args, target="cuda")
        for dname, d in _dialects(reduces).items():
            built[pid, dname] = (plan, cuda_emu.rerender(plan, d))
    units = [u for _, rendered in built.values() for u in rendered.values()] + [_PRIMITIVES]
    library = cuda_emu.Library(DEFAULT_DIALECT.prelude(), units)
    return library, built


# The emulation's own warp primitives, checked on a hand-written kernel: each thread
# reads x[i], a xor butterfly sums its warp, a ballot marks the warp's negative values,
# and atomics count and sum the whole grid.
_PRIMITIVES_SOURCE = r"""
extern "C" __global__ void emu_check(const int32_t *x, int32_t *warp_sum, uint32_t *ballot,
                                     int32_t *up, int32_t *count, int32_t *total, int32_t n) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const int32_t v = i < n ? x[i] : 0;
  int32_t s = v;
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  const uint32_t b = __ballot_sync(0xffffffffu, v < 0);
  const int32_t prev = __shfl_up_sync(0xffffffffu, v, 1);
  if (i < n) { warp_sum[i] = s; ballot[i] = b; up[i] = prev; atomicAdd(count, 1); atomicAdd(total, v); }
}
"""


class _Launch:
    name, params = "emu_check", [("const int32_t *", "x"), ("int32_t *", "warp_sum"), ("uint32_t *", "ballot"),
                                 ("int32_t *", "up"), ("int32_t *", "count"), ("int32_t *", "total"),
                                 ("int32_t", "n")]


class _Kernel:
    launches = [_Launch()]


_PRIMITIVES = (_PRIMITIVES_SOURCE, [_Kernel()])


@needs_gxx
def test_emulated_warp_primitives_and_atomics(emulated):
    library, _ = emulated
    n, block, grid = 150, 64, 3              # a partial last block, a partial warp
    x = _ints(40, n)
    outs = [np.full(n, -99, np.int32), np.zeros(n, np.uint32), np.zeros(n, np.int32),
            np.zeros(1, np.int32), np.zeros(1, np.int32)]
    count_n = np.array(n, np.int32)                    # a scalar argument: a pointer to its value
    library.launch(_Launch(), grid, block, [x] + outs + [count_n])
    warp_sum, ballot, up, count, total = outs
    padded = np.concatenate([x, np.zeros(grid * block - n, np.int32)]).reshape(-1, 32)
    np.testing.assert_array_equal(warp_sum, np.repeat(padded.sum(1), 32)[:n])
    bits = (padded < 0) * (1 << np.arange(32, dtype=np.uint64))
    np.testing.assert_array_equal(ballot, np.repeat(bits.sum(1), 32)[:n].astype(np.uint32))
    lanes = np.arange(n) % 32
    np.testing.assert_array_equal(up, np.where(lanes == 0, x, np.roll(x, 1)))
    assert count[0] == n and total[0] == x.sum()



def _assert_same(got, want, tol, where):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, where
    if want.dtype.kind == "c":   # both parts, as floats
        got, want = np.stack([got.real, got.imag]), np.stack([want.real, want.imag])
    if want.dtype.kind == "f" or want.dtype == BF16:
        g, w = got.astype(np.float64), want.astype(np.float64)
        if tol:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=where)
        else:
            ok = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
            assert ok.all(), f"{where}: got {g[~ok]} want {w[~ok]}"
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def _tolerance(dtype, reduces, gpu=False):
    """0 (bit for bit) for elementwise kernels on the CPU, which call the C kernels' libm.
    Floating-point reductions add in another order than C's loop, and CUDA's math
    functions are not glibc's (a few ulp): within a bound there."""
    if dtype.kind not in "fc" and dtype != BF16 or not (reduces or gpu):
        return 0
    return 1e-2 if dtype.itemsize == 2 else 2e-5 if reduces else 1e-6


def _check_program(pid, fn, args, reduces, runs, library, gpu=False):
    """Each rendering of the program (`runs`: dialect name -> (plan, rendered units)) run
    through `library` against the C kernels (jit on the host) and eager NumPy."""
    want_c = [np.asarray(w) for w in rune.tree.leaves(rune.jit(fn)(*args))]
    with np.errstate(all="ignore"):
        want_eager = [np.asarray(w) for w in rune.tree.leaves(fn(*[nx.asarray(a) for a in args]))]
    for dname, (plan, rendered) in runs.items():
        kernels = [k for _, ks in rendered.values() for k in ks]
        assert kernels, f"{pid}: no CUDA kernel planned"
        got = cuda_emu.run_plan(plan, list(args), library, rendered)
        for g, c, e in zip(got, want_c, want_eager):
            tol = _tolerance(c.dtype, reduces, gpu)
            _assert_same(g, c, tol, f"{pid} ({dname}) against the C kernels")
            _assert_same(g, e, tol or (1e-6 if c.dtype.kind in "fc" and c.dtype.itemsize > 2 else 0),
                         f"{pid} ({dname}) against eager NumPy")


@needs_gxx
@pytest.mark.parametrize("pid,fn,args,reduces", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_emulated_cuda_kernels_match_c_kernels_and_numpy(pid, fn, args, reduces, emulated):
    library, built = emulated
    runs = {d: built[pid, d] for d in _dialects(reduces)}
    for plan, rendered in runs.values():
        kernels = [k for _, ks in rendered.values() for k in ks]
        # the launches cross blocks: several blocks run unless the work fits one block
        assert any(ln.grid > 1 for k in kernels for ln in k.launches) or all(k.size <= 64 for k in kernels)
    _check_program(pid, fn, args, reduces, runs, library)


@pytest.mark.cuda
def test_kernels_on_a_gpu_match_c_kernels_and_numpy():
    """On a GPU: the programs above rendered for the device (its SM count) and with the
    small emulation shapes, compiled by rune's NVRTC path and launched with CuPy as the
    kernels record it."""
    cupy = pytest.importorskip("cupy")
    device = cupy.cuda.Device()
    arch = f"sm_{device.compute_capability}"
    props = DeviceProps(sm_count=device.attributes["MultiProcessorCount"],
                        max_threads_per_block=device.attributes["MaxThreadsPerBlock"], arch=arch)
    built, units = {}, []
    for pid, fn, args, reduces in PROGRAMS:
        plan = rune.jit(fn).plan(*args, target="cuda")
        dialects = {"device": CudaDialect(props), **_dialects(reduces)}
        built[pid] = {d: (plan, cuda_emu.rerender(plan, dialect)) for d, dialect in dialects.items()}
        units += [u for _, rendered in built[pid].values() for u in rendered.values()]
    library = cuda_emu.GpuLibrary(DEFAULT_DIALECT.prelude(), units, arch)
    for pid, fn, args, reduces in PROGRAMS:
        _check_program(pid, fn, args, reduces, built[pid], library, gpu=True)


@needs_gxx
def test_emulated_launch_shapes_do_not_change_results(emulated):
    """The same kernels under other grids and blocks: one block, many blocks, a block
    of one warp, a block of two and a half warps' worth of rows (grid-stride everywhere)."""
    library, built = emulated
    x = PROGRAMS[0][2]
    plan, rendered = built["flat", "default"]
    (step,) = [s for s in plan.steps if type(s) is TargetStretch]
    _, kernels = rendered[id(step)]
    want = np.asarray(rune.jit(PROGRAMS[0][1])(*x))
    for grid, block in ((1, 64), (7, 32), (40, 96)):
        env = list(plan.template)
        for s, a in zip(plan.in_slots, x):
            env[s] = a
        cuda_emu.run_unit(library, step.unit, kernels, env, grid=grid, block=block)
        _assert_same(env[plan.out_slots[0]], want, 0, f"grid {grid}, block {block}")


def _kernels(built, pid, dname):
    plan, rendered = built[pid, dname]
    return plan, [k for _, ks in rendered.values() for k in ks]


@needs_gxx
def test_emulated_indexed_kernels_take_the_intended_paths(emulated):
    """What the programs above exercise: Threefry inside every reduction strategy,
    argmax's (value, index) partials through shared memory and the split strategy's
    scratch, clamped runtime indices, scatter as one thread in order, the
    dynamic_update_slice across the grid."""
    library, built = emulated
    for dname in STRATEGY_DIALECTS:
        # one thread per row runs the C loop (its pair updated in index order); the others
        # combine (value, index) partials
        pair = "int64_t arg" if dname == "thread" else "RN_NO_INDEX"
        _, ks = _kernels(built, "random_reduced", dname)
        assert any("rn_threefry" in k.source and pair in k.source for k in ks if k.strategy == dname)
        _, ks = _kernels(built, "argmax_ties_nan", dname)
        arg = [k for k in ks if k.strategy == dname and pair in k.source]
        assert arg and all(len(k.launches) == (2 if dname == "split" else 1) for k in arg)
        if dname == "split":
            assert all(np.dtype(np.int64) in [dt for dt, _ in k.scratch] for k in arg)
        if dname == "block":
            assert all("sh_arg0" in k.source for k in arg) and any(k.launches[0].grid > 1 for k in arg)
        _, ks = _kernels(built, "indexed_reduction", dname)
        assert sum("rn_clamp_index" in k.source for k in ks if k.strategy == dname) == 2
    _, ks = _kernels(built, "gather_dynamic_slice", "default")
    assert sum("rn_clamp_index" in k.source for k in ks) >= 2
    _, ks = _kernels(built, "dynamic_update_slice", "default")
    update = [k for k in ks if not k.serial and "rn_clamp_index" in k.source]
    assert len(update) == 1 and update[0].launches[0].grid > 1
    plan, ks = _kernels(built, "scatter_every_mode", "default")
    serial = [k for k in ks if k.serial]   # float32: sums depend on the order, so each target's chain in order
    assert len(serial) == 5 and all(_chained(k) for k in serial)
    _, ks = _kernels(built, "scatter_ints", "default")
    chained = [k for k in ks if k.serial and _chained(k)]
    atomic = [k for k in ks if k.serial and not _chained(k)]
    assert len(chained) == 3 and not any("atomic" in k.source for k in chained)   # set, mul, int16 add
    assert all(len(k.launches) == 1 and k.launches[0].grid > 1 for k in atomic)
    assert sorted(k.source.count("atomic") for k in atomic) == [1] * 4   # 32/64-bit add, min, max


def _chained(kernel):
    """Whether a scatter kernel sorts its index points and folds each target's run in
    parallel: keys, one merge function launched for each of ceil(log2 M) passes (16
    outputs a thread), fold, the keys and the fold over several blocks."""
    names = [ln.name for ln in kernel.launches]
    merges = names[1:-1]
    return (names[0] == kernel.name and names[-1] == kernel.name + "_fold"
            and merges == [kernel.name + "_merge"] * len(merges)
            and all(ln.grid > 1 and ln.block > 1 for ln in kernel.launches[::len(names) - 1]))


@needs_gxx
def test_emulated_serial_scatter_is_order_exact_under_any_launch_shape(emulated):
    """A scatter's launches on other grids still combine each target's duplicates
    once each, in NumPy's order."""
    library, built = emulated
    pid, fn, args, _ = next(p for p in PROGRAMS if p[0] == "scatter_every_mode")
    plan, rendered = built[pid, "default"]
    want = [np.asarray(w) for w in fn(*[nx.asarray(a) for a in args])]
    (step,) = cuda_emu.stretches(plan)
    _, kernels = rendered[id(step)]
    env = list(plan.template)
    for s, a in zip(plan.in_slots, args):
        env[s] = a
    cuda_emu.run_unit(library, step.unit, kernels, env, grid=3, block=64)
    for slot, w in zip(plan.out_slots, want):
        _assert_same(env[slot], w, 0, "scatter launched on 3 blocks of 64 threads")


def test_cuda_headers_are_found_through_cuda_pathfinder_then_the_wheels(tmp_path, monkeypatch):
    pathfinder = pytest.importorskip("cuda.pathfinder")
    from rune.backends.cuda import nvrtc
    toolkit = tmp_path / "include"   # a CUDA toolkit's header folder, as cuda-pathfinder reports it
    toolkit.mkdir()
    (toolkit / "cuda_fp16.h").write_text("")
    monkeypatch.setattr(pathfinder, "find_nvidia_header_directory",
                        lambda name: str(toolkit) if name == "cudart" else None)
    nvrtc.include_dir.cache_clear()
    try:
        assert nvrtc.include_dir() == str(toolkit)
        monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", lambda name: None)
        nvrtc.include_dir.cache_clear()
        wheels = [d for d in nvrtc._wheel_header_dirs() if (pathlib.Path(d) / "cuda_fp16.h").exists()]
        if wheels:
            assert nvrtc.include_dir() == wheels[0]
        else:
            with pytest.raises(nvrtc.NvrtcError, match="cuda_fp16.h not found"):
                nvrtc.include_dir()
    finally:
        nvrtc.include_dir.cache_clear()


# ---------------------------------------------------------------- compiling pending stretches

_SMALL_PROGRAMS = [lambda x: nx.tanh(x) * 2.0, lambda x: nx.sum(x * x, axis=0), lambda x: x.T + 1.0,
                   lambda x: nx.exp(x) - x, lambda x: nx.max(x, axis=1), lambda x: nx.sqrt(nx.abs(x)) / 3.0]


def _pending_stretches(monkeypatch, compile_units):
    """CUDA stretches of small programs, built (no GPU needed) with `compile_units` as
    their platform's compile, as the only pending ones (of every platform)."""
    from rune.backends import stretch
    from rune.backends.cuda.stretch import CudaKernels
    import weakref
    monkeypatch.setattr(stretch, "_PENDING", weakref.WeakSet())
    platform = CudaKernels(0, DeviceProps(), compile_units)
    spec = rune.Spec((16, 33), "float32")
    built = []
    for f in _SMALL_PROGRAMS:
        (step,) = target_stretches(rune.jit(f).plan(spec, target="cuda"))
        built.append(stretch.CompiledStretch(step.eqns, step.unit, None, platform))
    return stretch, built


def _nvrtc_units(before=None):
    """A stand-in for the backend's compile: the units to one cubin with real NVRTC;
    each unit's "launcher" is what came out: its name, and which of its kernels' functions
    the cubin holds."""
    def compile_units(prelude, units):
        if before is not None:
            before(units)
        cubin = nvrtc.compile_unit(prelude + "\n" + "\n\n".join(text for _, text, _ in units))
        return [(name, tuple((ln.name, ln.name.encode() in cubin) for k in kernels for ln in k.launches))
                for name, _, kernels in units]
    return compile_units


@pytest.mark.nvrtc
def test_pending_stretches_compile_their_batches_at_once_and_the_same_either_way(monkeypatch):
    """Three NVRTC programs of two units: on one thread, and on three threads at once
    (each program waits until all three are compiling, which a one-after-another
    compile never reaches); every stretch gets the same functions either way."""
    stretch, serial = _pending_stretches(monkeypatch, _nvrtc_units())
    assert stretch.compile_pending(batch=2, threads=1) == 6
    want = {s.name: s._launch for s in serial}
    assert all(fn and all(found for _, found in fn[1]) for fn in want.values())
    together = threading.Barrier(3, timeout=30)
    threads = set()

    def meet(units):
        threads.add(threading.get_ident())
        together.wait()

    _, pooled = _pending_stretches(monkeypatch, _nvrtc_units(meet))
    assert stretch.compile_pending(batch=2, threads=4) == 6
    assert len(threads) == 3 and threading.get_ident() not in threads   # one NVRTC program each
    assert {s.name: s._launch for s in pooled} == want
    assert not stretch._PENDING


def test_a_rejected_batch_stays_pending_while_the_others_compile_on_the_pool(monkeypatch):
    from rune.backends.cuda import launch
    rejected = _SMALL_PROGRAMS[2]

    def compile_units(prelude, units):
        if bad in [name for name, _, _ in units]:
            raise launch.KernelCompileError(f"NVRTC rejected unit {bad}")
        return [name for name, _, _ in units]

    stretch, built = _pending_stretches(monkeypatch, compile_units)
    bad = built[_SMALL_PROGRAMS.index(rejected)].name
    assert stretch.compile_pending(batch=2, threads=3) == 4
    left = [s for s in built if s._launch is None]
    assert len(left) == 2 and bad in [s.name for s in left] and set(stretch._PENDING) == set(left)
    assert all(s._launch == s.name for s in built if s not in left)


# ---------------------------------------------------------------- scatter in parallel, in order

def _order_sensitive_scatter_case():
    """Updates whose sums depend on the order they are added in (magnitudes from 1e-3
    to 1e7, both signs), many repeats of few targets, indices counted from the end
    and out of range (dropped)."""
    rng = _rng(60)
    idx = rng.integers(-45, 45, 400).astype(np.int32)
    scale = 10.0 ** rng.integers(-3, 8, (400, 24))
    u = (rng.standard_normal((400, 24)) * scale).astype(np.float32)
    near_one = (1 + rng.standard_normal((400, 24)) * 0.05).astype(np.float32)
    return _floats(61, (40, 24)), idx, u, near_one


def _numpy_scatters(x, idx, u, near_one):
    """NumPy's one-update-at-a-time results: add.at and multiply.at in update order;
    set by fancy assignment, the last duplicate winning."""
    keep = (idx >= -40) & (idx < 40)
    i = np.where(idx[keep] < 0, idx[keep] + 40, idx[keep])
    add, mul, put = x.copy(), x.copy(), x.copy()
    np.add.at(add, i, u[keep])
    np.multiply.at(mul, i, near_one[keep])
    put[i] = u[keep]
    add_t, mul_t, put_t = x.T.copy(), x.T.copy(), x.T.copy()
    np.add.at(add_t, (slice(None), i), u[keep].T)
    np.multiply.at(mul_t, (slice(None), i), near_one[keep].T)
    put_t[:, i] = u[keep].T
    return [add, mul, put, add_t, mul_t, put_t]


def _scatters(x, i, u, w):
    return (bind(P["scatter"], x, i, u, axis=0, mode="add"), bind(P["scatter"], x, i, w, axis=0, mode="mul"),
            bind(P["scatter"], x, i, u, axis=0, mode="set"),
            bind(P["scatter"], x.T, i, u.T, axis=1, mode="add"), bind(P["scatter"], x.T, i, w.T, axis=1, mode="mul"),
            bind(P["scatter"], x.T, i, u.T, axis=1, mode="set"))


@needs_gxx
def test_emulated_float_scatter_runs_in_parallel_in_numpys_order():
    """Float add, mul and set with many duplicates, on several blocks of threads: each
    target's updates combine on one thread in update order, bit for bit NumPy's
    sequential result; the same with the chains off (one thread does everything)."""
    args = _order_sensitive_scatter_case()
    want = _numpy_scatters(*args)
    x, idx, u, _ = args
    keep = (idx >= -40) & (idx < 40)
    i = np.where(idx[keep] < 0, idx[keep] + 40, idx[keep])
    backwards = x.copy()
    np.add.at(backwards, i[::-1], u[keep][::-1])
    assert not np.array_equal(backwards, want[0])   # the order shows in the sums
    plan = rune.jit(_scatters).plan(*args, target="cuda")
    one_thread = CudaDialect(**EMU, scatter_sort=False)
    rendered = {"chains": cuda_emu.rerender(plan, DEFAULT_DIALECT), "one thread": cuda_emu.rerender(plan, one_thread)}
    library = cuda_emu.Library(DEFAULT_DIALECT.prelude(), [u for r in rendered.values() for u in r.values()])
    serial = {how: [k for _, ks in r.values() for k in ks if k.serial] for how, r in rendered.items()}
    assert len(serial["chains"]) == 6 and all(_chained(k) for k in serial["chains"])
    assert all([(ln.grid, ln.block) for ln in k.launches] == [(1, 1)] for k in serial["one thread"])
    for how, r in rendered.items():
        got = cuda_emu.run_plan(plan, list(args), library, r)
        for k, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, 0, f"scatter {k} ({how}) against NumPy's order")


# ---------------------------------------------------------------- loop and branch bodies

class _CountingLibrary(cuda_emu.Library):
    """The emulation, counting the launches of each function."""

    def __init__(self, *a):
        super().__init__(*a)
        self.launched = {}

    def launch(self, launch, grid, block, buffers):
        self.launched[launch.name] = self.launched.get(launch.name, 0) + 1
        super().launch(launch, grid, block, buffers)


def _loops(c, xs, k):
    c2, ys = rune.scan(lambda c, x: (c + nx.sin(x) * 2, c * 3 + x), c, xs)
    w = rune.while_loop(lambda v: nx.sum(v) < 1e4, lambda v: v * 1.5 + 1.0, nx.abs(c2))
    z = rune.cond(k > 0, lambda v: nx.exp(v * 1e-3) * 0.5, lambda v: v - 1.0, w)
    return c2, ys, w, z


@needs_gxx
@pytest.mark.parametrize("k", [1, -1])
def test_emulated_scan_while_and_cond_bodies_run_their_cuda_kernels(k):
    """A scan (rows passed as views), a while loop and a cond whose bodies are CUDA
    stretches: every body's kernels run under the emulation, once per row or
    iteration, and the results are the host's."""
    c, xs = _floats(62, 700), _floats(63, (4, 700))
    args = (c, xs, np.int32(k))
    plan = rune.jit(_loops).plan(*args, target="cuda")
    rendered = cuda_emu.rerender(plan, DEFAULT_DIALECT)
    top = [s for s in plan.steps if type(s) is TargetStretch]
    bodies = [s for s in cuda_emu.stretches(plan) if s not in top]
    assert len(bodies) >= 5   # scan body, while cond and body, two branches
    library = _CountingLibrary(DEFAULT_DIALECT.prelude(), list(rendered.values()))
    got = cuda_emu.run_plan(plan, list(args), library, rendered)
    want = [np.asarray(w) for w in rune.tree.leaves(rune.jit(_loops)(*args))]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    scan_body = next(s for step in plan.steps for sub in step.plans for s in sub.steps
                     if type(s) is TargetStretch and "sinf(" in s.text)
    assert library.launched[rendered[id(scan_body)][1][0].name] == 4   # once per row
    ran = {id(s) for s in bodies if all(ln.name in library.launched for kk in rendered[id(s)][1]
                                         for ln in kk.launches)}
    assert len(ran) == len(bodies) - 1   # all but the branch not taken


@pytest.mark.nvrtc
def test_cuda_units_compile_with_runes_flags_only_so_float32_subnormals_survive(tmp_path, monkeypatch):
    """A GPU stretch's unit goes through rune's own NVRTC call (launch.cubin_path), never
    CuPy's, which appends -ftz=true: its PTX keeps subnormals in arithmetic and comparisons."""
    from rune.backends.cuda import launch
    monkeypatch.setenv("RUNE_CACHE_DIR", str(tmp_path))
    plan = rune.jit(lambda v: (v > 0, v * 1.0, v * 0.5)).plan(rune.Spec((4096,), "float32"), target="cuda")
    code = CudaDialect().prelude() + "\n".join(k.source for k in plan.kernels)
    seen = []
    real = nvrtc.compile_unit
    monkeypatch.setattr(nvrtc, "compile_unit", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    path, temporary = launch.cubin_path(code, launch_options(), arch="sm_90")
    assert not temporary and open(path, "rb").read()[:4] == b"\x7fELF"
    assert len(seen) == 1 and not any("ftz" in o for o in seen[0]["options"])
    ptx = real(code, ptx=True, options=seen[0]["options"]).decode(errors="replace")
    assert "setp.gt.f32" in ptx and "mul.rn.f32" in ptx
    assert ".ftz" not in ptx
    rune.reset_stats()   # a second process (or plan) finds the cubin in rune's disk cache
    assert launch.cubin_path(code, launch_options(), arch="sm_90") == (path, False)
    assert len(seen) == 1 and rune.stats()["disk_cache_hits"] == 1


def launch_options():
    from rune.backends.cuda.backend import nvrtc_options
    return nvrtc_options()


def test_emulated_kernels_keep_float32_subnormals():
    """The dialect itself never flushes: x > 0, x * 1.0 and x * 0.5 of subnormals as on the host."""
    h = np.full(300, 1.0e-38, np.float32) * np.linspace(0.1, 1.0, 300, dtype=np.float32)
    fn = lambda v: (v > 0, v * 1.0, v * 0.5)  # noqa: E731
    plan = rune.jit(fn).plan(nx.asarray(h), target="cuda")
    rendered = cuda_emu.rerender(plan, DEFAULT_DIALECT)
    library = cuda_emu.Library(DEFAULT_DIALECT.prelude(), list(rendered.values()))
    got = cuda_emu.run_plan(plan, [h], library, rendered)
    for g, w in zip(got, fn(h)):
        assert np.array_equal(np.asarray(g), w)
    assert (h < np.finfo(np.float32).tiny).all() and (np.asarray(got[2]) > 0).all()


# ---------------------------------------------------------------- scatter past 65,536 index points

_SCATTER_MODES = ("add", "set", "mul", "min", "max")


def _embedding_scatter_case(dtype, tokens=(35, 2000), rows=1000, width=8):
    """A table, token ids (some counted from the end, some out of range: dropped;
    about 70 repeats a row) and one update array per mode: sums whose order shows
    (magnitudes 1e-3 to 1e5, both signs), factors near one (small ints for int32),
    and min/max updates with a NaN in some rows."""
    rng = _rng(70)
    idx = rng.integers(-rows - 10, rows + 10, tokens).astype(np.int32)
    shape = tokens + (width,)
    if np.dtype(dtype).kind == "i":
        u = rng.integers(-1000, 1000, shape).astype(dtype)
        near_one = rng.integers(-3, 4, shape).astype(dtype)
        return rng.integers(-50, 50, (rows, width)).astype(dtype), idx, u, near_one, u
    u = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 6, shape)).astype(dtype)
    near_one = (1 + rng.standard_normal(shape) * 0.01).astype(dtype)
    extremes = u.copy()
    extremes.reshape(-1, width)[::997, 1] = np.nan
    return _floats(71, (rows, width)).astype(dtype), idx, u, near_one, extremes


def _every_scatter_mode(x, i, u, near_one, extremes):
    return tuple(bind(P["scatter"], x, i, {"mul": near_one, "min": extremes, "max": extremes}.get(mode, u),
                      axis=0, mode=mode) for mode in _SCATTER_MODES)


@needs_gxx
def test_emulated_scatter_past_the_old_chain_limit_is_parallel_and_numpys_order():
    """70,000 token ids (the old chain search stopped at 65,536) into a 1000-row table,
    in every mode and float32/float64/bfloat16/int32: the sorted scatter (keys, merge
    passes, fold) on several blocks gives eager's bits (NumPy's ufunc.at, one update
    at a time). Integer add/min/max take atomics instead."""
    dtypes = (np.float32, np.float64, BF16, np.int32)
    cases = {np.dtype(dt).name: _embedding_scatter_case(dt) for dt in dtypes}
    plans = {name: rune.jit(_every_scatter_mode).plan(*args, target="cuda") for name, args in cases.items()}
    rendered = {name: cuda_emu.rerender(plan, DEFAULT_DIALECT) for name, plan in plans.items()}
    library = cuda_emu.Library(DEFAULT_DIALECT.prelude(), [u for r in rendered.values() for u in r.values()])
    m = cases["float32"][1].size
    for name, args in cases.items():
        serial = [k for _, ks in rendered[name].values() for k in ks if k.serial]
        sorted_ = [k for k in serial if _chained(k)]
        assert len(sorted_) == (2 if name == "int32" else 5) and len(serial) == 5
        assert all(len(k.launches) == 2 + (m - 1).bit_length() for k in sorted_)
        with np.errstate(all="ignore"):
            want = _every_scatter_mode(*[nx.asarray(a) for a in args])
        got = cuda_emu.run_plan(plans[name], list(args), library, rendered[name])
        for mode, g, w in zip(_SCATTER_MODES, got, want):
            _assert_same(g, np.asarray(w), 0, f"{name} scatter-{mode} of {m} points against eager")
    x, idx, u = cases["float32"][:3]
    keep = (idx >= -1000) & (idx < 1000)
    backwards = x.copy()
    np.add.at(backwards, (idx[keep] % 1000)[::-1], u[keep][::-1])
    assert not np.array_equal(backwards, np.asarray(want_f32_add(cases)))   # the order shows in the sums


def want_f32_add(cases):
    x, idx, u = cases["float32"][:3]
    return bind(P["scatter"], nx.asarray(x), nx.asarray(idx), nx.asarray(u), axis=0, mode="add")


def _odd_sized_scatters(x, *pairs):
    return tuple(bind(P["scatter"], x, i, u, axis=0, mode=mode) for i, u in pairs for mode in ("set", "add"))


@needs_gxx
def test_emulated_scatter_sort_handles_partial_runs_and_pairs():
    """2, 3, 17, 33 and 1000 index points (runs and pairs cut short at the end, merges
    of fewer than 16 outputs a thread) into 7 rows, launched on 3 blocks of 32 threads:
    set's last write and add's order are NumPy's."""
    rng = _rng(73)
    x = _floats(74, (7, 3))
    pairs = [(rng.integers(-9, 9, m).astype(np.int32),
              (rng.standard_normal((m, 3)) * 10.0 ** rng.integers(-3, 5, (m, 3))).astype(np.float32))
             for m in (2, 3, 17, 33, 1000)]
    args = [x] + [a for pair in pairs for a in pair]
    fn = lambda x, *flat: _odd_sized_scatters(x, *zip(flat[::2], flat[1::2]))  # noqa: E731
    plan = rune.jit(fn).plan(*args, target="cuda")
    (step,) = cuda_emu.stretches(plan)
    _, kernels = rendered = cuda_emu.rerender(plan, DEFAULT_DIALECT)[id(step)]
    assert [len(k.launches) for k in kernels if k.serial] == [2 + (m - 1).bit_length() for m in (2, 3, 17, 33, 1000)
                                                              for _ in range(2)]
    library = cuda_emu.Library(DEFAULT_DIALECT.prelude(), [rendered])
    env = list(plan.template)
    for slot, a in zip(plan.in_slots, args):
        env[slot] = a
    cuda_emu.run_unit(library, step.unit, kernels, env, grid=3, block=32)
    want = fn(*[nx.asarray(a) for a in args])
    for k, (slot, w) in enumerate(zip(plan.out_slots, want)):
        _assert_same(env[slot], np.asarray(w), 0, f"scatter {k} against eager")


def _embedding_gradient(table, tokens, grads, factors):
    """The scatters of an embedding's gradient (take's transpose binds the first) and
    of an update through `.at` (a flat scatter: one index point per token and column)."""
    return (*(bind(P["scatter"], table, tokens, u, axis=0, mode=mode)
              for mode, u in (("add", grads), ("set", grads), ("mul", factors))), table.at[tokens].add(grads))


_EMBEDDING = ((1000, 16), (64, 2048))   # table rows x width, batch x tokens


def _embedding_gradient_case(dtype):
    """A zero table, 131,072 token ids (about 131 repeats a row), gradients whose sums
    depend on their order (magnitudes 1e-3 to 1e3), factors near one."""
    rng = _rng(72)
    (rows, width), tokens = _EMBEDDING
    scale = 10.0 ** rng.integers(-3, 4, tokens + (width,))
    grads = (rng.standard_normal(tokens + (width,)) * scale).astype(dtype)
    factors = (1 + rng.standard_normal(tokens + (width,)) * 0.01).astype(dtype)
    return np.zeros((rows, width), dtype), rng.integers(0, rows, tokens).astype(np.int32), grads, factors


def test_an_embedding_gradient_scatter_renders_as_sorted_parallel_launches():
    """64x2048 token ids into a 1000x16 table on an H200's launch shapes: each scatter's
    keys, merge passes (17 for the 131,072 tokens of an axis scatter, 21 for the 2**21
    points of the flat `.at` one) and fold run over many blocks (the old chain search
    gave one thread past 65,536 points)."""
    plan = rune.jit(_embedding_gradient).plan(*_embedding_gradient_case(np.float32), target="cuda")
    ordered = [k for k in plan.kernels if k.serial]
    assert len(ordered) == 4 and all(_chained(k) for k in ordered)
    m = math.prod(_EMBEDDING[1])
    points = [k.scratch[0][1] for k in ordered]
    assert points == [m, m, m, m * 16]   # keys twice (the passes' source and target), the pass counter
    assert all(k.scratch == [(np.dtype(np.int64), p)] * 2 + [(np.dtype(np.uint32), 2)] for k, p in zip(ordered, points))
    assert [len(k.launches) for k in ordered] == [2 + 17] * 3 + [2 + 21]
    for k, count in zip(ordered, points):   # a thread a point, or 16 outputs of a merge
        work = [count] + [-(-count // min(16, 2 << p)) for p in range(len(k.launches) - 2)] + [count]
        assert [ln.grid * ln.block >= min(w, 132 * 8 * 256) for ln, w in zip(k.launches, work)] == [True] * len(work)


@pytest.mark.cuda
def test_an_embedding_gradient_scatter_on_a_gpu_is_numpys_sequential_result():
    """The same scatters in float32 and bfloat16 (one unit, one NVRTC program) run on
    the GPU through rune's launcher (two scratch buffers, 19 or 23 launches a kernel):
    bit for bit NumPy's one-update-at-a-time add.at, last-write set and multiply.at.
    Values only: what it costs is bench material."""
    cases = [_embedding_gradient_case(dt) for dt in (np.float32, BF16)]
    got = rune.jit(lambda *a: (_embedding_gradient(*a[:4]), _embedding_gradient(*a[4:])))(
        *[nx.asarray(a, device="cuda:0") for case in cases for a in case])
    for (table, tokens, grads, factors), outs in zip(cases, got):
        want_add, want_set, want_mul = table.copy(), table.copy(), table.copy()
        np.add.at(want_add, tokens, grads)
        want_set[tokens] = grads
        np.multiply.at(want_mul, tokens, factors)
        for g, w, what in zip(outs, (want_add, want_set, want_mul, want_add), ("add", "set", "multiply", ".at add")):
            _assert_same(np.asarray(g), w, 0, f"{table.dtype.name} embedding scatter-{what} on the GPU")
