"""Index helpers and index-based selection of the NumPy surface (diag, tril_indices, put, select, insert, ...)."""

__all__ = []
