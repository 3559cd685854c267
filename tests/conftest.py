import os
import sys

import pytest

# Tests live in folders by layer; the shared helpers (op_table, oracles, compiled,
# api_support, host_devices, cuda_emu) live at the top of tests/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Compile every stretch, however small (by default tiny stretches run on NumPy,
# which is faster for them), so that the op table and the fuzzer exercise the
# kernel compiler on their small samples.
os.environ.setdefault("RUNE_COMPILE_MIN_SIZE", "0")


def _have_gpu():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _have_cc():
    from rune.backends.cpu import compiler
    return compiler.find() is not None


def _have_nvrtc():
    try:
        from rune.backends.cuda import nvrtc
    except ImportError:   # no CuPy / cuda-bindings
        return False
    return nvrtc.available()


def _have_mpi():
    import importlib.util
    import shutil
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return importlib.util.find_spec("mpi4py") is not None and (os.path.exists(here) or shutil.which("mpiexec"))


# What each marker needs, and the reason a test is skipped without it; a marker
# is checked only when a selected test carries it.
NEEDS = {
    "cuda": (_have_gpu, "needs an NVIDIA GPU with CuPy"),
    "cc": (_have_cc, "needs a C compiler (none found, or RUNE_CC=none)"),
    "nvrtc": (_have_nvrtc, "needs NVRTC and the CUDA headers"),
    "mpi": (_have_mpi, "needs mpi4py and an mpiexec"),
}


# The files that take longest on a cold kernel cache (CPU seconds of the file and of the
# compilers and processes it starts, whole suite on 2 workers, measured 2026-12-06 after
# the per-test compiles were batched), longest first. `bash ci/test` runs each file
# whole on one worker (--dist loadfile) in the order collected (--no-loadscope-reorder):
# these start first and the short files fill in around them, so no long file starts
# last and runs alone (by test count, xdist's own order, a file of a few slow tests
# came near the end). A file not listed follows them, the files with more tests first.
LONGEST_FIRST = (
    "transforms/test_op_jit.py",               # the op table's kernels, compiled in batches (~39 s)
    "nx/test_random_exact.py",                 # the samplers' kernels, each large (~27 s)
    "compiler/test_compiler.py",               # processes compiling and reading the cache
    "transforms/test_compositions.py",         # eager loops compile their bodies as they run
    "codegen/test_cuda_kernels.py",            # NVRTC of the suite's kernels; emulation
    "codegen/test_fuzz_kernels.py",
    "training/test_examples.py",               # the examples' training runs
    "distributed/test_sharding_three_mpi.py",
    "codegen/test_reduction_determinism.py",
    "compiler/test_one_result.py",
    "transforms/test_op_vmap.py",
    "distributed/test_distributed_mpi.py",
    "nx/test_ops.py",
    "codegen/test_codegen.py",
    "nx/test_low_precision.py",
    "api/test_docs.py",
    "backends/test_compile_cache.py",
    "transforms/test_op_grad.py",
)


def _longest_first(items):
    """`items` regrouped file by file: LONGEST_FIRST's files in its order, then the
    others by their number of tests, most first; each file's tests in their order."""
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {f"tests/{name}": k for k, name in enumerate(LONGEST_FIRST)}
    order = sorted(files, key=lambda f: (rank.get(f, len(rank)), -len(files[f])))
    items[:] = [item for f in order for item in files[f]]


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    present = {}
    for item in items:
        for marker, (check, reason) in NEEDS.items():
            if marker in item.keywords:
                if marker not in present:
                    present[marker] = bool(check())
                if not present[marker]:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _clean_stats():
    import rune
    rune.reset_stats()
    yield


def pytest_collection_finish(session):
    # ci/gpu-check compares how many tests were selected with how many reported:
    # a part cut by its time limit then shows its unfinished tests as failed.
    path = os.environ.get("RUNE_SELECTED_COUNT_FILE")
    if path:
        with open(path, "w") as f:
            f.write(str(len(session.items)))
