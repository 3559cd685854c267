"""The backend protocol (rune.backends.base): one object per platform, the only
thing that touches raw buffers."""
import inspect

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends import backend_for
from rune.backends.base import Backend
from rune.core.prims import P
from rune.core.primitive import calls, eval_rules
from rune.core.devices import devices, get_device


def _present_backends():
    return {d.platform: backend_for(d) for d in devices()}


def test_backend_for_returns_one_backend_per_platform():
    cpu = get_device("cpu")
    b = backend_for(cpu)
    assert isinstance(b, Backend) and b.platform == "cpu"
    assert backend_for(cpu) is b


def test_every_first_order_primitive_has_an_implementation_on_every_backend():
    # Higher-order primitives evaluate themselves (eval_rules) and calls are
    # inlined; `place` is a transfer. Everything else runs on a backend.
    from rune.core.primitive import abstract_rules
    prims = {p for p in abstract_rules if p not in eval_rules and p not in calls and p is not P["place"]}
    for platform, backend in _present_backends().items():
        for d in devices(platform):
            table = backend.impls(d)
            missing = sorted(p.name for p in prims if p.name not in table)
            assert not missing, (platform, missing)


def test_creation_and_buffers_on_the_backend():
    cpu = get_device("cpu")
    b = backend_for(cpu)
    np.testing.assert_array_equal(b.full((2, 3), 1.5, np.dtype(np.float32), cpu), np.full((2, 3), 1.5, np.float32))
    np.testing.assert_array_equal(b.iota((2, 3), np.dtype(np.int32), 1, cpu), np.broadcast_to(np.arange(3), (2, 3)))
    np.testing.assert_array_equal(b.iota((2, 3), np.dtype(np.int32), 0, cpu), np.broadcast_to(np.arange(2)[:, None], (2, 3)))
    raw = np.arange(4.0)
    copied = b.copy(raw, cpu, cpu)
    assert copied is not raw and np.shares_memory(copied, raw) is False
    assert b.to_host(raw) is raw
    rows = [np.ones(2), np.zeros(2)]
    from rune.core.aval import Aval
    aval = Aval((2, 2), np.dtype(np.float64), cpu)
    np.testing.assert_array_equal(b.stack(rows, aval), np.stack(rows))
    assert b.empty(aval).shape == (0, 2)
    assert b.from_foreign(np.float32(2), cpu).dtype == np.float32
    np.testing.assert_array_equal(b.from_foreign(nx.arange(3), cpu), np.arange(3))  # a DLPack producer


def _protocol(cls):
    """The public members of a backend class: name -> signature (None for a value)."""
    return {name: (inspect.signature(getattr(cls, name)) if callable(getattr(cls, name)) else None)
            for name in dir(cls) if not name.startswith("_")}


def test_every_platform_implements_the_same_protocol_with_the_same_signatures():
    """CpuBackend and CudaBackend (imported without a GPU) define the same members, each
    method with the same signature, so that plans and the compile pipeline treat
    every platform alike."""
    pytest.importorskip("cupy")
    from rune.backends.cpu.backend import CpuBackend
    from rune.backends.cuda.backend import CudaBackend
    host, gpu = _protocol(CpuBackend), _protocol(CudaBackend)
    assert sorted(host) == sorted(gpu)
    differ = {name: (host[name], gpu[name]) for name in host if host[name] != gpu[name]}
    assert not differ, differ
    for name in ("compile", "compiled_stretch", "kernels_for", "compiler", "device_props", "device_count", "dialect"):
        assert name in host, name
    # each platform overrides the members its protocol says it has; compiled_stretch is
    # written once, in the base, from each platform's kernels_for
    for cls in (CpuBackend, CudaBackend):
        assert cls.compiled_stretch is Backend.compiled_stretch, cls.__name__
        for name in ("compile", "kernels_for", "compiler", "device_count"):
            assert getattr(cls, name) is not getattr(Backend, name), (cls.__name__, name)


def test_device_count_and_dialect_of_each_platform():
    from rune.backends import device_count
    from rune.codegen.c import CDialect
    host = backend_for(get_device("cpu"))
    assert device_count("cpu") == host.device_count() == len(devices("cpu"))
    assert isinstance(host.dialect, CDialect) and host.device_props(get_device("cpu")) is None
    assert device_count("cuda") == len(devices("cuda"))
    try:
        import cupy  # noqa: F401
    except ImportError:
        return
    from rune.backends.cuda.backend import BACKEND
    from rune.codegen.cuda import CudaDialect
    assert isinstance(BACKEND.dialect, CudaDialect)
    assert BACKEND.device_count() == len(devices("cuda"))


def test_compile_is_the_kernel_compilers_slot(monkeypatch):
    b = backend_for(get_device("cpu"))
    assert "dot_general" in b.library
    if b.compiler() is None:
        pytest.skip("no C compiler: plans run their stretches on NumPy")
    real, built = b.compile, []

    def counted(compiler, prelude, units):
        built.extend(name for name, _, _ in units)
        return real(compiler, prelude, units)

    monkeypatch.setattr(b, "compile", counted)
    f = rune.jit(lambda x: nx.exp(x) * 3 - 1)
    x = nx.asarray(np.linspace(-1, 1, 7))
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(np.linspace(-1, 1, 7)) * 3 - 1, rtol=1e-15)
    kernels = f.plan(x).kernels
    assert [k.target for k in kernels] == ["c"]
    # the plan's one stretch was built through the backend's slot (with whatever other
    # tests' stretches were still waiting to be built in this process)
    assert built.count(kernels[0].name.rsplit("_k", 1)[0]) == 1, built


def test_block_until_ready_synchronizes_the_device(monkeypatch):
    b = backend_for(get_device("cpu"))
    seen = []
    monkeypatch.setattr(b, "synchronize", lambda device: seen.append(device))
    x = nx.ones(3)
    assert x.block_until_ready() is x
    assert seen == [x.device]


def test_scalar_reads_are_counted_for_while_and_cond():
    rune.reset_stats()
    out = rune.while_loop(lambda c: c < 10, lambda c: c + 3, nx.array(0))
    assert int(out) == 12
    assert rune.stats()["scalar_reads"] == 5  # the predicate, once per test: 0, 3, 6, 9, 12
    rune.reset_stats()
    assert rune.cond(nx.array(True), lambda: nx.ones(2), lambda: nx.zeros(2)).tolist() == [1.0, 1.0]
    assert rune.stats()["scalar_reads"] == 1


def test_scalar_reads_are_counted_for_while_and_cond_under_jit():
    loop = rune.jit(lambda n: rune.while_loop(lambda c: c < n, lambda c: c + 3, nx.array(0)))
    branch = rune.jit(lambda p, x: rune.cond(p, lambda v: v + 1, lambda v: v - 1, x))
    loop(nx.array(10)), branch(nx.array(True), nx.ones(2))  # traced and planned
    rune.reset_stats()
    assert int(loop(nx.array(10))) == 12
    assert rune.stats()["scalar_reads"] == 5  # one per predicate test, as eagerly
    rune.reset_stats()
    assert branch(nx.array(False), nx.ones(2)).tolist() == [0.0, 0.0]
    assert rune.stats()["scalar_reads"] == 1


def test_dynamic_starts_held_in_arrays_are_counted_reads():
    x = nx.arange(10)
    from rune.core.trace import bind
    rune.reset_stats()
    out = bind(P["dynamic_slice"], x, nx.array(3, dtype=nx.int32), sizes=(2,))
    assert out.tolist() == [3, 4]
    assert rune.stats()["scalar_reads"] == 1
    rune.reset_stats()
    bind(P["dynamic_slice"], x, np.int32(3), sizes=(2,))  # a literal start is not a device read
    assert rune.stats()["scalar_reads"] == 0


def test_transfers_between_host_devices_go_through_copy(monkeypatch):
    from rune.core.devices import transfer
    cpu = get_device("cpu")
    b = backend_for(cpu)
    seen = []
    real = b.copy
    monkeypatch.setattr(b, "copy", lambda raw, src, dst: seen.append((src, dst)) or real(raw, src, dst))
    out = transfer(np.arange(3.0), cpu, cpu)
    assert seen == [(cpu, cpu)] and out.tolist() == [0.0, 1.0, 2.0]


def test_a_failing_backend_op_runs_once_and_reports(monkeypatch):
    # One eager path: the implementation is called once; its failure becomes a
    # rune error naming the operation (it is never swallowed and re-run).
    b = backend_for(get_device("cpu"))
    calls = []

    def broken(*args, **params):
        calls.append(args)
        raise FloatingPointError("boom")

    monkeypatch.setitem(b.IMPLS, "add", broken)
    monkeypatch.setattr(P["add"], "impls", {})
    x = nx.ones(3)
    with pytest.raises(rune.RuneError, match="add.*boom"):
        x + x
    with pytest.raises(rune.RuneError, match="add.*boom"):
        x + 1.0
    assert len(calls) == 2


def test_implementations_are_resolved_per_device():
    x = nx.ones(3)
    x * x
    assert P["mul"].impls[x.device.name] is backend_for(x.device).impls(x.device)["mul"]


def test_remembered_scalar_literals_keep_their_sign_and_dtype():
    x = nx.array([1.0, -2.0])
    for _ in range(3):  # the second and third calls reuse remembered literals
        assert np.signbit(np.asarray(x * -0.0)).tolist() == [True, False]
        assert np.signbit(np.asarray(x * 0.0)).tolist() == [False, True]
        assert (x * 3).dtype == nx.float32 and (nx.arange(2) * 3).tolist() == [0, 3]
        assert (nx.arange(2, dtype=nx.int8) + 100).dtype == nx.int8
