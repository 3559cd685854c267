"""Running rune's CUDA kernels on the CPU: the emulation header (cuda_emu.h, with
minimal cuda_fp16.h / cuda_bf16.h beside it), a g++ build of many units into one
shared library (cached on disk under the rune cache dir, keyed by its source),
and a plan runner that executes a `target="cuda"` plan's kernels through it
(its NumPy stretches run as they do on the host, its loop and branch bodies'
CUDA stretches through the library too).

Inputs reach the kernels as `CudaCompiledStretch.run` passes them: a contiguous
view keeps its offset into its allocation (a slice, a scan's row). The library
is built with UBSan's alignment check: a kernel that reads or writes a vector at
an address its type's alignment forbids (a fault on a GPU) fails its launch with
`MisalignedAccess`, naming the kernel, the address and the line.
"""
import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from rune.backends import disk_cache
from rune.compiler.plan import Plan
from rune.compiler.target import TargetStretch

HERE = os.path.dirname(os.path.abspath(__file__))
CXX = shutil.which("g++")
# compiled with UBSan's alignment check, whose handlers cuda_emu.h defines (so linked without
# UBSan's runtime): a misaligned access fails its launch with MisalignedAccess
FLAGS = ("-std=c++20", "-O1", "-fPIC", "-pthread", "-ffp-contract=off", "-fno-math-errno",
         "-fsanitize=alignment", "-fno-sanitize-recover=alignment", "-w", f"-I{HERE}")
LINK = ("-shared", "-pthread")


class MisalignedAccess(AssertionError):
    """An emulated kernel read or wrote a value at an address its type's alignment
    forbids (on a GPU: cudaErrorMisalignedAddress, which ends the CUDA context)."""


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
                proc = subprocess.run([CXX, *FLAGS, "-c", "-o", obj, src], capture_output=True, text=True)
                if not proc.returncode:
                    proc = subprocess.run([CXX, *LINK, "-o", lib, obj], capture_output=True, text=True)
                if proc.returncode:
                    numbered = "\n".join(f"{i + 1:5d} {ln}" for i, ln in enumerate(source.splitlines()))
                    raise RuntimeError(f"g++ could not build the emulated kernels:\n{proc.stderr[-6000:]}\n"
                                       f"--- source ---\n{numbered}")
                os.replace(lib, path) if not os.path.exists(path) else None
        self.lib = ctypes.CDLL(path)
        self.lib.rn_emu_fault.restype = ctypes.c_char_p

    # the memory and launch interface run_unit drives (GpuLibrary has the same, on a GPU)
    def upload(self, a):
        """As the stretch passes an input: a contiguous array (a view included) as it is."""
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)

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
        fault = self.lib.rn_emu_fault().decode()
        if fault:
            raise MisalignedAccess(f"kernel {launch.name} (grid {grid}, block {block}): {fault}")


class GpuLibrary:
    """The same units compiled by rune's NVRTC path to one cubin and run on a GPU with CuPy
    (bfloat16 arrays through ml_dtypes, as CuPy 14 holds them)."""

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
        """A copy on the GPU that starts as far past a 16-byte boundary as the host array
        does: a view with an offset stays one."""
        shift = a.ctypes.data % 16 if a.flags.c_contiguous else 0
        a = np.ascontiguousarray(a)
        room = self.cupy.empty(a.nbytes + 16, self.cupy.uint8)
        buf = room[shift:shift + a.nbytes].view(a.dtype).reshape(a.shape)
        buf.set(a)
        return buf

    def alloc(self, dtype, shape):
        buf = self.cupy.empty(shape, dtype)
        buf.reshape(-1).view(self.cupy.uint8).fill(0xA5)
        return buf

    def download(self, buf, dtype, shape):
        return buf.get().reshape(shape)

    def launch(self, launch, grid, block, buffers):
        self.module.get_function(launch.name)((grid,), (block,), tuple(buffers))


def stretches(plan):
    """The CUDA stretches of `plan`, its loop and branch bodies' included."""
    out = []
    for step in plan.steps:
        if type(step) is TargetStretch:
            out.append(step)
        for sub in step.plans:
            out += stretches(sub)
    return out


def rerender(plan, dialect):
    """Render `plan`'s IR kernels (its bodies' included) again with `dialect` (e.g. small
    blocks so that small inputs cross blocks); returns {stretch: (unit text, [CudaKernel])}."""
    return {id(s): dialect.render_unit(s.unit.kernels)[1:] for s in stretches(plan)}


def run_unit(library, unit, kernels, env, grid=None, block=None):
    """Run one fused unit's kernels over `env` (slot -> NumPy array) as a launcher would:
    inputs as the stretch passes them (contiguous views kept), fresh outputs and
    intermediates, scratch per kernel, the launches in order. `grid`/`block` override
    the recorded shapes (None: as recorded)."""
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
    (emulated, or on a GPU), the rest as on the host. A loop or branch step runs as the
    host runs it, each body's plan through this runner (its rows and carries passed as
    the host passes them: a scan's rows are views)."""
    assert isinstance(plan, Plan)
    env = list(plan.template)
    for s, a in zip(plan.in_slots, args):
        env[s] = np.asarray(a)
    for step in plan.steps:
        if type(step) is TargetStretch:
            text, kernels = rendered[id(step)]
            run_unit(library, step.unit, kernels, env)
        else:
            with _bodies_through(step, library, rendered):
                step.run(env)
    return [np.asarray(env[s]) for s in plan.out_slots]


@contextlib.contextmanager
def _bodies_through(step, library, rendered):
    """While `step` runs, each of its nested plans runs through `run_plan` (the step calls
    `plan.run`, shadowed here on the plan object and restored after)."""
    subs = list(step.plans)
    for sub in subs:
        sub.run = lambda args, sub=sub: run_plan(sub, args, library, rendered)
    try:
        yield
    finally:
        for sub in subs:
            del sub.run
