"""`nx.place`: put an array on a device, copying only when it is elsewhere."""
from .. import tree
from ..core.primitive import eval_rules
from ..core.prims import P
from ..core.trace import Tracer
from ..devices import get_device, transfer
from .array import Array, move
from .ops import asarray


def place(x, device):
    """`x` on `device` (a Device or a name such as "cpu", "cuda:0"); no copy if already there."""
    device = get_device(device)
    if isinstance(x, (Array, Tracer)):
        return move(x, device)
    return asarray(x, device=device)


def _place_concrete(x, *, src, device):
    # A staged `place` evaluated eagerly: the one primitive whose result lies
    # elsewhere than its operand.
    return Array(transfer(x._raw, src, device), device, x.weak)


eval_rules[P["place"]] = _place_concrete


def place_tree(tree_, device):
    """Every array leaf of the pytree `tree_` placed on `device` (rune.place)."""
    return tree.map(lambda x: place(x, device), tree_)
