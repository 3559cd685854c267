"""NumPy's integer functions: gcd, lcm (Euclid's steps unrolled to the width's worst case) and
bitwise_count.
"""
import numpy as np

from ..core import dtypes as dt
from ..errors import DTypeError
from . import ops
from .surface_operands import _array, _const, exporter

__all__ = []
_public = exporter(__all__)


# Euclid's steps needed at most for each width: consecutive Fibonacci numbers are the worst case.
_EUCLID_STEPS = {1: 12, 2: 24, 4: 47, 8: 93}


def _integer_pair(name, x, y):
    x, y = (_array(v) for v in ops.promote(name, x, y))
    if x.dtype.kind not in "iu":
        raise DTypeError(f"{name}: expected integer operands, got {x.dtype.name}")
    return x, y


@_public
def gcd(x, y):
    """The greatest common divisor of |x| and |y|, elementwise (gcd(0, 0) = 0).

    x, y: integer arrays or scalars, broadcast and promoted together.
    """
    x, y = _integer_pair("gcd", x, y)
    a, b = ops.abs(x), ops.abs(y)
    a, b = ops.broadcast_arrays(a, b)
    # Euclid's algorithm, unrolled for its worst case: once b is 0 the steps leave a as it is.
    for _ in range(_EUCLID_STEPS[x.dtype.itemsize]):
        zero = ops.equal(b, 0)
        a, b = ops.where(zero, a, b), ops.where(zero, b, ops.remainder(a, ops.where(zero, _const(b, 1), b)))
    return a


@_public
def lcm(x, y):
    """The least common multiple of |x| and |y|, elementwise (0 where either is 0).

    x, y: integer arrays or scalars, broadcast and promoted together.
    """
    x, y = _integer_pair("lcm", x, y)
    g = gcd(x, y)
    a = ops.abs(x)
    safe = ops.where(ops.equal(g, 0), _const(g, 1), g)
    return ops.abs(ops.multiply(ops.floor_divide(a, safe), ops.abs(y)))


@_public
def bitwise_count(x):
    """The number of 1 bits in |x|, elementwise, as uint8 (NumPy's bitwise_count).

    x: an integer or bool array or scalar.
    """
    x = _array(x)
    if x.dtype.kind == "b":
        x = ops.astype(x, dt.uint8)
    if x.dtype.kind not in "iu":
        raise DTypeError(f"bitwise_count: expected an integer or bool operand, got {x.dtype.name}")
    unsigned = np.dtype(f"uint{8 * x.dtype.itemsize}")
    v = ops.astype(ops.abs(x) if x.dtype.kind == "i" else x, unsigned)
    bits = 8 * x.dtype.itemsize

    def mask(pattern):
        return unsigned.type(int(pattern * (bits // 8), 16))

    # The classic parallel count: pairs, nibbles, then bytes summed by a multiply.
    v = ops.subtract(v, ops.bitwise_and(ops.right_shift(v, unsigned.type(1)), mask("55")))
    v = ops.add(ops.bitwise_and(v, mask("33")), ops.bitwise_and(ops.right_shift(v, unsigned.type(2)), mask("33")))
    v = ops.bitwise_and(ops.add(v, ops.right_shift(v, unsigned.type(4))), mask("0f"))
    if bits > 8:
        v = ops.right_shift(ops.multiply(v, mask("01")), unsigned.type(bits - 8))
    return ops.astype(v, dt.uint8)
