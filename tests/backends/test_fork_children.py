"""A forked child computes right and never hangs (rune/backends/cpu/threads.py, "fork").

GNU libgomp cannot run a parallel region in a child forked after the parent started
its OpenMP threads: the region waits forever for threads that were not copied. The
parent here runs a parallel compiled kernel, or a threaded matmul on the BLAS pool
(OpenBLAS on the kernels' OpenMP threads), then forks: the child's kernel and its
NumPy matmul must finish (a hard deadline: a hang fails the test, it does not stall
the suite) with NumPy's values. Children come from os.fork and from multiprocessing's
"fork" and "forkserver" contexts.
"""
import multiprocessing
import os
import time

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu import threads
from rune.backends.cpu import blas_pool

pytestmark = [pytest.mark.cc,
              pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork"),
              pytest.mark.skipif(threads.usable_cpus() < 2, reason="needs two CPUs for a parallel region")]

DEADLINE = 60   # seconds a child may take: it runs one cached kernel and a few small matmuls

SIZE = 1 << 20   # elements: the C renderer's parallel threshold, so the kernel has a parallel loop
X = np.linspace(-1, 1, SIZE, dtype=np.float32)
A = np.random.default_rng(0).standard_normal((256, 256))   # 256**3 multiply-adds: threaded by OpenBLAS and rune
KERNEL = rune.jit(lambda x: x * 2.5 + 1)


def _work():
    """What a child runs: the parallel kernel, rune's matmul and NumPy's (on the child's BLAS)."""
    return np.asarray(KERNEL(nx.asarray(X))), np.asarray(nx.asarray(A) @ nx.asarray(A)), A @ A


def _check(got):
    kernel, rune_product, numpy_product = got
    np.testing.assert_array_equal(kernel, X * np.float32(2.5) + np.float32(1))
    want = A @ A   # the parent's product: OpenBLAS splits the work alike on any thread count
    np.testing.assert_allclose(rune_product, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(numpy_product, want, rtol=1e-12, atol=1e-12)


@pytest.fixture
def threaded_parent(monkeypatch):
    """This process runs its parallel work on two threads, however busy the machine."""
    monkeypatch.setenv("RUNE_NUM_THREADS", "2")
    monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 8)


def _after_kernels(monkeypatch):
    np.testing.assert_array_equal(np.asarray(KERNEL(nx.asarray(X))), X * np.float32(2.5) + np.float32(1))
    assert threads._openmp_team[0], "the parent's kernel ran on one thread: nothing to test"


def _after_blas(monkeypatch):
    monkeypatch.setattr(threads, "_openmp_team", [False])   # only the BLAS pool's regions count
    np.testing.assert_allclose(np.asarray(nx.asarray(A) @ nx.asarray(A)), A @ A, rtol=1e-12, atol=1e-12)
    if blas_pool.counter("regions") == 0:
        pytest.skip("NumPy's BLAS does not run on rune's pool here: BLAS started no OpenMP team")


PARENTS = {"after kernels": _after_kernels, "after BLAS": _after_blas}


def _child_exit():
    """In an os.fork child: 0 when the work is right, ran on one thread and BLAS is back on
    OpenBLAS's own threads, else 3 (never returns)."""
    try:
        _check(_work())
        one_thread = threads.forked_from_a_team() and threads.parallel_threads() == 1
        own_blas = threads._blas_pool == ["openblas"] and blas_pool._routed[0] in (False, None)
        code = 0 if one_thread and own_blas else 3
    except BaseException:
        code = 4
    os._exit(code)


def _wait(pid):
    """The child's exit code; a child still running at the deadline is killed and fails the test."""
    end = time.monotonic() + DEADLINE
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung for {DEADLINE} s in its first parallel kernel or matmul")
        time.sleep(0.02)


@pytest.mark.parametrize("parent", PARENTS)
def test_an_os_fork_child_computes_on_one_thread_and_finishes(threaded_parent, monkeypatch, parent):
    PARENTS[parent](monkeypatch)
    pid = os.fork()
    if pid == 0:
        _child_exit()
    assert _wait(pid) == 0   # 3: not on one thread, or BLAS still on the pool; 4: a value was wrong
    _check(_work())          # and the parent's threads are as they were


@pytest.mark.parametrize("parent", PARENTS)
def test_a_multiprocessing_fork_worker_computes_and_finishes(threaded_parent, monkeypatch, parent):
    PARENTS[parent](monkeypatch)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        _check(pool.apply_async(_work).get(DEADLINE))   # a hang is a TimeoutError; the pool's exit kills it


def test_a_forkserver_worker_computes_and_finishes(threaded_parent, monkeypatch):
    # the server is a fresh process (rune preloaded, no team started): its children keep their threads
    _after_kernels(monkeypatch)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["rune"])
    with context.Pool(1) as pool:
        _check(pool.apply_async(_work).get(DEADLINE))
