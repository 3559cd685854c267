"""OpenBLAS's parallel work on the kernels' OpenMP pool (rune/backends/cpu/blas_pool.py):
the products stay right (against float64 NumPy), in one thread or several at once,
in a forked child and when OpenMP cannot give the whole team."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from rune import nx, threads
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
from rune import nx, threads
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
if os.environ.get("FORK"):
    pid = os.fork()
    if pid == 0:
        check()   # OpenBLAS's own threads again, restarted after the fork
        os._exit(0 if blas_pool._routed[0] is False and threads._blas_pool == ["openblas"] else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
    check()
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


@needs_callback
@pytest.mark.skipif(not hasattr(os, "fork") or threads.usable_cpus() < 2, reason="needs fork and two CPUs")
def test_a_forked_child_goes_back_to_openblas_own_threads():
    out = _child(FORK="1")
    assert "routed True" in out and "child 0" in out, out
