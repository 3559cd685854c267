"""Stacking, splitting, reshaping and construction helpers of the NumPy surface (hstack, atleast_2d, rot90, kron, ...)."""

__all__ = []
