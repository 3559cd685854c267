"""Sorting and cumulative functions: sort, argsort, cumulative_sum,
cumulative_prod (and NumPy's cumsum, cumprod).

Two primitives. `argsort` (stable; descending by sorting the reversed axis, so
equal elements keep their order both ways), whose integer result carries no
derivative. `sort` (ascending) is the array module's stable sort of the values:
NumPy sorts values several times faster than it finds their positions (1e6
int32: ~4 ms against ~60 ms), and unique, median and percentile need only the
values. Its derivative routes each cotangent to the element that landed there,
through the positions (argsort), which only differentiation computes. A
descending sort gathers x at argsort's positions (take_along_axis), which keeps
equal elements (0.0 and -0.0) in their order. The
cumulative functions are an associative scan (Hillis-Steele: log2(n) shifted
combines) of existing primitives: exact derivatives even through zeros of a
product, and jit, vmap and every backend with no new rules.

Their rules are here; their implementations on an array module are in
rune/backends/xp/sorting.py. They declare no lowering: compiled code runs them
op by op through those implementations.
"""
import builtins

from ..core.aval import Aval
from ..core.primitive import abstract_rules, batch_rules, jvp_rules, no_derivative, primitive, vjp_rules
from ..core.trace import bind
from ..errors import DTypeError, ShapeError
from ..core import dtypes as dt
from . import ops
from .shapes import take_along_axis
from .rule_helpers import to_front

argsort_p = primitive("argsort")
sort_p = primitive("sort")


def _argsort_abstract(x, *, axis, descending, index_dtype):
    return Aval(x.shape, index_dtype, x.device)


def _argsort_batch(values, dims, size, *, axis, **params):
    # each lane sorts along its own axis, one place further right behind the batch axis
    return bind(argsort_p, to_front(values[0], dims[0]), axis=axis + 1, **params), 0


def _argsort_jvp(primals, tangents, **params):
    return bind(argsort_p, *primals, **params), None


abstract_rules[argsort_p] = _argsort_abstract
# An integer result: no derivative flows through it (a zero tangent, and the tape never records it).
no_derivative.add(argsort_p)
jvp_rules[argsort_p] = _argsort_jvp
batch_rules[argsort_p] = _argsort_batch


def _sort_abstract(x, *, axis):
    return Aval(x.shape, x.dtype, x.device)


def _sort_batch(values, dims, size, *, axis):
    return bind(sort_p, to_front(values[0], dims[0]), axis=axis + 1), 0


def _positions(x, axis):
    return bind(argsort_p, x, axis=axis, descending=False, index_dtype=_index_dtype(x.shape[axis]))


def _sort_jvp(primals, tangents, *, axis):
    x, = primals
    t, = tangents
    return bind(sort_p, x, axis=axis), take_along_axis(t, _positions(x, axis), axis)


def _sort_vjp(ct, ins, out, wants, *, axis):
    # The cotangent of sorted place i goes back to the element sorted there: gather
    # ct at the inverse permutation (the positions of the positions).
    x, = ins
    return (take_along_axis(ct, _positions(_positions(x, axis), axis), axis),)


abstract_rules[sort_p] = _sort_abstract
jvp_rules[sort_p] = _sort_jvp
vjp_rules[sort_p] = _sort_vjp
batch_rules[sort_p] = _sort_batch


def _index_dtype(n):
    return dt.default_int if n < 2 ** 31 else dt.int64


def argsort(x, axis=-1, descending=False, stable=True):
    """The positions that sort `x` along `axis`, as int32 (int64 for axes of 2**31 elements or more).

    x: a real array of at least one dimension (complex numbers have no order). axis: the axis (-1 by default).
    descending: sort from largest to smallest. stable: accepted for the standard; the sort is always stable
    (ties keep their order, also when descending). NaNs sort last ascending and first descending.
    """
    x = ops.asarray(x)
    if x.ndim == 0:
        raise ShapeError("argsort: expected an array of at least 1 dimension, got a 0-d array")
    if dt.is_complex(x.dtype):
        raise DTypeError(f"argsort/sort: complex numbers have no order, got {x.dtype.name}; "
                         f"sort by nx.abs(x) or nx.real(x)")
    a = ops.normalize_axis("argsort", axis, x.ndim)
    return bind(argsort_p, x, axis=a, descending=builtins.bool(descending),
                index_dtype=_index_dtype(x.shape[a]))


def sort(x, axis=-1, descending=False, stable=True):
    """`x` sorted along `axis`; differentiable (each cotangent flows back to the element sorted into its place).

    x: a real array of at least one dimension. axis: the axis (-1 by default). descending: sort from largest to
    smallest. stable: accepted for the standard; the sort is always stable (see argsort).
    """
    x = ops.asarray(x)
    if x.ndim == 0:
        raise ShapeError("sort: expected an array of at least 1 dimension, got a 0-d array")
    if descending:
        return take_along_axis(x, argsort(x, axis, descending), axis)
    if dt.is_complex(x.dtype):
        raise DTypeError(f"argsort/sort: complex numbers have no order, got {x.dtype.name}; "
                         f"sort by nx.abs(x) or nx.real(x)")
    return bind(sort_p, x, axis=ops.normalize_axis("sort", axis, x.ndim))


# ---------------------------------------------------------------- cumulative

def _scan(x, axis, combine, identity):
    """Inclusive scan of `combine` along `axis`: at step s each element combines
    with the one s places before it (the identity before the start)."""
    n = x.shape[axis]
    s = 1
    while s < n:
        shifted = ops.slice_in_dim(x, 0, n - s, axis=axis)
        widths = [(0, 0)] * x.ndim
        widths[axis] = (s, 0)
        x = combine(x, ops.pad(shifted, widths, constant_values=identity))
        s *= 2
    return x


def _accumulator(name, x, dtype):
    """The dtype a cumulative sum/product runs in: `dtype` if given, else the
    standard's (and sum's): small ints widen to the default int of their kind,
    bools to the default int."""
    if dtype is not None:
        return dt.dtype(dtype)
    if x.dtype == dt.bool_ or x.dtype.kind == "i" and x.dtype.itemsize < dt.default_int.itemsize:
        return dt.default_int
    if x.dtype.kind == "u" and x.dtype.itemsize < dt.uint32.itemsize:
        return dt.uint32
    return x.dtype


def _cumulative(name, combine, identity):
    def op(x, /, *, axis=None, dtype=None, include_initial=False):
        x = ops.asarray(x)
        if axis is None:
            if x.ndim > 1:
                raise ShapeError(f"{name}: axis is required for an array of {x.ndim} dimensions "
                                 f"(shape {x.shape})")
            if x.ndim == 0:
                x = ops.reshape(x, (1,))
            axis = 0
        a = ops.normalize_axis(name, axis, x.ndim)
        x = ops.astype(x, _accumulator(name, x, dtype))
        out = _scan(x, a, combine, x.dtype.type(identity))
        if include_initial:
            widths = [(0, 0)] * x.ndim
            widths[a] = (1, 0)
            out = ops.pad(out, widths, constant_values=x.dtype.type(identity))
        return out
    op.__name__ = name
    return op


cumulative_sum = _cumulative("cumulative_sum", ops.add, 0)
cumulative_prod = _cumulative("cumulative_prod", ops.multiply, 1)
_CUMULATIVE_ARGS = ("x: an array. axis: the axis; may be None only for arrays of at most one dimension. "
                    "dtype: of the accumulator and the result (default: bools and narrow integers widen to int32, "
                    "uint8/uint16 to uint32, as in sum). include_initial: start with the identity (the result is "
                    "one longer along `axis`).")
cumulative_sum.__doc__ = "The running sum along `axis`.\n\n" + _CUMULATIVE_ARGS
cumulative_prod.__doc__ = "The running product along `axis`.\n\n" + _CUMULATIVE_ARGS


def _numpy_cumulative(standard, name):
    def op(x, axis=None, dtype=None, out=None):
        ops.check_out(name, out)
        x = ops.asarray(x)
        if axis is None:
            x, axis = ops.reshape(x, (-1,)), 0
        return standard(x, axis=axis, dtype=dtype)
    op.__name__ = name
    op.__doc__ = (f"NumPy's {name}: {standard.__name__} along `axis` (the flattened array when axis is None)."
                  "\n\nx: an array. axis: an int or None. dtype: of the accumulator and the result (default: "
                  "bools and narrow integers widen as in sum). out: must be None (rune arrays are immutable).")
    return op


cumsum = _numpy_cumulative(cumulative_sum, "cumsum")
cumprod = _numpy_cumulative(cumulative_prod, "cumprod")
