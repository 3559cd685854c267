"""rune: NumPy-like arrays, composable transformations, host callbacks and explicit placement.

The public surface, re-exported; nothing is defined here. Every primitive's
rules are registered by the module that defines it (importing rune.nx brings in
its family modules: linalg, fft, conv, sorting, mathfuncs, complex).
"""
from . import nx, tree
from .transforms.autodiff.api import checkpoint, grad, jvp, remat, value_and_grad, vjp
from .transforms.autodiff.custom import custom_jvp, custom_vjp
from .transforms.autodiff.jacobians import hessian, jacfwd, jacrev
from .transforms.batching import vmap
from .transforms.callback import Spec, callback
from .checkpoints import load, save  # (a module named checkpoint would shadow rune.checkpoint, the remat)
from .transforms.control import cond, fori_loop, scan, switch, while_loop
from .core.program import Program
from .compiler.tracing import trace
from .core.devices import Device, default_device, devices
from .errors import (ArgumentError, AxisError, CallbackError, CompileError, ConcretizationError, DeviceError,
                     DeviceMismatchError, DistributedError, DTypeError, IndexingError, NotDifferentiableError,
                     RuneError, RuneWarning,
                     ScalarOverflowError, ShapeError, TreeError, UsageError)
from .compiler.api import clear_caches, jit
from . import data, debug, distributed, metrics, nn, optim
from .nx.ops import stop_gradient
from .nx.placement import place_tree as place
from .base.profiler import profile
from .base.stats import reset_stats, stats
from .base.memory import memory_stats, reset_peak_memory

__all__ = [
    "nx", "nn", "optim", "data", "debug", "metrics", "distributed", "tree", "save", "load", "checkpoint", "grad", "hessian", "jacfwd",
    "jacrev", "jvp", "remat",
    "value_and_grad", "vjp", "custom_jvp", "custom_vjp", "vmap", "Spec", "callback", "cond",
    "fori_loop", "scan", "switch", "while_loop", "Program", "trace", "Device", "default_device",
    "devices", "ArgumentError", "AxisError", "CallbackError", "CompileError", "ConcretizationError", "DeviceError",
    "DeviceMismatchError", "DistributedError", "DTypeError", "IndexingError", "NotDifferentiableError", "RuneError", "RuneWarning",
    "ScalarOverflowError",
    "ShapeError", "TreeError", "UsageError", "clear_caches", "jit", "stop_gradient", "place",
    "reset_stats", "stats", "profile", "memory_stats", "reset_peak_memory",
]


def __dir__():
    """The public names (`__all__`) and the module's dunders, not the modules rune is built from."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__") and n.endswith("__")})
