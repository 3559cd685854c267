"""Primitive implementations written once against an array module `xp` (NumPy on
the host, CuPy on a GPU): each module's `make_impls(xp)` gives name -> function,
and rune/backends/array_impls.py gathers them into every backend's table."""
