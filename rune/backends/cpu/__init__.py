"""The host platform: a Backend on NumPy (backend.py); the system C compiler as its
`Compiler` (compiler.py); a compiled stretch's pointer array (stretch.py); the
host's direct convolution kernels (conv.py) and Threefry random bits (threefry.py)."""
