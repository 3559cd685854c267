"""Transformations of transformations: `multi_transform` (parameter groups)
and `MultiSteps` (gradient accumulation), with optax's meanings (`masked`, which
weight decay uses too, is in basics)."""
from typing import Any, NamedTuple

from .. import nx, tree
from ..errors import ArgumentError
from .basics import GradientTransformation, _count_like, _map, _masked, _wide


class MultiTransformState(NamedTuple):
    inner_states: Any


def multi_transform(transforms, param_labels):
    """A transformation per group of parameters (optax.multi_transform).

    transforms: {label: transformation}.
    param_labels: a tree of labels with the parameters' structure (or a prefix
        of it), or a function of the parameters giving one; each leaf is
        updated by the transformation of its label, which keeps state for its
        own leaves only.
    """
    transforms = dict(transforms)

    def labels_of(tree_):
        labels = param_labels(tree_) if callable(param_labels) else param_labels
        flat = tree.prefix_broadcast(labels, tree_, "multi_transform's param_labels")
        unknown = sorted({repr(label) for label in flat if label not in transforms})
        if unknown:
            raise ArgumentError(f"multi_transform: the labels {', '.join(unknown)} have no transformation; "
                                f"transforms has {sorted(map(repr, transforms))}")
        return flat

    groups = {label: _masked(f"multi_transform[{label!r}]", tx,
                             lambda tree_, label=label: [x == label for x in labels_of(tree_)])
              for label, tx in transforms.items()}

    def init(params):
        return MultiTransformState({label: group.init(params) for label, group in groups.items()})

    def update(updates, state, params=None):
        new = {}
        for label, group in groups.items():
            updates, new[label] = group.update(updates, state.inner_states[label], params)
        return updates, MultiTransformState(new)
    return GradientTransformation(init, update)


# ---------------------------------------------------------------- gradient accumulation

class MultiStepsState(NamedTuple):
    mini_step: Any        # gradients accumulated since the last inner update (int32)
    gradient_step: Any    # inner updates made (int32)
    inner_opt_state: Any
    acc_grads: Any        # the mean of the gradients accumulated so far


def MultiSteps(opt, every_k):  # noqa: N802  (optax's name)
    """`opt` applied to the mean of every `every_k` consecutive gradients
    (optax.MultiSteps with use_grad_mean): each call adds its gradients to the
    running mean; every k-th call hands the mean to `opt` and returns its update,
    the others return zero updates and leave `opt`'s state (so its step count
    and schedules) untouched. The choice is made with `nx.where`, never a Python
    branch on values, so a step with accumulation jits as one function."""
    every_k = int(every_k)
    if every_k < 1:
        raise ArgumentError(f"MultiSteps: every_k must be a positive integer, got {every_k}")

    def init(params):
        count = _count_like(params)
        return MultiStepsState(count, count, opt.init(params), _map(nx.zeros_like, params))

    def update(updates, state, params=None):
        k = state.mini_step

        def mean(g, acc):
            g, wide = _wide(g), _wide(acc)
            steps = nx.astype(k, wide.dtype)
            return nx.astype((g + steps * wide) / (steps + 1), acc.dtype)
        acc = _map(mean, updates, state.acc_grads)
        emit = k == every_k - 1
        inner_updates, inner_state = opt.update(acc, state.inner_opt_state, params)
        keep = lambda new, old: nx.where(emit, new, old)  # noqa: E731
        return (_map(lambda u: nx.where(emit, u, nx.zeros_like(u)), inner_updates),
                MultiStepsState(nx.where(emit, nx.zeros_like(k), k + 1),
                                state.gradient_step + nx.astype(emit, k.dtype),
                                _map(keep, inner_state, state.inner_opt_state),
                                _map(lambda a: nx.where(emit, nx.zeros_like(a), a), acc)))
    return GradientTransformation(init, update)
