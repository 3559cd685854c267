"""The complex-number primitives: real, imag, conj and complex (a complex
array from its real and imaginary parts). The rest of complex arithmetic
reuses the ordinary elementwise primitives (add, mul, exp, ...), whose host
implementations are NumPy's complex ufuncs. Derivative and batching rules:
rune/complex_rules.py; host implementations: rune/backends/cpu/complexfuncs.py.
"""
import functools

from ..core.aval import Aval
from ..core.prims import P, broadcast_shapes
from ..core.primitive import abstract_rules, primitive
from ..core.trace import common_device
from ..core import dtypes as dt

PARTS = ("real", "imag")          # complex -> its real dtype
NAMES = PARTS + ("conj", "complex")
for _name in NAMES:
    P[_name] = primitive(_name)


def _part(x, *, _prim):
    return Aval(x.shape, dt.real_dtype(x.dtype), x.device, x.weak)


def _complex(re, im):
    shape = broadcast_shapes("complex", re.shape, im.shape)
    return Aval(shape, dt.complex_dtype(re.dtype), common_device(P["complex"], (re, im)),
                re.weak and im.weak)


for _name in PARTS:
    abstract_rules[P[_name]] = functools.partial(_part, _prim=P[_name])
abstract_rules[P["conj"]] = lambda x: x
abstract_rules[P["complex"]] = _complex
