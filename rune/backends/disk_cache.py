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

The cache only ever saves time: a folder that cannot be written (no home
folder, read-only, a file in the way, a full disk) gives one RuneWarning and
the kernels built meanwhile live in this process only.
"""
import hashlib
import json
import os
import warnings

from ..base import config
from ..errors import RuneWarning

ABI_VERSION = "rune-kernels-1"  # bump when the calling convention of compiled units changes

_WARNED = set()   # the topics already warned about in this process


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
