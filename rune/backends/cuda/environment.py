"""What in this machine's CUDA setup keeps rune's CUDA backend from working, in one
line each, naming what to install.

- A driver older than the CUDA major CuPy's wheel is built for: CuPy then sees
  no GPU at all (cudaErrorInsufficientDriver). The line names the wheel that
  matches the driver (`cupy-cuda12x` for a CUDA 12 driver: `pip install 'rune[cuda12]'`).
- NumPy older than 2.1.2: CuPy refuses ml_dtypes' bfloat16, so no bfloat16
  array can live on a GPU.

`problems()` lists them (empty: nothing found); ci/gpu-check's probe prints them
(`python -m rune.backends.cuda.environment`), and rune's "no GPU is visible"
error and the CUDA backend's bfloat16 upload error carry them. Nothing here
needs a GPU: the driver's version is read from CuPy's runtime module, or from
cuda-bindings where CuPy is missing.
"""
import importlib.metadata
import sys

# The CuPy wheel built for each CUDA major, and the rune extra that installs it with
# NVRTC and the CUDA headers of that major.
CUPY_WHEELS = {12: ("cupy-cuda12x", "rune[cuda12]"), 13: ("cupy-cuda13x", "rune[cuda]")}
BFLOAT16_NUMPY = (2, 1, 2)   # CuPy's first NumPy with bfloat16 support (cupy/_core/_scalar.pyx)


def _split(version):
    """A CUDA version integer (12040) as (12, 4); None for 0 (no driver) or None."""
    return (version // 1000, version % 1000 // 10) if version else None


def driver_version():
    """(major, minor) of the CUDA version the installed NVIDIA driver supports, or None
    without a driver: CuPy's cudaDriverGetVersion, else cuda-bindings' cuDriverGetVersion."""
    try:
        import cupy
        return _split(cupy.cuda.runtime.driverGetVersion())
    except ImportError:
        pass
    except Exception:  # a CuPy that cannot load its runtime: ask the driver API instead
        pass
    try:
        from cuda.bindings import driver
        err, version = driver.cuDriverGetVersion()
        return _split(version) if int(err) == 0 else None
    except Exception:  # no cuda-bindings or no libcuda: no driver that we can see
        return None


def cupy_cuda_major():
    """The CUDA major the installed CuPy wheel is built for (None: no CuPy wheel found)."""
    for major, (wheel, _) in CUPY_WHEELS.items():
        try:
            importlib.metadata.version(wheel)
            return major
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        import cupy
        return cupy.cuda.runtime.runtimeGetVersion() // 1000
    except Exception:  # no CuPy, or one built from source without its runtime here
        return None


def driver_problem(driver=None, wheel_major=None):
    """One line when the driver cannot run the installed CuPy wheel (else None); the
    versions default to this machine's."""
    driver = driver_version() if driver is None else driver
    wheel_major = cupy_cuda_major() if wheel_major is None else wheel_major
    if wheel_major is None:
        return None
    wheel = CUPY_WHEELS.get(wheel_major, (f"cupy-cuda{wheel_major}x", None))[0]
    if not driver:
        return f"no NVIDIA driver is loaded here (the driver reports no CUDA version); {wheel} needs one"
    if driver[0] >= wheel_major:
        return None
    fix = CUPY_WHEELS.get(driver[0])
    install = (f"install {fix[0]} instead (pip uninstall {wheel}; pip install '{fix[1]}')" if fix else
               f"no CuPy wheel of rune's supports CUDA {driver[0]}")
    return (f"the NVIDIA driver supports CUDA {driver[0]}.{driver[1]}, older than the CUDA {wheel_major} "
            f"that {wheel} is built for, so CuPy sees no GPU: {install}, or update the driver")


def bfloat16_problem(numpy_version=None):
    """One line when CuPy cannot hold bfloat16 arrays with this NumPy (else None)."""
    if numpy_version is None:
        import numpy
        numpy_version = numpy.__version__
    parts = []
    for piece in numpy_version.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits or 0))
    if tuple(parts) >= BFLOAT16_NUMPY:
        return None
    need = ".".join(map(str, BFLOAT16_NUMPY))
    return (f"bfloat16 is unavailable in CuPy with NumPy {numpy_version}: CuPy takes ml_dtypes' bfloat16 "
            f"only from NumPy {need} on; pip install 'numpy>={need}'")


def problems():
    """Every line above that applies here."""
    return [p for p in (driver_problem(), bfloat16_problem()) if p]


def main():
    found = problems()
    for line in found:
        print(f"CUDA environment: {line}")
    if not found:
        driver, major = driver_version(), cupy_cuda_major()
        print(f"CUDA environment: driver CUDA {'.'.join(map(str, driver)) if driver else '-'}, "
              f"CuPy wheel CUDA {major}, NumPy bfloat16 ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
