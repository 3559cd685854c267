"""Complex numbers: the primitives real, imag, conj and complex (a complex
array from its real and imaginary parts), their rules, and the functions that
bind them (nx.real, nx.imag, nx.conj, nx.make_complex, nx.angle). nx.abs,
nx.sign, nx.round, var and vdot handle complex operands with them; the rest of
complex arithmetic reuses the ordinary elementwise primitives (add, mul, exp, ...).
Eagerly the four are the array module's (rune/backends/xp/complexfuncs.py); each lowers
as the elementwise kernel IR op of its name.

Derivatives follow JAX's convention for complex numbers. Reverse mode
transposes linear maps without conjugating anything (holomorphic functions
pull a cotangent back by multiplying with f'(z), as they push a tangent
forward). The parts are R-linear maps, transposed as JAX does:
real: ct -> ct + 0i; imag: ct -> 0 - ct i; complex(x, y): ct -> (real ct, -imag ct);
conj: ct -> conj ct. So grad of a real-valued f of z = x + iy is
df/dx - i df/dy (the conjugate of the ascent direction; JAX's convention).
"""
from ..core.aval import Aval
from ..core.prims import P, broadcast_shapes
from ..core.primitive import (Lowering, abstract_rules, batch_rules, declare_lowering, jvp_rules, primitive,
                              vjp_rules)
from ..core.trace import Tracer, bind, common_device
from ..core import dtypes as dt
from ..errors import DTypeError
from .buffers import Array
from .conversion import _all_weak, _dtype_of, _operand, asarray, astype, promote
from .elementwise import atan2, logical_and, multiply, negative
from .shapes import broadcast_to
from .rule_helpers import elementwise_batch, unbroadcast

PARTS = ("real", "imag")          # complex -> its real dtype
NAMES = PARTS + ("conj", "complex")
for _name in NAMES:
    P[_name] = declare_lowering(primitive(_name), Lowering.ELEMENTWISE)
real_p, imag_p, conj_p, complex_p = (P[n] for n in NAMES)


# ---------------------------------------------------------------- abstract rules

def _part_abstract(x):
    return Aval(x.shape, dt.real_dtype(x.dtype), x.device, x.weak)


def _complex_abstract(re, im):
    shape = broadcast_shapes("complex", re.shape, im.shape)
    return Aval(shape, dt.complex_dtype(re.dtype), common_device(complex_p, (re, im)), re.weak and im.weak)


abstract_rules.update({real_p: _part_abstract, imag_p: _part_abstract, conj_p: lambda x: x,
                       complex_p: _complex_abstract})


# ---------------------------------------------------------------- derivatives

def _zero_like(x):
    return multiply(x, x.dtype.type(0))


def _linear_unary(prim, transpose):
    def jvp(primals, tangents):
        return bind(prim, primals[0]), bind(prim, tangents[0])

    def vjp(ct, ins, out, wants):
        return (transpose(ct),)

    jvp_rules[prim], vjp_rules[prim] = jvp, vjp


_linear_unary(real_p, lambda ct: bind(complex_p, ct, _zero_like(ct)))
_linear_unary(imag_p, lambda ct: bind(complex_p, _zero_like(ct), negative(ct)))
_linear_unary(conj_p, lambda ct: bind(conj_p, ct))


def _complex_jvp(primals, tangents):
    out = bind(complex_p, *primals)
    tx, ty = (t if t is not None else _zero_like(p) for p, t in zip(primals, tangents))
    return out, broadcast_to(bind(complex_p, tx, ty), out.shape)


def _complex_vjp(ct, ins, out, wants):
    x, y = ins
    return (unbroadcast(bind(real_p, ct), x.shape) if wants[0] else None,
            unbroadcast(negative(bind(imag_p, ct)), y.shape) if wants[1] else None)


jvp_rules[complex_p], vjp_rules[complex_p] = _complex_jvp, _complex_vjp


# ---------------------------------------------------------------- batching

def _batch_rule(prim):
    return lambda values, dims, size: elementwise_batch(prim, values, dims, size)


for _prim in (real_p, imag_p, conj_p, complex_p):
    batch_rules[_prim] = _batch_rule(_prim)


# ---------------------------------------------------------------- the functions users call

def _as_array(x):
    x = _operand(x)
    return x if isinstance(x, (Array, Tracer)) else asarray(x)


def real(x):
    """The real part (a real number is its own real part).

    x: an array or scalar; of complex64 the result is float32, of complex128 float64.
    """
    x = _as_array(x)
    return bind(P["real"], x) if dt.is_complex(x.dtype) else x


def imag(x):
    """The imaginary part (zeros for real numbers, as NumPy's).

    x: an array or scalar; of complex64 the result is float32, of complex128 float64.
    """
    x = _as_array(x)
    if dt.is_complex(x.dtype):
        return bind(P["imag"], x)
    return multiply(x, x.dtype.type(0)) if x.dtype != dt.bool_ else logical_and(x, False)


def conj(x):
    """The complex conjugate (a real number is its own).

    x: an array or scalar.
    """
    x = _as_array(x)
    return bind(P["conj"], x) if dt.is_complex(x.dtype) else x


def make_complex(re, im):
    """The complex array re + i im (parts promoted to one float dtype).

    re, im: arrays or scalars, broadcast together; integer parts become the promotion table's float for them
    (float32 for bool and 8/16-bit integers, float64 for 32/64-bit ones), float16/bfloat16 parts widen to
    float32 (complex64).
    """
    weak = _all_weak(re, im)
    re, im = promote("complex", re, im)
    d = _dtype_of(re)
    if dt.is_complex(d):
        raise DTypeError(f"make_complex: expected real parts, got {d.name}; take nx.real / nx.imag of them first")
    if not dt.is_float(d):
        target = dt.to_inexact(d, weak)
        re, im = astype(re, target), astype(im, target)
    elif d.itemsize == 2:   # float16/bfloat16 parts widen to complex64's float32
        re, im = astype(re, dt.float32), astype(im, dt.float32)
    if not isinstance(re, (Array, Tracer)) and not isinstance(im, (Array, Tracer)):
        re = asarray(re)
    return bind(P["complex"], re, im)


def angle(x):
    """The argument of a complex number, atan2(imag, real) (0 or pi for reals).

    x: an array or scalar.
    """
    x = _as_array(x)
    return atan2(imag(x), real(x))
