"""Contractions: dot_general (the one primitive), matmul, dot, vdot, vecdot,
outer, inner, tensordot and einsum (pairwise dot_generals)."""
import builtins
import string


from ..core.prims import P, broadcast_shapes
from ..core.trace import bind
from ..errors import ShapeError
from ..core import dtypes as dt
from .constants import iota
from .conversion import _operands, asarray, promote
from .elementwise import multiply
from .shapes import broadcast_to, moveaxis, normalize_axis, ravel, reshape, squeeze, transpose
from .reductions import sum
from .complex import conj

def dot_general(x, y, dimension_numbers):
    """The general tensor contraction of lax.dot_general.

    x, y: arrays, promoted to one dtype. dimension_numbers: ((x_contract, y_contract), (x_batch, y_batch)),
    tuples of axes; the result's axes are the batch axes, then x's free axes, then y's.
    """
    x, y = promote("dot_general", x, y)
    x, y = asarray(x), asarray(y)
    (lc, rc), (lb, rb) = dimension_numbers
    dims = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    for a, b in zip(dims[0][0] + dims[1][0], dims[0][1] + dims[1][1]):
        if x.shape[a] != y.shape[b]:
            raise ShapeError(f"dot_general: axis {a} of {x.shape} and axis {b} of {y.shape} differ")
    return bind(P["dot_general"], x, y, dims=dims)


def matmul(x, y):
    """The matrix product x @ y, batched over leading axes (NumPy's matmul).

    x, y: arrays of at least one dimension, promoted to one dtype; a 1-d operand is a vector (its axis is
    dropped from the result) and the leading batch axes broadcast.
    """
    x, y = promote("matmul", x, y)
    x, y = asarray(x), asarray(y)
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError("matmul: operands must have at least one dimension; use * for scalars")
    vx, vy = x.ndim == 1, y.ndim == 1
    if vx:
        x = reshape(x, (1, x.shape[0]))
    if vy:
        y = reshape(y, (y.shape[0], 1))
    if x.shape[-1] != y.shape[-2]:
        raise ShapeError(f"matmul: contracting dimensions differ: {x.shape} @ {y.shape} "
                         f"({x.shape[-1]} vs {y.shape[-2]})")
    if x.ndim > 2 and y.ndim == 2 and not vy:
        # a stack of rows times one matrix (a dense layer): one product over all the rows,
        # never the matrix broadcast to a batch (per-batch products, and a gradient
        # summed over that batch after them)
        return bind(P["dot_general"], x, y, dims=(((x.ndim - 1,), (0,)), ((), ())))
    batch = broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
    if x.ndim > 2 or y.ndim > 2:
        x = broadcast_to(x, batch + x.shape[-2:])
        y = broadcast_to(y, batch + y.shape[-2:])
    nb = len(batch)
    out = bind(P["dot_general"], x, y, dims=(((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
    if vx:
        out = squeeze(out, -2)
    if vy:
        out = squeeze(out, -1)
    return out


def dot(x, y):
    """NumPy's dot: x * y for scalars, matmul(x, y) when y.ndim <= 2, else contracted over x's last axis.

    x, y: arrays or scalars; when y.ndim > 2 the contraction is with y's second-to-last axis.
    """
    x, y = (asarray(v) for v in _operands((x, y)))
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    if y.ndim <= 2:
        return matmul(x, y)
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), ((), ())))


def vdot(x, y):
    """sum(conj(x) * y) over the flattened arrays (NumPy's vdot conjugates its first argument).

    x, y: arrays of the same size.
    """
    return sum(multiply(conj(ravel(x)), ravel(y)))


def outer(x, y):
    """The outer product x[i] * y[j] of the flattened arrays, of shape (x.size, y.size).

    x, y: arrays or scalars.
    """
    return multiply(reshape(x, (-1, 1)), reshape(y, (1, -1)))


def inner(x, y):
    """The inner product over the last axes of `x` and `y` (NumPy's inner).

    x, y: arrays whose last axes have one size.
    """
    x, y = (asarray(v) for v in _operands((x, y)))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 1,)), ((), ())))


def tensordot(x, y, axes=2):
    """The sum of products over axes of `x` and `y` (NumPy's tensordot).

    x, y: arrays. axes: an int n (x's last n axes against y's first n), or a pair (x_axes, y_axes) of ints
    or sequences (negative counts from the end); 2 by default.
    """
    x, y = (asarray(v) for v in _operands((x, y)))
    if isinstance(axes, int):
        lc, rc = tuple(range(x.ndim - axes, x.ndim)), tuple(range(axes))
    else:
        lc, rc = (tuple(a) if not isinstance(a, int) else (a,) for a in axes)
        # Negative axes count from the end, as everywhere (the standard's tensordot allows them).
        lc = tuple(normalize_axis("tensordot", a, x.ndim) for a in lc)
        rc = tuple(normalize_axis("tensordot", a, y.ndim) for a in rc)
    return dot_general(x, y, ((lc, rc), ((), ())))


def einsum(spec, *operands):
    """Einstein summation over any number of operands, as pairwise dot_generals.

    spec: NumPy's subscripts ("ij,jk->ik"; "..." and implicit output allowed; a repeated index within one
    term takes a diagonal). operands: the arrays, one per term.
    """
    spec = spec.replace(" ", "")
    operands = [asarray(o) for o in _operands(operands)]
    if "." in spec:
        spec = _expand_ellipsis(spec, operands)
    if "->" in spec:
        lhs, out = spec.split("->")
    else:
        lhs = spec
        counts = {}
        for c in lhs.replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        out = "".join(sorted(c for c, k in counts.items() if k == 1))
    terms = lhs.split(",")
    unknown = set(out) - set("".join(terms))
    if unknown or len(set(out)) != len(out):
        raise ShapeError(f"einsum: the output {out!r} of {spec!r} must name distinct indices of the "
                         f"inputs" + (f" ({''.join(sorted(unknown))} appear in no input)" if unknown else ""))
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: {spec!r} names {len(terms)} operands, got {len(operands)}")
    for t, o in zip(terms, operands):
        if len(t) != o.ndim:
            raise ShapeError(f"einsum: term {t!r} names {len(t)} axes, operand has shape {o.shape}")
    pairs = [_einsum_diagonals(o, t) for o, t in zip(operands, terms)]
    operands, terms = [p[0] for p in pairs], [p[1] for p in pairs]
    acc, acc_t = operands[0], terms[0]
    for i in range(1, len(operands)):
        later = "".join(terms[i + 1:]) + out
        acc, acc_t = _einsum_pair(acc, acc_t, operands[i], terms[i], later)
    keep = [c for c in acc_t if c in out]
    drop = tuple(i for i, c in enumerate(acc_t) if c not in out)
    if drop:
        acc = sum(acc, drop)
    return transpose(acc, [keep.index(c) for c in out]) if keep else acc


def _expand_ellipsis(spec, operands):
    """The spec with each '...' replaced by letters for the axes it stands for
    (aligned from the right across operands, as NumPy does)."""
    lhs, arrow, out = spec.partition("->")
    terms = lhs.split(",")
    free = [c for c in string.ascii_letters if c not in spec]
    counts = [o.ndim - (len(t) - 3) if "..." in t else 0 for t, o in zip(terms, operands)]
    width = builtins.max(counts, default=0)
    letters = "".join(free[:width])
    terms = [t.replace("...", letters[width - k:]) for t, k in zip(terms, counts)]
    if arrow:
        out = out.replace("...", letters)
    else:
        single = [c for c in "".join(terms) if "".join(terms).count(c) == 1 and c not in letters]
        out = letters + "".join(sorted(single))
    return ",".join(terms) + "->" + out


def _einsum_diagonals(x, t):
    """An index repeated within one term takes the diagonal of those axes."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        p, q = t.index(c), t.index(c, t.index(c) + 1)
        n = x.shape[p]
        if x.shape[q] != n:
            raise ShapeError(f"einsum: index {c!r} in {t!r} names axes of sizes {n} and {x.shape[q]}")
        rest = [i for i in range(x.ndim) if i not in (p, q)]
        flat = reshape(transpose(x, rest + [p, q]), tuple(x.shape[i] for i in rest) + (n * n,))
        diagonal = multiply(iota((n,), dt.int32, 0, x.device), n + 1)
        x = bind(P["gather"], flat, diagonal, axis=len(rest))
        t = "".join(t[i] for i in rest) + c
    return x, t


def _einsum_pair(x, xt, y, yt, later):
    # Indices in neither the other operand nor later terms are summed right away.
    x, xt = _einsum_sum_private(x, xt, yt + later)
    y, yt = _einsum_sum_private(y, yt, xt + later)
    batch = [c for c in xt if c in yt and c in later]
    contract = [c for c in xt if c in yt and c not in later]
    dims = ((tuple(xt.index(c) for c in contract), tuple(yt.index(c) for c in contract)),
            (tuple(xt.index(c) for c in batch), tuple(yt.index(c) for c in batch)))
    out = dot_general(x, y, dims)
    out_t = "".join(batch) + "".join(c for c in xt if c not in batch and c not in contract) + \
        "".join(c for c in yt if c not in batch and c not in contract)
    return out, out_t


def _einsum_sum_private(x, xt, others):
    private = tuple(i for i, c in enumerate(xt) if c not in others)
    if not private:
        return x, xt
    return sum(x, private), "".join(c for i, c in enumerate(xt) if i not in private)


def vecdot(x1, x2, axis=-1):
    """The dot product sum(conj(x1) * x2) of vectors along `axis`, broadcast over the other axes.

    x1, x2: arrays of at least one dimension, promoted to one dtype; the result keeps it (a uint8 product is
    uint8, as in the standard). axis: the axis of the vectors (-1 by default).
    """
    x1, x2 = promote("vecdot", x1, x2)
    x1, x2 = asarray(x1), asarray(x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ShapeError("vecdot: operands must have at least one dimension")
    if not (-builtins.min(x1.ndim, x2.ndim) <= axis < 0 or 0 <= axis < builtins.min(x1.ndim, x2.ndim)):
        raise ShapeError(f"vecdot: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
    a1, a2 = axis % x1.ndim if axis >= 0 else axis, axis % x2.ndim if axis >= 0 else axis
    if x1.shape[a1] != x2.shape[a2]:
        raise ShapeError(f"vecdot: axis {axis} has size {x1.shape[a1]} in {x1.shape} and {x2.shape[a2]} "
                         f"in {x2.shape}")
    x1, x2 = moveaxis(x1, a1, -1), moveaxis(x2, a2, -1)
    # The standard keeps the operands' dtype (a uint8 dot product is uint8, as matmul's).
    # x1 conjugated (the standard's vecdot: sum(conj(x1) * x2)); a real array is its own conjugate.
    return sum(multiply(conj(x1), x2), -1, dtype=x1.dtype)
