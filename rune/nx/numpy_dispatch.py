"""NumPy's functions on traced values run rune's.

`np.exp(x)` or `np.dot(x, w)` on a tracer (inside grad, jit, vmap, a loop
body) reaches a tracer's `__array_ufunc__` / `__array_function__` (NEP 13 and
NEP 18), which call `ufunc` and `function` here: the rune.nx function of the
same name runs instead, so the result is traced like any other (a NumPy result
would hold the values only, without the derivative or the staging). A NumPy
function rune has no counterpart for raises a RuneError naming it, never
falling back to NumPy. On concrete rune arrays (`concrete_ufunc`,
`concrete_function`) rune's function runs too where rune has one that takes the
call's arguments, and its result is a rune array; a call rune has no counterpart
for runs NumPy's own on the values (there is no derivative or staging to lose).

Both functions take `namespace`, the rune.nx module (handed over by the array
operators, so this module needs no import of the package that imports it).
"""
import functools
import inspect

import numpy as np

from ..core.arraylike import ArrayLike
from ..errors import ArgumentError, DTypeError, RuneError, UsageError

# NumPy submodules and where their functions are in rune.nx
_SUBMODULES = {"numpy": (), "numpy.linalg": ("linalg",), "numpy.fft": ("fft",)}
# NumPy functions that only read `.shape`, `.ndim`, `.dtype`: NumPy's own code serves tracers.
_METADATA = frozenset({"shape", "ndim", "size", "iscomplexobj", "isrealobj"})
# ufunc.reduce and ufunc.accumulate as rune.nx reductions and scans
_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
           "logical_and": "all", "logical_or": "any"}
_ACCUMULATE = {"add": "cumsum", "multiply": "cumprod"}
# keyword arguments of a ufunc call whose default values change nothing here
_UFUNC_DEFAULTS = {"casting": "same_kind", "order": "K", "subok": True, "signature": None, "where": True}


class _NoCall(RuneError):
    """rune has no counterpart of this NumPy call (the function, the ufunc method, or
    an argument such as out=): on concrete arrays NumPy's own runs instead."""


class _NoArgument(ArgumentError, _NoCall):
    """A NumPy argument rune's function has no counterpart for."""


def _unsupported(name, why):
    return _NoCall(f"numpy.{name} on a traced rune value (inside grad, jit, vmap or a loop body): "
                     f"{why}. NumPy's own would compute with the values alone, dropping the derivative "
                     f"and the staging; call rune.nx functions on traced values")


def ufunc(namespace, uf, method, inputs, kwargs):
    """`uf` (a NumPy ufunc) applied by `method` ("__call__", "reduce", ...) to
    `inputs`, as its rune.nx counterpart."""
    name = uf.__name__
    label = name if method == "__call__" else f"{name}.{method}"
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
        raise _unsupported(label, "out= cannot be honoured (rune arrays are immutable and a NumPy "
                                  "array cannot hold a traced value); use the returned value")
    dtype = kwargs.pop("dtype", None)
    for key, value in kwargs.items():
        if method in ("reduce", "accumulate") and key in ("axis", "keepdims"):
            continue
        default = _UFUNC_DEFAULTS.get(key, ArgumentError)  # (a sentinel no argument equals)
        if not (value is default or (type(value) in (str, bool) and value == default)):
            raise _unsupported(label, f"rune does not take its argument {key}={_short(value)}")
    if method == "__call__":
        fn = _ufunc_function(namespace, name)
        if dtype is None:
            return fn(*inputs)
        return _in_loop_dtypes(namespace, uf, label, dtype, fn, inputs)
    if method == "reduce" and name in _REDUCE:
        # rune's reductions take NumPy's dtype= (the accumulator's, inputs cast to it first)
        return getattr(namespace, _REDUCE[name])(inputs[0], axis=kwargs.get("axis", 0),
                                                 keepdims=kwargs.get("keepdims", False), dtype=dtype)
    if method == "accumulate" and name in _ACCUMULATE:
        return getattr(namespace, _ACCUMULATE[name])(inputs[0], axis=kwargs.get("axis", 0), dtype=dtype)
    if method == "outer":
        fn = _ufunc_function(namespace, name)
        a, b = (namespace.asarray(v) for v in inputs)
        outer = (namespace.reshape(a, a.shape + (1,) * b.ndim), b)
        return fn(*outer) if dtype is None else _in_loop_dtypes(namespace, uf, label, dtype, fn, outer)
    raise _unsupported(label, "rune has no such ufunc method")


def _in_loop_dtypes(namespace, uf, label, dtype, fn, inputs):
    """`fn(*inputs)` as NumPy computes `uf(*inputs, dtype=dtype)`: dtype= picks the
    ufunc's loop (the one whose output has that dtype), and the inputs are cast to
    the loop's input dtypes before computing, so int8 + int8 with dtype=int32 does
    not wrap, and float32 / 3 with dtype=float64 divides in float64. NumPy's
    `resolve_dtypes` names that loop; it refuses as NumPy would (no such loop, or a
    cast that casting='same_kind' forbids)."""
    try:
        loop = uf.resolve_dtypes(tuple(_loop_operand(v) for v in inputs) + (None,) * uf.nout,
                                 signature=(None,) * uf.nin + (np.dtype(dtype),) * uf.nout)
        loop = [namespace.dtype(d) for d in loop]  # (a dtype rune lacks raises here)
    except (TypeError, ValueError) as e:
        raise DTypeError(f"numpy.{label}: dtype={_short(dtype)} names no loop for inputs of dtypes "
                         f"{[getattr(d, '__name__', str(d)) for d in map(_loop_operand, inputs)]} that rune runs "
                         f"({e})") from None
    # Python scalars stay weak: they take the (cast) arrays' dtype, as in NumPy.
    cast = [v if type(v) in (int, float, complex) else namespace.astype(namespace.asarray(v), d)
            for v, d in zip(inputs, loop)]
    result = fn(*cast)
    outs, want = (result, True) if isinstance(result, tuple) else ((result,), False)
    outs = tuple(o if o.dtype == d else namespace.astype(o, d) for o, d in zip(outs, loop[uf.nin:]))
    return outs if want else outs[0]


def _loop_operand(value):
    """`value` as `ufunc.resolve_dtypes` takes an operand: its dtype, or the Python
    type of a weak scalar (NEP 50)."""
    if type(value) in (int, float, complex):
        return type(value)
    dtype = getattr(value, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(value).dtype


def _ufunc_function(namespace, name):
    fn = _public_function(namespace, name)
    if fn is None:
        raise _unsupported(name, f"rune.nx has no function {name}")
    return fn


def _public_function(module, name):
    """`module`'s public function `name` (None if it has none of that name)."""
    public = getattr(module, "__all__", None)
    if public is not None and name not in public:
        return None
    fn = getattr(module, name, None)
    return fn if callable(fn) and not isinstance(fn, type) else None


def function(namespace, func, types, args, kwargs):
    """`func` (a NumPy function) on `args` and `kwargs`, as its rune.nx counterpart."""
    if not all(issubclass(t, (ArrayLike, np.ndarray)) for t in types):
        return NotImplemented  # another library's arrays: let it (or NumPy) decide
    name = func.__name__
    if name in _METADATA:
        return func._implementation(*args, **kwargs)
    module = getattr(func, "__module__", "") or ""
    full = f"{module[len('numpy.'):]}.{name}" if module.startswith("numpy.") else name
    target = namespace
    path = _SUBMODULES.get(module)
    for part in path or ():
        target = getattr(target, part, None)
    fn = _public_function(target, name) if path is not None and target is not None else None
    if fn is None:
        raise _unsupported(full, f"rune.nx has no function {full}")
    positional, keywords = _translate(full, func, fn, args, kwargs)
    return fn(*positional, **keywords)


# NumPy's names for the arrays its functions work on. They are passed by position, in
# order, into rune's parameters in the same places, never by name: NumPy's `a` is an
# array, where `a` of rune's swapaxes is an axis.
_NUMPY_ARRAYS = frozenset({"a", "b", "m", "A", "x", "y", "x1", "x2", "v", "arr", "array", "arrays", "ary",
                           "ar", "condition", "element", "test_elements", "prototype", "val", "z", "f"})
# rune's names for the arrays (a NumPy array argument goes only into one of these)
_RUNE_ARRAYS = frozenset({"x", "y", "x1", "x2", "xs", "arrays", "cond", "obj"})
# NumPy parameters that rune's function of the same name calls otherwise
_RENAMED = {"swapaxes": {"axis1": "a", "axis2": "b"}, "clip": {"a_min": "min", "a_max": "max"},
            "tile": {"reps": "repetitions"},
            # (named here, an index argument reaches a rune parameter that shares an array's name)
            "delete": {"obj": "obj"}, "insert": {"obj": "obj"}}
# NumPy's sort kinds. rune's sort is always stable, and a stable sort keeps every
# kind's promise: sorted values, whatever the kind; indices that keep ties in order
# for "stable" and "mergesort" (NumPy's stable kinds, so argsort's indices are
# NumPy's own), while the others leave the order of ties unspecified, which the
# stable order also meets (JAX ignores `kind` likewise).
_SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")
# NumPy arguments rune honours without a parameter of its own: the values accepted
_HONOURED = {("sort", "kind"): _SORT_KINDS, ("argsort", "kind"): _SORT_KINDS}
# NumPy functions whose first n parameters are arrays under names of their own (a polynomial's
# p, u, v; lstsq's a, b): those go by position into rune's first n parameters, and the rest by
# name, even where NumPy's name elsewhere means an array (polyder's order m)
_LEADING_ARRAYS = {"polydiv": 2, "polyval": 2, "polyder": 1, "polyint": 1, "linalg.lstsq": 2,
                   "linalg.tensorinv": 1, "linalg.tensorsolve": 2,
                   # the shaping functions keep NumPy's parameter names (ary, m, a, arr, values)
                   "append": 2, "array_split": 1, "copy": 1, "dsplit": 1, "hsplit": 1, "vsplit": 1, "fliplr": 1,
                   "flipud": 1, "kron": 2, "resize": 1, "rollaxis": 1, "rot90": 1,
                   # the statistics functions keep NumPy's parameter names (a, m, v)
                   **dict.fromkeys(("average", "median", "percentile", "quantile", "nanmedian", "nanpercentile",
                                    "nanquantile", "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar",
                                    "nanstd", "nanargmax", "nanargmin", "nancumsum", "nancumprod", "ptp", "partition",
                                    "argpartition", "sort_complex", "histogram", "histogram_bin_edges"),
                                   1), "cov": 2, "convolve": 2, "correlate": 2}


def _translate(name, np_func, fn, args, kwargs):
    """`args` and `kwargs` of a call of NumPy's `np_func`, as arguments of the
    rune function `fn`, by meaning. They are bound to NumPy's own signature first
    (so a position means what it means to NumPy); then NumPy's arrays go by
    position into rune's arrays, in order; a parameter `fn` has under the same
    name (or the one `_RENAMED` gives) is passed by that name; an argument rune
    honours without a parameter (`_HONOURED`) or that NumPy gave its default
    value is dropped. Anything else is refused, naming it."""
    try:
        np_params = _signature(np_func).parameters
    except (TypeError, ValueError):
        return args, kwargs  # no signature to read: the arguments as given
    try:
        bound = _signature(np_func).bind(*args, **kwargs).arguments
    except TypeError as e:
        raise UsageError(f"numpy.{name}: {e}") from None
    params = list(_signature(fn).parameters.values())
    by_name = {p.name: p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    slots = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    renamed = _RENAMED.get(name, {})

    def refuse(key, value):
        return _NoArgument(f"numpy.{name}: its argument {key}={_short(value)} has no counterpart in "
                             f"rune.nx's {name}{inspect.signature(fn)}; call the rune function instead")

    positional, keywords = [], {}
    leading = _LEADING_ARRAYS.get(name)
    for key, value in bound.items():
        param = np_params[key]
        if param.kind == param.VAR_POSITIONAL:  # NumPy's *arrays (einsum's operands, ...): as given
            positional.extend(value)
            continue
        if leading is not None and param.kind != param.VAR_KEYWORD:
            if list(np_params).index(key) < leading:
                positional.append(value)
                continue
        elif key in _NUMPY_ARRAYS and param.kind != param.VAR_KEYWORD:
            at = len(positional)
            if not (at < len(slots) and slots[at].name in _RUNE_ARRAYS) and not (at >= len(slots) and variadic):
                raise refuse(key, value)
            positional.append(value)
            continue
        for k, v in (value.items() if param.kind == param.VAR_KEYWORD else ((key, value),)):
            target = renamed.get(k, k)
            if (name, k) in _HONOURED:
                if not any(v is ok or (type(v) is str and v == ok) for ok in _HONOURED[name, k]):
                    raise ArgumentError(f"numpy.{name}: {k} must be one of {_HONOURED[name, k]}, "
                                        f"got {_short(v)}")
            elif target in by_name and (target not in _RUNE_ARRAYS or k in renamed) and not (
                    v is None and param.default is None
                    and by_name[target].default not in (None, by_name[target].empty)):
                # (NumPy's None default is "its default", which rune spells its own way: fft's norm)
                keywords[target] = v
            elif not (param.kind != param.VAR_KEYWORD and _is_default(param, v)):
                raise refuse(k, v)
    # rune's positional-only parameters after the arrays (matrix_power's n) go by position
    for slot in slots[len(positional):]:
        if slot.kind != slot.POSITIONAL_ONLY or slot.name not in keywords:
            break
        positional.append(keywords.pop(slot.name))
    for k, v in keywords.items():  # (a place an array took, or a positional-only one out of reach)
        if by_name[k] in slots[:len(positional)] or by_name[k].kind == by_name[k].POSITIONAL_ONLY:
            raise refuse(k, v)
    return positional, keywords


@functools.lru_cache(maxsize=None)
def _signature(fn):
    """inspect.signature(fn), read once per function: it costs tens of microseconds,
    and NumPy's functions on rune arrays ask it at every call."""
    return inspect.signature(fn)


def _is_default(param, value):
    default = param.default
    return default is not inspect.Parameter.empty and (value is default or (
        value is None and default is None) or (type(value) is type(default) and type(value) in
                                                 (bool, int, float, str) and value == default))


def _short(value):
    text = repr(value)
    return text if len(text) < 40 else f"<{type(value).__name__}>"


def concrete_ufunc(namespace, uf, method, inputs, kwargs):
    """NumPy's ufunc `uf` on concrete rune arrays: rune.nx's counterpart, or NumPy's
    own on the values where rune has none for this call."""
    try:
        return ufunc(namespace, uf, method, inputs, dict(kwargs))
    except _NoCall:
        return getattr(uf, method)(*_values(inputs), **_values(kwargs))


def concrete_function(namespace, func, types, args, kwargs):
    """NumPy's function `func` on concrete rune arrays: rune.nx's counterpart, or
    NumPy's own on the values where rune has none for this call."""
    if not all(issubclass(t, (ArrayLike, np.ndarray)) for t in types):
        return NotImplemented  # another library's arrays: let it (or NumPy) decide
    numpys = getattr(func, "_implementation", None)
    if numpys is not None and func.__name__ in _BY_METHOD:
        return numpys(*args, **kwargs)   # NumPy's own calls the array's method: rune's, with NumPy's defaults
    try:
        return function(namespace, func, types, args, kwargs)
    except _NoCall:
        return numpys(*args, **kwargs) if numpys is not None else func(*_values(args), **_values(kwargs))


# NumPy functions whose own implementation calls the array's method of the same name
# (fromnumeric's _wrapreduction / _wrapfunc): on a concrete array that runs rune's method
# with NumPy's defaults (np.take: an index out of bounds raises, where nx.take clamps as
# JAX), as fast as the method itself, without binding NumPy's signature
_BY_METHOD = frozenset({"sum", "prod", "max", "min", "amax", "amin", "any", "all", "mean", "std", "var",
                        "argmax", "argmin", "cumsum", "cumprod", "take", "clip", "round", "around",
                        "nonzero", "repeat", "swapaxes", "transpose", "reshape", "searchsorted", "argsort",
                        "compress", "choose"})


def _values(tree):
    """`tree` (arguments: sequences and dicts of them) with every rune array as NumPy's."""
    if isinstance(tree, ArrayLike):
        return np.asarray(tree)
    if type(tree) in (list, tuple):
        return type(tree)(_values(v) for v in tree)
    if type(tree) is dict:
        return {k: _values(v) for k, v in tree.items()}
    return tree
