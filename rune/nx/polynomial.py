"""Polynomials as coefficient arrays, highest degree first (NumPy's poly* functions and roots)."""

__all__ = []
