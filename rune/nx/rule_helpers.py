"""Building blocks of transformation rules, shared by the modules that define
primitives (the nx family modules) and by the core rule tables
(rune/transforms/autodiff/rules.py, rune/transforms/batching.py).

Rules are ordinary nx code, so these sit in nx, below the transformations
that run them. They are plain functions: each module that defines a primitive
writes and registers its own rules (rune/core/primitive.py's tables), calling
these for the shared arithmetic.

Elementwise primitives share one scheme: forward mode multiplies each tangent
by a partial derivative, reverse mode multiplies the cotangent by it and sums
over the axes broadcasting added (`unbroadcast`); vmap aligns every batched
operand's batch axis in front.
"""
import numpy as np

from ..core.trace import bind
from . import elementwise, reductions, shapes


def shape_of(x):
    """The shape of an array, or () for a Python scalar operand."""
    return x.shape if hasattr(x, "shape") else ()


def unbroadcast(ct, shape):
    """Sum `ct` down to `shape` (undoing NumPy broadcasting)."""
    if ct.shape == tuple(shape):
        return ct
    lead = ct.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and ct.shape[lead + i] != 1)
    out = reductions.sum(ct, axes) if axes else ct
    return shapes.reshape(out, shape)


def sum_terms(*terms):
    """The sum of the terms that are not None (None: a zero tangent or cotangent,
    as rules receive for unused outputs); None if all are."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    out = present[0]
    for t in present[1:]:
        out = elementwise.add(out, t)
    return out


def to_front(x, d):
    """`x` with batch axis `d` moved to axis 0."""
    return x if d == 0 else shapes.moveaxis(x, d, 0)


def elementwise_jvp(prim, partials, primals, tangents):
    """The JVP of the elementwise `prim`: each tangent times its operand's partial
    derivative (`partials`: one function of (*operands, out) per operand, None
    for zero), summed and broadcast to the result's shape."""
    out = bind(prim, *primals)
    with np.errstate(all="ignore"):   # a partial of inf meets a zero tangent (where's unused branch): NaN meant
        terms = [elementwise.multiply(t, d(*primals, out)) for t, d in zip(tangents, partials)
                 if t is not None and d is not None]
    if not terms:
        return out, None
    return out, shapes.broadcast_to(sum_terms(*terms), shape_of(out))


def elementwise_vjp(partials, ct, ins, out, wants):
    """The VJP of an elementwise primitive with these `partials` (as for
    `elementwise_jvp`): the cotangent times each wanted operand's partial, summed
    down to that operand's shape."""
    with np.errstate(all="ignore"):   # a partial of inf meets a zero cotangent (where's unused branch): NaN meant
        return tuple(None if d is None or not w else unbroadcast(elementwise.multiply(ct, d(*ins, out)), shape_of(v))
                     for v, d, w in zip(ins, partials, wants))


def elementwise_batch(prim, values, dims, size, **params):
    """The elementwise `prim` over a batch: every batched operand gets its batch
    axis first, padded with unit axes to the rank of the widest lane, so the
    primitive's own broadcasting lines the lanes up."""
    rank = max((v.ndim if hasattr(v, "ndim") else 0) - (d is not None) for v, d in zip(values, dims))
    aligned = []
    for v, d in zip(values, dims):
        if d is None:
            aligned.append(v)
        else:
            v = to_front(v, d)
            aligned.append(shapes.reshape(v, (size,) + (1,) * (rank - v.ndim + 1) + tuple(v.shape[1:])))
    return bind(prim, *aligned, **params), 0
