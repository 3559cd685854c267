"""JVP and VJP rules of the core first-order primitives (rune/core/prims.py).

Elementwise primitives declare their partial derivatives where they are declared
(rune/base/vocabulary.py): forward mode multiplies tangents by them, reverse mode
multiplies cotangents and sums over broadcast axes (the shared machinery of
rune/nx/rule_helpers.py). Structural
primitives have linear rules written once each. Primitives defined elsewhere
register their rules where they are defined (the nx family modules,
rune/transforms/control.py, ...).
"""
import functools

import numpy as np

from ...base import vocabulary
from ...core.prims import P
from ...core.primitive import jvp_rules, no_derivative, vjp_rules
from ...core.trace import bind
from ...nx import ops
from ...nx.constants import filled, iota
from ...nx.creation import ones_like, zeros_like
from ...nx.index_math import from_end, in_bounds
from ...nx.rule_helpers import elementwise_jvp, elementwise_vjp, shape_of, unbroadcast


# ---------------------------------------------------------------- elementwise

# Each elementwise primitive's derivative is declared with it (rune/base/vocabulary.py):
# partial derivatives, the signs of a linear one, or none.
def _linear_rules(name, signs):
    prim = P[name]

    def jvp(primals, tangents):
        out = bind(prim, *primals)
        terms = [t if s == 1 else ops.negative(t) for t, s in zip(tangents, signs) if t is not None]
        total = terms[0] if len(terms) == 1 else ops.add(*terms)
        return out, ops.broadcast_to(total, shape_of(out))

    def vjp(ct, ins, out, wants):
        return tuple(unbroadcast(ct if s == 1 else ops.negative(ct), shape_of(v)) if w else None
                     for v, s, w in zip(ins, signs, wants))

    jvp_rules[prim], vjp_rules[prim] = jvp, vjp


def _elementwise_rules(name, partials):
    prim = P[name]
    jvp_rules[prim] = lambda primals, tangents: elementwise_jvp(prim, partials, primals, tangents)
    vjp_rules[prim] = lambda ct, ins, out, wants: elementwise_vjp(partials, ct, ins, out, wants)


def _zero_rules(name):
    # No derivative flows through: forward mode gives a zero tangent, and the
    # tape never records these (no_derivative), so they need no VJP rule.
    prim = P[name]
    no_derivative.add(prim)
    jvp_rules[prim] = lambda primals, tangents, **params: (bind(prim, *primals, **params), None)


for _op in vocabulary.OPS:
    if _op.partials is not None:
        _elementwise_rules(_op.name, tuple(functools.partial(f, ops) for f in _op.partials))
    elif _op.linear is not None:
        _linear_rules(_op.name, _op.linear)
    elif not _op.smooth:
        _zero_rules(_op.name)


def _instantiate(t, like):
    return t if t is not None else zeros_like(like)


def _rule(name, table):
    def register(fn):
        table[P[name]] = fn
        return fn
    return register


@_rule("select", jvp_rules)
def _select_jvp(primals, tangents):
    pred, a, b = primals
    out = bind(P["select"], pred, a, b)
    _, ta, tb = tangents
    if ta is None and tb is None:
        return out, None
    return out, ops.where(pred, ta if ta is not None else zeros_like(out),
                         tb if tb is not None else zeros_like(out))


@_rule("select", vjp_rules)
def _select_vjp(ct, ins, out, wants):
    pred, a, b = ins
    zero = ct.dtype.type(0)
    return (None, unbroadcast(ops.where(pred, ct, zero), shape_of(a)) if wants[1] else None,
            unbroadcast(ops.where(pred, zero, ct), shape_of(b)) if wants[2] else None)


def _float(dtype):
    """Float or complex: the dtypes that carry derivatives."""
    return dtype.kind in "fc" or dtype.name == "bfloat16"


@_rule("convert", jvp_rules)
def _convert_jvp(primals, tangents, *, dtype):
    out = bind(P["convert"], primals[0], dtype=dtype)
    return out, (bind(P["convert"], tangents[0], dtype=dtype) if _float(dtype) else None)


@_rule("convert", vjp_rules)
def _convert_vjp(ct, ins, out, wants, *, dtype):
    x = ins[0]
    src = x.dtype if hasattr(x, "dtype") else None
    if src is None or not _float(src):
        return (None,)
    if ct.dtype.kind == "c" and src.kind != "c":
        # real -> complex is the embedding x -> x + 0i: its transpose keeps the real part (as JAX)
        ct = bind(P["real"], ct)
    return (bind(P["convert"], ct, dtype=src),)


# ---------------------------------------------------------------- reductions

def _keepdims_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _expand_back(ct, x, axes):
    return ops.broadcast_to(ops.reshape(ct, _keepdims_shape(x.shape, axes)), x.shape)


@_rule("reduce_sum", jvp_rules)
def _sum_jvp(primals, tangents, *, axes):
    return bind(P["reduce_sum"], primals[0], axes=axes), bind(P["reduce_sum"], tangents[0], axes=axes)


@_rule("reduce_sum", vjp_rules)
def _sum_vjp(ct, ins, out, wants, *, axes):
    return (_expand_back(ct, ins[0], axes),)


def _extremum_weights(x, out, axes):
    hit = ops.astype(ops.equal(x, _expand_back(out, x, axes)), x.dtype)
    return ops.divide(hit, _expand_back(bind(P["reduce_sum"], hit, axes=axes), x, axes))


def _extremum(name):
    prim = P[name]

    def jvp(primals, tangents, *, axes):
        out = bind(prim, primals[0], axes=axes)
        w = _extremum_weights(primals[0], out, axes)
        return out, bind(P["reduce_sum"], ops.multiply(tangents[0], w), axes=axes)

    def vjp(ct, ins, out, wants, *, axes):
        return (ops.multiply(_expand_back(ct, ins[0], axes), _extremum_weights(ins[0], out, axes)),)

    jvp_rules[prim], vjp_rules[prim] = jvp, vjp


_extremum("reduce_max")
_extremum("reduce_min")


def _prod_of_others(x, axes):
    """For each element, the product of the other elements it is reduced with.
    Exact with zeros: no element is divided by a zero (the count of zeros decides)."""
    zero = ops.equal(x, 0)
    safe = ops.where(zero, x.dtype.type(1), x)
    nonzero = _expand_back(bind(P["reduce_prod"], safe, axes=axes), x, axes)
    zeros = _expand_back(bind(P["reduce_sum"], ops.astype(zero, np.int32), axes=axes), x, axes)
    alone = ops.logical_and(zero, ops.equal(zeros, 1))  # the only zero: the rest multiply
    return ops.where(ops.equal(zeros, 0), ops.divide(nonzero, safe),
                    ops.where(alone, nonzero, x.dtype.type(0)))


@_rule("reduce_prod", jvp_rules)
def _prod_jvp(primals, tangents, *, axes):
    x = primals[0]
    out = bind(P["reduce_prod"], x, axes=axes)
    return out, bind(P["reduce_sum"], ops.multiply(tangents[0], _prod_of_others(x, axes)), axes=axes)


@_rule("reduce_prod", vjp_rules)
def _prod_vjp(ct, ins, out, wants, *, axes):
    return (ops.multiply(_expand_back(ct, ins[0], axes), _prod_of_others(ins[0], axes)),)


for _n in ("argmax", "argmin", "random_bits"):
    _zero_rules(_n)


def _constant_rules(name):
    # iota and full broadcast their scalar operand (iota adds the index, a
    # constant): linear in it, with the sum of the cotangent as its transpose.
    prim = P[name]

    def jvp(primals, tangents, *, shape, **params):
        return bind(prim, *primals, shape=shape, **params), ops.broadcast_to(tangents[0], shape)

    def vjp(ct, ins, out, wants, **params):
        return (ops.sum(ct),)

    jvp_rules[prim], vjp_rules[prim] = jvp, vjp


_constant_rules("iota")
_constant_rules("full")


# ---------------------------------------------------------------- structure

def _linear(name, transpose):
    """A primitive linear in its first operand: the JVP applies it to the tangent."""
    prim = P[name]

    def jvp(primals, tangents, **params):
        out = bind(prim, *primals, **params)
        return out, bind(prim, tangents[0], *primals[1:], **params)

    def vjp(ct, ins, out, wants, **params):
        return (transpose(ct, *ins, **params),) + (None,) * (len(ins) - 1)

    jvp_rules[prim], vjp_rules[prim] = jvp, vjp


_linear("broadcast_to", lambda ct, x, shape: unbroadcast(ct, x.shape))
_linear("reshape", lambda ct, x, shape: ops.reshape(ct, x.shape))
_linear("transpose", lambda ct, x, perm: ops.transpose(ct, [perm.index(i) for i in range(len(perm))]))
_linear("rev", lambda ct, x, axes: ops.flip(ct, axes))
_linear("place", lambda ct, x, src, device: bind(P["place"], ct, src=device, device=src))
_linear("gather", lambda ct, x, idx, axis: bind(P["scatter"], zeros_like(x), idx, ct, axis=axis, mode="add"))
_linear("dynamic_slice", lambda ct, x, *starts, sizes: bind(P["dynamic_update_slice"], zeros_like(x), ct, *starts))


def _unslice(ct, x, starts, limits, strides):
    """Transpose of `slice`: put `ct` back where it was taken, zeros elsewhere."""
    for axis, (s, l, st) in enumerate(zip(starts, limits, strides)):
        if st > 1:  # spread every element out to its stride
            m = ct.shape[axis]
            ct = ops.pad(ops.expand_dims(ct, axis + 1),
                        [(0, 0)] * (axis + 1) + [(0, st - 1)] + [(0, 0)] * (ct.ndim - axis - 1))
            shape = list(ct.shape)
            ct = ops.reshape(ct, shape[:axis] + [m * st] + shape[axis + 2:])
            ct = ops.slice_in_dim(ct, 0, (m - 1) * st + 1 if m else 0, axis=axis)
        after = x.shape[axis] - s - ct.shape[axis]
        ct = ops.pad(ct, [(0, 0)] * axis + [(s, after)] + [(0, 0)] * (ct.ndim - axis - 1))
    return ct


_linear("slice", _unslice)


@_rule("pad", jvp_rules)
def _pad_jvp(primals, tangents, *, config):
    x, value = primals
    tx, tv = tangents
    out = bind(P["pad"], x, value, config=config)
    return out, bind(P["pad"], _instantiate(tx, x), _instantiate(tv, ops.asarray(value)), config=config)


@_rule("pad", vjp_rules)
def _pad_vjp(ct, ins, out, wants, *, config):
    x = ins[0]
    inner = ops._slice(ct, [lo for lo, _ in config], [lo + d for (lo, _), d in zip(config, x.shape)],
                      [1] * x.ndim)
    return inner, ops.subtract(ops.sum(ct), ops.sum(inner))


@_rule("concatenate", jvp_rules)
def _concat_jvp(primals, tangents, *, axis):
    out = bind(P["concatenate"], *primals, axis=axis)
    return out, bind(P["concatenate"], *[_instantiate(t, p) for p, t in zip(primals, tangents)], axis=axis)


@_rule("concatenate", vjp_rules)
def _concat_vjp(ct, ins, out, wants, *, axis):
    bounds = np.cumsum([0] + [x.shape[axis] for x in ins])
    return tuple(ops.slice_in_dim(ct, int(lo), int(hi), axis=axis) for lo, hi in zip(bounds[:-1], bounds[1:]))


@_rule("scatter", jvp_rules)
def _scatter_jvp(primals, tangents, *, axis, mode):
    x, idx, upd = primals
    out = bind(P["scatter"], x, idx, upd, axis=axis, mode=mode)
    tx, tu = _instantiate(tangents[0], x), _instantiate(tangents[2], upd)
    if mode in ("set", "add"):  # linear in (x, updates)
        return out, bind(P["scatter"], tx, idx, tu, axis=axis, mode=mode)
    wx, wu, spread = _combined_weights(x, idx, upd, out, axis, mode)
    return out, ops.add(ops.multiply(tx, wx), spread(ops.multiply(tu, wu)))


def _combined_weights(x, idx, upd, out, axis, mode):
    """For mul/min/max scatters: d out / d x (shaped like x), d out / d update
    (shaped like the updates, at its own position) and the scatter-add that
    gathers update contributions back to positions."""
    landed = _scatter_landed(x, idx, axis, "add")
    zero = x.dtype.type(0)

    def spread(values):
        return bind(P["scatter"], zeros_like(x), idx, ops.where(landed, values, zero), axis=axis, mode="add")

    if mode == "mul":
        # d out_p / d x_p = the product P of p's updates; d out_p / d u_j = x_p times
        # the product of the other updates at p, exact with zeros (as for prod).
        product = bind(P["scatter"], ones_like(x), idx, upd, axis=axis, mode="mul")
        is_zero = ops.equal(upd, 0)
        nonzero = bind(P["gather"], bind(P["scatter"], ones_like(x), idx,
                                         ops.where(is_zero, upd.dtype.type(1), upd), axis=axis, mode="mul"),
                       idx, axis=axis)
        zeros = bind(P["gather"], bind(P["scatter"], zeros_like(x), idx, ops.astype(is_zero, x.dtype),
                                       axis=axis, mode="add"), idx, axis=axis)
        others = ops.where(ops.equal(zeros, 0), ops.divide(nonzero, ops.where(is_zero, upd.dtype.type(1), upd)),
                          ops.where(ops.logical_and(is_zero, ops.equal(zeros, 1)), nonzero, zero))
        return product, ops.multiply(bind(P["gather"], x, idx, axis=axis), others), spread
    # min/max: the value comes from whichever attain it, ties sharing equally (as reduce_max).
    hit_x = ops.astype(ops.equal(x, out), x.dtype)
    hit_u = ops.astype(ops.logical_and(landed, ops.equal(upd, bind(P["gather"], out, idx, axis=axis))), x.dtype)
    count = ops.add(hit_x, spread(hit_u))
    return ops.divide(hit_x, count), ops.divide(hit_u, bind(P["gather"], count, idx, axis=axis)), spread


def _scatter_landed(x, idx, axis, mode):
    """Which updates reach the result: in bounds and, for "set", the last write to
    their position (earlier duplicates are overwritten). Shaped to broadcast
    against the updates."""
    n = x.shape[axis]
    flat = ops.reshape(idx, (-1,))
    pos = from_end(flat, n)
    landed = in_bounds(pos, n)
    if mode == "set":
        order = iota((flat.shape[0],), np.int32, 0, x.device)
        writer = bind(P["scatter"], filled((n,), -1, np.int32, x.device), flat, order,
                      axis=0, mode="set")
        landed = ops.logical_and(landed, ops.equal(bind(P["gather"], writer, pos, axis=0), order))
    return ops.reshape(landed, (1,) * axis + tuple(idx.shape) + (1,) * (x.ndim - axis - 1))


@_rule("scatter", vjp_rules)
def _scatter_vjp(ct, ins, out, wants, *, axis, mode):
    x, idx, upd = ins
    if mode in ("mul", "min", "max"):
        wx, wu, _ = _combined_weights(x, idx, upd, out, axis, mode)
        ct_u = ops.multiply(bind(P["gather"], ct, idx, axis=axis), wu) if wants[2] else None
        return ops.multiply(ct, wx), None, ct_u
    ct_upd = None
    if wants[2]:
        ct_upd = ops.where(_scatter_landed(x, idx, axis, mode), bind(P["gather"], ct, idx, axis=axis),
                          ct.dtype.type(0))
    ct_x = ct if mode == "add" else bind(P["scatter"], ct, idx, zeros_like(upd), axis=axis, mode="set")
    return ct_x, None, ct_upd


@_rule("dynamic_update_slice", jvp_rules)
def _dus_jvp(primals, tangents):
    x, upd, *starts = primals
    out = bind(P["dynamic_update_slice"], x, upd, *starts)
    return out, bind(P["dynamic_update_slice"], _instantiate(tangents[0], x),
                     _instantiate(tangents[1], upd), *starts)


@_rule("dynamic_update_slice", vjp_rules)
def _dus_vjp(ct, ins, out, wants):
    x, upd, *starts = ins
    ct_x = bind(P["dynamic_update_slice"], ct, zeros_like(upd), *starts)
    ct_upd = bind(P["dynamic_slice"], ct, *starts, sizes=upd.shape)
    return (ct_x, ct_upd) + (None,) * len(starts)


# ---------------------------------------------------------------- dot_general

@_rule("dot_general", jvp_rules)
def _dot_jvp(primals, tangents, *, dims):
    x, y = primals
    tx, ty = tangents
    out = bind(P["dot_general"], x, y, dims=dims)
    terms = []
    if tx is not None:
        terms.append(bind(P["dot_general"], tx, y, dims=dims))
    if ty is not None:
        terms.append(bind(P["dot_general"], x, ty, dims=dims))
    return out, terms[0] if len(terms) == 1 else ops.add(*terms)


def _dot_transpose(ct, other, dims, ndim, this_side):
    """Cotangent of one dot_general operand: contract `ct` with the other operand."""
    (lc, rc), (lb, rb) = dims
    if this_side == 1:  # the cotangent of y: swap roles
        lc, rc, lb, rb = rc, lc, rb, lb
    nb = len(lb)
    this_free = [i for i in range(ndim) if i not in lc and i not in lb]
    other_free = [i for i in range(other.ndim) if i not in rc and i not in rb]
    nthis = len(this_free)
    ct_other_axes = (tuple(range(nb + nthis, nb + nthis + len(other_free))) if this_side == 0
                     else tuple(range(nb, nb + len(other_free))))
    ct_this_axes = (tuple(range(nb, nb + nthis)) if this_side == 0
                    else tuple(range(nb + len(other_free), nb + len(other_free) + nthis)))
    # Bring ct to (batch, this_free, other_free) order.
    ct = ops.transpose(ct, list(range(nb)) + list(ct_this_axes) + list(ct_other_axes)) \
        if this_side == 1 else ct
    result = bind(P["dot_general"], ct, other,
                  dims=((tuple(range(nb + nthis, nb + nthis + len(other_free))), tuple(other_free)),
                        (tuple(range(nb)), tuple(rb))))
    src = list(lb) + this_free + [lc[rc.index(j)] for j in sorted(rc)]
    return ops.transpose(result, [src.index(k) for k in range(ndim)])


@_rule("dot_general", vjp_rules)
def _dot_vjp(ct, ins, out, wants, *, dims):
    x, y = ins
    return (_dot_transpose(ct, y, dims, x.ndim, 0) if wants[0] else None,
            _dot_transpose(ct, x, dims, y.ndim, 1) if wants[1] else None)
