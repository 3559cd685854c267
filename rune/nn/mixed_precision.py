"""Mixed precision: dtype policies and loss scaling (DeepMind's jmp, for rune).

A `Policy` names three dtypes: `param` (how parameters are stored and
updated), `compute` (the dtype the forward and backward passes run in) and
`output` (what a module hands back). `policy.apply(model)` returns the model
with its parameters in `param` and its calls under the policy: each call casts
the module's parameters and its inputs to `compute` and the result to
`output`. Only floating arrays are cast; integers (labels, ids) pass through.
The casts are `nx.astype`, whose derivative casts back, so gradients with
respect to float32 parameters come out float32 however low the compute dtype.

float16 has a narrow exponent range: small gradients underflow to zero. Loss
scaling multiplies the loss by a large factor before differentiating and
divides the gradients by it afterwards. `DynamicLossScale` adapts the factor
with jmp's rules: a step whose gradients are not all finite is skipped and
the scale divided by `factor` (not below `min_loss_scale`); after `period`
finite steps in a row the scale is multiplied by `factor` (unless that
overflows). It is a pytree (a Module), and `adjust` uses no Python branch on
values, so the whole step jits:

    scaled_loss, grads = rune.value_and_grad(lambda m: scale.scale(loss(m)))(model)
    grads = scale.unscale(grads)
    finite = nn.all_finite(grads)
    updates, new_opt = opt.update(grads, opt_state, model)
    model, opt_state = nn.select_tree(finite, (optim.apply_updates(model, updates), new_opt),
                                      (model, opt_state))
    scale = scale.adjust(finite)
"""
import dataclasses

import numpy as np

from .. import nx, tree
from ..errors import ArgumentError, DTypeError, ShapeError, UsageError
from .module import Module, is_array, with_policy

__all__ = ["Policy", "DynamicLossScale", "all_finite", "select_tree"]


def _float_dtype(role, value):
    dtype = nx.dtype(value)
    if not nx.isdtype(dtype, "real floating"):
        raise ArgumentError(f"Policy: {role} must be a floating dtype, got {dtype.name}")
    return dtype


def _cast_floating(tree_, dtype):
    def cast(x):
        return nx.astype(x, dtype) if is_array(x) and nx.isdtype(x.dtype, "real floating") else x
    return tree.map(cast, tree_)


@dataclasses.dataclass(frozen=True)
class Policy:
    """The dtypes of parameters, computation and outputs (jmp.Policy); each a
    dtype or its name, float32 by default."""
    param: object = "float32"
    compute: object = "float32"
    output: object = "float32"

    def __post_init__(self):
        for role in ("param", "compute", "output"):
            object.__setattr__(self, role, _float_dtype(role, getattr(self, role)))

    def cast_to_param(self, tree_):
        """The floating arrays of `tree_` in the param dtype."""
        return _cast_floating(tree_, self.param)

    def cast_to_compute(self, tree_):
        """The floating arrays of `tree_` in the compute dtype."""
        return _cast_floating(tree_, self.compute)

    def cast_to_output(self, tree_):
        """The floating arrays of `tree_` in the output dtype."""
        return _cast_floating(tree_, self.output)

    def apply(self, module):
        """`module` with its parameters in the param dtype, its calls run under this
        policy (parameters and inputs in the compute dtype, results in the output
        dtype). Sub-modules are called inside, in the compute dtype."""
        if not isinstance(module, Module):
            raise UsageError(f"Policy.apply: expected an nn.Module, got {type(module).__name__}; for plain "
                             f"functions cast with cast_to_compute / cast_to_output")
        return with_policy(self.cast_to_param(module), self)

    def __repr__(self):
        return f"Policy(param={self.param.name}, compute={self.compute.name}, output={self.output.name})"


def all_finite(tree_):
    """A bool scalar: whether every element of every array in `tree_` is finite."""
    flags = [nx.all(nx.isfinite(x)) for x in tree.leaves(tree_) if is_array(x)]
    if not flags:
        return nx.asarray(True)
    return nx.all(nx.stack(flags))


def select_tree(pred, on_true, on_false):
    """`on_true` where the bool scalar `pred` holds, else `on_false`, leaf by leaf
    (no Python branch: it jits)."""
    pred = nx.asarray(pred)
    if pred.dtype != nx.bool:
        raise DTypeError(f"select_tree: expected a bool scalar predicate, got {pred.dtype.name}{list(pred.shape)}")
    if pred.shape != ():
        raise ShapeError(f"select_tree: expected a bool scalar predicate, got {pred.dtype.name}{list(pred.shape)}")
    return tree.map(lambda a, b: nx.where(pred, a, b), on_true, on_false)


def _largest_growable(factor):
    """The largest float32 whose product with `factor` is finite in float32."""
    top, factor = float(np.finfo(np.float32).max), float(np.float32(factor))
    limit = np.float32(top / factor)
    while float(limit) * factor > top:     # rounded up by the division: one step down (exact in float64)
        limit = np.nextafter(limit, np.float32(0))
    return limit


class DynamicLossScale(Module):
    """A loss scale that adapts to the gradients (jmp.DynamicLossScale): see the
    module docstring. `loss_scale` (float32) and `counter` (int32, finite steps
    since the last change) are arrays; period, factor and min_loss_scale are static."""
    loss_scale: object
    counter: object
    period: int
    factor: float
    min_loss_scale: float

    def __init__(self, initial=2.0 ** 15, period=2000, factor=2, min_loss_scale=1.0):
        if period < 1 or factor <= 1:
            raise ArgumentError(f"DynamicLossScale: period must be >= 1 and factor > 1, got period={period}, "
                                f"factor={factor}")
        self.loss_scale = nx.asarray(initial, nx.float32)
        self.counter = nx.zeros((), nx.int32)
        self.period, self.factor, self.min_loss_scale = int(period), float(factor), float(min_loss_scale)

    def scale(self, tree_):
        """Each array of `tree_` (the loss) times the loss scale, in its own dtype."""
        return tree.map(lambda x: x * nx.astype(self.loss_scale, x.dtype), tree_)

    def unscale(self, tree_):
        """Each array of `tree_` (the gradients) divided by the loss scale."""
        inverse = 1.0 / self.loss_scale
        return tree.map(lambda x: x * nx.astype(inverse, x.dtype), tree_)

    def adjust(self, grads_finite):
        """The next state after a step whose gradients were all finite or not."""
        finite = nx.asarray(grads_finite)
        # a scale that would overflow when grown stays: compared, not multiplied into inf
        limit = _largest_growable(self.factor)
        grown = nx.where(self.loss_scale <= limit, nx.minimum(self.loss_scale, limit) * np.float32(self.factor),
                         self.loss_scale)
        kept = nx.where(self.counter == self.period - 1, grown, self.loss_scale)
        shrunk = nx.maximum(np.float32(self.min_loss_scale), self.loss_scale / np.float32(self.factor))
        counter = ((self.counter + 1) % self.period) * nx.astype(finite, nx.int32)
        return self.replace(loss_scale=nx.where(finite, kept, shrunk), counter=counter)
