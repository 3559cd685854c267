"""Running rune's CUDA kernels on the CPU: the emulation header (cuda_emu.h, with
minimal cuda_fp16.h / cuda_bf16.h beside it), a g++ build of many units into one
shared library (cached on disk under the rune cache dir, keyed by its source),
and a plan runner that executes a `target="cuda"` plan's kernels through it
(its NumPy stretches run as they do on the host).
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from rune.backends import disk_cache
from rune.jit.plan import Plan
from rune.jit.target import TargetStretch

HERE = os.path.dirname(os.path.abspath(__file__))
CXX = shutil.which("g++")
FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-ffp-contract=off", "-fno-math-errno",
         "-w", f"-I{HERE}")


def _header_text():
    return "".join(open(os.path.join(HERE, f)).read() for f in ("cuda_emu.h", "cuda_fp16.h", "cuda_bf16.h"))


def _launcher(launch):
    """An `extern "C"` entry emu_<kernel>(grid, block, args) running the kernel on the host."""
    # a pointer parameter is passed as itself, a scalar as a pointer to its value (as cuLaunchKernel)
    casts = ", ".join(f"({t})a[{i}]" if "*" in t else f"*({t} *)a[{i}]" for i, (t, _) in enumerate(launch.params))
    return (f"static void body_{launch.name}(void **a) {{ {launch.name}({casts}); }}\n"
            f'extern "C" void emu_{launch.name}(unsigned grid, unsigned block, void **a) {{\n'
            f"  rn_emu_launch(grid, block, body_{launch.name}, a);\n}}")


class Library:
    """The emulated kernels of many units, built once: `launch(launch, grid, block, pointers)`."""

    def __init__(self, prelude, units):
        """`units`: [(unit text, [CudaKernel])] rendered by one dialect (whose `prelude` this is)."""
        seen, texts, entries = set(), [], []
        for text, kernels in units:
            if text in seen:
                continue
            seen.add(text)
            texts.append(text)
            entries += [_launcher(ln) for k in kernels for ln in k.launches]
        source = '#include "cuda_emu.h"\n' + prelude + "\n\n".join(texts + entries) + "\n"
        key = hashlib.sha256((_header_text() + " ".join(FLAGS) + source).encode()).hexdigest()[:24]
        folder = os.path.join(os.path.dirname(disk_cache.directory()), "cuda-emu")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, key + ".so")
        if not os.path.exists(path):
            with tempfile.TemporaryDirectory(prefix="rune-cuda-emu-") as tmp:
                src, lib = os.path.join(tmp, "unit.cpp"), os.path.join(tmp, "unit.so")
                with open(src, "w") as f:
                    f.write(source)
                proc = subprocess.run([CXX, *FLAGS, "-o", lib, src], capture_output=True, text=True)
                if proc.returncode:
                    numbered = "\n".join(f"{i + 1:5d} {ln}" for i, ln in enumerate(source.splitlines()))
                    raise RuntimeError(f"g++ could not build the emulated kernels:\n{proc.stderr[-6000:]}\n"
                                       f"--- source ---\n{numbered}")
                os.replace(lib, path) if not os.path.exists(path) else None
        self.lib = ctypes.CDLL(path)

    # the memory and launch interface run_unit drives (GpuLibrary has the same, on a GPU)
    def upload(self, a):
        return np.array(a, order="C")

    def alloc(self, dtype, shape):
        """Garbage, as fresh GPU memory holds: a kernel must write what it stores."""
        a = np.empty(shape, dtype)
        a.reshape(-1).view(np.uint8).fill(0xA5)
        return a

    def download(self, buf, dtype, shape):
        return buf.reshape(shape)

    def launch(self, launch, grid, block, buffers):
        fn = getattr(self.lib, f"emu_{launch.name}")
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        fn.restype = None
        array = (ctypes.c_void_p * max(len(buffers), 1))(*[b.ctypes.data for b in buffers])
        fn(grid, block, array)


class GpuLibrary:
    """The same units compiled by rune's NVRTC path to one cubin and run on a GPU with CuPy
    (raw device bytes: CuPy has no bfloat16 arrays, and kernels only see pointers)."""

    def __init__(self, prelude, units, arch):
        import cupy
        from rune.backends.cuda import nvrtc
        self.cupy = cupy
        texts = list(dict.fromkeys(text for text, _ in units))
        cubin = nvrtc.compile_unit(prelude + "\n\n".join(texts), arch=arch)
        self.folder = tempfile.mkdtemp(prefix="rune-cubin-")
        path = os.path.join(self.folder, "unit.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        self.module = cupy.RawModule(path=path)

    def upload(self, a):
        a = np.ascontiguousarray(a)
        return self.cupy.asarray(a.reshape(-1).view(np.uint8) if a.size else np.zeros(1, np.uint8))

    def alloc(self, dtype, shape):
        return self.cupy.full(max(int(np.prod(shape)) * dtype.itemsize, 1), 0xA5, self.cupy.uint8)

    def download(self, buf, dtype, shape):
        n = int(np.prod(shape))
        return buf.get()[:n * dtype.itemsize].view(dtype).reshape(shape)

    def launch(self, launch, grid, block, buffers):
        self.module.get_function(launch.name)((grid,), (block,), tuple(buffers))


def stretches(plan):
    """The CUDA stretches of `plan` (loop bodies are not emulated)."""
    return [s for s in plan.steps if type(s) is TargetStretch]


def rerender(plan, dialect):
    """Render `plan`'s IR kernels again with `dialect` (e.g. small blocks so that small
    inputs cross blocks); returns {stretch: (unit text, [CudaKernel])}."""
    return {id(s): dialect.unit(s.unit.kernels)[1:] for s in stretches(plan)}


def run_unit(library, unit, kernels, env, grid=None, block=None):
    """Run one fused unit's kernels over `env` (slot -> NumPy array) as a launcher would:
    contiguous buffers, fresh outputs and intermediates, scratch per kernel, the
    launches in order. `grid`/`block` override the recorded shapes (None: as recorded)."""
    buffers = [None] * len(unit.buffers)
    for b, s in unit.inputs:
        buffers[b.index] = library.upload(np.asarray(env[s], dtype=b.dtype))
    for b in unit.buffers:
        if buffers[b.index] is None:
            buffers[b.index] = library.alloc(b.dtype, b.shape)
    for k in kernels:
        scratch = [library.alloc(dt, (n,)) for dt, n in k.scratch]
        args = [buffers[i] if kind == "buffer" else scratch[i] for kind, i in k.args]
        for ln in k.launches:
            library.launch(ln, grid or ln.grid, block or ln.block, args)
    for b, s in unit.outputs:
        env[s] = library.download(buffers[b.index], b.dtype, b.shape)


def run_plan(plan, args, library, rendered):
    """Evaluate a `target="cuda"` plan on host arrays: its CUDA stretches through `library`
    (emulated, or on a GPU), the rest as on the host."""
    assert isinstance(plan, Plan)
    env = list(plan.template)
    for s, a in zip(plan.in_slots, args):
        env[s] = np.asarray(a)
    for step in plan.steps:
        if type(step) is TargetStretch:
            text, kernels = rendered[id(step)]
            run_unit(library, step.unit, kernels, env)
        else:
            step.run(env)
    return [np.asarray(env[s]) for s in plan.out_slots]
