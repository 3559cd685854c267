"""`nx.place`: put an array on a device, copying only when it is elsewhere; and
`nx.from_dlpack`: an Array where a foreign buffer lies, sharing it."""
from .. import tree
from ..core.array import from_foreign
from ..core.primitive import eval_rules
from ..core.prims import P
from ..core.trace import Tracer
from ..core.devices import HOST, device_of_dlpack, get_device, transfer
from .buffers import Array, move
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


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array sharing memory with a DLPack producer (NumPy, CuPy, PyTorch) when it can.

    x: the producer (an object with __dlpack__ and __dlpack_device__); the Array lies where its buffer lies.
    device: then placed there if given. copy: no visible effect: rune arrays are immutable, so a shared buffer
    is never written.
    """
    kind, index = x.__dlpack_device__()
    where = device_of_dlpack(kind, index)   # a DeviceError for a device type no platform holds
    target = None if device is None else get_device(device)
    if where.platform == HOST and target is not None and target.platform == HOST:
        where = target  # any host device can hold a host buffer without a copy
    out = from_foreign(x, where)
    out._shared = True  # the producer may still write the buffer: never donated
    return out if target is None else place(out, target)
