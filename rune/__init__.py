"""rune: NumPy-like arrays, composable transformations, host callbacks and explicit placement."""
from . import nx, tree
from .devices import Device, default_device, devices
from .errors import (CallbackError, ConcretizationError, DeviceError, DeviceMismatchError,
                     DTypeError, IndexingError, NotDifferentiableError, RuneError, ShapeError,
                     TreeError)
from .stats import reset_stats, stats


def place(tree_, device):
    """Every array leaf of `tree_` placed on `device`."""
    return tree.map(lambda x: nx.place(x, device), tree_)
from .autodiff.api import (checkpoint, grad, hessian, jacfwd, jacrev, jvp, remat, value_and_grad,
                           vjp)
from .core.staging import trace
from .core.program import Program
from .nx.ops import stop_gradient
from .autodiff.custom import custom_jvp, custom_vjp
from .callback import Spec, callback
from .control import cond, fori_loop, scan, switch, while_loop
from .jit.api import jit
from .batching import vmap
