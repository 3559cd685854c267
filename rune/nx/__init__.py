"""rune.nx: NumPy-like arrays and the functions on them."""
from types import SimpleNamespace as _SimpleNamespace

from ..core import arraylike as _arraylike
from . import ops as _ops
from . import indexing as _indexing
from . import random
from .buffers import Array
from .convolution import conv, reduce_window
from .creation import (arange, create, eye, full, full_like, identity, linspace, ones, ones_like,
                       scalar, zeros, zeros_like)
from ..core.dtypes import (bfloat16, bool_, complex64, complex128, dtype, float16, float32, float64, int8,
                           int16, int32, int64, uint8, uint16, uint32, uint64)
from .conversion import array, asarray, astype, cast
from .elementwise import (abs, acos, add, arctan2, asin, atan, atan2, bitwise_and, bitwise_or, bitwise_xor, ceil,
                          clip, cos, cosh, divide, equal, erf, exp, expm1, floor, floor_divide, greater,
                          greater_equal, invert, isfinite, isnan, left_shift, less, less_equal, log, log1p,
                          logical_and, logical_not, logical_or, logical_xor, maximum, minimum, multiply, negative,
                          not_equal, power, reciprocal, remainder, right_shift, round, rsqrt, sigmoid, sign, sin,
                          sinh, sqrt, square, stop_gradient, subtract, tan, tanh, where)
from .complex import angle, conj, imag, make_complex, real
from .reductions import (all, amax, amin, any, argmax, argmin, count_nonzero, log_softmax, logsumexp, max, mean,
                         min, prod, softmax, std, sum, var)
from .shapes import (broadcast_arrays, broadcast_to, concatenate, diff, dynamic_slice, dynamic_update_slice,
                     expand_dims, flip, matrix_transpose, meshgrid, moveaxis, pad, ravel, repeat, reshape, roll,
                     split, squeeze, stack, swapaxes, take, take_along_axis, tile, transpose, tril, triu, unstack)
from .contractions import dot, dot_general, einsum, inner, matmul, outer, tensordot, vdot, vecdot
from .placement import from_dlpack, place
from .mathfuncs import (acosh, arccosh, arcsinh, arctanh, asinh, atanh, copysign, hypot, isinf, log2,
                        log10, logaddexp, nextafter, positive, signbit, trunc)
from .sorting import argsort, cumprod, cumsum, cumulative_prod, cumulative_sum, sort
from .dynamic import nonzero, unique_all, unique_counts, unique_inverse, unique_values
from .searching import searchsorted
# The Array API standard's namespace; its asarray/astype/reshape/var/std take the
# standard's keywords (copy=, correction=) and replace the plain ones here.
from .array_api import (__array_api_version__, __array_namespace_info__, asarray, astype, bitwise_invert,
                        bitwise_left_shift, bitwise_right_shift, broadcast_shapes, can_cast, e, empty,
                        empty_like, finfo, iinfo, inf, isdtype, isin, nan, newaxis, permute_dims, pi,
                        reshape, result_type, std, var, concat, moveaxis)

bool = bool_
# NumPy's other names for the same functions.
mod, bitwise_not, absolute, pow = remainder, invert, abs, power
arcsin, arccos, arctan = asin, acos, atan
conjugate = conj
# What the array operators (`x + y`, `x[i]`, `x.at[i]`, `x.sum()`) call.
import sys as _sys  # noqa: E402
from . import numpy_dispatch as _numpy_dispatch  # noqa: E402
_arraylike.register_functions(_SimpleNamespace(**vars(_ops), getitem=_indexing.getitem,
                                               IndexUpdater=_indexing.IndexUpdater,
                                               numpy_ufunc=_numpy_dispatch.ufunc,
                                               numpy_function=_numpy_dispatch.function,
                                               numpy_concrete_ufunc=_numpy_dispatch.concrete_ufunc,
                                               numpy_concrete_function=_numpy_dispatch.concrete_function,
                                               place=place, namespace=_sys.modules[__name__]))


from . import linalg  # noqa: E402  (the standard's linalg extension, its primitives and their rules)
from . import fft  # noqa: E402

# The public API. The modules this package is built from (conversion, elementwise, creation, dtypes,
# array_api, ...) stay importable by their dotted paths but are not part of it.
__all__ = [
    # submodules and the array type
    "linalg", "fft", "random", "Array",
    # dtypes and constants
    "dtype", "bool", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "bfloat16", "float32", "float64", "complex64", "complex128", "e", "inf", "nan", "newaxis", "pi",
    "finfo", "iinfo", "isdtype", "can_cast", "result_type", "__array_api_version__", "__array_namespace_info__",
    # creation and placement
    "array", "asarray", "scalar", "create", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
    "full_like", "empty_like", "arange", "linspace", "eye", "identity", "meshgrid", "from_dlpack", "place",
    # functions
    "abs", "absolute", "acos", "acosh", "add", "all", "amax", "amin", "angle", "any", "arccos", "arccosh",
    "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "argmax", "argmin", "argsort", "asin", "asinh", "astype",
    "atan", "atan2", "atanh", "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "broadcast_arrays", "broadcast_shapes", "broadcast_to", "cast", "ceil",
    "clip", "concat", "concatenate", "conj", "conjugate", "conv", "copysign", "cos", "cosh", "count_nonzero",
    "cumprod", "cumsum", "cumulative_prod", "cumulative_sum", "diff", "divide", "dot", "dot_general",
    "dynamic_slice", "dynamic_update_slice", "einsum", "equal", "erf", "exp", "expand_dims", "expm1", "flip",
    "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "inner", "invert", "isfinite", "isin",
    "isinf", "isnan", "left_shift", "less", "less_equal", "log", "log10", "log1p", "log2", "log_softmax",
    "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "make_complex", "matmul",
    "matrix_transpose", "max", "maximum", "mean", "min", "minimum", "mod", "moveaxis", "multiply", "negative",
    "nextafter", "nonzero", "not_equal", "outer", "pad", "permute_dims", "positive", "pow", "power", "prod",
    "ravel", "real", "reciprocal", "reduce_window", "remainder", "repeat", "reshape", "right_shift", "roll",
    "round", "rsqrt", "searchsorted", "sigmoid", "sign", "signbit", "sin", "sinh", "softmax", "sort", "split",
    "sqrt", "square", "squeeze", "stack", "std", "stop_gradient", "subtract", "sum", "swapaxes", "take",
    "take_along_axis", "tan", "tanh", "tensordot", "tile", "transpose", "tril", "triu", "trunc", "unique_all",
    "unique_counts", "unique_inverse", "unique_values", "unstack", "var", "vdot", "vecdot", "where",
]

# The rest of NumPy's surface that jax.numpy has, one module per family (each module's __all__;
# docs/numpy.md lists them, tests/api/test_numpy_coverage.py checks it does).
from . import (shaping, index_tricks, elementwise_math, integer_math, comparisons, bit_packing,  # noqa: E402
               calculus, windows, mapping, nan_reductions, averages, order_statistics, ordering, histograms,
               sets, sequence_convolution, einsum_plans, polynomial)
from .shaping import *  # noqa: E402,F401,F403
from .index_tricks import *  # noqa: E402,F401,F403
from .elementwise_math import *  # noqa: E402,F401,F403
from .integer_math import *  # noqa: E402,F401,F403
from .comparisons import *  # noqa: E402,F401,F403
from .bit_packing import *  # noqa: E402,F401,F403
from .calculus import *  # noqa: E402,F401,F403
from .windows import *  # noqa: E402,F401,F403
from .mapping import *  # noqa: E402,F401,F403
from .nan_reductions import *  # noqa: E402,F401,F403
from .averages import *  # noqa: E402,F401,F403
from .order_statistics import *  # noqa: E402,F401,F403
from .ordering import *  # noqa: E402,F401,F403
from .histograms import *  # noqa: E402,F401,F403
from .sets import *  # noqa: E402,F401,F403
from .sequence_convolution import *  # noqa: E402,F401,F403
from .einsum_plans import *  # noqa: E402,F401,F403
from .polynomial import *  # noqa: E402,F401,F403
_NUMPY_FAMILIES = (shaping, index_tricks, elementwise_math, integer_math, comparisons, bit_packing, calculus,
                   windows, mapping, nan_reductions, averages, order_statistics, ordering, histograms, sets,
                   sequence_convolution, einsum_plans, polynomial)
__all__ += [n for m in _NUMPY_FAMILIES for n in m.__all__]

# NumPy's other dtype names, as jax.numpy has them: C-style aliases of rune's dtypes
# (int_ and uint are rune's default integers, 32 bits, as jax.numpy's without x64),
# and NumPy's abstract scalar classes themselves, for issubdtype(x.dtype, nx.floating).
import numpy as _np  # noqa: E402
single, double, csingle, cdouble = float32, float64, complex64, complex128
float_, complex_, int_, uint = float64, complex128, int32, uint32
(generic, number, inexact, floating, complexfloating, integer, signedinteger, unsignedinteger, character,
 flexible) = (_np.generic, _np.number, _np.inexact, _np.floating, _np.complexfloating, _np.integer,
              _np.signedinteger, _np.unsignedinteger, _np.character, _np.flexible)
__all__ += ["single", "double", "csingle", "cdouble", "float_", "complex_", "int_", "uint", "generic", "number",
            "inexact", "floating", "complexfloating", "integer", "signedinteger", "unsignedinteger", "character",
            "flexible"]


def __dir__():
    """The public names (`__all__`) and the module's dunders, not its building blocks."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__") and n.endswith("__")})
