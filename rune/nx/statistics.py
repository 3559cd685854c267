"""Statistics, NaN-aware reductions, histograms, order statistics and set operations of the NumPy surface."""

__all__ = []
