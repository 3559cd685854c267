"""rune's CUDA kernels run on the host: the emulation header (cuda_emu.h, with
the slices of cuda_fp16.h / cuda_bf16.h the kernels use beside it) and a g++
build of many units into one shared library, cached on disk beside the kernel
cache (keyed by its source, so a machine builds each set of kernels once).

The CUDA dialect's kernels are compiled as C++ against CUDA's execution model
written out on the host (cuda_emu.h): blocks run one after another on the
launching thread, a block's threads are fibers on it (stacks mapped once and
reused), and `__syncthreads` and the per-warp barrier behind `__syncwarp` and
the warp shuffles and votes park a fiber until the last of its block (warp)
arrives. An emulated thread costs ~0.2 us to start and ~20 ns a barrier
(x86-64, a hand-written switch; glibc's ucontext elsewhere: ~0.6 us and ~0.2
us), against ~10-40 us for the host thread each CUDA thread once was; the
emulation is still for checking a program's kernels on small inputs, not for
running it (`jitted.emulate`, rune/compiler/emulation.py).
A launch fails where a GPU would fault or hang: the library is built with
UBSan's alignment check, so a kernel that reads or writes a value at an address
its type's alignment forbids fails its launch with `MisalignedAccess`, naming
the kernel, the address and the line; a block whose threads wait at a barrier
the rest never reach (they returned, or wait at another) fails it with
`BarrierDeadlock`, naming the kernel, the block and who waits where; a kernel
that writes just outside a buffer the library allocated (`alloc`: outputs,
intermediates, scratch) fails it with `OutOfBoundsWrite`, naming the kernel, the
argument and where: each such buffer lies between two red zones of RED_ZONE bytes
filled with a pattern, checked after every launch (on a GPU such a write corrupts
another allocation, silently).
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import weakref

import numpy as np

from ... import disk_cache
from ....errors import ArgumentError, CompileError, RuneError

HERE = os.path.dirname(os.path.abspath(__file__))
HEADERS = ("cuda_emu.h", "cuda_fp16.h", "cuda_bf16.h")
# compiled with UBSan's alignment check, whose handlers cuda_emu.h defines (so linked without
# UBSan's runtime); no contraction, as the CUDA dialect is compiled (--fmad=false)
FLAGS = ("-std=c++20", "-O1", "-fPIC", "-ffp-contract=off", "-fno-math-errno",
         "-fsanitize=alignment", "-fno-sanitize-recover=alignment", "-w", f"-I{HERE}")
LINK = ("-shared",)


def compiler():
    """The C++ compiler the emulation is built with (g++, C++20), or None."""
    return shutil.which("g++")


class MisalignedAccess(RuneError):
    """An emulated kernel read or wrote a value at an address its type's alignment
    forbids (on a GPU: cudaErrorMisalignedAddress, which ends the CUDA context)."""


class BarrierDeadlock(RuneError):
    """An emulated block's threads wait at a barrier (`__syncthreads`, or a warp's:
    `__syncwarp`, a shuffle or vote) that the rest can never reach, having returned or
    waiting at another (on a GPU: the kernel hangs)."""


class OutOfBoundsWrite(RuneError):
    """An emulated kernel wrote just before or after a buffer the emulation allocated
    (on a GPU: another allocation's memory changes, or the context faults)."""


# Bytes on each side of a buffer `Library.alloc` makes, and their pattern: a CUDA
# allocation is 256-byte aligned, so a write up to 256 bytes past a buffer's end lands in
# padding or another buffer there; here it lands in a red zone, checked after each launch.
RED_ZONE = 256
_RED = 0xCB

# what cuda_emu.h's rn_emu_fault() names before ": " -> the error it is
_FAULTS = {"misaligned": MisalignedAccess, "stuck": BarrierDeadlock, "launch": ArgumentError}


def _header_text():
    return "".join(open(os.path.join(HERE, f)).read() for f in HEADERS)


def _launcher(launch):
    """An `extern "C"` entry emu_<kernel>(grid, block, args) running the kernel on the host."""
    # a pointer parameter is passed as itself, a scalar as a pointer to its value (as cuLaunchKernel)
    casts = ", ".join(f"({t})a[{i}]" if "*" in t else f"*({t} *)a[{i}]" for i, (t, _) in enumerate(launch.params))
    return (f"static void body_{launch.name}(void **a) {{ {launch.name}({casts}); }}\n"
            f'extern "C" void emu_{launch.name}(unsigned grid, unsigned block, void **a) {{\n'
            f"  rn_emu_launch(grid, block, body_{launch.name}, a);\n}}")


class Library:
    """The emulated kernels of many units, built once: `launch(launch, grid, block, buffers)`,
    with the memory interface a plan runner drives (upload, alloc, download)."""

    def __init__(self, prelude, units):
        """`units`: [(unit text, [CudaKernel])] rendered by one dialect (whose `prelude` this is)."""
        cxx = compiler()
        if cxx is None:
            raise CompileError("the CUDA emulation needs g++ (C++20) on PATH; none was found")
        seen, texts, entries = set(), [], []
        for text, kernels in units:
            if text in seen:
                continue
            seen.add(text)
            texts.append(text)
            # a function launched several times (a sort's passes) gets one entry
            entries += list(dict.fromkeys(_launcher(ln) for k in kernels for ln in k.launches))
        source = '#include "cuda_emu.h"\n' + prelude + "\n\n".join(texts + entries) + "\n"
        key = hashlib.sha256((_header_text() + " ".join(FLAGS + LINK) + source).encode()).hexdigest()[:24]
        folder = os.path.join(os.path.dirname(disk_cache.directory()), "cuda-emu")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, key + ".so")
        if not os.path.exists(path):
            with tempfile.TemporaryDirectory(prefix="rune-cuda-emu-") as tmp:
                src, obj, lib = (os.path.join(tmp, f"unit.{e}") for e in ("cpp", "o", "so"))
                with open(src, "w") as f:
                    f.write(source)
                proc = subprocess.run([cxx, *FLAGS, "-c", "-o", obj, src], capture_output=True, text=True)
                if not proc.returncode:
                    proc = subprocess.run([cxx, *LINK, "-o", lib, obj], capture_output=True, text=True)
                if proc.returncode:
                    numbered = "\n".join(f"{i + 1:5d} {ln}" for i, ln in enumerate(source.splitlines()))
                    raise CompileError(f"g++ could not build the emulated kernels:\n{proc.stderr[-6000:]}\n"
                                       f"--- source ---\n{numbered}")
                if not os.path.exists(path):   # another process may have built it meanwhile
                    os.replace(lib, path)
        self.lib = ctypes.CDLL(path)
        self.lib.rn_emu_fault.restype = ctypes.c_char_p
        self._zoned = weakref.WeakValueDictionary()   # data address -> the red-zoned block holding it

    def upload(self, a):
        """As a stretch passes an input: a contiguous array (a view included) as it is."""
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)

    def alloc(self, dtype, shape):
        """Garbage, as fresh GPU memory holds (a kernel must write what it stores),
        between two red zones (`RED_ZONE`) that `launch` checks."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block = np.full(nbytes + 2 * RED_ZONE, _RED, np.uint8)
        block[RED_ZONE:RED_ZONE + nbytes] = 0xA5
        a = block[RED_ZONE:RED_ZONE + nbytes].view(dtype).reshape(shape)
        self._zoned[a.ctypes.data] = block
        return a

    def download(self, buf, dtype, shape):
        return buf.reshape(shape)

    def launch(self, launch, grid, block, buffers):
        fn = getattr(self.lib, f"emu_{launch.name}")
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        fn.restype = None
        array = (ctypes.c_void_p * max(len(buffers), 1))(*[b.ctypes.data for b in buffers])
        fn(grid, block, array)
        fault = self.lib.rn_emu_fault().decode()
        if fault:
            kind, _, what = fault.partition(": ")
            raise _FAULTS[kind](f"kernel {launch.name} (grid {grid}, block {block}): {what}")
        for i, b in enumerate(buffers):
            zoned = self._zoned.get(b.ctypes.data)
            if zoned is not None and zoned.nbytes == b.nbytes + 2 * RED_ZONE:   # not a view of part of one
                _check_red_zones(zoned, b, f"kernel {launch.name} (grid {grid}, block {block}), argument {i}")


def _check_red_zones(zoned, buffer, where):
    """Raise OutOfBoundsWrite where a byte of `zoned`'s red zones around `buffer` changed,
    naming the changed bytes by their offsets from the buffer's start."""
    n = buffer.nbytes
    changed = np.flatnonzero(np.concatenate([zoned[:RED_ZONE], zoned[RED_ZONE + n:]]) != _RED)
    if changed.size:
        offsets = np.where(changed < RED_ZONE, changed - RED_ZONE, changed - RED_ZONE + n)
        side = "before its start" if offsets[-1] < 0 else ("after its end" if offsets[0] >= n else
                                                            "before its start and after its end")
        raise OutOfBoundsWrite(f"{where} ({buffer.dtype.name}{list(buffer.shape)}, {n} bytes): wrote "
                               f"{changed.size} byte(s) {side}, at byte offsets {offsets[0]} to {offsets[-1]} "
                               f"(on a GPU, another allocation's memory)")
