"""Derivative and batching rules of the elementwise primitives in
rune/nx/mathfuncs.py, through the shared elementwise machinery (one partial
derivative per operand; broadcasting handled once in rune/autodiff/rules.py).
"""
import math

from .autodiff.rules import _binary_rules, _unary_rules, _zero_rules
from .batching import _elementwise_rule, batch_rules
from .core.prims import P
from .nx import ops as nx
from .nx.mathfuncs import NEW, copysign

_LN2, _LN10 = math.log(2), math.log(10)


def _safe_ratio(num, den):
    """num / den, and 0 where den is 0 (hypot at the origin has no slope; JAX gives 0 too)."""
    zero = nx.equal(den, 0)
    return nx.where(zero, den.dtype.type(0), nx.divide(num, nx.where(zero, den.dtype.type(1), den)))


for _name, _partial in {
    "acosh": lambda x, out: nx.rsqrt(nx.subtract(nx.multiply(x, x), 1)),
    "asinh": lambda x, out: nx.rsqrt(nx.add(nx.multiply(x, x), 1)),
    "atanh": lambda x, out: nx.reciprocal(nx.subtract(1, nx.multiply(x, x))),
    "log2": lambda x, out: nx.reciprocal(nx.multiply(x, _LN2)),
    "log10": lambda x, out: nx.reciprocal(nx.multiply(x, _LN10)),
}.items():
    _unary_rules(_name, _partial)

for _name, _partials in {
    "hypot": (lambda x, y, out: _safe_ratio(x, out), lambda x, y, out: _safe_ratio(y, out)),
    # copysign(x, y) = |x| * sign(y): its slope in x is +-1, in y zero (away from y = 0).
    "copysign": (lambda x, y, out: copysign(x.dtype.type(1), nx.multiply(x, out)), None),
    "logaddexp": (lambda x, y, out: nx.exp(nx.subtract(x, out)), lambda x, y, out: nx.exp(nx.subtract(y, out))),
}.items():
    _binary_rules(_name, _partials)

for _name in ("trunc", "nextafter"):   # piecewise constant: zero derivative, as floor
    _zero_rules(_name)

for _name in NEW:
    batch_rules[P[_name]] = _elementwise_rule(P[_name])
