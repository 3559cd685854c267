"""`Embedding`: rows of a table looked up by integer ids, and the same table as
an output projection (`attend`, for tied input and output embeddings)."""
from .. import nx
from ..errors import DTypeError, ShapeError
from .layer_helpers import in_dtype_of
from .module import Module, _boundary, is_inexact_array

__all__ = ["Embedding"]


class Embedding(Module):
    """Rows of a (num_embeddings, features) table looked up by integer ids.

    An id outside [0, num_embeddings) gives a row of NaN (for a floating or
    complex table), eagerly and under jit/grad alike, as `nn.cross_entropy` gives a
    NaN loss for an out-of-range label: a vocabulary that does not match the table
    shows in the loss instead of training silently on a clamped row. (A table of
    another dtype has no NaN: its out-of-range ids are clamped as by `nx.take`.)"""
    weight: object
    num_embeddings: int
    features: int

    def __init__(self, key, num_embeddings, features, dtype=nx.float32, weight_init=None):
        self.num_embeddings, self.features = int(num_embeddings), int(features)
        shape = (self.num_embeddings, self.features)
        self.weight = nx.random.normal(key, shape, nx.dtype(dtype)) if weight_init is None else \
            weight_init(key, shape, dtype)

    def __call__(self, ids):
        ids = nx.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise DTypeError(f"Embedding(num_embeddings={self.num_embeddings}, features={self.features}): "
                             f"expected integer ids, got {ids.dtype.name} of shape {ids.shape}")
        rows = nx.take(self.weight, ids, axis=0)
        if not is_inexact_array(self.weight):
            return rows
        # a where, not a Python check, so the same rule holds for traced ids
        valid = ids >= 0
        if self.num_embeddings <= nx.iinfo(ids.dtype).max:   # else every id fits (uint8 ids, 300 rows)
            valid = nx.logical_and(valid, ids < self.num_embeddings)
        valid = valid[..., None]
        return nx.where(valid, rows, nx.full_like(rows, float("nan")))

    @_boundary   # under a mixed-precision policy, as __call__ is
    def attend(self, x):
        """x (..., features) @ weight.T: (..., num_embeddings) scores against every row."""
        where = f"Embedding(num_embeddings={self.num_embeddings}, features={self.features}).attend"
        x = in_dtype_of(where, x, self.weight)
        if x.ndim < 1 or x.shape[-1] != self.features:
            raise ShapeError(f"{where}: expected vectors whose last axis is {self.features}, got shape {x.shape}")
        # one product contracting both last axes: the table is read as it lies, not transposed first
        return nx.dot_general(x, self.weight, (((x.ndim - 1,), (1,)), ((), ())))
