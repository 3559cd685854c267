"""rune's dtypes and NumPy 2 (NEP 50) promotion with weak Python scalars.

A dtype is a NumPy dtype (bfloat16 comes from ml_dtypes). The one promotion
lattice every operation uses (`promote`, and `to_inexact` for the float an
operation of integers computes in) is written down below, above `promote`.
Python scalars are "weak": they take the dtype of the array they meet unless
their kind is higher.
"""
import numpy as np
import ml_dtypes

from ..errors import DTypeError

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)

ALL = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
       float16, bfloat16, float32, float64, complex64, complex128)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["bool"] = bool_

default_float = float32
default_int = int32
default_complex = complex64

# Kinds ordered for weak-scalar promotion: a weak scalar of a higher kind than
# the array it meets turns into that kind's default dtype.
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_WEAK_DEFAULT = {bool: bool_, int: int32, float: float32, complex: complex64}


def dtype(d):
    """The rune dtype named by `d` (a dtype, a NumPy type, a name or a Python type)."""
    if isinstance(d, np.dtype) and d in _DTYPE_SET:
        return d
    if isinstance(d, str):
        found = _BY_NAME.get(d)
    elif d is float:
        found = default_float
    elif d is int:
        found = default_int
    elif d is bool:
        found = bool_
    else:
        try:
            found = np.dtype(d)
        except TypeError:
            found = None
        if found is not None and found not in _DTYPE_SET:
            found = None
    if found is None:
        raise DTypeError(f"unknown dtype {d!r}; expected one of {', '.join(x.name for x in ALL)}")
    return found


_DTYPE_SET = frozenset(ALL)


def is_float(d):
    return d.kind == "f" or d == bfloat16


def is_complex(d):
    return d.kind == "c"


def is_inexact(d):
    """Float or complex: the dtypes that carry derivatives."""
    return d.kind in "fc" or d == bfloat16


def real_dtype(d):
    """The real dtype of a complex one's parts (complex64 -> float32); other dtypes are their own."""
    return _REAL_OF.get(d, d)


def complex_dtype(d):
    """The complex dtype whose parts have float dtype `d` (float64 -> complex128, others complex64)."""
    return complex128 if d in (float64, complex128) else complex64


_REAL_OF = {complex64: float32, complex128: float64}


def is_int(d):
    return d.kind in "iu"


def kind_rank(d):
    return 2 if d == bfloat16 else _KIND_RANK[d.kind]


def weak_dtype_of(value):
    """The dtype a Python scalar takes on its own (bool, int32 or float32)."""
    return _WEAK_DEFAULT[type(value)] if type(value) in _WEAK_DEFAULT else _scalar_default(value)


def _scalar_default(value):
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int32
    if isinstance(value, float):
        return float32
    if isinstance(value, complex):
        return complex64
    raise DTypeError(f"expected an array or a Python scalar, got {type(value).__name__}")


# ---------------------------------------------------------------- the promotion lattice
#
# One rule for every operation that combines dtypes (binary ops, where,
# concatenate, matmul, result_type) and for the float an operation of integers
# computes in (true division, mean/var/std, exp/log/sqrt/..., linalg, fft):
#
# - bool and integers: NumPy's table, the smallest integer holding both
#   (int8 + uint8 -> int16); int64 + uint64 has none and gives float64.
# - floats: the wider; bfloat16 + float16 gives float32 (neither holds the other).
# - a float (or complex) meeting bool or an integer: the narrowest float at least
#   as wide as that float which holds every value of the integer exactly, float64
#   at most (NumPy's rule: float16 + int16 -> float32, float32 + int32 ->
#   float64). bfloat16 follows the same rule as float16: both hold every int8 and
#   uint8, neither an int16, so bfloat16 + int8 is bfloat16 and bfloat16 + int16
#   float32. Integer precision is never lost to the float silently (but int64
#   beyond 2**53 rounds to float64, the widest float).
# - a float needed from integers alone (1 / 2, exp, mean): the integer meeting
#   the default float, float32: bool and 8/16-bit integers give float32,
#   32/64-bit integers float64 (`to_inexact`).
# - Python scalars are weak (NEP 50): one of a kind no higher than the array's
#   never changes its dtype (float32 * 2.0 is float32, int8 + 1 is int8); one of
#   a higher kind acts as its kind's default dtype (int32, float32, complex64),
#   so int16 * 0.5 is float32, int32 * 0.5 float64 and float64 * 1j complex128,
#   exactly as the float function of those integers.
#
# Pairs are commutative. Within integers, or within floats and complex
# numbers, joins are associative; mixing the two is not (NumPy's isn't either:
# (int8 + uint8) + float16 is float32, int8 + (uint8 + float16) float16), so an
# operation of many operands (where, concatenate, stack, result_type) joins the
# integers, then the floats, then the two: its answer never depends on the order.

# Significant bits: those a float holds exactly, or an integer needs.
_BITS = {bool_: 1, int8: 7, uint8: 8, int16: 15, uint16: 16, int32: 31, uint32: 32, int64: 63, uint64: 64,
         bfloat16: 8, float16: 11, float32: 24, float64: 53}


def _join_inexact(a, b):
    """Two floats or complex dtypes: the narrowest holding both."""
    if a == b:
        return a
    ra, rb = real_dtype(a), real_dtype(b)
    real = float32 if {ra, rb} == {float16, bfloat16} else max(ra, rb, key=_BITS.__getitem__)
    return complex_dtype(real) if is_complex(a) or is_complex(b) else real


def _inexact_with_int(f, i):
    """The float or complex `f` meeting bool or integer `i`: `f` if it holds every
    value of `i` exactly, else the narrowest wider one that does (float64 at most)."""
    if _BITS[real_dtype(f)] >= _BITS[i]:
        return f
    return _join_inexact(f, float32 if _BITS[i] <= _BITS[float32] else float64)


def _promote_pair(a, b):
    """Two strong dtypes: the lattice's join."""
    if a == b:
        return a
    a_int, b_int = not is_inexact(a), not is_inexact(b)
    if a_int and b_int:
        return np.promote_types(a, b)
    if a_int or b_int:
        return _inexact_with_int(a, b) if b_int else _inexact_with_int(b, a)
    return _join_inexact(a, b)


def _join_strong(strong):
    """Many strong dtypes: the integers joined, then the floats, then the two."""
    ints = [d for d in strong if not is_inexact(d)]
    floats = [d for d in strong if is_inexact(d)]
    result = None
    for d in ints + floats:   # joining the integers first keeps the answer order-free
        result = d if result is None else _promote_pair(result, d)
    return result


def to_inexact(d, weak=False):
    """The float (or complex) dtype an operation of `d` computes in when it needs
    one (true division, exp, sqrt, mean, var, linalg): floats and complex dtypes
    are their own; bool and integers meet the default float (bool and 8/16-bit
    integers give float32, 32/64-bit integers float64); a weak integer (a Python
    int) gives the default float, as a Python float would."""
    if is_inexact(d):
        return d
    return default_float if weak else _promote_pair(d, default_float)


_promote_cache = {}


def promote(dtypes_and_weak):
    """Result dtype of operands given as ((dtype, weak), ...), and whether it is weak.

    The lattice above: strong operands join (the integers first, then the
    floats); weak ones (Python scalars) only raise the kind, acting as their
    kind's default dtype (a weak float meeting strong int16 gives float32, int32
    float64). Weak operands alone give the highest kind's default dtype, widened
    only within that kind (a weak int meeting a weak float gives float32).
    """
    key = tuple(dtypes_and_weak)
    hit = _promote_cache.get(key)
    if hit is not None:
        return hit
    strong = [d for d, w in key if not w]
    weak = [d for d, w in key if w]
    if strong:
        result = _join_strong(strong)
        top = max((kind_rank(d) for d in weak), default=-1)
        if top > kind_rank(result):
            result = _promote_pair(result, _WEAK_BY_RANK[top])
    else:
        top = max(kind_rank(d) for d in weak)
        same_kind = [d for d in weak if kind_rank(d) == top]
        result = _join_strong(same_kind)
    _promote_cache[key] = (result, not strong)
    return result, not strong


_WEAK_BY_RANK = {0: bool_, 1: int32, 2: float32, 3: complex64}
