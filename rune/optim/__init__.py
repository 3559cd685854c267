"""Optimizers as optax-shaped gradient transformations: `rune.optim`.

A transformation is a pair `init(params) -> state` and
`update(grads, state, params=None) -> (updates, state)` over pytrees; `chain`
composes them, and `apply_updates(params, updates)` adds the result to the
parameters. States are pytrees of arrays made with `zeros_like` of the
parameters, so they live where the parameters live, and everything is plain
`nx` code: a whole training step (loss, gradient, update) jits as one function.

The optimizers are chains of small pieces, as in optax:
sgd = trace (momentum) + scale by -learning_rate; adam = scale_by_adam + scale
by -learning_rate; adamw adds the decoupled weight decay before the scaling.
A learning rate is a number or a schedule: any function of the step count
(0 for the first update), such as `warmup_cosine`.

- schedules (rune/optim/schedules.py): constant, linear, cosine, exponential,
  piecewise, one-cycle, joined.
- pieces (basics.py): chain, scaling, momentum, weight decay, clipping, EMA,
  masked.
- adaptive directions (scaling.py): Adam's, RMSProp's, Adagrad's, Lion's,
  LAMB's trust ratio, Adafactor's factored moments.
- wrappers (wrappers.py): multi_transform (parameter groups), MultiSteps.
- optimizers (aliases.py): sgd adam adamw rmsprop adagrad lion lamb adafactor.
"""
from .aliases import adafactor, adagrad, adam, adamw, lamb, lion, rmsprop, sgd
from .basics import (EmaState, EmptyState, GradientTransformation, MaskedNode, MaskedState,
                     ScaleByScheduleState, TraceState, add_decayed_weights, apply_updates, chain, clip,
                     clip_by_block_rms, clip_by_global_norm, ema, incremental_update, masked, scale,
                     scale_by_learning_rate, trace)
from .scaling import (FactoredState, ScaleByAdamState, ScaleByLionState, ScaleByRmsState, ScaleByRssState,
                      ScaleByStddevState, scale_by_adam, scale_by_factored_rms, scale_by_lion,
                      scale_by_param_block_rms, scale_by_rms, scale_by_rss, scale_by_stddev,
                      scale_by_trust_ratio)
from .schedules import (constant, constant_schedule, cosine_decay, cosine_decay_schedule, cosine_onecycle,
                        cosine_onecycle_schedule, exponential_decay, join_schedules, linear, linear_onecycle,
                        linear_onecycle_schedule, linear_schedule, piecewise_constant,
                        piecewise_constant_schedule, piecewise_interpolate, piecewise_interpolate_schedule,
                        warmup_cosine, warmup_cosine_decay_schedule)
from .wrappers import MultiSteps, MultiStepsState, MultiTransformState, multi_transform

# Checkpoints name a state's class by module and qualified name (rune.save's metadata,
# matched by rune.load's classes=): the classes keep the public module's name, as they
# had before rune.optim was split into modules, so saved files still load.
for _cls in (EmaState, EmptyState, GradientTransformation, MaskedNode, MaskedState, ScaleByScheduleState,
             TraceState, FactoredState, ScaleByAdamState, ScaleByLionState, ScaleByRmsState, ScaleByRssState,
             ScaleByStddevState, MultiStepsState, MultiTransformState):
    _cls.__module__ = __name__
del _cls
