"""The core elementwise primitives, each declared once.

One `Op` per primitive holds everything the layers need to know about it:

    name      the primitive's name (rune/core/prims.py) and its kernel IR op
              (rune/codegen/expressions.py)
    arity     1 or 2 operands (broadcast together, of one dtype: nx promotes)
    boolean   the result is bool (comparisons, isnan, isfinite), else the operands' dtype
    numpy     the array-module function the eager table calls (`xp.<numpy>`,
              rune/backends/array_impls.py); None where rune writes its own (rsqrt,
              erf, logistic, stop_gradient)
    quiet     it never raises floating-point flags on finite operands, so the eager
              call skips NumPy's errstate guard (about 1 us a call)
    partials  the derivative, as JAX's `defjvp2`: one function per operand of
              (nx, *operands, out) -> d out / d operand, where `nx` is the namespace of
              nx's functions (rune/transforms/autodiff/rules.py passes it in, so this
              layer imports none of them); forward mode multiplies tangents by them,
              reverse mode cotangents (rune/nx/rule_helpers.py)
    linear    instead of partials, the sign of each operand's contribution (add, sub, neg)
    smooth    False: no derivative flows through (piecewise constant: floor, sign,
              comparisons, bitwise ops, stop_gradient)
    c         the C math function computing it for float operands, in both dialects
              (rune's float32 library where it has one, rune/codegen/mathlib.py); None
              where rune/codegen/expressions.py writes a rule under the op's name
    costly    as dear as a libm call: fusion loads a tree holding it where it is stored
              anyway rather than recomputing it in each reader (rune/compiler/fuse.py),
              and a loop of few points pays for threads (rune/codegen/c.py)

Primitives, autodiff, batching, the eager array table and codegen all read this
table (tests/nx/test_rule_homes.py checks each has its rules). The nx functions
users call (rune/nx/elementwise.py) choose the dtypes each accepts and bind these.
It sits in rune/base, below codegen, because codegen may import nothing above it.
"""
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    name: str
    arity: int
    numpy: str = None
    quiet: bool = False
    partials: tuple = None
    linear: tuple = None
    smooth: bool = True
    c: str = None
    costly: bool = False
    boolean: bool = False


# ---------------------------------------------------------------- derivatives
# Written against the nx namespace `nx` that the autodiff rules pass in.

def _abs_dx(nx, x, out):
    return nx.where(nx.greater_equal(x, 0), x.dtype.type(1), x.dtype.type(-1))


def _pow_dx(nx, x, y, out):
    """d x**y / dx = y * x**(y - 1), and exactly 0 where y == 0. The base is
    replaced by 1 there, so no 0 * inf appears in this or any higher derivative
    (x**0, then x**1 differentiated twice, ... at x = 0)."""
    zero = nx.equal(y, 0)
    safe = nx.where(zero, x.dtype.type(1), x)
    return nx.where(zero, x.dtype.type(0), nx.multiply(y, nx.power(safe, nx.subtract(y, 1))))


def _pow_dy(nx, x, y, out):
    return nx.multiply(nx.log(nx.where(nx.equal(x, 0), 1, x)), out)


def _tie_split(nx, wins, ties, like):
    """1 where this operand wins, 0.5 on ties (as JAX), 0 elsewhere."""
    dtype = like.dtype
    return nx.where(wins, dtype.type(1), nx.where(ties, dtype.type(0.5), dtype.type(0)))


def _extremum_partials(wins_x, wins_y):
    return (lambda nx, x, y, out: _tie_split(nx, getattr(nx, wins_x)(x, y), nx.equal(x, y), x),
            lambda nx, x, y, out: _tie_split(nx, getattr(nx, wins_y)(x, y), nx.equal(x, y), y))


def _atan2_partials():
    def norm(nx, x, y):
        return nx.add(nx.multiply(x, x), nx.multiply(y, y))
    return (lambda nx, x, y, out: nx.divide(y, norm(nx, x, y)),
            lambda nx, x, y, out: nx.negative(nx.divide(x, norm(nx, x, y))))


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _unary(name, numpy=None, dx=None, **kw):
    return Op(name, 1, numpy, partials=None if dx is None else (dx,), **kw)


def _binary(name, numpy=None, partials=None, **kw):
    return Op(name, 2, numpy, partials=partials, **kw)


# ---------------------------------------------------------------- the table
# The order is the primitives' order (rune/core/prims.py registers them in it).
OPS = (
    _unary("neg", "negative", quiet=True, linear=(-1,)),
    _unary("exp", "exp", lambda nx, x, out: out, c="exp", costly=True),
    _unary("log", "log", lambda nx, x, out: nx.reciprocal(x), c="log", costly=True),
    _unary("log1p", "log1p", lambda nx, x, out: nx.reciprocal(nx.add(x, 1)), c="log1p", costly=True),
    _unary("expm1", "expm1", lambda nx, x, out: nx.add(out, 1), c="expm1", costly=True),
    _unary("sqrt", "sqrt", lambda nx, x, out: nx.divide(0.5, out), c="sqrt"),
    _unary("cbrt", "cbrt", lambda nx, x, out: nx.reciprocal(nx.multiply(nx.multiply(out, out), 3)), quiet=True,
           c="cbrt", costly=True),
    _unary("rsqrt", None, lambda nx, x, out: nx.multiply(nx.divide(out, x), -0.5)),
    _unary("sin", "sin", lambda nx, x, out: nx.cos(x), quiet=True, c="sin", costly=True),
    _unary("cos", "cos", lambda nx, x, out: nx.negative(nx.sin(x)), quiet=True, c="cos", costly=True),
    _unary("tan", "tan", lambda nx, x, out: nx.add(nx.multiply(out, out), 1), quiet=True, c="tan",
           costly=True),
    _unary("tanh", "tanh", lambda nx, x, out: nx.subtract(1, nx.multiply(out, out)), quiet=True, c="tanh",
           costly=True),
    _unary("sinh", "sinh", lambda nx, x, out: nx.cosh(x), c="sinh", costly=True),
    _unary("cosh", "cosh", lambda nx, x, out: nx.sinh(x), c="cosh", costly=True),
    _unary("asin", "arcsin", lambda nx, x, out: nx.rsqrt(nx.subtract(1, nx.multiply(x, x))), c="asin",
           costly=True),
    _unary("acos", "arccos", lambda nx, x, out: nx.negative(nx.rsqrt(nx.subtract(1, nx.multiply(x, x)))),
           c="acos", costly=True),
    _unary("atan", "arctan", lambda nx, x, out: nx.reciprocal(nx.add(nx.multiply(x, x), 1)), quiet=True,
           c="atan", costly=True),
    _unary("erf", None, lambda nx, x, out: nx.multiply(nx.exp(nx.negative(nx.multiply(x, x))), _TWO_OVER_SQRT_PI),
           quiet=True, c="erf", costly=True),
    _unary("logistic", None, lambda nx, x, out: nx.multiply(out, nx.subtract(1, out)), quiet=True, costly=True),
    _unary("floor", "floor", quiet=True, smooth=False, c="floor"),
    _unary("ceil", "ceil", quiet=True, smooth=False, c="ceil"),
    _unary("round", "round", smooth=False, c="rint"),   # rint rounds half to even in the default mode
    _unary("sign", "sign", quiet=True, smooth=False),
    _unary("abs", "abs", _abs_dx, quiet=True),
    _unary("not", "invert", quiet=True, smooth=False),
    _unary("stop_gradient", None, smooth=False),
    _binary("add", "add", quiet=True, linear=(1, 1)),
    _binary("sub", "subtract", quiet=True, linear=(1, -1)),
    _binary("mul", "multiply", (lambda nx, x, y, out: y, lambda nx, x, y, out: x), quiet=True),
    _binary("div", "true_divide", (lambda nx, x, y, out: nx.reciprocal(y),
                                   lambda nx, x, y, out: nx.negative(nx.divide(out, y)))),
    _binary("floordiv", "floor_divide", smooth=False),
    _binary("rem", "remainder", (lambda nx, x, y, out: x.dtype.type(1),
                                 lambda nx, x, y, out: nx.negative(nx.floor(nx.divide(x, y))))),
    _binary("pow", "power", (_pow_dx, _pow_dy), costly=True),
    _binary("max", "maximum", _extremum_partials("greater", "less"), quiet=True),
    _binary("min", "minimum", _extremum_partials("less", "greater"), quiet=True),
    _binary("atan2", "arctan2", _atan2_partials(), c="atan2", costly=True),
    _binary("and", "bitwise_and", quiet=True, smooth=False),
    _binary("or", "bitwise_or", quiet=True, smooth=False),
    _binary("xor", "bitwise_xor", quiet=True, smooth=False),
    _binary("shift_left", "left_shift", quiet=True, smooth=False),
    _binary("shift_right", "right_shift", quiet=True, smooth=False),
    _binary("eq", "equal", quiet=True, smooth=False, boolean=True),
    _binary("ne", "not_equal", quiet=True, smooth=False, boolean=True),
    _binary("lt", "less", quiet=True, smooth=False, boolean=True),
    _binary("le", "less_equal", quiet=True, smooth=False, boolean=True),
    _binary("gt", "greater", quiet=True, smooth=False, boolean=True),
    _binary("ge", "greater_equal", quiet=True, smooth=False, boolean=True),
    _unary("isnan", "isnan", quiet=True, smooth=False, boolean=True),
    _unary("isfinite", "isfinite", quiet=True, smooth=False, boolean=True),
)
BY_NAME = {op.name: op for op in OPS}

# The groups the layers handle alike.
UNARY = tuple(op.name for op in OPS if op.arity == 1 and not op.boolean)
BINARY = tuple(op.name for op in OPS if op.arity == 2 and not op.boolean)
COMPARE = tuple(op.name for op in OPS if op.arity == 2 and op.boolean)
PREDICATE = tuple(op.name for op in OPS if op.arity == 1 and op.boolean)
