"""Learning-rate schedules: functions of the step count (0 for the first update).

Each returns a number or a float32 scalar array for a step given as an int or
an int array (an optimizer's counter, traced under jit), with optax's
meaning; the short names have optax's `*_schedule` names as aliases.
"""
import math

import numpy as np

from .. import nx
from ..errors import ArgumentError


def constant(value):
    """The same learning rate at every step."""
    return lambda step: value


def linear(init_value, end_value, transition_steps, transition_begin=0):
    """From init_value to end_value linearly over transition_steps steps, starting
    at step transition_begin (optax.linear_schedule)."""
    if transition_steps <= 0:
        return constant(init_value)

    def schedule(step):
        done = nx.clip(nx.asarray(step) - transition_begin, 0, transition_steps).astype(nx.float32)
        return init_value + (end_value - init_value) * (done / transition_steps)
    return schedule


def warmup_cosine(init_value, peak_value, warmup_steps, decay_steps, end_value=0.0):
    """Linear warm-up from init_value to peak_value over warmup_steps, then a
    cosine decay to end_value reached at decay_steps (which counts the warm-up
    steps, as optax.warmup_cosine_decay_schedule)."""
    if decay_steps <= warmup_steps:
        raise ArgumentError(f"warmup_cosine: decay_steps ({decay_steps}) must exceed warmup_steps "
                            f"({warmup_steps})")
    warm = linear(init_value, peak_value, warmup_steps)
    span = decay_steps - warmup_steps

    def schedule(step):
        step = nx.asarray(step)
        t = nx.clip(step - warmup_steps, 0, span).astype(nx.float32) / span
        cosine = end_value + (peak_value - end_value) * 0.5 * (1 + nx.cos(math.pi * t))
        return nx.where(step < warmup_steps, warm(step), cosine)
    return schedule


def cosine_decay(init_value, decay_steps, alpha=0.0):
    """init_value * ((1 - alpha) * (1 + cos(pi * t / decay_steps)) / 2 + alpha), with t
    held at decay_steps afterwards (optax.cosine_decay_schedule)."""
    def schedule(step):
        t = nx.clip(nx.asarray(step), 0, decay_steps).astype(nx.float32) / decay_steps
        return init_value * ((1 - alpha) * 0.5 * (1 + nx.cos(math.pi * t)) + alpha)
    return schedule


def exponential_decay(init_value, transition_steps, decay_rate, transition_begin=0, staircase=False,
                      end_value=None):
    """init_value * decay_rate ** ((step - transition_begin) / transition_steps), the
    exponent floored with staircase, and held at 0 before transition_begin; with
    end_value, never past it (a floor when decaying, a ceiling when growing), as
    optax.exponential_decay (which is constant when transition_steps <= 0)."""
    if transition_steps <= 0:   # as optax: no decay at all
        return constant(init_value)

    def schedule(step):
        t = nx.maximum(nx.asarray(step) - transition_begin, 0).astype(nx.float32) / transition_steps
        value = init_value * nx.power(nx.asarray(decay_rate, nx.float32), nx.floor(t) if staircase else t)
        if end_value is None:
            return value
        return nx.maximum(value, end_value) if decay_rate < 1 else nx.minimum(value, end_value)
    return schedule


def _boundaries(who, boundaries_and_scales):
    """The {step: scale} dict as sorted (steps, scales), scales checked non-negative."""
    items = sorted((boundaries_and_scales or {}).items())
    if any(scale < 0 for _, scale in items):
        raise ArgumentError(f"{who}: scales must be non-negative, got {dict(items)}")
    return [int(b) for b, _ in items], [float(s) for _, s in items]


def piecewise_constant(init_value, boundaries_and_scales=None):
    """init_value, multiplied by boundaries_and_scales[b] from step b on, for each
    boundary b (optax.piecewise_constant_schedule: {1000: 0.1, 2000: 0.1} divides
    the rate by 10 at step 1000 and again at 2000)."""
    bounds, scales = _boundaries("piecewise_constant", boundaries_and_scales)

    def schedule(step):
        step = nx.asarray(step)
        value = nx.full((), init_value, nx.float32, step.device)
        for bound, scale in zip(bounds, scales):
            value = nx.where(step < bound, value, value * scale)
        return value
    return schedule


def _interpolators():
    return {"linear": lambda start, end, pct: start + pct * (end - start),
            "cosine": lambda start, end, pct: end + (start - end) / 2.0 * (nx.cos(math.pi * pct) + 1)}


def piecewise_interpolate(interpolate_type, init_value, boundaries_and_scales=None):
    """Values init_value * (product of the scales of the boundaries up to b) at each
    boundary b (and init_value at step 0), joined by "linear" or "cosine"
    interpolation, held after the last boundary (optax.piecewise_interpolate_schedule)."""
    interpolate = _interpolators().get(interpolate_type)
    if interpolate is None:
        raise ArgumentError(f"piecewise_interpolate: interpolate_type must be one of "
                            f"{sorted(_interpolators())}, got {interpolate_type!r}")
    bounds, scales = _boundaries("piecewise_interpolate", boundaries_and_scales)
    bounds = [0] + bounds
    values = np.cumprod([float(init_value)] + scales).tolist()

    def schedule(step):
        step = nx.asarray(step)
        steps = step.astype(nx.float32)
        value = nx.full((), values[-1], nx.float32, step.device)
        for i in reversed(range(len(bounds) - 1)):
            # an interval of no steps (two equal boundaries) is never selected; max(., 1) keeps
            # its division finite
            pct = (steps - bounds[i]) / max(bounds[i + 1] - bounds[i], 1)
            value = nx.where(step < bounds[i + 1], interpolate(values[i], values[i + 1], pct), value)
        return value
    return schedule


def _onecycle(interpolate_type, transition_steps, peak_value, pct_start, div_factor, final_div_factor):
    if transition_steps <= 0:
        raise ArgumentError(f"{interpolate_type}_onecycle: transition_steps must be positive, "
                            f"got {transition_steps}")
    return piecewise_interpolate(interpolate_type, peak_value / div_factor,
                                 {int(pct_start * transition_steps): div_factor,
                                  int(transition_steps): 1.0 / (div_factor * final_div_factor)})


def cosine_onecycle(transition_steps, peak_value, pct_start=0.3, div_factor=25.0, final_div_factor=1e4):
    """The one-cycle policy (Smith & Topin 2018) with cosine ramps: from
    peak_value / div_factor up to peak_value over the first pct_start of
    transition_steps, then down to peak_value / (div_factor * final_div_factor)
    at transition_steps, held after (optax.cosine_onecycle_schedule)."""
    return _onecycle("cosine", transition_steps, peak_value, pct_start, div_factor, final_div_factor)


def linear_onecycle(transition_steps, peak_value, pct_start=0.3, pct_final=0.85, div_factor=25.0,
                    final_div_factor=1e4):
    """The one-cycle policy with linear ramps: up to peak_value over pct_start of
    transition_steps, back to peak_value / div_factor at pct_final, then down to
    peak_value / (div_factor * final_div_factor) at transition_steps
    (optax.linear_onecycle_schedule)."""
    if transition_steps <= 0:
        raise ArgumentError(f"linear_onecycle: transition_steps must be positive, got {transition_steps}")
    return piecewise_interpolate("linear", peak_value / div_factor,
                                 {int(pct_start * transition_steps): div_factor,
                                  int(pct_final * transition_steps): 1.0 / div_factor,
                                  int(transition_steps): 1.0 / final_div_factor})


def join_schedules(schedules, boundaries):
    """schedules[0] until boundaries[0], then schedules[1] counted from 0 again at
    that step, and so on (optax.join_schedules; one boundary fewer than schedules)."""
    schedules, boundaries = list(schedules), [int(b) for b in boundaries]
    if len(boundaries) != len(schedules) - 1:
        raise ArgumentError(f"join_schedules: {len(schedules)} schedules need {len(schedules) - 1} "
                            f"boundaries, got {len(boundaries)}")

    def schedule(step):
        step = nx.asarray(step)
        value = schedules[0](step)
        for boundary, later in zip(boundaries, schedules[1:]):
            value = nx.where(step < boundary, value, later(step - boundary))
        return value
    return schedule


constant_schedule, linear_schedule, warmup_cosine_decay_schedule = constant, linear, warmup_cosine
cosine_decay_schedule, piecewise_constant_schedule = cosine_decay, piecewise_constant
piecewise_interpolate_schedule = piecewise_interpolate
cosine_onecycle_schedule, linear_onecycle_schedule = cosine_onecycle, linear_onecycle


def as_schedule(learning_rate):
    """A learning rate that is a number or already a schedule, as a schedule."""
    return learning_rate if callable(learning_rate) else constant(learning_rate)
