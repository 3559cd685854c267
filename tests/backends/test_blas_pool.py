"""OpenBLAS's parallel work on the kernels' OpenMP pool (rune/backends/cpu/blas_pool.py):
the products stay right (against float64 NumPy), in one thread or several at once
and when OpenMP cannot give the whole team; one parallel BLAS call at a time runs in
the pool; it is installed while rune is imported, and RUNE_BLAS_POOL=0 leaves NumPy's
BLAS as it was. (A forked child: tests/backends/test_fork_children.py.)"""
import ctypes
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rune
from rune.base import config
from rune import nx
from rune.backends.cpu import threads
from rune.backends.cpu import blas_pool, compiler

pytestmark = pytest.mark.cc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _routable():
    blas = threads.openblas()
    return blas is not None and blas.set_callback is not None


needs_callback = pytest.mark.skipif(not _routable(), reason="NumPy's BLAS is not an OpenBLAS with a threads callback")


def _check(a, b):
    """a @ b through rune, against the float64 product."""
    got = np.asarray(nx.asarray(a) @ nx.asarray(b))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setenv("RUNE_NUM_THREADS", "2")
    monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 8)


@needs_callback
def test_a_threaded_matmul_routes_blas_onto_the_kernels_pool_and_stays_exact(two_threads):
    rng = np.random.default_rng(0)
    for m, k, n in ((2048, 64, 64), (512, 512, 512), (3000, 17, 129), (64, 4096, 64)):
        _check(rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32))
    assert blas_pool.route(compiler.find()) is True
    assert threads._blas_pool == ["openmp"]
    # NumPy's own BLAS calls run there too now: matrix-vector, LAPACK, float64
    x = rng.standard_normal((1500, 1500))
    np.testing.assert_allclose(x @ np.ones(1500), x.sum(axis=1), rtol=1e-10)
    np.testing.assert_allclose(np.linalg.solve(x, x @ np.ones(1500)), np.ones(1500), rtol=1e-6)


@needs_callback
def test_threaded_matmuls_from_several_python_threads_at_once_stay_exact(two_threads):
    rng = np.random.default_rng(1)
    pairs = [(rng.standard_normal((1024, 256)).astype(np.float32), rng.standard_normal((256, 128)).astype(np.float32))
             for _ in range(4)]
    errors = []

    def work(a, b):
        try:
            for _ in range(5):
                _check(a, b)
        except Exception as e:   # reported below: an assertion in a thread would be lost
            errors.append(e)
    workers = [threading.Thread(target=work, args=p) for p in pairs]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not any(w.is_alive() for w in workers), "a BLAS call on the pool hung"
    assert errors == []


_CHILD = r"""
import os, numpy as np
from rune import nx
from rune.base import config
from rune.backends.cpu import threads
from rune.backends.cpu import blas_pool
threads.free_cpus = lambda pool=None: 8   # a busy machine would leave the call on one thread
rng = np.random.default_rng(2)
a, b = rng.standard_normal((2048, 256)).astype(np.float32), rng.standard_normal((256, 128)).astype(np.float32)
want = a.astype(np.float64) @ b
def check():
    got = np.asarray(nx.asarray(a) @ nx.asarray(b))
    assert np.allclose(got, want, rtol=2e-5, atol=1e-3), np.abs(got - want).max()
check()
print("routed", blas_pool._routed[0])
"""


def _child(**env):
    full = dict(os.environ, RUNE_NUM_THREADS="2", PYTHONPATH=ROOT, **env)
    proc = subprocess.run([sys.executable, "-c", _CHILD], env=full, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@needs_callback
@pytest.mark.skipif(threads.usable_cpus() < 2, reason="needs two CPUs for a threaded call")
def test_when_openmp_cannot_give_the_whole_team_the_jobs_run_on_threads_of_their_own():
    # OMP_THREAD_LIMIT=1: every team is one thread, and OpenBLAS's jobs wait on one another
    assert "routed True" in _child(OMP_THREAD_LIMIT="1")


# ---------------------------------------------------------------- one call at a time

_JOB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)


@needs_callback
def test_one_parallel_blas_call_at_a_time_is_inside_the_pool():
    """OpenBLAS's per-thread buffers are shared by every call the pool runs, so its
    mutex lets one in at a time (without it, two threads' matmuls overwrote a third of
    each other's elements). Two Python threads call the pool; the first call's job
    waits, after the second thread has called, until the pool counts two calls inside
    or a fifth of a second has passed: with the mutex the second stays outside, without
    it both are inside at once, whatever the timing."""
    assert blas_pool.route(compiler.find()) is True
    pool = blas_pool._unit[0].rune_blas_pool
    pool.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int]
    pool.restype = None
    second_called, seen = threading.Event(), []

    def job(thread, data, arg):
        if not seen:   # the first call in
            seen.append(None)
            second_called.wait(30)
            end = time.monotonic() + 0.2
            while blas_pool.counter("inside") < 2 and time.monotonic() < end:
                time.sleep(0.002)
        seen.append(blas_pool.counter("inside"))
    callback = _JOB(job)   # kept alive until both calls are done

    def call(announce):
        if announce:
            second_called.set()
        pool(1, ctypes.cast(callback, ctypes.c_void_p), 1, 8, None, 0)
    first = threading.Thread(target=call, args=(False,))
    first.start()
    while not seen:   # the first call's job runs
        time.sleep(0.002)
    second = threading.Thread(target=call, args=(True,))
    second.start()
    first.join(30)
    second.join(30)
    assert seen[1:] == [1, 1], f"calls inside the pool at once, as each job saw them: {seen[1:]}"
    assert blas_pool.counter("most_inside") == 1 and blas_pool.counter("inside") == 0


# ---------------------------------------------------------------- installed at import; RUNE_BLAS_POOL

_NUMPY_PRODUCT = r"""
import hashlib, sys, numpy as np
if sys.argv[1] == "rune":
    import rune
    from rune.backends.cpu import blas_pool
    routed, regions = blas_pool._routed[0] is True, blas_pool.counter("regions")
else:
    routed = regions = None
a = np.random.default_rng(3).standard_normal((384, 384))
print(routed, hashlib.sha256((a @ a).tobytes()).hexdigest(),
      None if regions is None else blas_pool.counter("regions") > regions)
"""


def _numpy_product(*args, **env):
    """(routed right after `import rune`, the hash of a threaded NumPy matmul, whether it ran
    on the pool) in a new process."""
    full = dict(os.environ, PYTHONPATH=ROOT, **env)
    proc = subprocess.run([sys.executable, "-c", _NUMPY_PRODUCT, *args], env=full, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@needs_callback
@pytest.mark.skipif(threads.usable_cpus() < 2, reason="needs two CPUs for a threaded call")
def test_the_pool_is_installed_at_import_and_leaves_numpy_products_bit_identical():
    # OpenBLAS's setter "should be called before any other openblas function": right after
    # `import rune` it is installed, before any BLAS work of rune's or the program's
    alone = _numpy_product("numpy")[1]
    routed, product, on_pool = _numpy_product("rune")
    assert (routed, on_pool) == ("True", "True") and product == alone
    routed, product, on_pool = _numpy_product("rune", RUNE_BLAS_POOL="0")
    assert (routed, on_pool) == ("False", "False") and product == alone


def test_rune_blas_pool_is_a_flag(monkeypatch):
    for value, want in (("0", False), ("off", False), ("1", True), ("", True)):
        monkeypatch.setenv("RUNE_BLAS_POOL", value)
        assert config.blas_pool() is want
    monkeypatch.setenv("RUNE_BLAS_POOL", "sometimes")
    with pytest.raises(rune.ArgumentError, match="RUNE_BLAS_POOL must be 0 or 1 .*got 'sometimes'"):
        config.blas_pool()
