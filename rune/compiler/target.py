"""Plans for a target this process need not have: `jitted.plan(*args, target="cuda")`
(a registered platform with a kernel dialect, rune/backends/__init__.py).

The target is one of a plan's inputs (`Plan(program, target, device)`,
rune/compiler/plan.py), passed down explicitly: such a plan is fused exactly as
the host's (rune/compiler/fuse.py), and `lower(..., target=...)` turns each run
of lowerable primitives into a `TargetStretch` holding the target dialect's
kernels (copies of the IR kernels carrying their source and launch shapes);
loop bodies are planned for the target too. It is an inspection: nothing is
compiled or run.
"""
from ..backends import kernel_dialect, target_names
from ..errors import ArgumentError, UsageError
from ..codegen.kernel import describe_launched


def dialect(target):
    found = kernel_dialect(target)
    if found is None:
        named = " or ".join(f'"{name}"' for name in target_names())
        raise ArgumentError(f"plan(target={target!r}): rune renders no kernels for this target; "
                            f"expected {named} (or None for this process's devices)")
    return found


class TargetStretch:
    """A run of primitives fused into kernels rendered for `target` (a plan step,
    rune/compiler/plan.py, that does not run)."""
    profile_kind = "kernel"   # how rune.profile names this step
    plans = ()
    takes_donations = False

    def __init__(self, target, eqns, unit):
        self.eqns, self.unit, self.target = eqns, unit, target
        self.name, self.text, kernels = dialect(target).render_unit(unit.kernels)
        self.kernels = tuple(kernels)

    def reads(self):
        return tuple(s for _, s in self.unit.inputs)

    def writes(self):
        return tuple(s for _, s in self.unit.outputs)

    def run(self, env):
        raise UsageError(f"a plan for target={self.target!r} is for inspection and does not run; "
                         f"call the jitted function to run it on its device")

    def describe(self):
        return describe_launched(f"{self.target} stretch", self.name, self.eqns, self.kernels, "")
