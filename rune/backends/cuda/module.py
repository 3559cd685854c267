"""A compiled CUDA unit loaded with CuPy: the CUDA platform's `Program`
(rune/backends/base.py), which NVRTC's compiler (rune/backends/cuda/nvrtc.py)
loads its cubins as."""
import atexit
import os
import shutil
import tempfile
import threading

import cupy

from ..base import Program


class Module(Program):
    """A cubin as CuPy loads it: `cupy.RawModule(path=...)`, which loads the file on a
    GPU when one of its functions is first taken there (so the file stays: the cache's,
    or a private one kept until the process ends). `data`: its bytes, when at hand."""

    def __init__(self, path, data=None):
        if data is None:
            with open(path, "rb") as f:
                data = f.read()
        if path is None:
            path = _private_file(data)
        self.path, self._data = path, data
        self.module = cupy.RawModule(path=path)

    def has(self, name):
        return name.encode() + b"\0" in self._data   # the ELF string table names each function

    def function(self, name):
        return self.module.get_function(name)


_PRIVATE = []   # the folder of cubins not in the disk cache, removed when the process ends
_PRIVATE_LOCK = threading.Lock()


def _private_file(data):
    with _PRIVATE_LOCK:
        if not _PRIVATE:
            _PRIVATE.append(tempfile.mkdtemp(prefix="rune-cubins-"))
            atexit.register(shutil.rmtree, _PRIVATE[0], True)
    fd, path = tempfile.mkstemp(dir=_PRIVATE[0], suffix=".cubin")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path
