"""The transformations nx's own composites call (vmap, for vectorize and apply_along_axis).

They live a layer above nx (rune.transforms.batching), which hands them over here when it is imported, as nx hands its
functions to core's array operators (`arraylike.register_functions`): nx imports nothing above it.
"""
from ..errors import UsageError

_registered = {}


def register(**transformations):
    """Make `transformations` (name -> function) what nx's composites call."""
    _registered.update(transformations)


def vmap(f, in_axes=0, out_axes=0, **kwargs):
    """rune.vmap (rune.transforms.batching's), for nx's composites."""
    if "vmap" not in _registered:
        raise UsageError("vmap is not registered: import rune (rune.transforms.batching) first")
    return _registered["vmap"](f, in_axes, out_axes, **kwargs)
