"""Plans for a target this process need not have: `jitted.plan(*args, target="cuda")`.

Such a plan is built inside `planning_for(target)`: it is fused exactly as the
host's (rune/compiler/fuse.py), and `lower` turns each run of lowerable primitives
into a `TargetStretch` holding the target dialect's kernels (copies of the IR
kernels carrying their source and launch shapes); loop bodies are planned for
the target too, afresh. It is an inspection: nothing is compiled or run.
"""
import contextlib
import threading

from ..backends import kernel_dialect
from ..errors import ArgumentError, UsageError
from ..codegen.kernel import describe_launched


class _Planning(threading.local):
    target = None


_PLANNING = _Planning()


def planning_target():
    """The target the plan being built is for (None: this process's devices)."""
    return _PLANNING.target


@contextlib.contextmanager
def planning_for(target):
    """Plans built inside (loop and branch bodies included) are for `target`."""
    dialect(target)  # an unknown target fails here, kernels or not
    outer, _PLANNING.target = _PLANNING.target, target
    try:
        yield
    finally:
        _PLANNING.target = outer


def dialect(target):
    found = kernel_dialect(target)
    if found is None:
        raise ArgumentError(f"plan(target={target!r}): rune renders no kernels for this target; "
                            f"expected \"cuda\" (or None for this process's devices)")
    return found


class TargetStretch:
    """A run of primitives fused into kernels rendered for `target`."""

    def __init__(self, target, eqns, unit):
        self.eqns, self.unit, self.target = eqns, unit, target
        self.name, self.text, self.kernels = dialect(target).unit(unit.kernels)

    def run(self, env):
        raise UsageError(f"a plan for target={self.target!r} is for inspection and does not run; "
                         f"call the jitted function to run it on its device")

    def describe(self):
        return describe_launched(f"{self.target} stretch", self.name, self.eqns, self.kernels, "")

