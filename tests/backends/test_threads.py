"""Planning, rendering, compiling and first calls of jitted functions from many threads.

A dialect object is shared by every stretch of a process (and by threads), so a
kernel's rendering must depend only on its arguments; compile queues are shared
too. Each test starts its threads together (a barrier) with a tiny GIL switch
interval, so that threads interleave inside rendering and planning."""
import contextlib
import sys
import threading
import time

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu import compiler as c_compiler
from rune.backends.stretch import CompiledStretch, compile_pending
from rune.codegen.c import CDialect

THREADS = 8


@contextlib.contextmanager
def _interleaved():
    """Switch threads as often as CPython allows while the block runs."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _together(work, n=THREADS):
    """Run work(k) for k < n in n threads started at once; returns their results, re-raising
    the first exception of any thread."""
    barrier, results, errors = threading.Barrier(n), [None] * n, []

    def main(k):
        try:
            barrier.wait()
            results[k] = work(k)
        except BaseException as e:   # noqa: BLE001  re-raised in the caller
            errors.append(e)

    with _interleaved():
        threads = [threading.Thread(target=main, args=(k,)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return results


# Distinct programs, each a kind of kernel: index nodes (arange, iota of distinct
# shapes), reductions over the last and a leading axis, argmax, a gather, a scan.
def _arange(k):
    return lambda x: nx.arange(x.shape[0] + k, dtype=np.float32)[: x.shape[0]] * x + k


def _reductions(k):
    return lambda x: (nx.sum(x * x) + k, nx.mean(nx.reshape(x, (-1, 2)), axis=0))


def _argmax(k):
    return lambda x: nx.argmax(nx.reshape(x, (2, -1)) * (k + 1.0), axis=1)


def _gather(k):
    return lambda x: nx.take(x, (nx.arange(x.shape[0], dtype=np.int32) * 7 + k) % x.shape[0], axis=0) * 2.0


def _scan(k):
    return lambda x: rune.scan(lambda c, v: (c + v * k, c * 2.0), np.float32(0.0), x)


PROGRAMS = [_arange, _reductions, _argmax, _gather, _scan]


def _case(k):
    """The k-th program and its argument (an even length distinct per k)."""
    x = np.random.default_rng(k).standard_normal(6 + 2 * k).astype(np.float32)
    return PROGRAMS[k % len(PROGRAMS)](k), x


def _close(got, want, what):
    got, want = rune.tree.leaves(got), rune.tree.leaves(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5, err_msg=what)


def test_distinct_jitted_functions_plan_and_run_in_threads_as_eager():
    def work(k):
        f, x = _case(k)
        jitted = rune.jit(f)
        a = nx.asarray(x)
        jitted.plan(a)
        return jitted(a), f(a)

    for trial in range(3):
        for k, (got, want) in enumerate(_together(lambda k: work(k + THREADS * trial))):
            _close(got, want, f"program {k + THREADS * trial}")


def test_one_jitted_function_first_called_from_many_threads_at_once():
    for k in range(len(PROGRAMS)):
        f, x = _case(k)
        jitted, a = rune.jit(f), nx.asarray(x)
        want = f(a)
        for got in _together(lambda _: jitted(a)):
            _close(got, want, f"program {k}")


def _ir_units():
    """The IR kernels of every compiled stretch of the programs, planned in this thread."""
    units = []
    for k in range(2 * len(PROGRAMS)):
        f, x = _case(k)
        plan = rune.jit(f).plan(nx.asarray(x))
        units += [s.unit.kernels for s in _steps(plan) if isinstance(s, CompiledStretch)]
    assert len(units) >= len(PROGRAMS)
    return units


def _steps(plan):
    for s in plan.steps:
        yield s
        for sub in s.plans:
            yield from _steps(sub)


@pytest.mark.cc   # the IR comes from compiled stretches, which need a C compiler to be planned
def test_rendering_returns_the_kernels_names_and_sources_and_leaves_the_ir_alone():
    units = _ir_units()
    assert all(k.source is None and k.target is None for ks in units for k in ks), \
        "planning wrote rendered text into the IR kernels"
    names = [[k.name for k in ks] for ks in units]
    for ks in units:
        name, text, rendered = CDialect().render_unit(ks)
        assert [r.name for r in rendered] == [f"{name}_k{j}" for j in range(len(ks))]
        assert all(r.target == "c" and r.source in text and r.shape == k.shape for r, k in zip(rendered, ks))
    assert all(k.source is None and k.target is None for ks in units for k in ks)
    assert [[k.name for k in ks] for ks in units] == names


@pytest.mark.cc   # the IR comes from compiled stretches, which need a C compiler to be planned
def test_a_shared_dialect_renders_in_threads_what_it_renders_alone():
    units = _ir_units()
    dialect = CDialect()
    alone = [dialect.render_unit(ks)[:2] for ks in units]

    def work(k):
        return [[dialect.render_unit(ks)[:2] for ks in units] for _ in range(20)]

    for rounds in _together(work):
        for again in rounds:
            assert again == alone


@pytest.mark.cc   # the IR comes from compiled stretches, which need a C compiler to be planned
def test_the_cuda_dialect_renders_in_threads_what_it_renders_alone():
    pytest.importorskip("cupy")
    from rune.codegen.cuda import CudaDialect
    units = _ir_units()
    dialect = CudaDialect()
    alone = [dialect.render_unit(ks)[:2] for ks in units]
    for rounds in _together(lambda k: [[dialect.render_unit(ks)[:2] for ks in units] for _ in range(3)]):
        for again in rounds:
            assert again == alone
    assert all(k.source is None and k.target is None for ks in units for k in ks)


def _slow_counting(compile_fn, compiled):
    """`compile_fn` wrapped to record each unit name compiled and to take a while
    (so another thread asks for the same units meanwhile)."""
    def wrapped(compiler, prelude, units):
        compiled.extend(name for name, _, _ in units)
        time.sleep(0.05)
        return compile_fn(compiler, prelude, units)
    return wrapped


def test_threads_running_new_stretches_at_once_compile_each_once(monkeypatch):
    compiled = []
    monkeypatch.setattr(c_compiler, "build", _slow_counting(c_compiler.build, compiled))
    compile_pending()   # what earlier tests left pending
    compiled.clear()
    xs = [nx.asarray(np.arange(16 + k, dtype=np.float32)) for k in range(THREADS)]
    fns = [rune.jit(lambda x, k=k: nx.exp(x * np.float32(k / 8)) + nx.sum(x)) for k in range(THREADS)]
    plans = [f.plan(x) for f, x in zip(fns, xs)]   # built here: every thread's stretch is pending
    got = _together(lambda k: fns[k](xs[k]))
    for k in range(THREADS):
        _close(got[k], nx.exp(xs[k] * np.float32(k / 8)) + nx.sum(xs[k]), f"function {k}")
    names = [s.name for p in plans for s in _steps(p) if isinstance(s, CompiledStretch)]
    assert sorted(compiled) == sorted(names), "a stretch was compiled twice, or not at all"


def test_cuda_stretches_compile_once_when_threads_run_them_at_once(monkeypatch):
    """Without a GPU: the NVRTC step is a stand-in that records what it compiles."""
    pytest.importorskip("cupy")
    from rune.backends import stretch
    from rune.backends.cuda.stretch import CudaKernels
    from rune.codegen.cuda import DeviceProps
    from rune.compiler.target import TargetStretch
    monkeypatch.setattr(stretch, "_PENDING", type(stretch._PENDING)())   # only this test's stretches
    compiled = []

    def compile_units(prelude, units):
        compiled.extend(name for name, _, _ in units)
        time.sleep(0.05)
        return [lambda buffers, name=name: name for name, _, _ in units]

    platform = CudaKernels(0, DeviceProps(), compile_units)
    built = []
    for k in range(THREADS):
        f, x = _case(k)
        plan = rune.jit(f).plan(rune.Spec(x.shape, x.dtype), target="cuda")
        built += [stretch.CompiledStretch(s.eqns, s.unit, None, platform)
                  for s in _steps(plan) if type(s) is TargetStretch]
    assert len(built) >= THREADS

    def work(k):   # half the threads compile everything pending, half their own stretch
        if k % 2:
            stretch.compile_pending()
        return [s.compile()([]) for s in built[k::THREADS]]

    results = _together(work)
    assert all(r == [s.name for s in built[k::THREADS]] for k, r in enumerate(results))
    assert sorted(compiled) == sorted(s.name for s in built), "a stretch was compiled twice"


def test_the_compile_pipeline_runs_its_batches_at_once_on_a_pool(monkeypatch):
    """rune/backends/pipeline.py for any platform's Compiler: six units, two to a
    compiler run, give three runs that all wait for one another (which one run after
    another never reaches), each unit built once and handed its batch's Program."""
    from types import SimpleNamespace
    from rune.backends import base, pipeline
    monkeypatch.setenv("RUNE_CACHE", "0")
    monkeypatch.setenv("RUNE_NUM_THREADS", "4")
    together, seen = threading.Barrier(3, timeout=30), []

    class Loaded(base.Program):
        def __init__(self, source):
            self.source = source

        def has(self, name):
            return name in self.source

    class Standin(base.Compiler):
        platform, name, suffix, batch = "test", "a stand-in compiler", ".bin", 2

        def key(self, source):
            return "pool-test\0" + source

        def compile(self, source, names=()):
            seen.append((threading.get_ident(), names))
            together.wait()
            return base.Binary(source.encode())

        def load(self, path, data=None):
            return Loaded(data.decode())

        def symbols(self, unit):
            return (unit[0] + "_run",)

    units = [(f"u{k}", f"void u{k}_run(void) {{ }}", [SimpleNamespace(name=f"u{k}_k0")]) for k in range(6)]
    rune.reset_stats()
    programs = pipeline.build(Standin(), "", units + units[:2])   # the last two again: built once
    assert len(seen) == 3 and len({t for t, _ in seen}) == 3 and threading.get_ident() not in {t for t, _ in seen}
    assert sorted(n for _, names in seen for n in names) == [f"u{k}_k0" for k in range(6)]
    assert rune.stats()["kernels_compiled"] == 3
    for (name, text, _), program in zip(units + units[:2], programs):
        assert text in program.source and program.has(name + "_run")
    assert programs[6] is programs[0] and programs[0] is programs[1] and programs[0] is not programs[2]
