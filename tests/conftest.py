import os
import sys

import pytest

# Tests live in folders by layer; the shared helpers (op_table, oracles, compiled,
# api_support, cuda_emu) live at the top of tests/.
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


def pytest_collection_modifyitems(config, items):
    if _have_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


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
