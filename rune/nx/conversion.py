"""Values as rune arrays: asarray/array (from Python numbers, nested lists,
NumPy and DLPack arrays), astype, and the operand rules every nx function
starts with: placement (`committed_device`) and dtype promotion (`promote`,
NEP 50: Python scalars are weak literals)."""
import builtins
import functools

import numpy as np

from ..core.prims import P
from ..core.array import from_foreign
from ..core.trace import Tracer, bind
from ..errors import DTypeError, ScalarOverflowError, ShapeError, UsageError
from ..core import dtypes as dt
from ..core.devices import get_device
from .buffers import Array, from_host, move
from .constants import checked_scalar as _literal, host_cast, host_convert

_HOST0 = get_device("cpu")

_SCALARS = (bool, int, float, complex)
# Scalars that can stand as literals in an equation: Python's and NumPy's.
_LITERALS = frozenset(_SCALARS + tuple(np.dtype(d).type for d in dt.ALL))


def asarray(x, dtype=None, device=None):
    """`x` as an Array or tracer; NumPy arrays keep their dtype, Python scalars take rune's."""
    if isinstance(x, (Array, Tracer)):
        if dtype is not None and dt.dtype(dtype) != x.dtype:
            x = astype(x, dtype)
        if device is not None:
            x = move(x, get_device(device))
        return x
    if dtype is not None:
        dtype = dt.dtype(dtype)
    if type(x) in _SCALARS:  # exact types: np.float64 subclasses float but keeps its dtype
        target = dtype or dt.weak_dtype_of(x)
        host = np.asarray(_literal("asarray", x, target), target) if type(x) is int else host_cast(x, target)
    elif hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        host = np.asarray(from_foreign(x, _HOST0)._raw)
        host = host if dtype is None else host.astype(dtype)
    else:
        if isinstance(x, tuple) and type(x) is not tuple:
            _check_tuple_subclass(x)
        if isinstance(x, (list, tuple)) and holds_arrays(x):
            return _stacked(x, dtype, device)
        try:
            host = np.asarray(x)
        except ValueError as e:
            if not isinstance(x, (list, tuple)):
                raise
            raise ShapeError(f"array: nested sequences must be rectangular, but "
                             f"{_ragged(x) or e}") from e
        if dtype is not None:
            host = host_convert(host, dtype)  # rune's cast rules, as `astype`
        elif not isinstance(x, (np.ndarray, np.generic)) or host.dtype not in dt.ALL:
            target = _default_for_kind(host.dtype, x)
            if host.dtype.kind in "iu" and target.kind in "iu" and host.size:
                info = np.iinfo(target)
                if host.min() < info.min or host.max() > info.max:
                    raise ScalarOverflowError(f"asarray: the integers in {type(x).__name__} do not fit "
                                              f"in {target.name} (from {host.min()} to {host.max()}); "
                                              f"pass dtype=nx.int64")
            host = host.astype(target)
    return from_host(np.array(host, copy=True) if host is x else host, device)


def holds_arrays(xs):
    """Whether the (nested) sequence `xs` holds a rune array or tracer."""
    return builtins.any(isinstance(e, (Array, Tracer)) for e in _flat(xs))


def _stacked(xs, dtype, device):
    """A (nested) sequence holding rune arrays or tracers as one array: its
    elements stacked, as JAX does, so derivatives flow through each one and
    device arrays stay on their device (going through NumPy would keep only
    the values). The dtype is the elements' common one, Python numbers among
    them weak: [x_bf16, 1.0] is bfloat16."""
    if dtype is None:
        keys = []
        for e in _flat(xs):
            if not isinstance(e, (Array, Tracer)) and type(e) not in _SCALARS:
                e = asarray(e)  # NumPy data keeps its dtype, strongly
            keys.append((dt.weak_dtype_of(e), True) if type(e) in _SCALARS else (e.dtype, e.weak))
        dtype, _ = dt.promote(dict.fromkeys(keys))  # each kind once: a long list is a short key
    if device is None:
        device = committed_device(list(_flat(xs)))
    where = _ragged(xs)
    if where:
        raise ShapeError(f"array: nested sequences must be rectangular, but {where}")

    def build(x):
        if isinstance(x, (list, tuple)) and holds_arrays(x):
            # The parts have one dtype and shape by now: each gets a leading axis and they
            # are joined on it (the primitives by name: nx.stack is built on this module).
            rows = [bind(P["reshape"], p, shape=(1,) + p.shape) for p in map(build, x)]
            return rows[0] if len(rows) == 1 else bind(P["concatenate"], *rows, axis=0)
        if isinstance(x, (Array, Tracer)):
            return asarray(astype(x, dtype), device=device)  # astype: a weak element becomes strong
        return asarray(x, dtype, device)
    return build(xs)


def _ragged(x, path=""):
    """Where nested lists stop being rectangular, in words (for the error), or ""."""
    for i, e in enumerate(x):
        found = _ragged(e, f"{path}[{i}]") if isinstance(e, (list, tuple)) else ""
        if found:
            return found
    shapes = [_shape_of(e) for e in x]  # each is rectangular by now
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            return f"x{path}[{i}] has shape {shape} and x{path}[0] has shape {shapes[0]}"
    return ""


def _shape_of(x):
    """The shape of array data `x` (a rectangular nested sequence may hold arrays
    and tracers, which NumPy must not convert)."""
    if isinstance(x, (list, tuple)):
        return (len(x),) + (_shape_of(x[0]) if x else ())
    return tuple(x.shape) if isinstance(x, (Array, Tracer)) else np.shape(x)


def _check_tuple_subclass(x):
    """A tuple subclass that is not a pytree container reached here as a leaf:
    it would silently become one array. JAX refuses such leaves too."""
    from ..tree import _handler
    if _handler(type(x)) is None:
        raise UsageError(f"a {type(x).__qualname__} (a tuple subclass) is not an array, and rune.tree does "
                         f"not know it as a container of arrays: register it with rune.tree.register "
                         f"(or make it a NamedTuple)")


def _default_for_kind(np_dtype, source):
    """Lists of Python numbers take rune's defaults (float32, int32), as in JAX."""
    kinds = {"f": dt.float32, "i": dt.int32, "u": dt.uint32, "b": dt.bool_, "c": dt.complex64}
    if isinstance(source, (np.ndarray, np.generic)) and np_dtype in dt.ALL:
        return np_dtype
    if np_dtype.kind in kinds:
        return kinds[np_dtype.kind]
    raise DTypeError(f"cannot make an array of {type(source).__name__} with NumPy dtype {np_dtype}")


def array(x, dtype=None, device=None):
    """An Array holding `x` (a list, possibly of arrays, a NumPy array, a scalar, an Array).

    x: the data; lists of Python numbers take rune's defaults (float32, int32), NumPy arrays keep their dtype.
    dtype: the result's dtype (default: from `x`). device: where it is placed (default: the default device).
    """
    return asarray(x, dtype, device)


def committed_device(xs):
    """The device of the first rune array or tracer among `xs` (None if none).

    The placement rule: rune arrays are committed to their device, so operands
    on different devices are an error. NumPy arrays, lists and Python scalars
    are not (as JAX treats NumPy arrays): meeting rune arrays, they become
    arrays on this device; alone, on the default device.
    """
    for x in xs:
        if isinstance(x, (Array, Tracer)):
            return x.device
    return None


def operands(xs):
    """Each of `xs` as an Array or tracer; Python and NumPy values become arrays
    placed with the rune arrays among `xs` (see `committed_device`)."""
    device = committed_device(xs)
    return [x if isinstance(x, (Array, Tracer)) else asarray(x, device=device) for x in xs]


def tree_operands(tree_):
    """The leaves of a pytree as arrays or tracers, and its structure."""
    from .. import tree
    leaves, structure = tree.flatten(tree_)
    return operands(leaves), structure


def _flat(xs):
    for e in xs:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


def _operand(x, device=None):
    if isinstance(x, (Array, Tracer, np.generic)) or type(x) in _SCALARS:
        return x
    return asarray(x, device=device)


def _operands(xs):
    """Each of `xs` as an operand of one operation: scalars stay literals, NumPy
    arrays and lists become arrays placed by `committed_device`'s rule."""
    device = committed_device(xs)
    return [_operand(x, device) for x in xs]


def promote(name, *xs):
    """Operands with one common dtype (NEP 50; Python scalars are weak literals)."""
    xs = _operands(xs)
    keys = []
    for x in xs:
        if type(x) in _SCALARS:
            keys.append((dt.weak_dtype_of(x), True))
        elif isinstance(x, np.generic):  # a NumPy scalar is strong (NEP 50)
            keys.append((dt.dtype(x.dtype), False))
        else:
            keys.append((x.dtype, x.weak))
    target, _ = dt.promote(keys)
    out = []
    for x, (d, _) in zip(xs, keys):
        if type(x) in _SCALARS or isinstance(x, np.generic):
            out.append(_literal(name, x, target) if d != target or type(x) in _SCALARS else x)
        elif d != target:
            out.append(converted(x, target, name))
        else:
            out.append(x)
    return out


# A Python float or int given to a jitted function is traced as two values (api.py,
# `_stage`): its exact value (float64, int64), the staged input, and that value as the
# weak float32 / int32 the function sees, as eager code sees the scalar itself.
# id(narrow) -> _Scalar while the function is staged: a conversion of the narrow value to
# another dtype starts from the exact one, so `int32_array + 0.3` under jit adds
# float64(0.3) and `int64_array + 2**40` adds 2**40, as eagerly; an int converted to a
# narrower integer (`int8_array + n`) records the range the value must lie in, which each
# call checks (eagerly: ScalarOverflowError), instead of wrapping silently.
_EXACT = {}


class _Scalar:
    """A Python scalar argument while its function is staged: the value the function
    sees (`narrow`), its exact value (`exact`), and the integer dtypes it was narrowed
    to, with the operation that did it (`ranges`)."""
    __slots__ = ("narrow", "exact", "ranges")

    def __init__(self, narrow, exact):
        self.narrow, self.exact, self.ranges = narrow, exact, []


def converted(x, dtype, name="astype"):
    """`x` (an Array or tracer) converted to `dtype`; a Python scalar argument of jit
    converts from its exact value (see `_EXACT`), `name` the operation converting it."""
    if x.weak and _EXACT:
        scalar = _EXACT.get(id(x))
        if scalar is not None and scalar.narrow is x:
            if dt.is_int(dtype) and dtype != dt.int64:
                scalar.ranges.append((np.dtype(dtype), name))
            x = scalar.exact
    return bind(P["convert"], x, dtype=dtype)


def narrowed_python_scalars(leaves):
    """Staging a jitted function: each weak float64 / int64 input (a Python float or int
    argument at its exact value) as the weak float32 / int32 the function sees, kept in
    `_EXACT` with its exact value. Returns the leaves and their _Scalars."""
    out, scalars = [], []
    for x in leaves:
        if isinstance(x, Tracer) and x.aval.weak and x.aval.dtype in _NARROW:
            narrow = bind(P["convert"], x, dtype=_NARROW[x.aval.dtype])
            narrow.var.aval = narrow.aval = narrow.aval.update(weak=True)   # a staged value: a Var's
            scalars.append(_Scalar(narrow, x))
            _EXACT[id(narrow)] = scalars[-1]
            x = narrow
        out.append(x)
    return out, scalars


_NARROW = {dt.float64: dt.float32, dt.int64: dt.int32}   # a Python scalar's exact dtype -> its own


def forget_exact(scalars):
    for scalar in scalars:
        _EXACT.pop(id(scalar.narrow), None)


def _dtype_of(x):
    return x.dtype if hasattr(x, "dtype") else dt.weak_dtype_of(x)


def _is_weak(x):
    """Whether `x` is weak: a Python scalar, or an array made of Python scalars alone."""
    return type(x) in _SCALARS or getattr(x, "weak", False)


def _all_weak(*xs):
    """Whether the operands `xs`, as given (before `promote` turns Python scalars into
    NumPy literals), are all weak: then a float they need is the default float."""
    return builtins.all(_is_weak(x) for x in xs)


def astype(x, dtype):
    """`x` converted to `dtype` (a strong dtype from then on)."""
    dtype = dt.dtype(dtype)
    x = _operand(x)
    if not isinstance(x, (Array, Tracer)):
        return asarray(x, dtype)
    if x.dtype == dtype and not x.weak:
        return x
    if dt.is_complex(x.dtype) and not dt.is_complex(dtype) and dtype != dt.bool_:
        raise DTypeError(f"astype: casting {x.dtype.name} to {dtype.name} would drop the imaginary part; "
                         f"take nx.real(x) or nx.abs(x) first")
    return converted(x, dtype)


cast = astype


def in_float32(fn):
    """`fn` computed in float32 for float16/bfloat16 operands, rounded once to
    their dtype at the end (as torch's kernels for these dtypes and XLA's
    reductions do). A sum or a divisor never passes through the low-precision
    dtype (float16's counts overflow at 65504), and a chain of elementwise steps
    (an activation's) rounds once instead of after every step; the derivatives
    follow the same path, through the two conversions."""
    @functools.wraps(fn)
    def run(x, *args, **kwargs):
        x = asarray(x)
        if x.dtype not in (dt.float16, dt.bfloat16):
            return fn(x, *args, **kwargs)
        return astype(fn(astype(x, dt.float32), *args, **kwargs), x.dtype)
    return run


def constant_like(value, like, dtype=None):
    """`value` as an array operand of `like`: a rune array stays as it is (so a
    device mismatch is reported, never fixed silently); a Python or NumPy value
    becomes a constant placed with `like`, as a Python scalar would be."""
    if isinstance(value, (Array, Tracer)):
        return value if dtype is None else astype(value, dtype)
    return asarray(value, dtype, like.device)
