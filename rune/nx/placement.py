"""`nx.place`: put an array on a device, copying only when it is elsewhere."""
from ..core.primitive import eval_rules
from ..core.prims import P
from ..core.trace import Tracer, bind
from ..devices import get_device, transfer
from .array import Array


def place(x, device):
    """`x` on `device` (a Device or a name such as "cpu", "cuda:0"); no copy if already there."""
    device = get_device(device)
    if isinstance(x, Array):
        if x.device == device:
            return x
        return Array(transfer(x._raw, x.device, device), device, x.weak)
    if isinstance(x, Tracer):
        if x.device == device:
            return x
        return bind(P["place"], x, src=x.device, device=device)
    from .ops import asarray
    return asarray(x, device=device)


def _place_concrete(x, *, src, device):
    # A staged `place` evaluated eagerly: the one primitive whose result lies
    # elsewhere than its operand.
    return Array(transfer(x._raw, src, device), device, x.weak)


eval_rules[P["place"]] = _place_concrete


def place_tree(tree_, device):
    """Every array leaf of the pytree `tree_` placed on `device` (rune.place)."""
    from .. import tree
    return tree.map(lambda x: place(x, device), tree_)
