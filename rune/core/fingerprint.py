"""What a staged Python function depends on, as a hashable key.

Staging runs a function once at abstract inputs; the program it records
depends on the function's code and on every value the code reaches besides
its arguments: closure cells, defaults, the globals it reads, the module
attributes it reads through them, and so on through the Python functions it
calls. `fingerprint(f)` returns (key, held): `key` is hashable and equal for
two functions exactly when all of those values are the same, given that the
objects in `held` are the same ones (by identity: a caller keeping `held`
alive compares ids). Those are the rune Arrays reached (immutable, so the
same array is the same value) and the objects a library closure captured.

A value qualifies when it cannot change without the key changing: None,
numbers and strings (by type and exact bits: 0.0 and -0.0 differ), NumPy
scalars and dtypes, tuples and frozensets of such values, rune Arrays,
classes and built-in functions (by identity), modules reached only through
attribute reads (each attribute read is part of the key), and Python
functions (recursively). Anything else (a list, a dict, an object, a NumPy
array that may be written in place, a tracer) makes the function
unfingerprintable: `fingerprint` returns None and the caller stages afresh.

Functions of rune and NumPy themselves are keyed by their code, without
their globals (the library's module state, not the caller's); a closure one
of them made at run time (a `grad` of a user function) is keyed by what it
captured: functions fingerprinted, other objects by identity.
"""
import dis
import functools
import sys
import types
import weakref

import numpy as np

from .array import Array

_LIBRARIES = ("rune", "numpy")
_MAX_DEPTH = 8  # nested functions followed; deeper ones are not fingerprinted


class _Unsafe(Exception):
    """A reached value whose meaning could change without the key changing."""


def fingerprint(f):
    """(key, held) for `f` as described above, or None."""
    held = []
    try:
        key = _value(f, held, {}, 0)
    except _Unsafe:
        return None
    return key, held


_EXACT = (type(None), bool, int, str, bytes, type(Ellipsis), type(NotImplemented))


def _value(v, held, seen, depth, lenient=False):
    t = type(v)
    if t in _EXACT:
        return t, v
    if t is float:
        return float, v.hex()  # exact bits: 0.0 and -0.0 stage different literals
    if t is complex:
        return complex, v.real.hex(), v.imag.hex()
    if t is Array:
        held.append(v)
        return Array, len(held) - 1  # its identity is compared by the caller
    if t is types.FunctionType:
        return _function(v, held, seen, depth)
    if t is tuple:
        return tuple, tuple(_value(x, held, seen, depth, lenient) for x in v)
    if t is frozenset:  # members are hashable: order by hash is not stable, so key the set itself
        return frozenset, frozenset(_value(x, held, seen, depth, lenient) for x in v)
    if isinstance(v, np.generic):
        return t, v.tobytes()
    if t is np.dtype or isinstance(v, np.dtype):
        return np.dtype, v
    if t is types.BuiltinFunctionType or isinstance(v, type) or t is np.ufunc:
        return "id", v  # hashed by identity; held by the key
    if t is functools.partial:
        return (functools.partial, _value(v.func, held, seen, depth),
                _value(v.args, held, seen, depth),
                tuple(sorted((k, _value(x, held, seen, depth)) for k, x in v.keywords.items())))
    if t is types.MethodType:
        return types.MethodType, _value(v.__func__, held, seen, depth), _value(v.__self__, held, seen, depth)
    if lenient:  # captured by a library closure: the library's own object
        held.append(v)
        return "held", len(held) - 1
    raise _Unsafe(v)


def _function(f, held, seen, depth):
    library = (f.__module__ or "").partition(".")[0] in _LIBRARIES
    if library and f.__closure__ is None:
        return "id", f  # a library's own function: its defaults and globals are the library's
    if id(f) in seen:  # a recursive function: its key is being built further up
        return "rec", seen[id(f)]
    if depth > _MAX_DEPTH:
        raise _Unsafe(f)
    seen[id(f)] = len(seen)
    code = f.__code__
    held.append(code)  # the key has its id: the same id must be the same code
    parts = [id(code)]
    reads = _global_reads(code)
    if f.__closure__:
        for cell in f.__closure__:
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell (assigned later in the enclosing function)
                raise _Unsafe(f) from None
            if type(content) is types.ModuleType and not library:
                raise _Unsafe(content)  # a module used as a value: its reads are not tracked
            parts.append(_value(content, held, seen, depth + 1, lenient=library))
    if f.__defaults__:
        parts.append(_value(f.__defaults__, held, seen, depth + 1, lenient=library))
    if f.__kwdefaults__:
        parts.append(tuple(sorted((k, _value(x, held, seen, depth + 1, lenient=library))
                                  for k, x in f.__kwdefaults__.items())))
    if not library:
        scope = f.__globals__
        for chain in reads:
            parts.append(_chain(scope, chain, held, seen, depth))
    del seen[id(f)]
    return tuple(parts)


_MISSING = object()


def _chain(scope, chain, held, seen, depth):
    """The key of a global read `name.attr.attr...`: attributes are followed
    while they are read from modules; the value reached is keyed."""
    name = chain[0]
    value = scope.get(name, _MISSING)
    if value is _MISSING:
        builtins = scope.get("__builtins__", sys.modules["builtins"])
        builtins = builtins.__dict__ if type(builtins) is types.ModuleType else builtins
        value = builtins.get(name, _MISSING)
    owner = None
    for attr in chain[1:]:
        if type(value) is not types.ModuleType:
            break
        owner, value = value, getattr(value, attr, _MISSING)
    if value is _MISSING:  # a name read before it is defined: staging would fail anyway
        raise _Unsafe(chain)
    if type(value) is types.ModuleType:  # a module used as a value: its reads are not tracked
        raise _Unsafe(value)
    if owner is not None and type(value) is types.FunctionType and \
            owner.__name__.partition(".")[0] in _LIBRARIES:
        return chain, "id", value  # a library's own function (nx.sin), made when it was imported
    return chain, _value(value, held, seen, depth + 1)


# id(code) -> (a weak reference to the code, its global reads): a code object
# hashes all of its contents, an id is cheap.
_READS = {}
_GLOBAL_OPS = frozenset(("LOAD_GLOBAL", "LOAD_NAME"))
_ATTR_OPS = frozenset(("LOAD_ATTR", "LOAD_METHOD"))


def _global_reads(code):
    """Every global read of `code` (and of the functions and comprehensions
    defined in it) with the attribute reads that follow it, as name tuples."""
    found = _READS.get(id(code))
    if found is None or found[0]() is not code:
        reads = set()
        _collect(code, reads)
        key = id(code)
        found = _READS[key] = (weakref.ref(code, lambda _, key=key: _READS.pop(key, None)), tuple(sorted(reads)))
    return found[1]


def _collect(code, found):
    chain = None
    for ins in dis.get_instructions(code):
        if chain is not None and ins.opname in _ATTR_OPS:
            chain.append(ins.argval)
            continue
        if chain is not None:
            found.add(tuple(chain))
            chain = None
        if ins.opname in _GLOBAL_OPS:
            chain = [ins.argval]
    if chain is not None:
        found.add(tuple(chain))
    for const in code.co_consts:
        if type(const) is types.CodeType:
            _collect(const, found)
