"""The CUDA backend (rune/backends/cuda) and the array-module table it shares
with the host (rune/backends/array_impls.py).

Tests marked `cuda` need an NVIDIA GPU and run under ci/gpu-check; they compare
each result on `cuda:0` with the same computation on the host (NumPy, which
the rest of the suite checks against its own oracles). The others run
everywhere: what the table does on NumPy for the GPU's sake, and how rune
behaves without a GPU.
"""
import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import types
import weakref

import numpy as np
import pytest

import rune
from rune import nx
from rune.core.array import Array
from rune.backends.array_impls import make_impls
from rune.backends.cpu.backend import BACKEND as HOST, IMPLS as HOST_IMPLS

from op_table import F64, TABLE, is_float


def _gpu_count():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


GPUS = _gpu_count()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository


# ---------------------------------------------------------------- everywhere

def test_importing_rune_does_not_import_cupy():
    code = ("import sys, rune; from rune import nx; nx.sum(nx.ones(3) * 2).item(); rune.jit(lambda x: x + 1)(nx.ones(2));"
            "print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_devices_lists_one_cuda_device_per_visible_gpu():
    listed = [d.name for d in rune.devices() if d.platform == "cuda"]
    assert listed == [f"cuda:{i}" for i in range(GPUS)]
    assert rune.devices()[0].name == "cpu:0"


@pytest.mark.skipif(GPUS > 0, reason="checks the error a machine without a GPU gives")
def test_placing_on_cuda_without_a_gpu_is_a_clear_device_error():
    with pytest.raises(rune.DeviceError, match=r"'cuda'.*not available.*no GPU is visible"):
        nx.place(nx.ones(3), "cuda")
    with pytest.raises(rune.DeviceError, match=r"'cuda:1'.*not available"):
        nx.asarray([1.0, 2.0], device="cuda:1")


def test_the_host_table_is_the_array_module_table_on_numpy():
    table = make_impls(np, HOST, special=lambda: __import__("scipy.special").special)
    assert table.keys() == HOST_IMPLS.keys()
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    for name in ("exp", "tanh", "erf", "logistic", "rsqrt", "acosh"):
        np.testing.assert_array_equal(table[name](np.abs(x) + 1), HOST_IMPLS[name](np.abs(x) + 1))


def test_every_primitive_has_a_cuda_implementation():
    pytest.importorskip("cupy")
    from rune.backends.cuda.backend import CudaBackend
    assert CudaBackend().IMPLS.keys() == HOST_IMPLS.keys()


_DEVICE_SCATTER = make_impls(np, HOST, special=None, cheap_reads=False)["scatter"]


def _scatter_loop(x, idx, updates, axis, mode):
    """Scatter one update at a time, in order: the oracle (last write wins for "set")."""
    out = np.array(x, copy=True)
    n = x.shape[axis]
    combine = {"set": lambda a, b: b, "add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[mode]
    moved = np.moveaxis(out, axis, 0)
    ups = np.broadcast_to(updates, x.shape[:axis] + idx.shape + x.shape[axis + 1:])
    ups = np.moveaxis(ups.reshape(x.shape[:axis] + (idx.size,) + x.shape[axis + 1:]), axis, 0)
    for k, i in enumerate(idx.reshape(-1)):
        i = i + n if i < 0 else i
        if 0 <= i < n:
            moved[i] = combine(moved[i], ups[k])
    return out


@pytest.mark.parametrize("mode,axis", list(itertools.product(("set", "add", "mul", "min", "max"), (0, 1))))
def test_device_scatter_matches_one_write_at_a_time(mode, axis):
    """The scatter the GPU runs (no atomics; repeats applied in rounds; one
    counted read), checked here on NumPy against one update at a time: bit for
    bit, since repeated float updates combine in the same order."""
    rng = np.random.default_rng(len(mode) * 10 + axis)
    for dtype, idx_shape in ((np.float64, (3, 4)), (np.float32, (40,)), (np.int8, (3, 4)), (np.int64, (0,))):
        x = (rng.standard_normal((5, 6)) * 50).astype(dtype)
        idx = rng.integers(-8, 8, idx_shape)  # repeats, negatives, out of bounds on both sides
        shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
        updates = (rng.standard_normal(shape) * 50).astype(dtype)
        rune.reset_stats()
        with np.errstate(over="ignore"):  # int8 products wrap, as on the host
            got = _DEVICE_SCATTER(x, idx, updates, axis=axis, mode=mode)
            want = _scatter_loop(x, idx, updates, axis, mode)
        assert rune.stats()["scalar_reads"] == (1 if idx.size else 0)
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_array_equal(got, want, err_msg=f"{dtype.__name__} {idx_shape}")
        np.testing.assert_array_equal(got, HOST_IMPLS["scatter"](x, idx, updates, axis=axis, mode=mode))


def test_kernel_scalars_are_passed_with_their_exact_c_type():
    pytest.importorskip("cupy")
    from rune.backends.cuda.launch import scalar
    args = [scalar(3, "int", "k"), scalar(1 << 40, "long long", "k"), scalar(0.5, "float", "k"),
            scalar(7, "uint32_t", "k")]
    assert [type(a) for a in args] == [np.int32, np.int64, np.float32, np.uint32]
    assert [a.item() for a in args] == [3, 1 << 40, 0.5, 7]
    with pytest.raises(rune.RuneError, match=r"kernel k: scalar parameter of C type 'short'"):
        scalar(1, "short", "k")


# ---------------------------------------------------------------- compiled CUDA stretches, built here

# Programs a GPU plan compiles: elementwise chains, reductions over many short and
# few long rows, softmax, matmul + bias + relu, select and concatenate, gather,
# scatter, random bits and iota, argmax.
def _softmax(x):
    e = nx.exp(x - nx.max(x, axis=1, keepdims=True))
    return e / nx.sum(e, axis=1, keepdims=True)


_RNG = np.random.default_rng(11)
STRETCH_PROGRAMS = [
    ("chain", lambda x, y: nx.tanh(x * 2.0 + y) - nx.exp(-x),
     (_RNG.standard_normal((37, 41)).astype(np.float32), _RNG.standard_normal(41).astype(np.float32))),
    ("many_short_rows", lambda x: nx.sum(x * x, axis=1), (_RNG.standard_normal((700, 6)).astype(np.float32),)),
    ("few_long_rows", lambda x: nx.max(nx.abs(x), axis=1), (_RNG.standard_normal((2, 5000)).astype(np.float32),)),
    ("softmax", _softmax, (_RNG.standard_normal((5, 300)).astype(np.float32),)),
    ("matmul_bias_relu", lambda x, w, b: nx.maximum(x @ w + b, 0.0),
     (_RNG.standard_normal((20, 30)).astype(np.float32), _RNG.standard_normal((30, 12)).astype(np.float32),
      _RNG.standard_normal(12).astype(np.float32))),
    ("select_concat", lambda x, y: nx.concatenate([nx.where(x > 0, x, 0.1 * x), y.T], axis=0),
     (_RNG.standard_normal((33, 19)).astype(np.float32), _RNG.standard_normal((19, 5)).astype(np.float32))),
    ("gather", lambda x, i: nx.take(x, i, axis=0) * 3.0,
     (_RNG.standard_normal((50, 7)).astype(np.float32), _RNG.integers(-60, 60, 700).astype(np.int32))),
    ("scatter", lambda x, i, u: x.at[i].add(u) + 1.0,
     (_RNG.standard_normal((40, 5)).astype(np.float32), _RNG.integers(0, 40, 60).astype(np.int32),
      _RNG.standard_normal((60, 5)).astype(np.float32))),
    ("random_iota", lambda k, x: nx.random.normal(k, (100, 70)) * x + nx.arange(70, dtype=np.float32),
     (np.asarray(nx.random.key(5)), _RNG.standard_normal(70).astype(np.float32))),
    ("argmax", lambda x: nx.argmax(x * 2.0, axis=1), (_RNG.standard_normal((12, 300)).astype(np.float32),)),
]


def _compiled_stretches(fn, args, props):
    """The plan of `fn` for a CUDA device, its lowered runs built as `CompiledStretch`es
    for a GPU with `props` (no GPU needed), and the stretches by the planned step."""
    from rune.backends.cuda.backend import BACKEND
    from rune.compiler.target import TargetStretch
    plan = rune.jit(fn).plan(*args, target="cuda")
    built = {id(s): BACKEND.compiled_stretch(s.eqns, s.unit, rune.devices()[0], props)
             for s in plan.steps if type(s) is TargetStretch}
    return plan, built


def _props():
    pytest.importorskip("cupy")
    from rune.codegen.cuda import DeviceProps
    return DeviceProps(sm_count=3, max_threads_per_block=512, arch="sm_80")


@pytest.mark.parametrize("pid,fn,args", STRETCH_PROGRAMS, ids=[p[0] for p in STRETCH_PROGRAMS])
def test_cuda_stretches_build_without_a_gpu_with_the_launches_the_dialect_records(pid, fn, args):
    from rune.codegen.cuda import CudaDialect
    from rune.backends.cuda.launch import SCALAR_TYPES, arguments
    props = _props()
    plan, built = _compiled_stretches(fn, args, props)
    assert built, f"{pid}: nothing lowered"
    for s in built.values():
        # the dialect, asked directly for this GPU, records the same launches
        _, text, recorded = CudaDialect(props).render_unit(s.unit.kernels)
        assert s.text == text and s.prelude == CudaDialect(props).prelude()
        assert [[(ln.name, ln.grid, ln.block, ln.shared, ln.params) for ln in k.launches] for k in s.kernels] == \
               [[(ln.name, ln.grid, ln.block, ln.shared, ln.params) for ln in k.launches] for k in recorded]
        roles = {b.index: b.role for b in s.unit.buffers}
        assert sorted(b for b, _ in s.inputs) == sorted(i for i, r in roles.items() if r == "in")
        assert sorted(b for b, *_ in s.outputs) == sorted(i for i, r in roles.items() if r == "out")
        assert sorted(b for b, *_ in s.buffers.temps) == sorted(i for i, r in roles.items() if r == "tmp")
        for k, args_ in zip(s.kernels, [arguments(k) for k in s.kernels]):
            for ln in k.launches:
                assert ln.grid <= 8 * props.sm_count and ln.block <= props.max_threads_per_block
                assert len(args_) == len(ln.params), (pid, k.name)
                for (kind, v), (ctype, _) in zip(args_, ln.params):
                    if kind == "buffer":
                        want = s.unit.buffers[v].dtype
                    elif kind == "scratch":
                        want = np.dtype(k.scratch[v][0])
                    else:
                        assert type(v) is SCALAR_TYPES[ctype.strip()], (pid, ctype, type(v))
                        continue
                    assert ctype.replace("const ", "").rstrip(" *") == CudaDialect(props).ctype(want), \
                        (pid, k.name, ctype, want)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to build the CUDA emulation")
def test_cuda_stretch_kernels_run_under_the_emulation_as_on_the_host():
    """The kernels and argument lists the stretches launch with, for a 3-SM GPU (so the
    work spreads over several blocks), executed by the CPU emulation of CUDA, against
    the host's jit and eager NumPy."""
    import cuda_emu
    props = _props()
    built = {pid: _compiled_stretches(fn, args, props) for pid, fn, args in STRETCH_PROGRAMS}
    units = [(s.text, s.kernels) for _, stretches in built.values() for s in stretches.values()]
    prelude = next(iter(built["chain"][1].values())).prelude
    library = cuda_emu.Library(prelude, units)
    for pid, fn, args in STRETCH_PROGRAMS:
        plan, stretches = built[pid]
        assert any(ln.grid > 1 for s in stretches.values() for k in s.kernels for ln in k.launches) \
            or pid == "matmul_bias_relu", pid
        rendered = {key: (s.text, s.kernels) for key, s in stretches.items()}
        got = cuda_emu.run_plan(plan, list(args), library, rendered)
        want = [np.asarray(w) for w in rune.tree.leaves(rune.jit(fn)(*args))]
        eager = [np.asarray(w) for w in rune.tree.leaves(fn(*[nx.asarray(a) for a in args]))]
        for g, w, e in zip(got, want, eager):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6, err_msg=f"{pid} against the C kernels")
            np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6, err_msg=f"{pid} against NumPy")


class _RecordingFunction:
    """A loaded kernel function that launches nothing: it keeps weak references to the
    device buffers (here NumPy arrays) each launch is passed."""

    def __init__(self, seen):
        self.seen = seen

    def __call__(self, grid, block, args, shared_mem=0):
        self.seen.extend(weakref.ref(a) for a in args)


def _device_arrays_held(obj, depth=3):
    """The arrays reachable from `obj`'s attributes (lists, tuples, dicts included)."""
    if isinstance(obj, np.ndarray):
        return [obj]
    if depth == 0:
        return []
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        items = list(vars(obj).values())
    else:
        return []
    return [a for item in items for a in _device_arrays_held(item, depth - 1)]


def test_a_cuda_stretch_holds_no_intermediates_or_scratch_between_runs(monkeypatch):
    """A plan's stretches take their intermediates and their kernels' scratch for the run
    and keep none after it (a jitted function caches thousands of plans): run with CuPy
    stood in for by NumPy, every buffer the kernels were passed other than the inputs
    and outputs is gone when the run returns, and no stretch or kernel holds an array."""
    from rune.backends.cuda import launch, owned, stretch
    standin = types.SimpleNamespace(empty=np.empty, ndarray=np.ndarray, asarray=np.asarray,
                                    ascontiguousarray=np.ascontiguousarray,
                                    cuda=types.SimpleNamespace(Device=lambda index: contextlib.nullcontext()))
    monkeypatch.setattr(stretch, "cupy", standin)
    monkeypatch.setattr(owned, "empty", np.empty)   # outputs: owned allocations on a GPU
    monkeypatch.setattr(launch, "cupy", standin)
    host = _RNG.standard_normal((3, 5000)).astype(np.float32)
    fn = lambda x: (_softmax(x), nx.sum(x * x))   # noqa: E731  (intermediates; a split reduction's scratch)
    plan, built = _compiled_stretches(fn, (host,), _props())
    seen = []
    module = types.SimpleNamespace(function=lambda name: _RecordingFunction(seen))
    for s in built.values():
        s._launch = launch._launcher(s.name, [launch._Kernel(module, k) for k in s.kernels])
    assert any(s.buffers.temps for s in built.values()) and any(k.scratch for s in built.values() for k in s.kernels)
    for _ in range(2):
        env = list(plan.template)
        env[plan.in_slots[0]] = host
        seen.clear()
        for step in plan.steps:
            built[id(step)].run(env) if id(step) in built else step.run(env)
        live = {id(a()) for a in seen if a() is not None}
        kept = {id(a) for a in env if isinstance(a, np.ndarray)}
        assert seen and live <= kept, "a buffer outlived its run"
        assert len(seen) > len(live)   # intermediates and scratch were passed, and are gone
        for s in built.values():
            assert not _device_arrays_held(s) and not _device_arrays_held(s._launch.__closure__[0].cell_contents)


def test_a_cuda_stretch_writes_an_output_into_the_buffer_it_is_given(monkeypatch):
    """`run(env, donated)`: an output named in `donated` is written into that buffer (the
    launch is passed it, and the plan reads it back), the others into fresh ones; with
    CuPy stood in for by NumPy and a launcher that records what it is passed."""
    from rune.backends.cuda import owned, stretch
    standin = types.SimpleNamespace(empty=np.empty, ndarray=np.ndarray, asarray=np.asarray,
                                    ascontiguousarray=np.ascontiguousarray,
                                    cuda=types.SimpleNamespace(Device=lambda index: contextlib.nullcontext()))
    monkeypatch.setattr(stretch, "cupy", standin)
    monkeypatch.setattr(owned, "empty", np.empty)   # outputs: owned allocations on a GPU
    host = _RNG.standard_normal((16, 16)).astype(np.float32)
    plan, built = _compiled_stretches(lambda p, g: (p - 0.1 * g, g * 2.0), (host, host), _props())
    (s,) = built.values()
    assert s.takes_donations and s.reads() and len(s.writes()) == 2 and s.plans == ()
    passed = []
    s._launch = lambda buffers: passed.append(list(buffers))
    donated_slot, fresh_slot = s.writes()
    mine = np.empty((16, 16), np.float32)
    env = list(plan.template)
    for slot in plan.in_slots:
        env[slot] = host
    s.run(env, {donated_slot: mine})
    (buffers,) = passed
    assert env[donated_slot] is mine and any(b is mine for b in buffers)
    assert env[fresh_slot] is not mine and any(b is env[fresh_slot] for b in buffers)
    s.run(env)   # no donation: both outputs fresh
    assert env[donated_slot] is not mine and not any(b is mine for b in passed[1])


def test_a_copy_between_gpus_orders_both_streams_around_it(monkeypatch):
    """GPU to GPU: the destination's stream waits for the source's pending writes, the
    copy is queued there, and the source's stream then waits for the copy's read (its
    buffer goes back to the source's pool when copy returns); on CuPy stood in for by a
    recorder of what each GPU's stream is asked."""
    from rune.backends.cuda import backend
    from rune.core.devices import Device
    log, current, ids = [], [0], itertools.count()

    class Stream:
        def __init__(self, gpu):
            self.gpu = gpu

        def wait_event(self, event):
            log.append(("wait", self.gpu, event.id))

    class Event:
        def __init__(self, disable_timing=True):
            self.id = next(ids)

        def record(self, stream=None):
            log.append(("record", (stream or Stream(current[-1])).gpu, self.id))

    @contextlib.contextmanager
    def device(index):
        current.append(index)
        yield
        current.pop()

    def copy(raw):
        log.append(("copy", current[-1]))
        return raw.copy()

    standin = types.SimpleNamespace(
        ascontiguousarray=np.ascontiguousarray, copy=copy,
        cuda=types.SimpleNamespace(Device=device, Event=Event, get_current_stream=lambda: Stream(current[-1])))
    monkeypatch.setattr(backend, "cupy", standin)
    x = np.arange(6.0)
    out = backend.BACKEND.copy(x, Device("cuda", 1), Device("cuda", 0))
    assert np.array_equal(out, x) and out is not x
    events = [e[2] for e in log if e[0] == "record"]
    assert len(events) == 2, f"expected an event on each GPU's stream, got {log}"
    written, read = events
    assert log == [("record", 1, written), ("wait", 0, written), ("copy", 0), ("record", 0, read),
                   ("wait", 1, read)], log


def _gpu_plan(fn, args):
    """A plan for a CUDA device whose runs are `CompiledStretch`es (built, not run)."""
    plan, built = _compiled_stretches(fn, args, _props())
    plan.steps = [built.get(id(s), s) for s in plan.steps]
    return plan


def test_donated_buffers_go_to_outputs_nothing_reads_the_input_after():
    from rune.compiler import donation
    from rune.backends.stretch import CompiledStretch
    sq = np.ones((16, 16), np.float32)

    def reuse(fn, args, donate):
        plan = _gpu_plan(fn, args)
        slots = [plan.in_slots[i] for i in donate]
        chosen = donation.reuse_plan(plan, slots)
        steps = {id(s): s for s in plan.steps}
        assert all(type(steps[step]) is CompiledStretch for step, _ in chosen)
        return plan, {out: plan.in_slots.index(s) for (_, out), s in chosen.items()}

    # an SGD update reads each point of p where it writes it: in place
    plan, got = reuse(lambda p, g: p - 0.1 * g, (sq, sq), [0])
    assert got == {plan.out_slots[0]: 0}
    # a transposed read would see points already overwritten
    assert reuse(lambda x: x.T + x, (sq,), [0])[1] == {}
    assert reuse(lambda x: x[::-1] * 2.0, (sq,), [0])[1] == {}
    # a donated argument that is also returned keeps its buffer
    assert reuse(lambda x: (x, x + 1.0), (sq,), [0])[1] == {}
    # read by a matmul first, then point by point by the stretch after it: one of
    # that stretch's outputs takes it
    plan, got = reuse(lambda x, w: (nx.tanh(x @ w), x * 2.0), (sq, sq), [0])
    assert list(got.values()) == [0] and set(got) <= set(plan.out_slots)
    # read by a matmul after the stretch that scales it: the stretch writes x * 2
    # into x's buffer, which the matmul then reads as its operand
    plan, got = reuse(lambda x, w: nx.tanh((x * 2.0) @ w) + 1.0, (sq, sq), [0])
    assert list(got.values()) == [0] and not set(got) & set(plan.out_slots)
    # the same with x read again by a second matmul: no stretch output may take it
    assert reuse(lambda x, w: nx.tanh((x * 2.0) @ w) @ x, (sq, sq), [0])[1] == {}
    # read again point by point by the last stretch: its output takes it there
    plan, got = reuse(lambda x, w: nx.tanh((x * 2.0) @ w) + x, (sq, sq), [0])
    assert got == {plan.out_slots[0]: 0}
    # shapes and dtypes must match
    assert reuse(lambda x: nx.sum(x, axis=0), (sq,), [0])[1] == {}
    assert reuse(lambda x: (x * 2).astype(np.float64), (sq,), [0])[1] == {}


def test_donation_on_the_host_is_a_hint_and_the_argument_stays_usable():
    f = rune.jit(lambda p, g: p - 0.5 * g, donate_argnums=(0,))
    p, g = nx.asarray(np.arange(6.0, dtype=np.float32)), nx.ones(6, np.float32)
    before = p._raw
    out = f(p, g)
    np.testing.assert_array_equal(np.asarray(out), np.arange(6.0) - 0.5)
    assert p._raw is before and not np.shares_memory(np.asarray(out), before)
    np.testing.assert_array_equal(np.asarray(p + 0), np.arange(6.0))


def test_donated_argument_positions_select_their_leaves():
    """donate_argnums names arguments; their pytree leaves are what is donated,
    among the call's leaves (static arguments have none)."""
    def f(a, n, tree_arg, b):
        return a, b

    x = nx.ones(2)
    args = (x, 3, {"p": x, "q": (x, x)}, x)
    cases = {(0,): [0], (2,): [1, 2, 3], (-1,): [4], (0, 3): [0, 4], (1,): [], (7,): []}
    for donate, want in cases.items():
        jitted = rune.jit(f, static_argnums=(1,), donate_argnums=donate)
        leaves = rune.tree.leaves(jitted._split(args, {})[:2])
        assert jitted._donated_leaves(args) == want, donate
        assert all(leaves[i] is x for i in want)


@pytest.mark.cuda
def test_a_donated_buffer_a_cupy_view_holds_keeps_its_values():
    import cupy
    x = nx.asarray(np.arange(4096, dtype=np.float32), device="cuda:0")
    view = cupy.asarray(x)           # zero copy, through __cuda_array_interface__
    f = rune.jit(lambda p: p * 2.0 + 1.0, donate_argnums=(0,))
    y = f(x)
    np.testing.assert_array_equal(cupy.asnumpy(view), np.arange(4096, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(y), np.arange(4096, dtype=np.float32) * 2 + 1)


def test_a_deleted_buffer_names_the_call_it_was_donated_to():
    from rune.compiler.donation import DeletedBuffer
    x = nx.asarray(np.arange(3.0))
    x._raw = DeletedBuffer("jit(step) (donate_argnums=(0,))")
    for use in (lambda: np.asarray(x), lambda: x + 1, lambda: float(x[0]), lambda: x.tolist()):
        with pytest.raises(rune.UsageError, match=r"donated to jit\(step\).*use the call's result"):
            use()


# ---------------------------------------------------------------- on a GPU

cuda = pytest.mark.cuda


def _cases(traced_only=False):
    """One test per op-table case; its samples (but known bugs) run inside it."""
    return [pytest.param(c, id=c.name) for c in TABLE if c.traced or not traced_only]


def _eager_samples(case):
    """The case's samples, or with RUNE_GPU_EAGER_SAMPLES=per-dtype (ci/gpu-check's time budget)
    one per combination of argument dtypes: each combination is its own
    cold CuPy kernel on a fresh machine, while more shapes of it mostly are not."""
    samples = [s for s in case.samples if not s.bug]
    if os.environ.get("RUNE_GPU_EAGER_SAMPLES") != "per-dtype":
        return samples
    first = {}
    for s in samples:
        dtypes = tuple(str(getattr(a, "dtype", type(a).__name__)) for a in s.args)
        first.setdefault(dtypes, s)
    return list(first.values())


def _on(device, args):
    return [nx.asarray(a, device=device) if isinstance(a, (np.ndarray, np.generic)) else a for a in args]


def _assert_same(case, sample, gpu, cpu):
    if isinstance(cpu, (list, tuple)):
        assert isinstance(gpu, (list, tuple)) and len(gpu) == len(cpu), sample.id
        for g, c in zip(gpu, cpu):
            _assert_same(case, sample, g, c)
        return
    where = f"{case.name}:{sample.id}"
    assert gpu.device.platform == "cuda", (where, gpu.device)
    assert (gpu.shape, gpu.dtype) == (cpu.shape, cpu.dtype), where
    g, c = np.asarray(gpu), np.asarray(cpu)
    if is_float(c.dtype) or c.dtype.kind == "c":
        rtol, atol = case.tolerance(c.dtype)
        # Where the host runs NumPy (complex functions, FFTs, BLAS) the GPU runs CuPy,
        # cuFFT and cuBLAS, which round differently in the last places; rune's own
        # kernels give the host's bits (tests/compiler/test_emulate.py checks those).
        wide = F64 if c.dtype.kind == "f" else np.complex128
        np.testing.assert_allclose(g.astype(wide), c.astype(wide), rtol=4 * rtol, atol=4 * atol,
                                   equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(g, c, err_msg=where)


@cuda
@pytest.mark.parametrize("case", _cases())
def test_every_op_eager_on_cuda_matches_the_host(case):
    for sample in _eager_samples(case):
        cpu = case.fn(*_on("cpu", sample.args), **sample.kwargs)
        with rune.default_device("cuda:0"):
            gpu = case.fn(*_on("cuda:0", sample.args), **sample.kwargs)
        _assert_same(case, sample, gpu, cpu)


def _with_kwargs(fn, kwargs):
    return lambda *a: fn(*a, **kwargs)


@pytest.fixture(scope="module")
def jitted_on_gpu():
    """Every traced sample of the op table jitted and planned on cuda:0 first, then
    their CUDA stretches compiled together, many units to an NVRTC program (one
    program per sample would pay NVRTC's fixed cost thousands of times)."""
    from rune.backends.stretch import compile_pending
    jitted = {}
    with rune.default_device("cuda:0"):
        for case in TABLE:
            for sample in case.samples if case.traced else ():
                if sample.bug:
                    continue
                f = rune.jit(_with_kwargs(case.fn, sample.kwargs))
                args = _on("cuda:0", sample.args)
                try:
                    f.plan(*args)
                except Exception:
                    pass  # raised again where the test calls it
                jitted[case.name, sample.id] = f, args
    compile_pending()
    return jitted


@cuda
@pytest.mark.parametrize("case", _cases(traced_only=True))
def test_every_op_under_jit_on_cuda_matches_the_host(case, jitted_on_gpu):
    for sample in case.samples:
        if sample.bug:
            continue
        cpu = case.fn(*_on("cpu", sample.args), **sample.kwargs)
        f, args = jitted_on_gpu[case.name, sample.id]
        with rune.default_device("cuda:0"):
            gpu = f(*args)
        _assert_same(case, sample, gpu, cpu)


@cuda
def test_placement_round_trip_is_counted():
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    rune.reset_stats()
    x = nx.place(nx.asarray(host), "cuda:0")
    assert x.device.name == "cuda:0"
    back = nx.place(x * 2, "cpu")
    s = rune.stats()
    assert (s["host_to_device"], s["device_to_host"]) == (1, 1)
    assert s["bytes_moved"] == 2 * host.nbytes
    np.testing.assert_array_equal(np.asarray(back), host * 2)
    assert back.device.name == "cpu:0"


@cuda
def test_block_until_ready_waits_and_returns_the_array():
    x = nx.asarray(np.ones(1 << 20, np.float32), device="cuda:0")
    y = (x * 3).block_until_ready()
    import cupy
    assert cupy.cuda.get_current_stream().done  # nothing left queued
    assert float(nx.sum(y)) == 3 * (1 << 20)


@cuda
def test_scalar_reads_of_device_values_are_counted():
    x = nx.asarray(np.arange(10, dtype=np.int32), device="cuda:0")
    rune.reset_stats()
    out = rune.while_loop(lambda c: c < 5, lambda c: c + 1, x[0])
    assert int(out) == 5
    assert rune.stats()["scalar_reads"] >= 6


@cuda
def test_jit_on_cuda_matches_the_host_for_a_training_step():
    rng = np.random.default_rng(0)
    w, xb = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)

    def loss(w, x):
        return nx.mean(nx.tanh(x @ w) ** 2)

    step = rune.jit(rune.value_and_grad(loss))
    lc, gc = step(nx.asarray(w), nx.asarray(xb))
    lg, gg = step(nx.asarray(w, device="cuda:0"), nx.asarray(xb, device="cuda:0"))
    assert gg.device.name == "cuda:0"
    np.testing.assert_allclose(float(lg), float(lc), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(gg), np.asarray(gc), rtol=1e-4, atol=1e-6)


@cuda
def test_random_bits_on_cuda_are_bit_identical_to_the_host():
    for width, dtype in ((32, np.float32), (64, np.float64)):
        cpu = nx.random.uniform(nx.random.key(7), (1000, 3), dtype)
        gpu = nx.random.uniform(nx.random.key(7, device="cuda:0"), (1000, 3), dtype)
        assert gpu.device.name == "cuda:0"
        np.testing.assert_array_equal(np.asarray(gpu), np.asarray(cpu))
    keys = nx.random.split(nx.random.key(3, device="cuda:0"), 4)
    np.testing.assert_array_equal(np.asarray(keys), np.asarray(nx.random.split(nx.random.key(3), 4)))


@cuda
def test_conv_and_pooling_on_cuda_match_the_host():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 9, 9, 3)).astype(np.float32), rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    for place in ("cpu", "cuda:0"):
        y = nx.conv(nx.asarray(x, device=place), nx.asarray(w, device=place), strides=(2, 1),
                    padding="SAME", dilation=(1, 2))
        p = nx.reduce_window(y, "max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        if place == "cpu":
            yc, pc = np.asarray(y), np.asarray(p)
    np.testing.assert_allclose(np.asarray(y), yc, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(p), pc, rtol=1e-4, atol=1e-5)


@cuda
def test_host_callback_gets_numpy_once_per_call_and_its_result_returns_to_the_gpu():
    seen = []

    def on_host(a, b):
        seen.append((type(a), type(b)))
        return np.asarray(a) * 2 + np.asarray(b)

    x = nx.asarray(np.arange(6, dtype=np.float32), device="cuda:0")
    f = rune.jit(lambda x: rune.callback(on_host, x + 1, x, like=x) * 3)
    rune.reset_stats()
    out = f(x)
    assert out.device.name == "cuda:0"
    np.testing.assert_array_equal(np.asarray(out), ((np.arange(6) + 1) * 2 + np.arange(6)) * 3)
    assert seen == [(nx.Array, nx.Array)]
    s = rune.stats()
    assert s["device_to_host"] == 2 + 1 and s["host_to_device"] == 1  # two arguments, the result, the read


@cuda
def test_device_callback_gets_gpu_arrays_and_may_return_cupy():
    import cupy
    seen = []

    def on_gpu(a):
        view = cupy.asarray(a)                      # zero copy: the same device memory
        seen.append((a.device.name, view.data.ptr == a.__cuda_array_interface__["data"][0]))
        return cupy.sqrt(view)

    x = nx.asarray(np.arange(8, dtype=np.float32), device="cuda:0")
    rune.reset_stats()
    out = rune.jit(lambda x: rune.callback(on_gpu, x * x, like=x, host=False))(x)
    assert seen == [("cuda:0", True)]
    assert rune.stats()["device_to_host"] == 0 and rune.stats()["host_to_device"] == 0
    assert out.device.name == "cuda:0"
    np.testing.assert_allclose(np.asarray(out), np.arange(8, dtype=np.float32), rtol=1e-6)


@cuda
def test_scan_on_cuda_runs_a_host_callback_per_row():
    rows = []

    def log(row):
        rows.append(np.asarray(row).copy())
        return np.float32(np.asarray(row).sum())

    xs = np.arange(12, dtype=np.float32).reshape(4, 3)

    def step(carry, row):
        s = rune.callback(log, row * 2, like=rune.Spec((), np.float32))
        return carry + s, s

    with rune.default_device("cuda:0"):  # where the Spec's result and the zero carry lie
        carry, ys = rune.jit(lambda xs: rune.scan(step, nx.zeros((), np.float32), xs))(nx.asarray(xs))
    assert len(rows) == 4 and ys.device.name == "cuda:0"
    np.testing.assert_array_equal(np.stack(rows), xs * 2)
    np.testing.assert_array_equal(np.asarray(ys), (xs * 2).sum(1))
    assert float(carry) == (xs * 2).sum()


@cuda
def test_dlpack_with_cupy_both_ways_without_copies():
    import cupy
    c = cupy.arange(10, dtype=cupy.float32)
    x = nx.from_dlpack(c)
    assert x.device.name == "cuda:0" and x.__cuda_array_interface__["data"][0] == c.data.ptr
    gpu = rune.devices("cuda")[0]
    assert rune.backends.backend_for(gpu).from_foreign(c, gpu) is c
    a = nx.place(nx.asarray(np.arange(5, dtype=np.float32)), "cuda:0")
    for back in (cupy.from_dlpack(a), cupy.asarray(a)):
        assert back.data.ptr == a.__cuda_array_interface__["data"][0]
        np.testing.assert_array_equal(cupy.asnumpy(back), np.arange(5, dtype=np.float32))


@cuda
def test_dlpack_with_pytorch_both_ways_without_copies():
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32, device="cuda:0")
    x = nx.from_dlpack(t)
    assert x.device.name == "cuda:0" and x.__cuda_array_interface__["data"][0] == t.data_ptr()
    np.testing.assert_array_equal(np.asarray(x * 2), np.arange(6) * 2)
    gpu = rune.devices("cuda")[0]
    assert rune.backends.backend_for(gpu).from_foreign(t, gpu).data.ptr == t.data_ptr()
    a = nx.place(nx.asarray(np.arange(4, dtype=np.float32)), "cuda:0")
    u = torch.from_dlpack(a)
    assert u.device.type == "cuda" and u.data_ptr() == a.__cuda_array_interface__["data"][0]
    assert u.tolist() == [0.0, 1.0, 2.0, 3.0]


@cuda
def test_hand_written_kernel_unit_launches_with_exact_scalar_types():
    """The compile slot: a unit of two kernels loaded as one RawModule, buffers
    picked by position, a scratch buffer, scalars of the kernels' exact C types."""
    import cupy
    from types import SimpleNamespace as K
    from rune.backends.cuda import launch
    source = r'''
    extern "C" __global__ void axpb(const float* x, float* y, float* t, float a, long long n) {
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
             i += (long long)gridDim.x * blockDim.x) { t[i] = a * x[i]; y[i] = t[i] + 1.0f; }
    }
    extern "C" __global__ void twice(float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] *= 2.0f;
    }'''
    n = 1000
    kernels = [K(name="axpb", launches=[K(name="axpb", grid=3, block=128, shared=0)], scratch=[(np.float32, n)],
                 args=[("buffer", 0), ("buffer", 1), ("scratch", 0), ("scalar", 0.5, "float"),
                       ("scalar", n, "long long")]),
               K(name="twice", launches=[K(name="twice", grid=8, block=128, shared=0)], scratch=[],
                 args=[("buffer", 1), ("scalar", n, "int")])]
    run = launch.load("", ("unit", source, kernels), ("-std=c++17",))
    x, y = cupy.arange(n, dtype=cupy.float32), cupy.zeros(n, cupy.float32)
    run([x, y])
    np.testing.assert_allclose(cupy.asnumpy(y), (0.5 * np.arange(n, dtype=np.float32) + 1) * 2)


@cuda
@pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")
def test_two_gpus_compute_on_their_own_device_and_copy_directly():
    x = nx.asarray(np.arange(8, dtype=np.float32), device="cuda:1")
    y = nx.exp(x) + nx.sum(x)
    assert y.device.name == "cuda:1" and y._raw.device.id == 1
    rune.reset_stats()
    z = nx.place(y, "cuda:0")
    assert z._raw.device.id == 0
    s = rune.stats()
    assert (s["host_to_device"], s["device_to_host"], s["transfers"]) == (0, 0, 1)
    np.testing.assert_allclose(np.asarray(z), np.exp(np.arange(8)) + 28, rtol=1e-6)
    with pytest.raises(rune.DeviceMismatchError):
        z + y


@cuda
@pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")
def test_a_copy_between_gpus_waits_for_the_work_that_writes_its_source():
    big = nx.asarray(np.ones((4096, 4096), np.float32), device="cuda:1")
    for _ in range(3):   # queued on cuda:1's stream; the copy to cuda:0 must come after all of it
        z = nx.place(nx.tanh(big @ big) + 1.0, "cuda:0")
        np.testing.assert_array_equal(np.asarray(z), np.full((4096, 4096), 2.0, np.float32))


@cuda
@pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")
def test_a_copy_between_gpus_reads_its_source_before_the_source_gpu_reuses_it():
    """The source of each copy is a temporary of cuda:1, dropped as the copy returns; the
    copy is queued behind long work on cuda:0, while cuda:1 at once takes memory of the
    same size from its pool and overwrites it."""
    busy = nx.asarray(np.ones((4096, 4096), np.float32), device="cuda:0")
    big = nx.asarray(np.ones((2048, 2048), np.float32), device="cuda:1")
    copies = []
    for k in range(4):
        for _ in range(4):
            busy = busy @ busy * (1.0 / 4096)   # ones stay ones; keeps cuda:0's stream busy
        copies.append(nx.place(big * float(k + 2), "cuda:0"))
        overwrite = big * -1.0   # the temporary's memory, reused on cuda:1
    del overwrite
    for k, c in enumerate(copies):
        np.testing.assert_array_equal(np.asarray(c), np.full((2048, 2048), k + 2.0, np.float32))


@cuda
@pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")
def test_a_device_callback_result_for_the_second_gpu_is_made_there():
    import cupy
    with rune.default_device("cuda:1"):
        x = nx.asarray(np.arange(6, dtype=np.float32))
        y = rune.callback(lambda v: cupy.asarray(v) * 2, x, like=x, host=False)
    assert y.device.name == "cuda:1" and y._raw.device.id == 1
    np.testing.assert_array_equal(np.asarray(y), np.arange(6, dtype=np.float32) * 2)


# ---------------------------------------------------------------- jit on a GPU: compiled CUDA stretches

# Beside STRETCH_PROGRAMS: bigger reductions than the emulation can run (every
# strategy on a real GPU's SM count).
GPU_PROGRAMS = STRETCH_PROGRAMS + [
    ("many_short_rows_large", lambda x: nx.sum(x * x, axis=1), (_RNG.standard_normal((200_000, 8)).astype(np.float32),)),
    ("few_long_rows_large", lambda x: nx.max(x, axis=1) - nx.min(x, axis=1),
     (_RNG.standard_normal((3, 1 << 21)).astype(np.float32),)),
    ("one_long_sum", lambda x: nx.sum(x * 0.5), (_RNG.standard_normal(3_000_001).astype(np.float32),)),
]
# Float32 sums of millions of terms differ with the order they are added in.
_RTOL = {"one_long_sum": 1e-3}


def _launches_per_call(plan):
    """Kernel launches one run of `plan` counts: a compiled stretch its kernels, a
    library call or an op-by-op stretch one, views none (nested plans not counted)."""
    from rune.backends.stretch import CompiledStretch
    from rune.compiler.lower import LibraryCall, ViewStep
    from rune.compiler.plan import Stretch
    counts = {CompiledStretch: lambda s: len(s.kernels), LibraryCall: lambda s: 1,
              Stretch: lambda s: 1, ViewStep: lambda s: 0}
    return sum(counts[type(s)](s) for s in plan.steps)


@cuda
@pytest.mark.parametrize("pid,fn,args", GPU_PROGRAMS, ids=[p[0] for p in GPU_PROGRAMS])
def test_jit_on_cuda_runs_compiled_kernels_and_matches_the_host(pid, fn, args):
    from rune.backends.stretch import CompiledStretch
    want = [np.asarray(w) for w in rune.tree.leaves(rune.jit(fn)(*args))]
    f = rune.jit(fn)
    on_gpu = _on("cuda:0", args)
    with rune.default_device("cuda:0"):
        f(*on_gpu)
        rune.reset_stats()
        got = rune.tree.leaves(f(*on_gpu))
        launched = rune.stats()["kernels_launched"]
        plan = f.plan(*on_gpu)
    compiled = [s for s in plan.steps if type(s) is CompiledStretch]
    assert compiled, f"{pid}: no compiled CUDA stretch in\n{plan}"
    assert launched <= sum(len(s.eqns) for s in plan.steps), f"{pid}: more launches than ops ({launched})"
    assert launched == _launches_per_call(plan)
    assert all(s.device.name == "cuda:0" for s in compiled)
    for g, w in zip(got, want):
        assert g.device.name == "cuda:0"
        rtol = _RTOL.get(pid, 2e-5)
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=rtol * max(1.0, float(np.abs(w).max())),
                                   err_msg=pid)


@cuda
def test_compiled_stretches_allocate_fresh_outputs():
    x = nx.asarray(np.arange(4096, dtype=np.float32), device="cuda:0")
    f = rune.jit(lambda x: (_softmax(x.reshape(64, 64)), nx.exp(x) * 2.0))
    a, b = f(x)
    c, d = f(x)
    assert a._raw.data.ptr != c._raw.data.ptr and b._raw.data.ptr != d._raw.data.ptr
    np.testing.assert_array_equal(np.asarray(a), np.asarray(c))
    np.testing.assert_allclose(np.asarray(b), np.exp(np.arange(4096, dtype=np.float32)) * 2, rtol=1e-6)
    rune.reset_stats()
    f(x)
    assert rune.stats()["kernels_compiled"] == 0  # compiled once, on the first call


@cuda
def test_a_run_gives_its_intermediates_and_scratch_back_to_the_pool():
    """After a call, CuPy's pool holds what it held before plus the outputs: the
    stretches' intermediates and split-reduction scratch went back when the run ended."""
    import cupy
    pool = cupy.get_default_memory_pool()
    x = nx.asarray(_RNG.standard_normal((3, 50000)).astype(np.float32), device="cuda:0")
    f = rune.jit(lambda x: (_softmax(x), nx.sum(x * x)))
    f(x)   # compiles, and uploads any plan constants
    cupy.cuda.Device(0).synchronize()
    before = pool.used_bytes()
    outs = f(x)
    cupy.cuda.Device(0).synchronize()
    rounded = sum(-(-o._raw.nbytes // 512) * 512 for o in outs)   # the pool's allocation unit
    assert pool.used_bytes() - before == rounded
    del outs
    assert pool.used_bytes() == before


@cuda
def test_a_float_scatter_on_a_gpu_combines_duplicates_in_numpys_order():
    """An embedding-gradient-like scatter-add (many repeated rows, order-sensitive
    float32 sums) and a set with duplicates, bit for bit NumPy's sequential result."""
    rng = np.random.default_rng(12)
    idx = rng.integers(0, 50, 1024).astype(np.int32)
    u = (rng.standard_normal((1024, 64)) * 10.0 ** rng.integers(-3, 7, (1024, 64))).astype(np.float32)
    g = np.zeros((50, 64), np.float32)
    add, put = g.copy(), g.copy()
    np.add.at(add, idx, u)
    put[idx] = u
    f = rune.jit(lambda g, i, u: (g.at[i].add(u), g.at[i].set(u)))
    got = f(*[nx.asarray(a, device="cuda:0") for a in (g, idx, u)])
    np.testing.assert_array_equal(np.asarray(got[0]), add)
    np.testing.assert_array_equal(np.asarray(got[1]), put)


@cuda
def test_scan_with_a_host_callback_runs_its_rows_as_compiled_kernels():
    from rune.backends.stretch import CompiledStretch
    seen = []

    def log(v):
        seen.append(float(v))
        return np.float32(v) * 2

    def step(carry, row):
        s = nx.sum(nx.tanh(row) * carry)
        back = rune.callback(log, s, like=rune.Spec((), np.float32))
        return carry * 0.5 + back, s

    xs = _RNG.standard_normal((20, 64)).astype(np.float32)
    f = rune.jit(lambda c, xs: rune.scan(step, c, xs))
    want_c, want_ys = f(nx.ones(64, np.float32), xs)
    host_rows = list(seen)
    seen.clear()
    with rune.default_device("cuda:0"):
        got_c, got_ys = f(nx.asarray(np.ones(64, np.float32), device="cuda:0"), nx.asarray(xs, device="cuda:0"))
        plan = f.plan(nx.asarray(np.ones(64, np.float32), device="cuda:0"), nx.asarray(xs, device="cuda:0"))
    np.testing.assert_allclose(seen, host_rows, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_c), np.asarray(want_c), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_ys), np.asarray(want_ys), rtol=1e-5)
    bodies = [sub for s in plan.steps for sub in s.plans]
    assert any(type(s) is CompiledStretch for body in bodies for s in body.steps), plan


@cuda
def test_donated_gpu_buffer_holds_the_output_and_the_argument_is_deleted():
    f = rune.jit(lambda p, g: p - 0.1 * g, donate_argnums=(0,))
    host_p, host_g = np.arange(10_000, dtype=np.float32), np.ones(10_000, np.float32)
    p, g = nx.asarray(host_p, device="cuda:0"), nx.asarray(host_g, device="cuda:0")
    ptr = p._raw.data.ptr
    out = f(p, g)
    assert out._raw.data.ptr == ptr
    np.testing.assert_allclose(np.asarray(out), host_p - 0.1, rtol=1e-6)
    with pytest.raises(rune.UsageError, match=r"donated to jit.*donate_argnums=\(0,\)"):
        p + 1
    with pytest.raises(rune.UsageError, match="donated"):
        f(p, g)
    # a loop donating its state: every step writes into the one buffer
    q = out
    for _ in range(3):
        q = f(q, g)
    assert q._raw.data.ptr == ptr
    np.testing.assert_allclose(np.asarray(q), host_p - 0.4, rtol=1e-5)
    # an argument another array shares is deleted but its buffer is not reused
    r = nx.asarray(host_p, device="cuda:0")
    alias = Array(r._raw, r.device)
    s = f(r, g)
    assert s._raw.data.ptr != alias._raw.data.ptr
    np.testing.assert_array_equal(np.asarray(alias), host_p)


@pytest.mark.nvrtc
def test_a_unit_nvrtc_rejects_fails_when_run_with_its_kernels_source_and_log(tmp_path, monkeypatch):
    """Compiling needs no GPU: the rejected unit's launcher raises NVRTC's error, naming
    its kernels, each time it is run, and nothing of it is cached."""
    pytest.importorskip("cupy")   # the launcher is built on CuPy
    from types import SimpleNamespace as K
    from rune.backends.cuda import launch
    monkeypatch.setenv("RUNE_CACHE_DIR", str(tmp_path))
    source = 'extern "C" __global__ void broken_k0(float *p0) { p0[0] = undeclared_name; }'
    kernels = [K(name="broken_k0", launches=[K(name="broken_k0", grid=1, block=32, shared=0)], scratch=[],
                 args=[("buffer", 0)])]
    run = launch.load("", ("broken", source, kernels), arch="sm_90")
    for _ in range(2):
        with pytest.raises(launch.KernelCompileError, match=r"(?s)NVRTC could not compile broken_k0 for sm_90.*"
                           r"undeclared_name.*--- source ---\n.*\d extern \"C\" __global__ void broken_k0"):
            run([])
    assert not list(tmp_path.glob("kernels/*.json"))


@cuda
@pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")
def test_plans_for_the_second_gpu_compile_and_launch_there():
    from rune.backends.stretch import CompiledStretch
    host = _RNG.standard_normal((300, 40)).astype(np.float32)
    f = rune.jit(_softmax)
    with rune.default_device("cuda:1"):
        x = nx.asarray(host, device="cuda:1")
        y = f(x)
        plan = f.plan(x)
    assert y.device.name == "cuda:1" and y._raw.device.id == 1
    assert [s.device.name for s in plan.steps if type(s) is CompiledStretch] == ["cuda:1"]
    np.testing.assert_allclose(np.asarray(y), np.asarray(rune.jit(_softmax)(host)), rtol=1e-5)


def test_a_run_the_cuda_dialect_has_no_rule_for_is_not_compiled():
    """A node the CUDA dialect has no rule for (it raises NotImplementedError naming
    it) leaves its run op by op on a GPU; a unit it renders is built."""
    pytest.importorskip("cupy")
    from rune.backends.cuda.backend import BACKEND
    from rune.compiler.fuse import Unit
    props, device = _props(), rune.devices()[0]
    for op in ("exp", "frobnicate"):
        unit = Unit()
        b0, b1 = unit.buffer(np.float32, (4,), "in"), unit.buffer(np.float32, (4,), "out")
        k = unit.kernel((4,))
        k.store(b1, k.node(op, np.float32, [k.load(b0, (1,), 0)]))
        built = BACKEND.compiled_stretch([], unit, device, props)
        assert (built is None) == (op == "frobnicate"), op


@cuda
def test_stretches_planned_before_they_run_compile_in_one_nvrtc_program():
    from rune.backends.stretch import compile_pending
    host = _RNG.standard_normal((64, 33)).astype(np.float32)
    fns = [lambda x: nx.tanh(x) * 2.0, lambda x: nx.sum(x * x, axis=0), _softmax, lambda x: nx.tanh(x) * 2.0]
    with rune.default_device("cuda:0"):
        x = nx.asarray(host, device="cuda:0")
        jitted = [rune.jit(f) for f in fns]
        for f in jitted:
            f.plan(x)
        rune.reset_stats()
        assert compile_pending() >= len(fns)
        assert rune.stats()["kernels_compiled"] == 1
        outs = [np.asarray(f(x)) for f in jitted]
    assert rune.stats()["kernels_compiled"] == 1  # nothing compiled again when they run
    for f, got in zip(fns, outs):
        np.testing.assert_allclose(got, np.asarray(rune.jit(f)(host)), rtol=1e-5, atol=1e-6)


@cuda
def test_float32_subnormals_survive_gpu_kernels_as_on_the_host():
    h = np.full(4096, 1.0e-38, np.float32) * np.linspace(0.1, 1.0, 4096, dtype=np.float32)
    g = nx.asarray(h, device="cuda:0")
    for fn in (lambda v: v > 0, lambda v: v * 1.0, lambda v: v * 0.5, lambda v: nx.maximum(v, 0.0)):
        np.testing.assert_array_equal(np.asarray(rune.jit(fn)(g)), np.asarray(rune.jit(fn)(nx.asarray(h))))
