"""CUDA setups that used to fail silently or with a bare error now say what to install:
a driver older than CuPy's wheel, a NumPy too old for CuPy's bfloat16, a missing
libnvrtc. None of this needs a GPU."""
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import rune
from rune.backends.cuda import environment

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_a_cuda_12_driver_with_the_cuda_13_wheel_names_the_cuda_12_wheel():
    line = environment.driver_problem(driver=(12, 4), wheel_major=13)
    assert "CUDA 12.4" in line and "cupy-cuda13x" in line
    assert "pip uninstall cupy-cuda13x; pip install 'rune[cuda12]'" in line
    assert "install cupy-cuda12x" in line


def test_a_driver_as_new_as_the_wheel_or_newer_is_no_problem():
    assert environment.driver_problem(driver=(13, 0), wheel_major=13) is None
    assert environment.driver_problem(driver=(13, 2), wheel_major=12) is None


def test_no_driver_and_an_unsupported_old_driver_say_so():
    assert "no NVIDIA driver" in environment.driver_problem(driver=None, wheel_major=13)
    assert "no CuPy wheel of rune's supports CUDA 11" in environment.driver_problem(driver=(11, 8), wheel_major=13)


@pytest.mark.parametrize("version, unavailable", [
    ("1.26.4", True), ("2.0.2", True), ("2.1.1", True), ("2.1.2", False), ("2.1.3", False),
    ("2.2.0rc1", False), ("2.10.0", False), ("3.0.0.dev0", False)])
def test_numpy_before_2_1_2_makes_bfloat16_unavailable_in_cupy(version, unavailable):
    line = environment.bfloat16_problem(version)
    assert (line is not None) == unavailable
    if unavailable:
        assert f"NumPy {version}" in line and "numpy>=2.1.2" in line


def _no_gpu_here():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() == 0
    except Exception:
        return True


@pytest.mark.skipif(not _no_gpu_here(), reason="checks the error of a machine whose driver CuPy cannot use")
def test_placing_on_cuda_with_a_cuda_12_driver_names_the_wheel_to_install(monkeypatch):
    cupy = pytest.importorskip("cupy")
    monkeypatch.setattr(environment, "cupy_cuda_major", lambda: 13)
    monkeypatch.setattr(cupy.cuda.runtime, "driverGetVersion", lambda: 12040)
    with pytest.raises(rune.DeviceError, match=r"'cuda' is not available: no GPU is visible: the NVIDIA driver "
                                               r"supports CUDA 12\.4.*install cupy-cuda12x"):
        rune.nx.place(rune.nx.asarray(np.ones(2)), "cuda")


def test_the_cuda_backend_refuses_bfloat16_with_the_reason_when_numpy_is_too_old(monkeypatch):
    pytest.importorskip("cupy")
    from rune.backends.cuda import backend
    from rune.core.devices import Device
    old = environment.bfloat16_problem("2.0.2")
    monkeypatch.setattr(backend, "_bfloat16_problem", lambda: old)
    for make in (lambda: backend.BACKEND.from_host(np.zeros(3, BF16), Device("cuda", 0)),
                 lambda: backend.BACKEND.full((3,), 0, BF16, Device("cuda", 0))):
        with pytest.raises(rune.DeviceError, match=r"bfloat16 array on cuda:0: bfloat16 is unavailable in CuPy "
                                                   r"with NumPy 2\.0\.2.*numpy>=2\.1\.2"):
            make()


# cuda-bindings finds libnvrtc through cuda-pathfinder when NVRTC is first called: made
# to fail there (in a fresh process, before anything loaded it), as on a machine without it.
_NO_LIBNVRTC = textwrap.dedent("""
    import warnings
    import cuda.pathfinder as finder

    def not_found(name, *args, **kwargs):
        raise finder.DynamicLibNotFoundError(f"Failure finding lib{name}.so: no such library here")
    finder.load_nvidia_dynamic_lib = not_found

    from rune.backends.cuda import backend
    from rune.codegen.cuda import DeviceProps
    from rune.core.devices import Device
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = backend._nvrtc_compiler("sm_90"), backend._nvrtc_compiler("sm_90")
        stretch = backend.BACKEND.compiled_stretch([], None, Device("cuda", 0), DeviceProps(132, 1024, "sm_90"))
    print(first, second, stretch)
    for w in caught:
        print(w.category.__name__, w.message)
""")


def test_a_missing_libnvrtc_runs_gpu_jit_op_by_op_after_one_warning_naming_it():
    pytest.importorskip("cuda.pathfinder")
    pytest.importorskip("cupy")
    done = subprocess.run([sys.executable, "-c", _NO_LIBNVRTC], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, RUNE_CUDA_COMPILE="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "None None None"                      # no compiler: stretches stay op by op
    warned = [ln for ln in lines[1:] if ln.startswith("RuneWarning")]
    assert len(warned) == 1, lines
    assert "DynamicLibNotFoundError" in warned[0] and "libnvrtc.so" in warned[0] and "op by op" in warned[0]
