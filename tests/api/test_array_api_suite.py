"""A fast slice of the official Array API conformance suite (data-apis/array-api-tests,
the pinned copy in ../shared/array-api-tests beside the project), run against rune.nx,
complex dtypes included, unpatched. Skipped when that folder, or a package the suite
needs, is absent.

The full measurement is `../shared/array-api-tests/run --module rune.nx`.
"""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]   # the repository
SUITE = ROOT.parent / "shared" / "array-api-tests"
# Files that pass completely, a few examples each.
FILES = ["test_sorting_functions.py", "test_searching_functions.py", "test_set_functions.py",
         "test_constants.py", "test_inspection_functions.py", "test_data_type_functions.py",
         "test_manipulation_functions.py", "test_statistical_functions.py", "test_utility_functions.py",
         "test_indexing_functions.py", "test_dlpack.py", "test_operators_and_elementwise_functions.py",
         "test_linalg.py", "test_fft.py"]

pytestmark = pytest.mark.skipif(not SUITE.is_dir(), reason=f"no conformance suite at {SUITE}")


def _missing_packages():
    return [m for m in ("ndindex", "hypothesis") if importlib.util.find_spec(m) is None]


@pytest.mark.timeout(240)
def test_conformance_slice():
    missing = _missing_packages()
    if missing:
        pytest.skip(f"the conformance suite needs {', '.join(missing)}")
    env = dict(os.environ, ARRAY_API_TESTS_MODULE="rune.nx", ARRAY_API_TESTS_VERSION="2024.12",
               PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(SUITE / "plugins")]))
    args = [sys.executable, "-m", "pytest", *[f"array_api_tests/{f}" for f in FILES], "-p", "no:cacheprovider",
            "-p", "aapi_noshrink", "--max-examples=5", "--disable-deadline", "-q", "--tb=line", "-x"]
    done = subprocess.run(args, cwd=SUITE, env=env, capture_output=True, text=True, timeout=230)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
