"""Processes compiling the same kernels at once compile each batch once
(rune/backends/disk_cache.py `compiling`): the first takes the batch's lock in
the cache folder, the others wait for it and load what it built. A process that
dies holding a lock, or is stuck holding it, stops nobody; without fcntl each
process just compiles. Real processes, real compilers (C; CUDA C through NVRTC
where it is installed, no GPU needed)."""
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from rune.backends import disk_cache
from test_compile_cache import (ROOT, X, _SECOND_PROCESS, _forget_loaded, _fresh_process_state,  # noqa: F401
                                _run, _rune_warnings, second_process_oracle)

pytestmark = pytest.mark.cc


def _have_nvrtc():
    try:
        from rune.backends.cuda import nvrtc
    except ImportError:
        return False
    return nvrtc.available()


def _env(**more):
    # RUNE_BLAS_POOL=0: no BLAS pool unit built at import, so each process compiles only its program's units
    return dict(os.environ, RUNE_CACHE="1", RUNE_COMPILE_MIN_SIZE="0", RUNE_BLAS_POOL="0", **more)


def test_three_processes_building_one_program_at_once_compile_each_unit_once(tmp_path):
    """Three processes plan the same two functions (for the CPU, and for CUDA where NVRTC
    is installed), meet at a barrier, then compile one unit per compiler run: each unit
    is compiled by one of them, the others load it from the cache."""
    platforms = "c,cuda" if _have_nvrtc() else "c"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = _env(RUNE_CACHE_DIR=str(tmp_path / "shared"))
    procs = [subprocess.Popen([sys.executable, "-c", _SECOND_PROCESS, platforms, str(barrier), "3"], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    runs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        runs.append(json.loads(out.strip().splitlines()[-1]))
    units = runs[0]["built"]
    assert units == 2 * len(platforms.split(",")) and all(r["done"] == units for r in runs)
    # one process alone compiles each unit once (a run per unit): so do the three together
    assert sum(r["stats"]["kernels_compiled"] for r in runs) == units, [r["stats"] for r in runs]
    for r in runs:   # each unit either compiled here or loaded from the cache
        assert r["stats"]["kernels_compiled"] + r["stats"]["disk_cache_hits"] == units, r["stats"]
        for got, want in zip(r["ys"], second_process_oracle()):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert r["functions"]   # the CUDA Programs define every kernel launched
    assert not list((tmp_path / "shared" / "kernels").glob(".lock-*"))   # each lock removed by its holder


# The process holding the lock: its compiler run of kernel `_kernel(argv[2])` never ends.
_HOLDER = """
import sys, time, numpy as np, rune
from rune import nx
from rune.backends.cpu import compiler

def stuck(self, source, names=()):
    open(sys.argv[1], "w").close()   # the batch's lock is held now
    time.sleep(600)

compiler.Compiler.compile = stuck
c = float(sys.argv[2])
rune.jit(lambda x: x * c + 0.5)(nx.asarray(np.linspace(-2, 2, 7, dtype=np.float32)))
"""


@contextlib.contextmanager
def _holder(tmp_path, c):
    """A process compiling `_kernel(c)` in this test's cache, stuck holding the batch's lock;
    killed (SIGKILL) at the end of the block unless it was already."""
    flag = tmp_path / "holding"
    assert np.array_equal(X, np.linspace(-2, 2, 7, dtype=np.float32))   # _HOLDER's input
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(flag), repr(c)], cwd=ROOT, env=_env(),
                            stderr=subprocess.PIPE, text=True)
    try:
        while not flag.exists():   # (a holder that never gets there fails on the test's time limit)
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        yield proc
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


def test_a_process_killed_holding_a_batchs_lock_does_not_stop_another_compiling_it(monkeypatch, tmp_path):
    """This process waits for the holder; the holder is killed (SIGKILL); the operating
    system frees its lock and this process compiles the kernel itself."""
    waiting = threading.Event()
    pause = disk_cache._pause
    monkeypatch.setattr(disk_cache, "_pause", lambda s: (waiting.set(), pause(s)))
    with _holder(tmp_path, 2.375) as holder, concurrent.futures.ThreadPoolExecutor(1) as pool:
        counts = pool.submit(_run, 2.375)
        while not waiting.wait(0.01):
            assert not counts.done(), f"compiled without waiting for the lock's holder: {counts.result()}"
        holder.kill()
        assert counts.result() == (1, 0)   # (kernels compiled, disk hits): checked against NumPy
    assert not list((tmp_path / "cache" / "kernels").glob(".lock-*"))


def test_a_stuck_holder_is_waited_for_a_while_and_without_fcntl_not_at_all(monkeypatch, tmp_path):
    """A holder that never finishes: after WAIT_SECONDS this process warns and compiles the
    kernel itself. Without fcntl (Windows) there is no lock: it compiles at once."""
    monkeypatch.setattr(disk_cache, "WAIT_SECONDS", 0.25)
    with _holder(tmp_path, 2.625):
        with _rune_warnings() as caught:
            assert _run(2.625) == (1, 0)
        assert len(caught) == 1, [str(w.message) for w in caught]
        assert "waited 0.25 s for another process compiling the same kernels" in str(caught[0].message)
        _forget_loaded(monkeypatch)
        for entry in (tmp_path / "cache" / "kernels").glob("*.json"):
            entry.unlink()
        monkeypatch.setattr(disk_cache, "WAIT_SECONDS", 600.0)   # would fail the test's time limit
        monkeypatch.setattr(disk_cache, "fcntl", None)
        with _rune_warnings() as caught:
            assert _run(2.625) == (1, 0)
        assert caught == []
