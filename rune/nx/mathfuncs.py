"""The standard's elementwise functions NumPy has and rune lacked: acosh,
asinh, atanh, log2, log10, trunc, hypot, copysign, logaddexp, nextafter,
plus isinf, signbit and positive.

The first ten are primitives, defined here with all their rules: abstract
(NumPy broadcasting), JVP and VJP through the shared elementwise machinery
(one partial derivative per operand, rune/nx/rule_helpers.py), batching, and
their lowering (each an elementwise kernel IR op of its own name, where the
target's renderer has one). Eagerly they are library calls to NumPy's ufuncs
on the host (rune/backends/xp/mathfuncs.py), so results and their corner
cases match NumPy exactly; a composite such as log(x + sqrt(x*x + 1)) loses
accuracy near 0 and overflows for large x. isinf, signbit and positive are
composites of existing primitives.
"""
import math

from ..core.aval import Aval
from ..core.prims import P, broadcast_shapes
from ..core.primitive import (Lowering, abstract_rules, batch_rules, declare_lowering, jvp_rules, no_derivative,
                              primitive, vjp_rules)
from ..core.trace import Tracer, bind, common_device
from ..errors import DTypeError
from ..core import dtypes as dt
from . import ops
from .rule_helpers import elementwise_batch, elementwise_jvp, elementwise_vjp

FLOAT_UNARY = ("acosh", "asinh", "atanh", "log2", "log10")
FLOAT_BINARY = ("hypot", "copysign", "logaddexp", "nextafter")
NEW = FLOAT_UNARY + FLOAT_BINARY + ("trunc",)
_LN2, _LN10 = math.log(2), math.log(10)


def _safe_ratio(num, den):
    """num / den, and 0 where den is 0 (hypot at the origin has no slope; JAX gives 0 too)."""
    zero = ops.equal(den, 0)
    return ops.where(zero, den.dtype.type(0), ops.divide(num, ops.where(zero, den.dtype.type(1), den)))


# name -> the partial derivative of the result in each operand, as a function of
# (*operands, out); None: zero. Piecewise-constant functions (trunc, nextafter)
# carry no derivative at all, as floor.
_PARTIALS = {
    "acosh": (lambda x, out: ops.rsqrt(ops.subtract(ops.multiply(x, x), 1)),),
    "asinh": (lambda x, out: ops.rsqrt(ops.add(ops.multiply(x, x), 1)),),
    "atanh": (lambda x, out: ops.reciprocal(ops.subtract(1, ops.multiply(x, x))),),
    "log2": (lambda x, out: ops.reciprocal(ops.multiply(x, _LN2)),),
    "log10": (lambda x, out: ops.reciprocal(ops.multiply(x, _LN10)),),
    "hypot": (lambda x, y, out: _safe_ratio(x, out), lambda x, y, out: _safe_ratio(y, out)),
    # copysign(x, y) = |x| * sign(y): its slope in x is +-1, in y zero (away from y = 0).
    "copysign": (lambda x, y, out: copysign(x.dtype.type(1), ops.multiply(x, out)), None),
    "logaddexp": (lambda x, y, out: ops.exp(ops.subtract(x, out)), lambda x, y, out: ops.exp(ops.subtract(y, out))),
    "trunc": None,
    "nextafter": None,
}


def _define(name, partials):
    """The primitive `name` and its rules: abstract (NumPy broadcasting; the
    operands already share one dtype, which the result keeps), derivatives from
    `partials` (None: no derivative), batching, and its lowering."""
    prim = P[name] = primitive(name)

    def abstract(*avals):
        shape = broadcast_shapes(name, *(a.shape for a in avals))
        return Aval(shape, avals[-1].dtype, common_device(prim, avals), all(a.weak for a in avals))

    abstract_rules[prim] = abstract
    if partials is None:   # a zero tangent, and the tape never records it
        no_derivative.add(prim)
        jvp_rules[prim] = lambda primals, tangents: (bind(prim, *primals), None)
    else:
        jvp_rules[prim] = lambda primals, tangents: elementwise_jvp(prim, partials, primals, tangents)
        vjp_rules[prim] = lambda ct, ins, out, wants: elementwise_vjp(partials, ct, ins, out, wants)
    batch_rules[prim] = lambda values, dims, size: elementwise_batch(prim, values, dims, size)
    declare_lowering(prim, Lowering.ELEMENTWISE)


for _name in NEW:
    _define(_name, _PARTIALS[_name])


def _float_operand(x):
    """Floats and complex numbers stay (NumPy's complex ufuncs); the rest become
    the promotion table's float for them (`dt.to_inexact`)."""
    weak = ops._all_weak(x)   # read before asarray: a Python int is weak
    x = ops.asarray(x) if not isinstance(x, (ops.Array, Tracer)) else x
    return x if dt.is_inexact(x.dtype) else ops.astype(x, dt.to_inexact(x.dtype, weak))


def _unary(name):
    prim = P[name]

    def op(x):
        return ops.bind(prim, _float_operand(x))
    op.__name__ = name
    return op


def _binary(name):
    prim = P[name]

    def op(x, y):
        weak = ops._all_weak(x, y)   # read before promote makes Python scalars NumPy literals
        x, y = ops.promote(name, x, y)
        d = ops._dtype_of(x)
        if dt.is_complex(d):
            raise DTypeError(f"{name}: expected real (not complex) operands, got {d.name}")
        if not dt.is_float(d):
            x, y = ops.astype(x, dt.to_inexact(d, weak)), ops.astype(y, dt.to_inexact(d, weak))
        if not isinstance(x, (ops.Array, Tracer)) and not isinstance(y, (ops.Array, Tracer)):
            x = ops.asarray(x)
        return ops.bind(prim, x, y)
    op.__name__ = name
    return op


acosh, asinh, atanh, log2, log10 = (_unary(n) for n in FLOAT_UNARY)
hypot, copysign, logaddexp, nextafter = (_binary(n) for n in FLOAT_BINARY)
arccosh, arcsinh, arctanh = acosh, asinh, atanh

# Docstrings of the functions made by _unary and _binary (no `def` holds them).
_X = f"x: an array or scalar; integers and bools are computed in {ops._INT_FLOAT}, complex numbers stay complex."
_XY = ("x, y: real arrays or scalars, broadcast together and promoted by NEP 50 (Python scalars are weak); "
       f"integers and bools are computed in {ops._INT_FLOAT}.")
for _f, _summary, _args in (
        (acosh, "The inverse hyperbolic cosine, elementwise (also named arccosh).", _X),
        (asinh, "The inverse hyperbolic sine, elementwise (also named arcsinh).", _X),
        (atanh, "The inverse hyperbolic tangent, elementwise (also named arctanh).", _X),
        (log2, "The base-2 logarithm, elementwise.", _X),
        (log10, "The base-10 logarithm, elementwise.", _X),
        (hypot, "sqrt(x**2 + y**2), elementwise, without overflow for large operands.", _XY),
        (copysign, "The magnitude of `x` with the sign of `y`, elementwise.", _XY),
        (logaddexp, "log(exp(x) + exp(y)), elementwise, computed stably.", _XY),
        (nextafter, "The next float after `x` in the direction of `y`, elementwise.", _XY)):
    _f.__doc__ = f"{_summary}\n\n{_args}"


def trunc(x):
    """`x` rounded toward zero; integers keep their dtype (they are already whole).

    x: a real array or scalar (complex numbers are refused).
    """
    x = ops.asarray(x)
    if x.dtype.kind in "biu":
        return x
    if dt.is_complex(x.dtype):
        raise DTypeError(f"trunc: expected a real (not complex) operand, got {x.dtype.name}")
    return ops.bind(P["trunc"], x)


def isinf(x):
    """Whether each element is +inf or -inf (never for integers; for complex numbers: either part).

    x: an array or scalar.
    """
    x = ops.asarray(x)
    if dt.is_complex(x.dtype):   # either part infinite (as NumPy and the standard)
        return ops.logical_or(isinf(ops.real(x)), isinf(ops.imag(x)))
    if not dt.is_float(x.dtype):
        return ops.not_equal(x, x) if x.dtype.kind == "b" else ops.less(x, x)   # all False, shaped like x
    return ops.logical_and(ops.logical_not(ops.isfinite(x)), ops.logical_not(ops.isnan(x)))


def signbit(x):
    """Whether the sign bit is set: true for negative numbers, -0.0 and NaNs with the sign bit, as NumPy's.

    x: an array or scalar of any real dtype.
    """
    x = ops.asarray(x)
    if x.dtype.kind in "bu":
        return ops.less(ops.astype(x, dt.int8 if x.dtype.kind == "b" else x.dtype), 0)
    if x.dtype.kind == "i":
        return ops.less(x, 0)
    return ops.less(copysign(x.dtype.type(1), x), 0)


def positive(x):
    """`x` itself (unary +); refused for bool as the standard's numeric functions are.

    x: a numeric array or scalar.
    """
    x = ops.asarray(x)
    if x.dtype.kind == "b":
        raise DTypeError("positive: expected a numeric operand, got bool")
    return x
