"""Host values of operands whose result shape depends on them (nonzero, unique,
boolean masks, repeat counts): known eagerly, a ConcretizationError while tracing."""
import numpy as np

from ..core.trace import Tracer
from ..errors import ConcretizationError

_HINT = ("its result's shape depends on the values, which are not known while tracing (inside jit, "
         "vmap, a scan/cond/while body or rune.trace). Use nx.where(mask, x, fill) to keep a fixed "
         "shape, or pass size= (nonzero) to fix the number of results.")


def concrete(name, x, what="the operand"):
    """The host (NumPy) value of `x`, or ConcretizationError naming `name`."""
    if isinstance(x, Tracer):
        value = x.concrete()
        if value is None:
            raise ConcretizationError(f"{name}: {what} is a traced {x.aval.describe()}, and {_HINT}")
        x = value
    return np.asarray(x)
