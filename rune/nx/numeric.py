"""Elementwise math, comparisons, windows and calculus helpers of the NumPy surface (cbrt, isclose, hanning, gradient, ...)."""

__all__ = []
