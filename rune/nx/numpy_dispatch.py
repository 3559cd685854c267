"""NumPy's functions on traced values run rune's.

`np.exp(x)` or `np.dot(x, w)` on a tracer (inside grad, jit, vmap, a loop
body) reaches a tracer's `__array_ufunc__` / `__array_function__` (NEP 13 and
NEP 18), which call `ufunc` and `function` here: the rune.nx function of the
same name runs instead, so the result is traced like any other (a NumPy result
would hold the values only, without the derivative or the staging). A NumPy
function rune has no counterpart for raises a RuneError naming it, never
falling back to NumPy. Concrete arrays are left to NumPy's own protocols
(`__array__`), so NumPy code on them works as before.

Both functions take `namespace`, the rune.nx module (handed over by the array
operators, so this module needs no import of the package that imports it).
"""
import inspect

import numpy as np

from ..core.arraylike import ArrayLike
from ..errors import ArgumentError, RuneError

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


def _unsupported(name, why):
    return RuneError(f"numpy.{name} on a traced rune value (inside grad, jit, vmap or a loop body): "
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
        result = fn(*inputs)
    elif method == "reduce" and name in _REDUCE:
        result = getattr(namespace, _REDUCE[name])(inputs[0], axis=kwargs.get("axis", 0),
                                                   keepdims=kwargs.get("keepdims", False))
    elif method == "accumulate" and name in _ACCUMULATE:
        result = getattr(namespace, _ACCUMULATE[name])(inputs[0], axis=kwargs.get("axis", 0))
    elif method == "outer":
        fn = _ufunc_function(namespace, name)
        a, b = (namespace.asarray(v) for v in inputs)
        result = fn(namespace.reshape(a, a.shape + (1,) * b.ndim), b)
    else:
        raise _unsupported(label, "rune has no such ufunc method")
    return result if dtype is None else namespace.astype(result, dtype)


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


def _translate(name, np_func, fn, args, kwargs):
    """`args` and `kwargs` of a call of NumPy's `np_func`, as arguments of the
    rune function `fn`: an argument whose name `fn` also has is passed by that
    name; the others (the arrays: NumPy's `a`, `b` are rune's `x`, `y`) by
    position, in order; an argument NumPy gave its default value is dropped
    when `fn` has no such parameter. Anything else is refused by name."""
    try:
        np_params = inspect.signature(np_func).parameters
        bound = inspect.signature(np_func).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return args, kwargs  # no signature to read: the arguments as given
    params = list(inspect.signature(fn).parameters.values())
    by_name = {p.name: p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    slots = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    positional, keywords = [], {}
    for key, value in bound.items():
        kind = np_params[key].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            positional.extend(value)
        elif kind == inspect.Parameter.VAR_KEYWORD:
            for k, v in value.items():
                if k not in by_name:
                    raise ArgumentError(f"numpy.{name}: rune.nx's {name} has no parameter {k!r}")
                keywords[k] = v
        elif key in by_name and not (len(positional) < len(slots) and slots[len(positional)].name == key
                                     and not keywords):
            keywords[key] = value
        elif key in by_name:
            positional.append(value)
        elif _is_default(np_params[key], value):
            continue
        elif not keywords and (len(positional) < len(slots) or variadic):
            positional.append(value)
        else:
            raise ArgumentError(f"numpy.{name}: its argument {key}={_short(value)} has no counterpart in "
                                f"rune.nx's {name}{inspect.signature(fn)}; call the rune function instead")
    return positional, keywords


def _is_default(param, value):
    default = param.default
    return default is not inspect.Parameter.empty and (value is default or (
        value is None and default is None) or (type(value) is type(default) and type(value) in
                                                 (bool, int, float, str) and value == default))


def _short(value):
    text = repr(value)
    return text if len(text) < 40 else f"<{type(value).__name__}>"
