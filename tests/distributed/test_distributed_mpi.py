"""rune.distributed across real MPI processes: each test launches `mpiexec -n N` on a
worker script (tests/distributed/mpi/) and reads what the ranks print. Skipped without mpi4py
or an `mpiexec` (pip install 'rune[distributed]')."""
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository
WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi")
LAUNCH_VARS = ("PMI_", "OMPI_", "PMIX_", "MV2_", "MPI_LOCAL", "HYDRA_")


def _mpiexec():
    # The mpich wheel puts mpiexec next to the interpreter; prefer it to one on PATH.
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


# Skipped without mpi4py or an mpiexec (conftest checks the need once).
pytestmark = pytest.mark.mpi


def launch(n, script, *args, timeout=60):
    """Run `script` on n ranks; (return code, stdout + stderr). A run that outlives
    `timeout` (a rank left hanging) fails the test with TimeoutExpired."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}  # not nested in a launch
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([_mpiexec(), "-n", str(n), sys.executable, script, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("n", [2, 3])
def test_every_collective_against_numpy(n):
    rc, out = launch(n, os.path.join(WORKERS, "collectives_worker.py"))
    assert rc == 0, out[-4000:]
    assert sorted(re.findall(r"OK rank (\d) of (\d)", out)) == [(str(r), str(n)) for r in range(n)], out


def test_a_raising_rank_ends_every_rank_naming_itself():
    rc, out = launch(3, os.path.join(WORKERS, "failures_worker.py"), "raise", timeout=30)
    assert rc != 0
    assert "ValueError: boom on purpose" in out
    assert "rank 1 of 3 raised ValueError" in out and "aborting all 3 ranks" in out
    assert "done" not in out


@pytest.mark.parametrize("mode", ["raise-before-start", "raise-before-start-busy"])
def test_a_rank_that_raises_before_mpi_starts_ends_the_run(mode):
    # Rank 1 fails before any rune.distributed call; the others wait for it in MPI
    # start-up (or are still busy before it). A hang fails the test by its timeout.
    rc, out = launch(2, os.path.join(WORKERS, "failures_worker.py"), mode, timeout=45)
    assert rc != 0
    assert "ValueError: boom before any collective" in out, out[-3000:]
    assert "rank 1 of 2 raised ValueError" in out and "aborting all 2 ranks" in out, out[-3000:]
    assert "done" not in out


MISMATCHES = {
    "structure": r"all_reduce\(op='sum'\) at collective #2: the ranks passed trees of different structures: "
                 r"rank 0 passed \{'b': \*, 'w': \*\}, rank 1 passed \{'bias': \*, 'w': \*\}",
    "shape": r"all_reduce\(op='sum'\) at collective #2: leaf 0 differs between ranks: rank 0 has "
             r"float32\[3, 2\] \(cpu\), rank 1 has float32\[3, 3\] \(cpu\)",
    "dtype": r"all_gather\(axis=0\) at collective #2: leaf 0 differs between ranks: rank 0 has "
             r"float32\[2\] \(cpu\), rank 1 has int32\[2\] \(cpu\)",
}


@pytest.fixture(scope="module")
def mismatched():
    """One launch for every mismatch: each is an error on every rank before any data moves,
    so the worker catches all but the last (printing each) and the last ends the run."""
    return launch(2, os.path.join(WORKERS, "failures_worker.py"), ",".join(MISMATCHES), timeout=30)


@pytest.mark.parametrize("mode", list(MISMATCHES))
def test_mismatched_layouts_are_an_error_naming_ranks_and_shapes(mismatched, mode):
    rc, out = mismatched
    assert rc != 0
    assert "DistributedError" in out and re.search(MISMATCHES[mode], out), out[-3000:]


def test_a_rank_that_exits_early_is_detected():
    rc, out = launch(3, os.path.join(WORKERS, "failures_worker.py"), "exit", timeout=30)
    assert rc != 0
    assert "rank 1 of 3 exited after 1 collectives" in out and "waits in collective #2" in out, out[-3000:]


def test_a_rank_that_vanishes_ends_the_run():
    # os._exit skips Python's clean-up: the launcher (MPICH's hydra) sees the process
    # vanish and kills the others at once; nobody waits forever.
    _, out = launch(2, os.path.join(WORKERS, "failures_worker.py"), "kill", timeout=30)
    assert "rank 0 done" not in out


def test_data_parallel_digits_keeps_parameters_identical(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    ckpt = str(tmp_path / "digits.safetensors")
    rc, out = launch(2, os.path.join(REPO, "examples", "train_digits.py"), "--epochs", "2", "--limit", "256",
                        "--no-progress", "--checkpoint", ckpt, timeout=120)
    assert rc == 0, out[-4000:]
    assert "2 processes" in out and os.path.exists(ckpt)
    digests = re.findall(r"parameters identical on all 2 ranks: ([0-9a-f]+)", out)
    assert len(digests) == 2, out
    assert float(re.search(r"final test accuracy ([0-9.]+)", out).group(1)) > 0.3, out
