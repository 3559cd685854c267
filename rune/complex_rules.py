"""Derivative and batching rules of the complex-number primitives
(rune/nx/complex_prims.py), with JAX's convention for complex numbers.

Reverse mode transposes linear maps without conjugating anything (holomorphic
functions pull a cotangent back by multiplying with f'(z), as they push a
tangent forward). The parts are R-linear maps, transposed as JAX does:
real: ct -> ct + 0i; imag: ct -> 0 - ct i; complex(x, y): ct -> (real ct, -imag ct);
conj: ct -> conj ct. So grad of a real-valued f of z = x + iy is
df/dx - i df/dy (the conjugate of the ascent direction; JAX's convention).
"""
from .autodiff.jvp import jvp_rules
from .autodiff.rules import unbroadcast
from .autodiff.vjp import vjp_rules
from .batching import _elementwise_rule, batch_rules
from .core.prims import P
from .core.trace import bind
from .nx import ops as nx
from .nx.complex_prims import NAMES


def _zero_like(x):
    return nx.multiply(x, x.dtype.type(0))


def _real_vjp(ct):
    return bind(P["complex"], ct, _zero_like(ct))


def _imag_vjp(ct):
    return bind(P["complex"], _zero_like(ct), nx.negative(ct))


def _linear_unary(name, transpose):
    prim = P[name]

    def jvp(primals, tangents):
        return bind(prim, primals[0]), bind(prim, tangents[0])

    def vjp(ct, ins, out, wants):
        return (transpose(ct),)

    jvp_rules[prim], vjp_rules[prim] = jvp, vjp


_linear_unary("real", _real_vjp)
_linear_unary("imag", _imag_vjp)
_linear_unary("conj", lambda ct: bind(P["conj"], ct))


def _complex_jvp(primals, tangents):
    out = bind(P["complex"], *primals)
    tx, ty = (t if t is not None else _zero_like(p) for p, t in zip(primals, tangents))
    return out, nx.broadcast_to(bind(P["complex"], tx, ty), out.shape)


def _complex_vjp(ct, ins, out, wants):
    x, y = ins
    return (unbroadcast(bind(P["real"], ct), x.shape) if wants[0] else None,
            unbroadcast(nx.negative(bind(P["imag"], ct)), y.shape) if wants[1] else None)


jvp_rules[P["complex"]], vjp_rules[P["complex"]] = _complex_jvp, _complex_vjp

for _name in NAMES:
    batch_rules[P[_name]] = _elementwise_rule(P[_name])
