"""NumPy's einsum_path: the contraction order einsum would use and its cost report, planned on the
operands' shapes alone.
"""
import numpy as np

from ..errors import ArgumentError

__all__ = ["einsum_path"]


def einsum_path(subscripts, *operands, optimize="greedy", einsum_call=False):
    """The contraction order einsum would use, and a report of its cost: (path, text), as NumPy's.

    subscripts: the einsum specification. operands: arrays (or anything with a shape; only shapes are read).
    optimize: "greedy", "optimal", True/False or an explicit path (a list starting with "einsum_path").
    einsum_call: NumPy's internal form (the contraction list for einsum itself); refused here.
    """
    if einsum_call:
        raise ArgumentError("einsum_path: einsum_call= is internal to NumPy and not supported")
    # Zero-stride stand-ins of the operands' shapes: NumPy's planner reads shapes only, no data.
    shaped = [np.lib.stride_tricks.as_strided(np.zeros((), np.float64), tuple(np.shape(o)), (0,) * np.ndim(o))
              for o in operands]
    try:
        return np.einsum_path(subscripts, *shaped, optimize=optimize)
    except (ValueError, TypeError, KeyError) as e:
        raise ArgumentError(f"einsum_path: {e} (subscripts {subscripts!r}, shapes "
                            f"{[tuple(np.shape(o)) for o in operands]})") from None
