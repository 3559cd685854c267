"""Rules of the `argsort` primitive (rune/nx/sorting.py): an integer result,
so no derivative flows through it; vmap sorts along the same axis of each lane."""
from .autodiff.jvp import jvp_rules
from .autodiff.vjp import no_derivative
from .batching import batch_rules, to_front
from .core.trace import bind
from .nx.sorting import argsort_p

no_derivative.add(argsort_p)
jvp_rules[argsort_p] = lambda primals, tangents, **params: (bind(argsort_p, *primals, **params), None)


def _argsort_batch(values, dims, size, *, axis, **params):
    return bind(argsort_p, to_front(values[0], dims[0]), axis=axis + 1, **params), 0


batch_rules[argsort_p] = _argsort_batch
