"""A third platform, defined entirely here, registered through rune's platform seam
(rune.backends.register_platform): "twin", a second host platform computing with
NumPy whose buffers are `DeviceMemory`, a type of its own wrapping an ndarray.
Code that treated such a buffer as an ndarray or as a CuPy array (indexing it,
NumPy on it, `.get()`, `__cuda_array_interface__`, `.item()`) would fail, so
every test here passing shows rune reaching the platform's memory only through
its Backend and the registry: eager ops of the op table, jit (no compiler: plans
run the stretches op by op through the platform's table), placement and
transfers, the data Loader, callbacks and checkpoints. No file under rune/
names the platform (checked below), and rune outside rune/backends/ imports no
CuPy or CUDA module.
"""
import os
import re
import warnings

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends import backend_for, register_platform, unregister_platform
from rune.backends.base import Backend
from rune.base.stats import COUNTERS

from op_table import TABLE, expected_dtype, is_inexact, widest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "twin"


class DeviceMemory:
    """The twin's buffers: an ndarray held, not shown. Shape and dtype are public (a
    CuPy array has them too); NumPy may not read one (no buffer protocol, `__array__`
    refuses), and it has no methods of an array."""
    __slots__ = ("held",)

    def __init__(self, held):
        assert isinstance(held, np.ndarray), type(held)
        self.held = held

    shape = property(lambda self: self.held.shape)
    dtype = property(lambda self: self.held.dtype)
    ndim = property(lambda self: self.held.ndim)
    size = property(lambda self: self.held.size)
    nbytes = property(lambda self: self.held.nbytes)

    def __array__(self, *args, **kwargs):
        raise TypeError("twin device memory read as a NumPy array: go through the twin backend's to_host")

    def __repr__(self):
        return f"DeviceMemory({self.held.dtype}{list(self.held.shape)})"


class Exported:
    """Twin memory handed out by another library as a DLPack producer (device type
    kDLExtDev, 12): what `nx.from_dlpack` meets."""

    def __init__(self, memory, index):
        self.memory, self.index = memory, index

    def __dlpack_device__(self):
        return (KDL_EXT_DEV, self.index)

    def __dlpack__(self, **kwargs):
        raise TypeError("only the twin backend reads twin memory")


KDL_EXT_DEV = 12


def _held(x):
    """Arguments of the twin's table as the host's table takes them."""
    if isinstance(x, DeviceMemory):
        return x.held
    if isinstance(x, (list, tuple)):
        return type(x)(_held(v) for v in x)
    return x


def _memory(out):
    """A host table's result as twin memory (a list for a multiple result)."""
    if isinstance(out, (list, tuple)):
        return type(out)(_memory(v) for v in out)
    return DeviceMemory(np.asarray(out))


def _lifted(fn):
    def run(*args, **params):
        return _memory(fn(*_held(args), **params))
    return run


class TwinBackend(Backend):
    """Every twin:N device: the host's primitive table lifted onto DeviceMemory; no
    kernel compiler, so jitted stretches run op by op through the table."""
    platform = NAME

    def __init__(self, count=2):
        from rune.backends.cpu.backend import IMPLS as HOST_TABLE   # the host's NumPy functions to lift
        self.count = count
        self.IMPLS = {name: _lifted(fn) for name, fn in HOST_TABLE.items()}
        self.library = {}
        self.uploads = 0

    def to_host(self, raw):
        return raw.held.copy()

    def from_host(self, host, device):
        return DeviceMemory(np.array(host, copy=True))

    def copy(self, raw, src, dst):
        return DeviceMemory(raw.held.copy())

    def holds(self, obj):
        return isinstance(obj, DeviceMemory)

    def from_foreign(self, obj, device):
        if isinstance(obj, Exported):
            return obj.memory   # zero copy, as CuPy takes a CUDA producer's buffer
        return obj if isinstance(obj, DeviceMemory) else self.from_host(np.asarray(obj), device)

    def full(self, shape, value, dtype, device):
        return DeviceMemory(np.full(shape, value, dtype))

    def iota(self, shape, dtype, dimension, device):
        line = np.arange(shape[dimension], dtype=dtype).reshape((-1,) + (1,) * (len(shape) - dimension - 1))
        return DeviceMemory(np.ascontiguousarray(np.broadcast_to(line, shape)))

    def empty(self, aval):
        return DeviceMemory(np.empty((0,) + aval.shape[1:], aval.dtype))

    def stack(self, rows, aval):
        return DeviceMemory(np.stack([r.held for r in rows]))

    def read_scalar(self, raw):
        COUNTERS["scalar_reads"] += 1
        return raw.held.item()

    def device_count(self):
        return self.count

    def uploader(self, device):
        return TwinUploader(self, device)


class TwinUploader:
    """The Loader's asynchronous copies, done at once; counts what it moved."""

    def __init__(self, backend, device):
        self.backend, self.device = backend, device

    def upload(self, hosts):
        self.backend.uploads += len(hosts)
        return [self.backend.from_host(h, self.device) for h in hosts], "ready"

    def wait(self, ready):
        assert ready == "ready"

    def settle(self):
        pass


BACKEND = TwinBackend()


def _register():
    register_platform(NAME, lambda: BACKEND, dlpack=(KDL_EXT_DEV,))


@pytest.fixture(scope="module", autouse=True)
def twin():
    _register()
    yield BACKEND
    unregister_platform(NAME)


def _raw(x):
    return x._raw


# ---------------------------------------------------------------- devices and transfers

def test_the_twin_is_listed_and_its_devices_are_distinct_places():
    assert [d.name for d in rune.devices(NAME)] == ["twin:0", "twin:1"]
    assert rune.devices()[0].name == "cpu:0" and backend_for(rune.devices(NAME)[1]) is BACKEND
    with pytest.raises(rune.DeviceError, match=r"'twin:2' is not available: only 2 twin device\(s\) exist"):
        nx.asarray([1.0], device="twin:2")


def test_a_forgotten_platform_has_no_devices_and_names_are_looked_up_again():
    assert rune.core.devices.get_device("twin:1").platform == NAME   # a name resolved once is remembered
    unregister_platform(NAME)
    try:
        assert rune.devices(NAME) == [] and NAME not in {d.platform for d in rune.devices()}
        with pytest.raises(rune.DeviceError, match=r"unknown device 'twin:1'; expected 'cpu', 'cuda'"):
            nx.asarray([1.0], device="twin:1")
    finally:
        _register()
    assert rune.core.devices.get_device("twin:1").name == "twin:1"


def test_placement_and_transfers_to_and_from_the_host_are_counted():
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    rune.reset_stats()
    x = nx.place(nx.asarray(host), "twin:0")
    assert x.device.name == "twin:0" and isinstance(_raw(x), DeviceMemory)
    y = nx.place(x, "twin:1")                 # within the platform: the backend's own copy
    assert isinstance(_raw(y), DeviceMemory) and _raw(y).held is not _raw(x).held
    back = nx.place(y * 2, "cpu")
    s = rune.stats()
    assert (s["host_to_device"], s["device_to_host"], s["transfers"]) == (1, 1, 3)
    assert s["bytes_moved"] == 3 * host.nbytes
    assert back.device.name == "cpu:0" and isinstance(_raw(back), np.ndarray)
    np.testing.assert_array_equal(np.asarray(back), host * 2)
    np.testing.assert_array_equal(np.asarray(x), host)   # __array__ of a rune Array: through to_host
    assert nx.place(x, "twin:0") is x                    # already there: no copy


def test_from_dlpack_takes_a_producer_of_twin_memory_where_it_lies():
    memory = DeviceMemory(np.arange(5, dtype=np.int32))
    x = nx.from_dlpack(Exported(memory, 1))
    assert x.device.name == "twin:1" and _raw(x) is memory
    np.testing.assert_array_equal(np.asarray(x), np.arange(5))
    on_host = nx.from_dlpack(Exported(memory, 1), device="cpu")
    assert on_host.device.name == "cpu:0" and isinstance(_raw(on_host), np.ndarray)


def test_arrays_are_made_on_the_twin_by_default_device():
    with rune.default_device("twin:1"):
        z = nx.zeros((2, 3), nx.float32) + nx.arange(3, dtype=nx.float32)
        r = nx.random.normal(nx.random.key(3), (4,))
    assert z.device.name == "twin:1" and isinstance(_raw(z), DeviceMemory)
    np.testing.assert_array_equal(np.asarray(z), np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))
    assert r.device.name == "twin:1"
    np.testing.assert_array_equal(np.asarray(r), np.asarray(nx.random.normal(nx.random.key(3), (4,))))


# ---------------------------------------------------------------- the op table, eager

def _sampled_cases():
    """Every seventh case of the op table (a spread over its families), its first sample
    rune gets right (the table's known bugs are the host's too)."""
    out = []
    for case in TABLE[::7]:
        sample = next((s for s in case.samples if not s.bug), None)
        if sample is not None:
            out.append(pytest.param(case, sample, id=f"{case.name}:{sample.id}"))
    return out


def _matches_numpy(case, sample, out, ref):
    ref = np.asarray(ref)
    assert isinstance(out, nx.Array) and out.device.platform == NAME, (type(out), getattr(out, "device", None))
    assert isinstance(_raw(out), DeviceMemory), type(_raw(out))
    want = expected_dtype(case, sample, ref.dtype)
    assert (out.shape, out.dtype) == (ref.shape, want)
    got = np.asarray(out)
    if is_inexact(want) or is_inexact(ref.dtype):
        # the looser of the result's and NumPy's tolerances (tests/nx/test_ops.py's rule)
        tols = [case.tolerance(d) for d in (want, ref.dtype) if is_inexact(d)]
        tol = (max(t[0] for t in tols), max(t[1] for t in tols))
        wide = widest(ref.dtype if ref.dtype.kind == "c" else want)
        np.testing.assert_allclose(got.astype(wide), ref.astype(wide), rtol=tol[0], atol=tol[1], equal_nan=True)
    else:
        np.testing.assert_array_equal(got, ref)


def _on_twin(args):
    return [nx.asarray(a, device="twin:0") if isinstance(a, (np.ndarray, np.generic)) else a for a in args]


@pytest.mark.parametrize("case,sample", _sampled_cases())
def test_a_sample_of_the_op_table_runs_eagerly_on_the_twin_as_numpy_does(case, sample):
    with rune.default_device("twin:0"):
        out = case.fn(*_on_twin(sample.args), **sample.kwargs)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = case.ref(*sample.args, **sample.kwargs)
    for o, r in zip(out, ref) if isinstance(ref, (list, tuple)) else [(out, ref)]:
        _matches_numpy(case, sample, o, r)


# ---------------------------------------------------------------- jit

def test_jit_runs_its_stretches_op_by_op_through_the_twins_table():
    def step(w, x):
        h = nx.tanh(x @ w)
        return (h * h).sum(axis=1) / 2.0, nx.where(h > 0, h, 0.0).max()

    g = np.random.default_rng(0)
    w, x = g.standard_normal((3, 4)).astype(np.float32), g.standard_normal((5, 3)).astype(np.float32)
    jitted = rune.jit(step)
    with rune.default_device("twin:0"):
        a, b = jitted(nx.asarray(w, device="twin:0"), nx.asarray(x, device="twin:0"))
    assert a.device.name == b.device.name == "twin:0" and isinstance(_raw(a), DeviceMemory)
    h = np.tanh(x.astype(np.float64) @ w)
    np.testing.assert_allclose(np.asarray(a), (h * h).sum(axis=1) / 2, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(b), np.where(h > 0, h, 0).max(), rtol=1e-5)


def test_grad_and_a_loop_under_jit_on_the_twin():
    def loss(w):
        return nx.sum(nx.sin(w) * w)

    def count_up(x):
        return rune.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]

    w = np.linspace(-1, 1, 6).astype(np.float64)
    with rune.default_device("twin:0"):
        tw = nx.asarray(w, device="twin:0")
        g = rune.jit(rune.grad(loss))(tw)
        doubled = rune.jit(count_up)(tw)
    assert g.device.name == doubled.device.name == "twin:0"
    np.testing.assert_allclose(np.asarray(g), np.cos(w) * w + np.sin(w), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(doubled), w * 32)


# ---------------------------------------------------------------- the data Loader

def test_the_loader_places_batches_on_the_twin_through_its_uploader():
    from rune.data import Loader
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    y = np.arange(12, dtype=np.int32)
    before = BACKEND.uploads
    batches = list(Loader((x, y), 4, device="twin:1", shuffle=False, shard=None).epoch(0))
    assert len(batches) == 3 and BACKEND.uploads - before == 6
    for k, (bx, by) in enumerate(batches):
        assert bx.device.name == by.device.name == "twin:1" and isinstance(_raw(bx), DeviceMemory)
        np.testing.assert_array_equal(np.asarray(bx), x[4 * k:4 * k + 4])
        np.testing.assert_array_equal(np.asarray(by), y[4 * k:4 * k + 4])


# ---------------------------------------------------------------- callbacks

def test_callbacks_receive_and_return_arrays_on_the_twin():
    seen = []

    def on_device(a):   # host=False: the twin's own arrays, computed on by rune
        seen.append((a.device.name, type(_raw(a))))
        return a * 3.0

    def hands_back_memory(a):   # a result in the twin's memory stays there, no host bounce
        return DeviceMemory(np.asarray(a) + 1.0)

    def on_host(a):     # host=True: NumPy-backed host arrays in, a NumPy array out
        seen.append((a.device.name, type(_raw(a))))
        return np.asarray(a) - 1.0

    x = np.arange(4.0, dtype=np.float32)
    with rune.default_device("twin:0"):
        tx = nx.asarray(x, device="twin:0")
        like = nx.zeros(4, device="twin:0")

        def f(v):
            return (rune.callback(on_device, v, like=like, host=False),
                    rune.callback(hands_back_memory, v, like=like),
                    rune.callback(on_host, v, like=like))
        eager, jitted = f(tx), rune.jit(f)(tx)
    for outs in (eager, jitted):
        for out, want in zip(outs, (x * 3, x + 1, x - 1)):
            assert out.device.name == "twin:0" and isinstance(_raw(out), DeviceMemory)
            np.testing.assert_array_equal(np.asarray(out), want)
    assert seen == [("twin:0", DeviceMemory), ("cpu:0", np.ndarray)] * 2


# ---------------------------------------------------------------- checkpoints

def test_checkpoints_save_from_and_load_onto_the_twin(tmp_path):
    state = {"w": nx.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3), device="twin:1"),
             "step": nx.asarray(np.int32(7), device="twin:1")}
    path = tmp_path / "twin.rune"
    rune.save(path, state)
    back = rune.load(path, like=state, device="twin:1")
    for key in state:
        assert back[key].device.name == "twin:1" and isinstance(_raw(back[key]), DeviceMemory), key
        np.testing.assert_array_equal(np.asarray(back[key]), np.asarray(state[key]))
    with rune.default_device("twin:0"):
        by_default = rune.load(path)
    assert by_default["w"].device.name == "twin:0" and isinstance(_raw(by_default["w"]), DeviceMemory)
    on_host = rune.load(path, device="cpu")
    assert isinstance(_raw(on_host["w"]), np.ndarray)
    np.testing.assert_array_equal(np.asarray(on_host["w"]), np.arange(6.0, dtype=np.float32).reshape(2, 3))


# ---------------------------------------------------------------- nothing in rune names it

def _python_files(under):
    for folder, _, files in os.walk(os.path.join(ROOT, under)):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def test_no_file_under_rune_names_the_twin():
    named = [path for path in _python_files("rune") if re.search(r"\btwin\b", open(path).read(), re.I)]
    assert named == []


# Imports of CuPy or CUDA modules outside rune/backends/ (file, module) that remain, and why.
KNOWN_CUDA_IMPORTS = {}


def test_rune_outside_its_backends_imports_no_cupy_or_cuda_module():
    pattern = re.compile(r"^\s*(?:from\s+(\S*(?:cupy|cuda)\S*)\s+import|import\s+(\S*(?:cupy|cuda)\S*))", re.M)
    found = {}
    for path in _python_files("rune"):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(os.path.join("rune", "backends") + os.sep):
            continue
        for m in pattern.finditer(open(path).read()):
            found[rel] = m.group(1) or m.group(2)
    assert found == KNOWN_CUDA_IMPORTS


# ---------------------------------------------------------------- collectives

_RANKS_SCRIPT = """
import numpy as np, rune, rune.distributed as dist
from rune import nx
from rune.backends import register_platform
import test_third_platform as twin
register_platform("twin", lambda: twin.BACKEND)
rank, size = dist.rank(), dist.size()
x = nx.asarray(np.arange(6, dtype=np.float32).reshape(2, 3) * (rank + 1), device="twin:0")
k = nx.asarray(np.int32(rank + 10), device="twin:0")
total, mean = dist.all_reduce(x, "sum"), dist.all_reduce({"x": x}, "mean")["x"]
sent, gathered = dist.broadcast(k, root=1), dist.all_gather(x, axis=1)
for out in (total, mean, sent, gathered):
    assert out.device.name == "twin:0" and isinstance(out._raw, twin.DeviceMemory), out.device
base = np.arange(6, dtype=np.float32).reshape(2, 3)
factors = np.arange(1, size + 1, dtype=np.float32)
np.testing.assert_array_equal(np.asarray(total), base * factors.sum())
np.testing.assert_allclose(np.asarray(mean), base * factors.mean(), rtol=1e-6)
assert int(sent) == 11
np.testing.assert_array_equal(np.asarray(gathered), np.concatenate([base * f for f in factors], axis=1))
print(f"OK rank {rank} of {size}")
"""


@pytest.mark.mpi
def test_collectives_on_the_twin_go_through_the_hosts_mpi():
    """The twin has no collective library of its own (Backend.communicator is None): two
    ranks reduce, broadcast and gather its arrays through MPI on the host, each result
    back in twin memory."""
    import shutil
    import subprocess
    import sys
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = mpiexec if os.path.exists(mpiexec) else shutil.which("mpiexec")
    here = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MV2_", "HYDRA_"))}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.dirname(here), here, env.get("PYTHONPATH", "")])
    done = subprocess.run([mpiexec, "-n", "2", sys.executable, "-c", _RANKS_SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=90)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert sorted(re.findall(r"OK rank (\d) of (\d)", out)) == [("0", "2"), ("1", "2")], out
