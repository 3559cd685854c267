"""rune's dtypes and NumPy 2 (NEP 50) promotion with weak Python scalars.

A dtype is a NumPy dtype (bfloat16 comes from ml_dtypes). Python scalars are
"weak": they take the dtype of the array they meet unless their kind is higher
(a float meeting an int array gives the default float, float32, as in JAX).
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


_promote_cache = {}


def promote(dtypes_and_weak):
    """Result dtype of operands given as ((dtype, weak), ...), NEP 50 style.

    Strong dtypes promote as NumPy does (bfloat16 with any other float gives
    the wider float, bfloat16 with float16 gives float32). Weak operands only
    raise the kind: a weak float meeting strong ints gives float32.
    """
    key = tuple(dtypes_and_weak)
    hit = _promote_cache.get(key)
    if hit is not None:
        return hit
    strong = [d for d, w in key if not w]
    weak = [d for d, w in key if w]
    if strong:
        result = strong[0]
        for d in strong[1:]:
            result = _promote_pair(result, d)
        for d in weak:
            if kind_rank(d) > kind_rank(result):
                # A weak complex keeps a float64 array's precision (the standard's rule).
                result = complex_dtype(result) if d.kind == "c" else _WEAK_BY_RANK[kind_rank(d)]
    else:
        # Only weak operands: the highest kind wins, widened only within that kind
        # (a weak int meeting a weak float gives float32, not NumPy's float64).
        top = max(kind_rank(d) for d in weak)
        same_kind = [d for d in weak if kind_rank(d) == top]
        result = same_kind[0]
        for d in same_kind[1:]:
            result = _promote_pair(result, d)
    _promote_cache[key] = (result, not strong)
    return result, not strong


_WEAK_BY_RANK = {0: bool_, 1: int32, 2: float32, 3: complex64}


def _promote_pair(a, b):
    if a == b:
        return a
    if a == bfloat16 or b == bfloat16:
        other = b if a == bfloat16 else a
        if other.kind == "c":
            return other
        if other.kind == "f":
            return float32 if other == float16 else other
        return bfloat16
    return np.promote_types(a, b)
