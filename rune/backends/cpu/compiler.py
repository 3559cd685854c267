"""Compiling rendered C units with the system C compiler and loading them with ctypes.

`RUNE_CC` picks the compiler (`none` turns compilation off: stretches then run
on the NumPy backend); by default the first of cc, gcc, clang on PATH. Units
are compiled many to a translation unit (one compiler run costs ~70-100 ms
here, whatever it holds) and, when several batches are needed, in parallel.
Each unit's entry point is `<name>_run(void **buffers)`.

What the compiler writes is checked: no library, or one that does not load or
lacks an entry point, is a CompileError with the compiler's output. A library
is loaded from the disk cache, or, where that folder will not load libraries
(mounted noexec) or is not written, from a private copy. Libraries load through
rune.threads (which sets how the OpenMP runtime waits), and an entry point with
parallel loops runs on the threads rune.threads gives it.
"""
import ctypes
import functools
import hashlib
import os
import shutil
import sys

from ... import config, threads
from ...errors import CompileError
from .. import disk_cache as cache
from ...stats import COUNTERS

# Never -ffast-math: it breaks isnan/isinf and flushes denormals for the whole process.
# sinf and cosf are not builtins: gcc would merge sinf(x) and cosf(x) (a sine and its
# derivative) into one sincosf call, which has no vector variant, and the loop would
# run scalar (15x slower on a grad chain).
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno",
         "-ffp-contract=off", "-fno-builtin-sinf", "-fno-builtin-cosf")
LIBS = ("-lmvec", "-lm")
BATCH = 64        # units per translation unit when many are built at once


class Compiler:
    def __init__(self, path):
        self.path = path
        self.version = _version(path)
        self.identity = "\0".join((os.path.realpath(path), self.version, " ".join(FLAGS + LIBS),
                                   _cpu_features(), _platform()))

    def key(self, text):
        return cache.key(self.identity, text)


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


_LOADED = {}      # key -> entry function, for this process
_LIBS = {}        # library path -> CDLL (kept alive)
_MEMFDS = []      # in-memory libraries' files, kept open: a reused /proc/self/fd/N name would
#                   make the dynamic loader hand back the library first loaded under it


def _entry(lib, symbol):
    fn = getattr(lib, symbol)
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = None
    return fn


def _open(path):
    lib = _LIBS.get(path)
    if lib is None:
        lib = _LIBS[path] = threads.load_kernel_library(path)
    return lib


def _open_private(data):
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
            return threads.load_kernel_library(path)   # the mapping stays valid after unlinking
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
        lib = threads.load_kernel_library(f"/proc/self/fd/{fd}")
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


def _load_hit(path, symbol):
    """The entry function of a cached library (already checked against its hash), or
    None to rebuild it."""
    try:
        return _entry(_open(path), symbol)
    except AttributeError:
        return None
    except OSError as e:   # intact, so the folder is what will not load it
        try:
            with open(path, "rb") as f:
                lib = _open_private(f.read())
            fn = _entry(lib, symbol)
        except (OSError, AttributeError):
            return None
        _LIBS[path] = lib   # one private copy for all the units it holds
        _warn_noexec(path, e)
        return fn


def build(compiler, prelude, units):
    """Entry functions for `units` ([(name, text, kernel names)]), in order.

    Each is looked up in this process, then on disk; the rest are compiled,
    up to BATCH to a translation unit. A unit that does not build gets a
    function raising its CompileError when run, so that it fails only the
    stretch it belongs to, not every stretch compiled with it."""
    keys = [compiler.key(prelude + text) for _, text, _ in units]
    fns = [None] * len(units)
    missing = []
    for i, ((name, text, _), k) in enumerate(zip(units, keys)):
        fn = _LOADED.get(k)
        if fn is None:
            hit = cache.lookup(k)
            if hit is not None:
                fn = _load_hit(*hit)
                if fn is not None:
                    COUNTERS["disk_cache_hits"] += 1
            if fn is not None:
                _LOADED[k] = fn
        if fn is None:
            missing.append(i)
        fns[i] = fn
    seen, todo = set(), []
    for i in missing:
        if keys[i] not in seen:
            seen.add(keys[i])
            todo.append(i)
    batches = [todo[j:j + BATCH] for j in range(0, len(todo), BATCH)]
    failed = {}   # key -> the CompileError message of a unit that did not build
    workers = min(len(batches), threads.num_threads())   # RUNE_NUM_THREADS bounds the compiler processes too
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda b: _compile_batch(compiler, prelude, units, keys, b, failed), batches))
    else:
        for b in batches:
            _compile_batch(compiler, prelude, units, keys, b, failed)
    for i in missing:
        fns[i] = _LOADED.get(keys[i]) or _failing(failed[keys[i]])
    # a unit with parallel loops runs on the threads rune's policy gives it
    return [threads.parallel_kernel(fn) if "omp parallel" in text else fn for fn, (_, text, _) in zip(fns, units)]


def _failing(message):
    def run(buffers):
        raise CompileError(message)
    return run


def _compile_batch(compiler, prelude, units, keys, batch, failed):
    """Build the units `batch` (indices into `units`) into one library and load their
    entry functions into _LOADED; the message of each unit that does not build
    goes to `failed`."""
    import subprocess   # compiling is rare next to loading: these imports stay off the warm path
    import tempfile
    text = prelude + "\n\n".join(units[i][1] for i in batch)
    with tempfile.TemporaryDirectory(prefix="rune-cc-") as tmp:
        src, lib = os.path.join(tmp, "unit.c"), os.path.join(tmp, "unit.so")
        with open(src, "w") as f:
            f.write(text)
        proc = subprocess.run([compiler.path, *FLAGS, "-o", lib, src, *LIBS],
                              capture_output=True, text=True)
        COUNTERS["kernels_compiled"] += 1
        if proc.returncode != 0:
            if len(batch) == 1:
                name, utext, kernels = units[batch[0]]
                failed[keys[batch[0]]] = (
                    f"the C compiler ({compiler.path}) rejected kernel(s) {', '.join(kernels)} "
                    f"of stretch {name}:\n{proc.stderr.strip()}\n--- source ---\n{prelude}{utext}")
                return
            _isolate(compiler, prelude, units, keys, batch, failed, proc.stderr)
            return
        output = "\n".join(s.strip() for s in (proc.stdout, proc.stderr) if s.strip()) or "(no output)"
        what = (f"the C compiler ({compiler.path}) exited 0 for kernel(s) "
                f"{', '.join(k for i in batch for k in units[i][2])}, but")
        try:
            with open(lib, "rb") as f:
                data = f.read()
        except OSError as e:
            for i in batch:
                failed[keys[i]] = f"{what} wrote no library {lib} ({e.strerror or e}); its output:\n{output}"
            return
        try:
            handle, stored = _open_built(data, what, output)
        except CompileError as e:
            for i in batch:
                failed[keys[i]] = str(e)
            return
        for i in batch:
            symbol = units[i][0] + "_run"
            try:
                _LOADED[keys[i]] = _entry(handle, symbol)
            except AttributeError:
                failed[keys[i]] = f"{what} the library it wrote has no function {symbol}; its output:\n{output}"
                continue
            if stored is not None:
                cache.store_entry(keys[i], *stored, symbol)


def _isolate(compiler, prelude, units, keys, batch, failed, stderr):
    """The compiler rejected a batch: build the units its messages point at alone (to
    report each with its own source), then the rest together again. Where no message
    names a line of a unit, units are built alone until one fails; if the first two
    both fail so, the compiler fails whatever it is given (a missing library, say)
    and every unit of the batch gets that message, at the cost of three runs."""
    import re
    first, starts = prelude.count("\n") + 1, []
    for i in batch:
        starts.append(first)
        first += units[i][1].count("\n") + 2   # the unit and the blank line joining it to the next
    lines = {int(n) for n in re.findall(r"unit\.c:(\d+)(?::\d+)?: (?:fatal )?error", stderr)}
    at_fault = {batch[j] for line in lines for j in range(len(batch))
                if starts[j] <= line < (starts[j + 1] if j + 1 < len(batch) else first)}
    if not at_fault:
        for i in batch:
            _compile_batch(compiler, prelude, units, keys, [i], failed)
            if keys[i] in failed:
                at_fault = {i}
                break
        if batch[0] in at_fault:
            _compile_batch(compiler, prelude, units, keys, [batch[1]], failed)
            if keys[batch[1]] in failed:
                for i in batch[2:]:
                    failed[keys[i]] = f"every kernel built with it fails alike; the first:\n{failed[keys[batch[0]]]}"
                return
    for i in at_fault:
        if keys[i] not in failed and keys[i] not in _LOADED:
            _compile_batch(compiler, prelude, units, keys, [i], failed)
    rest = [i for i in batch if keys[i] not in failed and keys[i] not in _LOADED]
    if rest:
        _compile_batch(compiler, prelude, units, keys, rest, failed)


def _open_built(data, what, output):
    """A freshly built library loaded, from the disk cache where it can be: (the
    CDLL, (cache path, sha256) or None when it is not cached)."""
    stored = cache.store_library(data)
    if stored is not None:
        try:
            return _open(stored[0]), stored
        except OSError as e:
            cached_error = e
    try:
        handle = _open_private(data)
    except OSError as e:
        if stored is not None:   # not a library at all: keep it out of the cache
            try:
                os.unlink(stored[0])
            except OSError:
                pass
        raise CompileError(f"{what} the library it wrote ({len(data)} bytes) does not load: {e}; "
                           f"its output:\n{output}") from None
    if stored is not None:   # later processes load it from a private copy as well
        _LIBS[stored[0]] = handle
        _warn_noexec(stored[0], cached_error)
    return handle, stored
