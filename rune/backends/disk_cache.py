"""The on-disk kernel cache.

Under `$RUNE_CACHE_DIR` (default `~/.cache/rune`), `kernels/` holds compiled
libraries named by the hash of their bytes and one small JSON entry per key
(`<key>.json`: the library's name, its sha256 and the symbol), so many keys
can share one library built from a batched translation unit. Every write is
a temporary file renamed into place, so two processes compiling the same key
at once both succeed and a reader never sees half a file; an entry that is
unreadable, or whose library is missing or does not hash to what it says, is
a miss. `RUNE_CACHE=0` reads and writes nothing.
"""
import hashlib
import json
import os

ABI_VERSION = "rune-kernels-1"  # bump when the calling convention of compiled units changes


def enabled():
    return os.environ.get("RUNE_CACHE", "1") != "0"


def directory():
    root = os.environ.get("RUNE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rune")
    return os.path.join(root, "kernels")


def key(*parts):
    h = hashlib.sha256(ABI_VERSION.encode())
    for p in parts:
        h.update(b"\0" + p.encode())
    return h.hexdigest()


def lookup(k):
    """(library path, symbol) for key `k`, or None on a miss (also for a damaged entry)."""
    if not enabled():
        return None
    d = directory()
    try:
        with open(os.path.join(d, k + ".json")) as f:
            entry = json.load(f)
        path = os.path.join(d, entry["lib"])
        with open(path, "rb") as f:
            data = f.read()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        return None
    return path, entry["symbol"]


def read_note(name):
    """The bytes of a small note kept beside the kernels (None when absent or off)."""
    if not enabled():
        return None
    try:
        with open(os.path.join(directory(), name)) as f:
            return f.read().encode()
    except (OSError, ValueError):
        return None


def write_note(name, data):
    """Keep a small note (e.g. a compiler's version line) for later processes."""
    if not enabled():
        return
    os.makedirs(directory(), exist_ok=True)
    _atomic_write(os.path.join(directory(), name), data)


def store_library(data):
    """Put a compiled library's bytes in the cache; returns its path (None when off)."""
    if not enabled():
        return None
    digest = hashlib.sha256(data).hexdigest()
    d = directory()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"lib-{digest[:32]}.so")
    _atomic_write(path, data)  # also replaces a damaged file of that name (a mapped one lives on)
    return path, digest


def store_entry(k, lib_path, digest, symbol):
    if not enabled():
        return
    entry = json.dumps({"lib": os.path.basename(lib_path), "sha256": digest, "symbol": symbol})
    _atomic_write(os.path.join(directory(), k + ".json"), entry.encode())


def _atomic_write(path, data):
    import tempfile   # only writers pay for it
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
