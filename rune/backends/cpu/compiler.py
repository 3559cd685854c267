"""The host's `Compiler` (rune/backends/base.py): the system C compiler, and
shared libraries loaded with ctypes.

`RUNE_CC` picks the compiler (`none` turns compilation off: stretches then run
on the NumPy backend); by default the first of cc, gcc, clang on PATH. Units go
through rune's one compile pipeline (rune/backends/pipeline.py: the disk cache,
many units to a translation unit, since one compiler run costs ~70-100 ms here
whatever it holds, and batches in parallel). Each unit's entry point is
`<name>_run(void **buffers)`; `build` returns them.

What the compiler writes is checked: no library, or one that does not load or
lacks an entry point, is a CompileError with the compiler's output. A library
is loaded from the disk cache, or, where that folder will not load libraries
(mounted noexec) or is not written, from a private copy. Libraries load through
rune.backends.cpu.threads (which sets how the OpenMP runtime waits), and an entry point with
parallel loops runs on the threads rune.backends.cpu.threads gives it.
"""
import copy
import ctypes
import functools
import hashlib
import os
import re
import shutil
import sys

from ...base.tuning import C_UNITS_PER_RUN
from ...base import config
from . import math_library, threads
from ...errors import CompileError
from .. import disk_cache as cache
from .. import pipeline
from ..base import Binary, Compiler as _Compiler, Program, SourceRejected

# Never -ffast-math: it breaks isnan/isinf and flushes denormals for the whole process.
# sinf and cosf are not builtins: gcc would merge sinf(x) and cosf(x) (a sine and its
# derivative) into one sincosf call, which has no vector variant, and the loop would
# run scalar (15x slower on a grad chain).
# -fno-trapping-math changes no value (only which floating-point flags a kernel may raise)
# and lets gcc turn a float comparison's branches into selects, so loops over rune's math
# library (rune/codegen/c_src/rn_math.h) vectorize.
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math",
         "-ffp-contract=off", "-fno-builtin-sinf", "-fno-builtin-cosf")
LIBS = ("-lmvec", "-lm")
BATCH = C_UNITS_PER_RUN   # units per translation unit when many are built at once


class Compiler(_Compiler):
    """The C compiler at `path`: shared libraries of C units (rune/codegen's C dialect)."""
    platform = "cpu"
    suffix = ".so"
    batch = BATCH

    mode = ctypes.DEFAULT_MODE   # how its libraries load: each keeps its names to itself

    def __init__(self, path):
        self.path = path
        self.name = f"the C compiler ({path})"
        self.version = _version(path)
        self.identity = "\0".join((os.path.realpath(path), self.version, " ".join(FLAGS + LIBS),
                                   _cpu_features(), _platform()))

    def global_scope(self):
        """This compiler, its libraries loaded into the process's global scope: the
        functions they define resolve the names other libraries leave undefined (rune's
        math library, rune/backends/cpu/math_library.py)."""
        scoped = copy.copy(self)
        scoped.mode = os.RTLD_GLOBAL
        scoped.identity = self.identity + "\0global"
        return scoped

    def key(self, source):
        return cache.key(self.identity, source)

    def compile(self, source, names=()):
        """The shared library of `source`, built with FLAGS and LIBS."""
        import subprocess   # compiling is rare next to loading: these imports stay off the warm path
        import tempfile
        with tempfile.TemporaryDirectory(prefix="rune-cc-") as tmp:
            src, lib = os.path.join(tmp, "unit.c"), os.path.join(tmp, "unit.so")
            with open(src, "w") as f:
                f.write(source)
            proc = subprocess.run([self.path, *FLAGS, "-o", lib, src, *LIBS], capture_output=True, text=True)
            if proc.returncode != 0:
                raise SourceRejected(f"{self.name} rejected kernel(s) {', '.join(names)}:\n"
                                     f"{proc.stderr.strip()}\n--- source ---\n{source}", proc.stderr)
            output = "\n".join(s.strip() for s in (proc.stdout, proc.stderr) if s.strip())
            try:
                with open(lib, "rb") as f:
                    return Binary(f.read(), output)
            except OSError as e:
                raise CompileError(f"{self.name} exited 0 for kernel(s) {', '.join(names)}, but wrote no "
                                   f"library {lib} ({e.strerror or e}); its output:\n{output or '(no output)'}") from None

    def load(self, path, data=None):
        """The library at `path` (or of `data`) loaded with ctypes, from a private copy
        where the cache folder will not load libraries."""
        if path is not None:
            try:
                return Library(self._dlopen(lambda: threads.load_kernel_library(path, self.mode), path, data))
            except OSError as e:
                cached_error = e
            if data is None:
                with open(path, "rb") as f:
                    data = f.read()
        lib = Library(self._dlopen(lambda: _open_private(data, self.mode), None, data))
        if path is not None:   # intact (its hash was checked), so the folder is what will not load it
            _warn_noexec(path, cached_error)
        return lib

    def _dlopen(self, opener, path, data):
        """opener()'s library (at `path`, or of `data`); one that calls functions of rune's
        math library that this process has not loaded is opened again once they are (a
        kernel's library leaves them undefined, and the loader looks in the global scope)."""
        try:
            return opener()
        except OSError as e:
            if not math_library.names_in(str(e)):
                raise
        if data is None:
            with open(path, "rb") as f:
                data = f.read()
        math_library.load(self, math_library.needed(data))
        return opener()

    def symbols(self, unit):
        return (unit[0] + "_run",)

    def blame(self, log):
        return {int(n) for n in re.findall(r"unit\.c:(\d+)(?::\d+)?: (?:fatal )?error", log)}


class Library(Program):
    """A loaded shared library of C units; its functions take the unit's pointer array."""

    def __init__(self, lib):
        self.lib = lib

    def has(self, name):
        return hasattr(self.lib, name)

    def function(self, name):
        fn = getattr(self.lib, name)
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = None
        return fn


def find():
    """The compiler `RUNE_CC` names, else the first C compiler on PATH; None for none."""
    return _find(config.c_compiler())


@functools.lru_cache(maxsize=None)
def _find(choice):
    if choice == "none":
        return None
    if choice:
        return Compiler(choice)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return Compiler(path)
    return None


def _version(path):
    """The compiler's `--version` line. Kept in the disk cache under the binary's
    path, size and mtime: a warm process then starts no subprocess at all."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        name = "cc-" + hashlib.sha256(f"{real}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:32]
    except OSError:
        name = None
    known = cache.read_note(name) if name else None
    if known is not None:
        return known.decode()
    import subprocess   # only when the version is not cached: it costs a few ms to import
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        version = out.stdout.splitlines()[0] if out.stdout else out.stderr.strip()
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        raise CompileError(f"cannot run the C compiler {path} (RUNE_CC picks another): "
                           f"{path} --version failed: {e}") from e
    if name and out.returncode == 0:
        cache.write_note(name, version.encode())
    return version


@functools.lru_cache(maxsize=1)
def _platform():
    """The system a library is built for and loaded on: OS, machine, pointer width and
    C library. The Python version is not part of it: units are plain C called through
    ctypes and link nothing of Python's."""
    import platform
    libc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in getattr(os, "confstr_names", {}) else ""
    return f"{sys.platform} {platform.machine()} {ctypes.sizeof(ctypes.c_void_p) * 8}-bit {libc}"


@functools.lru_cache(maxsize=1)
def _cpu_features():
    """What -march=native compiles for: the CPU model and its feature flags."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        import platform
        return platform.machine() + " " + platform.processor()
    lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags"))]
    return hashlib.sha256("\n".join(sorted(set(lines))).encode()).hexdigest()


_MEMFDS = []      # in-memory libraries' files, kept open: a reused /proc/self/fd/N name would
#                   make the dynamic loader hand back the library first loaded under it


def _open_private(data, mode=ctypes.DEFAULT_MODE):
    """Library bytes loaded from a private copy: a temporary file, unlinked once
    mapped, or an in-memory file where the temporary folder will not load
    libraries either (mounted noexec). Raises the loader's OSError."""
    import tempfile
    try:
        fd, path = tempfile.mkstemp(suffix=".so", prefix="rune-")
    except OSError as e:
        error = e
    else:
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return threads.load_kernel_library(path, mode)   # the mapping stays valid after unlinking
        except OSError as e:
            error = e
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
    if not hasattr(os, "memfd_create"):
        raise error
    fd = os.memfd_create("rune-kernel")
    try:
        with open(fd, "wb", closefd=False) as f:
            f.write(data)
        lib = threads.load_kernel_library(f"/proc/self/fd/{fd}", mode)
    except OSError:
        os.close(fd)
        raise error from None   # the first failure says more (a bad library, say)
    _MEMFDS.append(fd)
    return lib


def _warn_noexec(path, error):
    folder = os.path.dirname(path)
    cache.warn_once(("noexec", folder), f"libraries in the kernel cache {folder} do not load ({error}); "
                    "each is loaded from a private copy instead (set RUNE_CACHE_DIR to a folder "
                    "on a filesystem that allows executables)")


def build(compiler, prelude, units):
    """Entry functions for `units` ([(name, source, kernels)]), in order, through the
    compile pipeline. A unit that does not build gets a function raising its
    CompileError when run, so that it fails only the stretch it belongs to."""
    fns = []
    for program, (name, text, _) in zip(pipeline.build(compiler, prelude, units), units):
        if isinstance(program, CompileError):
            fns.append(_failing(program))
            continue
        fn = program.function(name + "_run")
        # a unit with parallel loops runs on the threads rune's policy gives it
        fns.append(threads.parallel_kernel(fn) if "omp parallel" in text else fn)
    return fns


def _failing(error):
    def run(buffers):
        raise error.with_traceback(None)
    return run
