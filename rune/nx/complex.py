"""The complex-number primitives and their rules: real, imag, conj and complex
(a complex array from its real and imaginary parts). The functions that bind
them (nx.real, nx.imag, nx.conj, nx.make_complex) are in rune/nx/ops.py, whose
own composites (abs, sign, angle, var, vdot) build on them. The rest of complex
arithmetic reuses the ordinary elementwise primitives (add, mul, exp, ...).
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
from ..core.trace import bind, common_device
from ..core import dtypes as dt
from . import ops
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
    return ops.multiply(x, x.dtype.type(0))


def _linear_unary(prim, transpose):
    def jvp(primals, tangents):
        return bind(prim, primals[0]), bind(prim, tangents[0])

    def vjp(ct, ins, out, wants):
        return (transpose(ct),)

    jvp_rules[prim], vjp_rules[prim] = jvp, vjp


_linear_unary(real_p, lambda ct: bind(complex_p, ct, _zero_like(ct)))
_linear_unary(imag_p, lambda ct: bind(complex_p, _zero_like(ct), ops.negative(ct)))
_linear_unary(conj_p, lambda ct: bind(conj_p, ct))


def _complex_jvp(primals, tangents):
    out = bind(complex_p, *primals)
    tx, ty = (t if t is not None else _zero_like(p) for p, t in zip(primals, tangents))
    return out, ops.broadcast_to(bind(complex_p, tx, ty), out.shape)


def _complex_vjp(ct, ins, out, wants):
    x, y = ins
    return (unbroadcast(bind(real_p, ct), x.shape) if wants[0] else None,
            unbroadcast(ops.negative(bind(imag_p, ct)), y.shape) if wants[1] else None)


jvp_rules[complex_p], vjp_rules[complex_p] = _complex_jvp, _complex_vjp


# ---------------------------------------------------------------- batching

def _batch_rule(prim):
    return lambda values, dims, size: elementwise_batch(prim, values, dims, size)


for _prim in (real_p, imag_p, conj_p, complex_p):
    batch_rules[_prim] = _batch_rule(_prim)
