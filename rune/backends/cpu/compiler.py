"""Compiling rendered C units with the system C compiler and loading them with ctypes.

`RUNE_CC` picks the compiler (`none` turns compilation off: stretches then run
on the NumPy backend); by default the first of cc, gcc, clang on PATH. Units
are compiled many to a translation unit (one compiler run costs ~70-100 ms
here, whatever it holds) and, when several batches are needed, in parallel.
Each unit's entry point is `<name>_run(void **buffers)`.
"""
import ctypes
import functools
import hashlib
import os
import shutil

from ...errors import RuneError
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


class CompileError(RuneError):
    pass


class Compiler:
    def __init__(self, path):
        self.path = path
        self.version = _version(path)
        self.identity = "\0".join((os.path.realpath(path), self.version, " ".join(FLAGS + LIBS),
                                   _cpu_features()))

    def key(self, text):
        return cache.key(self.identity, text)


def find():
    """The compiler `RUNE_CC` names, else the first C compiler on PATH; None for none."""
    choice = os.environ.get("RUNE_CC", "")
    return _find(choice)


@functools.lru_cache(maxsize=None)
def _find(choice):
    if choice.lower() == "none":
        return None
    if choice:
        path = shutil.which(choice) or (choice if os.path.exists(choice) else None)
        if path is None:
            raise RuneError(f"RUNE_CC={choice!r}: no such compiler")
        return Compiler(path)
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
        raise RuneError(f"RUNE_CC: cannot run {path} --version: {e}") from e
    if name and out.returncode == 0:
        cache.write_note(name, version.encode())
    return version


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


def _load(path, symbol):
    lib = _LIBS.get(path)
    if lib is None:
        lib = _LIBS[path] = ctypes.CDLL(path)
    fn = getattr(lib, symbol)
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = None
    return fn


def build(compiler, prelude, units):
    """Entry functions for `units` ([(name, text, kernel names)]), in order.

    Each is looked up in this process, then on disk; the rest are compiled,
    up to BATCH to a translation unit."""
    keys = [compiler.key(prelude + text) for _, text, _ in units]
    fns = [None] * len(units)
    missing = []
    for i, ((name, text, _), k) in enumerate(zip(units, keys)):
        fn = _LOADED.get(k)
        if fn is None:
            hit = cache.lookup(k)
            if hit is not None:
                try:
                    fn = _load(hit[0], hit[1])
                    COUNTERS["disk_cache_hits"] += 1
                except (OSError, AttributeError):
                    fn = None   # a damaged library: rebuild it
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
    workers = min(len(batches), os.cpu_count() or 1)
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda b: _compile_batch(compiler, prelude, units, keys, b), batches))
    else:
        for b in batches:
            _compile_batch(compiler, prelude, units, keys, b)
    for i in missing:
        fns[i] = _LOADED[keys[i]]
    return fns


def _compile_batch(compiler, prelude, units, keys, batch):
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
            if len(batch) > 1:  # find the unit at fault, to report it alone
                for i in batch:
                    _compile_batch(compiler, prelude, units, keys, [i])
            name, utext, kernels = units[batch[0]]
            raise CompileError(
                f"the C compiler ({compiler.path}) rejected kernel(s) {', '.join(kernels)} "
                f"of stretch {name}:\n{proc.stderr.strip()}\n--- source ---\n{prelude}{utext}")
        with open(lib, "rb") as f:
            data = f.read()
        stored = cache.store_library(data)
        if stored is None:  # no disk cache: load from a private copy that outlives tmp
            fd, path = tempfile.mkstemp(suffix=".so", prefix="rune-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            digest = None
        else:
            path, digest = stored
        for i in batch:
            symbol = units[i][0] + "_run"
            _LOADED[keys[i]] = _load(path, symbol)
            if digest is not None:
                cache.store_entry(keys[i], path, digest, symbol)
        if stored is None:
            os.unlink(path)  # the loaded mapping stays valid after unlinking
