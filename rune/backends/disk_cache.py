"""The on-disk kernel cache: one for every platform (rune/backends/pipeline.py
writes and reads it for C shared libraries and CUDA cubins alike).

Under `$RUNE_CACHE_DIR` (default `~/.cache/rune`), `kernels/` holds compiled
artifacts (`lib-<hash>.so`, `lib-<hash>.cubin`) named by the hash of their bytes
and one small JSON entry per unit key (`<key>.json`: the artifact's name, its
sha256 and a function it defines), so many keys can share one artifact built
from a batched source. A key (`key`, through each platform's `Compiler.key`)
covers the source, the compiler and its version, the flags, the CPU features or
GPU architecture and rune's calling convention (`ABI_VERSION`). Every write is
a temporary file renamed into place, so two processes compiling the same key
at once both succeed and a reader never sees half a file; an entry that is
unreadable, or whose library is missing or does not hash to what it says, is
a miss, and is replaced when its kernel is rebuilt. `RUNE_CACHE=0` reads and
writes nothing.

Processes compiling the same batch of units at once (the ranks of an MPI job on
one machine, test workers) compile it once: `compiling(keys)` holds an advisory
lock (`flock`) on `.lock-<hash of the keys>` in the kernels folder while one
process compiles; another that finds it held waits for it (at most
`WAIT_SECONDS`, then compiles itself, warning once) and then looks the batch up
here, compiling only what is still missing (the first process failed, or died).
Without a usable folder (off, unwritable) or without `fcntl` (Windows) there is
no lock and each process just compiles.

The cache only ever saves time: a folder that cannot be written (no home
folder, read-only, a file in the way, a full disk) gives one RuneWarning and
the kernels built meanwhile live in this process only.
"""
import contextlib
import hashlib
import json
import os
import time
import warnings

try:
    import fcntl
except ImportError:   # Windows: no advisory locks; processes just compile
    fcntl = None

from ..base import config
from ..errors import RuneWarning

ABI_VERSION = "rune-kernels-1"  # bump when the calling convention of compiled units changes

_WARNED = set()   # the topics already warned about in this process
# How long a process waits for another compiling the same batch before compiling it itself:
# a compiler run takes seconds at most, so this is reached only by a holder that is stuck
# (stopped in a debugger, say); a holder that dies frees its lock at once.
WAIT_SECONDS = 120.0


def enabled():
    return config.cache_enabled()


def directory():
    """The kernels folder; None when the cache is off or there is no home folder for it."""
    if not enabled():
        return None
    root = config.cache_root()
    if root is None:
        warn_unusable(None, "there is no home folder for the default ~/.cache/rune")
        return None
    return os.path.join(root, "kernels")


def warn_unusable(folder, why):
    """Say once per folder that kernels are not written there, and why."""
    where = "no kernel cache is used" if folder is None else f"the kernel cache in {folder} is not written"
    warn_once(("unwritable", folder), f"{where}: {why}; kernels compiled now are kept in this process "
              "only (set RUNE_CACHE_DIR to a writable folder, or RUNE_CACHE=0 to build without a disk cache)")


def warn_once(topic, message):
    """A RuneWarning, given once per process for each `topic`."""
    if topic in _WARNED:
        return
    _WARNED.add(topic)
    warnings.warn(message, RuneWarning, stacklevel=3)


def key(*parts):
    h = hashlib.sha256(ABI_VERSION.encode())
    for p in parts:
        h.update(b"\0" + p.encode())
    return h.hexdigest()


def lookup(k):
    """(artifact path, symbol) for key `k`, or None on a miss (also for a damaged entry)."""
    d = directory()
    if d is None:
        return None
    try:
        with open(os.path.join(d, k + ".json")) as f:
            entry = json.load(f)
        lib, digest, symbol = entry["lib"], entry["sha256"], entry["symbol"]
        if not all(isinstance(s, str) for s in (lib, digest, symbol)) or os.path.basename(lib) != lib:
            return None
        path = os.path.join(d, lib)
        with open(path, "rb") as f:
            data = f.read()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if hashlib.sha256(data).hexdigest() != digest:
        return None
    return path, symbol


def read_note(name):
    """The bytes of a small note kept beside the kernels (None when absent or off)."""
    d = directory()
    if d is None:
        return None
    try:
        with open(os.path.join(d, name)) as f:
            return f.read().encode()
    except (OSError, ValueError):
        return None


def write_note(name, data):
    """Keep a small note (e.g. a compiler's version line) for later processes."""
    _write(name, data)


def store_library(data, suffix=".so"):
    """Put a compiled library's bytes (a shared library, or a GPU's `.cubin`) in the
    cache: (its path, its sha256), or None when the cache is off or cannot be written."""
    digest = hashlib.sha256(data).hexdigest()
    # Also replaces a damaged file of that name (a mapped one lives on).
    path = _write(f"lib-{digest[:32]}{suffix}", data)
    return None if path is None else (path, digest)


def store_entry(k, lib_path, digest, symbol):
    entry = json.dumps({"lib": os.path.basename(lib_path), "sha256": digest, "symbol": symbol})
    _write(k + ".json", entry.encode())


def _write(name, data):
    """Write `name` in the kernels folder; its path, or None (off, or warned once: unwritable)."""
    d = directory()
    if d is None:
        return None
    path = os.path.join(d, name)
    try:
        os.makedirs(d, exist_ok=True)
        _atomic_write(path, data)
    except OSError as e:
        warn_unusable(d, f"writing {name} there failed ({e.strerror or e})")
        return None
    return path


def _atomic_write(path, data):
    import tempfile   # only writers pay for it
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            os.replace(tmp, path)
        except IsADirectoryError:   # a damaged cache: a folder where a file belongs
            import shutil
            shutil.rmtree(path)
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def compiling(keys):
    """Hold the lock of the batch of units `keys` for the block (which compiles them and
    writes them here). Where another process holds it, wait until it lets go (it finished,
    failed or died) or WAIT_SECONDS pass; the block then runs either way, and should look
    the units up again first. No lock (the block just runs) where the cache is off or its
    folder cannot be written, or on platforms without fcntl."""
    d = directory()
    if d is None or fcntl is None:
        yield
        return
    path = os.path.join(d, ".lock-" + key(*sorted(map(str, keys)))[:32])
    # A process that dies holding the lock (killed mid-compile) keeps nobody waiting: the
    # operating system releases a flock when the last descriptor of its file closes, which
    # the process's exit does; its file stays, and the next process takes its lock.
    fd = _lock(path)
    try:
        yield
    finally:
        if fd is not None:
            # Removed while held, so the name never outlives its use; a waiter that then
            # gets the old file's lock sees that the name is gone and looks up the cache.
            try:
                os.unlink(path)
            except OSError:
                pass
            os.close(fd)


def _lock(path):
    """A descriptor holding the flock of `path`; None where it cannot be taken (no lock:
    compile anyway) or where WAIT_SECONDS passed while another process held it."""
    deadline, pause = time.monotonic() + WAIT_SECONDS, 0.002
    while time.monotonic() <= deadline:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError:   # read-only, full, a file in the way: _write warns when it tries
            return None
        try:
            fd = _wait(fd, path, deadline, pause)
        except OSError:   # a file system without flock
            os.close(fd)
            return None
        if fd is not None:
            return fd
    warn_once(("wait", path), f"waited {WAIT_SECONDS:g} s for another process compiling the same kernels "
              f"(lock {path}); compiling them in this process too")
    return None


def _wait(fd, path, deadline, pause):
    """`fd` once it holds the flock of `path`; None (closed) when `path` names another file
    (its holder finished and removed it: take the name anew) or when the deadline passes."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = False
        except BlockingIOError:
            held = True
        if not _names(path, fd) or (held and time.monotonic() > deadline):
            os.close(fd)
            return None
        if not held:
            return fd
        _pause(pause)
        pause = min(2 * pause, 0.02)   # a compiler run takes 0.1 s or more


def _names(path, fd):
    """Whether `path` still names the file open as `fd`."""
    try:
        a, b = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _pause(seconds):
    time.sleep(seconds)
