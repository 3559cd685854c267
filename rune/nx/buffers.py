"""`nx.Array` (defined in `rune.core.array`) and moving raw buffers into Arrays."""
from ..core.array import _HOST0, Array  # noqa: F401  (rune.nx.buffers.Array is public)
from ..core.prims import P
from ..core.trace import bind
from ..core.devices import current_default, get_device, transfer


def wrap_raws(raws, avals):
    """Raw outputs of a program as Arrays, each where its aval says (unplaced
    values on the default device)."""
    return [Array(r, a.device if a.device is not None else current_default(), a.weak)
            for r, a in zip(raws, avals)]


def move(x, device):
    """The Array or tracer `x` on `device`: itself if already there, else a
    counted copy (eagerly) or a staged `place`."""
    if x.device == device:
        return x
    if type(x) is Array:
        return Array(transfer(x._raw, x.device, device), device, x.weak)
    return bind(P["place"], x, src=x.device, device=device)


def place_raw(raw, src, dst):
    return raw if src == dst else transfer(raw, src, dst)


def from_host(host, device=None):
    """An Array on `device` (the default device) holding the NumPy array `host`."""
    device = current_default() if device is None else get_device(device)
    if device.platform == "cpu":
        return Array(host, device)
    return Array(transfer(host, _HOST0, device), device)

