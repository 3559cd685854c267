"""The GPU's part of a compiled stretch (rune/backends/stretch.py): one fused unit
of CUDA kernels, launched in order on one GPU.

`CudaKernels` renders units with the CUDA dialect for the GPU's properties (SM
count, threads per block, architecture) and compiles them through the backend's
`compile` (rune's own NVRTC call, rune/backends/cuda/launch.py). `DeviceBuffers`
is one stretch's run: inputs are the plan's device arrays (made contiguous where
they are strided views; a contiguous view is passed as it is, whatever its
alignment, and a host constant is copied up once), outputs are fresh arrays
whose allocation is owned (`owned.empty`, so that a later call may take one as
a donated buffer), or the donated buffer `run` is given for them. Intermediates and scratch
are taken from CuPy's memory pool for the run and given back when it ends (cheap
after the first run; the pool is ordered by the stream), so a function holding
many cached plans holds no device memory for them. Building one needs no GPU: the
launch shapes and argument lists are fixed at construction.
"""
import cupy

from ...codegen.cuda import CudaDialect
from ...codegen.kernel import launch_line
from ..stretch import Kernels
from . import owned


class CudaKernels(Kernels):
    """The CUDA stretches of one GPU (`index`) and its `props`: rendered by the CUDA
    dialect for them, compiled by `compile_units(prelude, units)`."""
    label = "CUDA"
    takes_donations = True

    def __init__(self, index, props, compile_units):
        self.index, self.props, self.compile_units = index, props, compile_units
        self.device_name = f"cuda:{index}"
        self.rendered_for = f" for {props}"
        self.dialect = CudaDialect(props)
        self.prelude = self.dialect.prelude()

    def buffers(self, stretch):
        return DeviceBuffers(stretch, self.index)

    def describe_kernel(self, kernel):
        return launch_line(kernel)


class DeviceBuffers:
    """One CUDA stretch's run: its buffers on GPU `index`, taken for each run."""

    def __init__(self, stretch, index):
        unit = stretch.unit
        self.index = index
        self.count = len(unit.buffers)
        self.inputs, self.outputs = stretch.inputs, stretch.outputs
        self.temps = [(b.index, b.shape, b.dtype) for b in unit.buffers if b.role == "tmp"]
        self._constants = {}                # slot -> (host constant, its copy on the GPU)

    def run(self, launch_all, env, donated=None):
        with cupy.cuda.Device(self.index):
            buffers = [None] * self.count
            for b, shape, dtype in self.temps:   # back to CuPy's pool when the run ends
                buffers[b] = cupy.empty(shape, dtype)
            for b, s in self.inputs:
                a = env[s]
                if type(a) is not cupy.ndarray:
                    a = self._uploaded(s, a)
                elif not a.flags.c_contiguous:
                    a = cupy.ascontiguousarray(a)  # a view made between stretches
                buffers[b] = a
            for b, s, shape, dtype in self.outputs:
                o = None if donated is None else donated.get(s)
                env[s] = buffers[b] = owned.empty(shape, dtype) if o is None else o
            launch_all(buffers)

    def _uploaded(self, slot, host):
        """A host value read as an input (a plan constant): copied up once, then reused."""
        kept = self._constants.get(slot)
        if kept is None or kept[0] is not host:
            kept = self._constants[slot] = (host, cupy.ascontiguousarray(cupy.asarray(host)))
        return kept[1]
