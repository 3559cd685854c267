"""Plans of NumPy stretches written as straight-line Python.

A plan whose every step is a NumPy `Stretch` (small arrays: a loop body, a
branch, a cached jit call of a few ops) spends more time in the plan's
machinery than in its ops: an environment list, a loop over steps, a call
per step, a wrapper per op. `straight_function(plan)` writes the whole plan
as one function over local variables; `straight_lines` writes a plan's
statements for a caller composing plans into one function (a while loop's
test and step, a scan's loop over rows: rune/compiler/control_steps.py; a
cached jit call: rune/compiler/api.py).

The backend's implementations are called as the stretch calls them, except
that an elementwise op whose result is an array anyway calls the bare
function under its wrapper (`impl.on_nd`), on the host a 0-d result of a
bare NumPy ufunc (a NumPy scalar) is made an array inline, as the wrapper
would, and inside loops 0-d float arithmetic and comparisons on the host are
Python operators on NumPy scalars (`_OPERATORS`).
"""
import numpy as np

from ..core.prims import P
from ..base.stats import COUNTERS


def straight_function(plan):
    """`plan.run` as one written function: the same results, and its
    stretches counted as launched, as `Stretch.run` counts them."""
    names = {"COUNTERS": COUNTERS}
    inputs = [f"a{k}" for k in range(len(plan.in_slots))]
    body, outs = straight_lines(plan, inputs, "", names)
    lines = ["def run(args):"]
    if inputs:
        lines.append(f"    {', '.join(inputs)}, = args")
    lines.append(f"    COUNTERS['kernels_launched'] += {len(plan.steps)}")
    lines += ["    " + line for line in body]
    lines.append(f"    return [{', '.join(outs)}]")
    exec(compile("\n".join(lines), "<rune plan>", "exec"), names)
    return names["run"]


# Ops a loop writes as Python operators on NumPy scalars, which skip the ufunc
# machinery (a tenth of its cost on one element) with the same IEEE result and
# the same floating-point warnings. Arithmetic only on floats: an integer
# scalar operator warns on overflow where the ufunc wraps silently.
_COMPARISONS = {P["lt"]: "<", P["le"]: "<=", P["gt"]: ">", P["ge"]: ">=", P["eq"]: "==", P["ne"]: "!="}
_OPERATORS = {P["add"]: "+", P["sub"]: "-", P["mul"]: "*", **_COMPARISONS}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _operator(eqn, plan, ins):
    """The operator `eqn` is written as on NumPy scalars, or None."""
    symbol = _OPERATORS.get(eqn.prim)
    if symbol is None or eqn.params or len(ins) != 2:
        return None
    a, b = (plan.avals[i] for i in ins)
    if a.ndim or b.ndim or a.dtype != b.dtype:
        return None
    devices = {v.device.platform for v in (a, b) if v.device is not None}
    if devices != {"cpu"}:
        return None  # NumPy scalars are host values
    if a.dtype in _FLOATS or (eqn.prim in _COMPARISONS and a.dtype.kind in "iub"):
        return symbol
    return None


def straight_lines(plan, inputs, tag, names, read_only=False, scalars=False):
    """`plan` (every step a NumPy stretch) as Python statements on the variables
    named `inputs`: (the lines, the expressions of its outputs). The names they
    use go into `names` (the namespace to run them in), each starting with
    `tag`, so several plans can be written into one function. The caller counts
    the plan's `len(plan.steps)` stretches as launched.

    With `read_only`, the outputs are only read as scalars by the host (a
    loop's predicate): a 0-d output nothing else reads may stay a NumPy
    scalar. With `scalars` (a loop, where each op is on a few values), 0-d
    float arithmetic and 0-d comparisons are Python operators on NumPy
    scalars (`_OPERATORS`); a value is made an array again where another op,
    or the caller, reads it."""
    names.update(_ndarray=np.ndarray, _asarray=np.asarray)
    slot, scalar = {}, {}  # slot -> expression of its value as an array / as a NumPy scalar
    for s, v in plan.constants.items():
        slot[s] = f"{tag}k{s}"
        names[slot[s]] = v
    slot.update(zip(plan.in_slots, inputs))
    ops = [(n, k, op, impl) for n, step in enumerate(plan.steps)
           for k, (op, impl) in enumerate(zip(step.ops, step.impls))]
    read_later = set()  # slots some later op reads
    needed = []  # per op: whether its 0-d result must be an array
    for _, _, (_, ins, outs), _ in reversed(ops):
        needed.append(not (read_only and set(outs) <= set(plan.out_slots) and not read_later & set(outs)))
        read_later.update(ins)
    needed.reverse()
    lines = []

    def as_array(i):
        if i not in slot:  # known only as a scalar so far
            slot[i] = f"{tag}s{i}"
            lines.append(f"{slot[i]} = _asarray({scalar[i]})")
        return slot[i]

    def as_scalar(i):
        if i not in scalar:
            if i in plan.constants:  # converted once, here
                scalar[i] = f"{tag}k{i}_"
                names[scalar[i]] = plan.constants[i][()]
            else:
                scalar[i] = f"{slot[i]}[()]"
        return scalar[i]

    for (n, k, (eqn, ins, outs), impl), array_needed in zip(ops, needed):
        symbol = _operator(eqn, plan, ins) if scalars else None
        if symbol is not None:
            (o,) = outs
            scalar[o] = f"{tag}s{o}_"
            lines.append(f"{scalar[o]} = {as_scalar(ins[0])} {symbol} {as_scalar(ins[1])}")
            continue
        bare = getattr(impl, "on_nd", impl)
        wrap = False
        if all(plan.avals[o].ndim for o in outs):
            impl = bare  # an n-d result comes from an n-d operand: the bare function returns an array
        elif isinstance(bare, np.ufunc) and bare is not impl and len(outs) == 1:
            impl, wrap = bare, array_needed  # a host ufunc: its 0-d result is a NumPy scalar
        op = f"{tag}op{n}_{k}"
        names[op] = impl
        args = ", ".join(as_array(i) for i in ins)
        if eqn.params:
            names[f"{op}_params"] = eqn.params
            args += f", **{op}_params"
        slot.update({o: f"{tag}s{o}" for o in outs})
        for o in outs:
            scalar.pop(o, None)
        targets = ", ".join(slot[o] for o in outs)
        comma = "," if eqn.prim.multiple_results and len(outs) == 1 else ""
        lines.append(f"{targets}{comma} = {op}({args})")
        if wrap:
            lines.append(f"if type({targets}) is not _ndarray: {targets} = _asarray({targets})")
    outputs = [slot[s] if s in slot else (scalar[s] if read_only else f"_asarray({scalar[s]})")
               for s in plan.out_slots]
    return lines, outputs
