"""rune's benchmarks against NumPy, JAX and PyTorch: `python -m bench`."""
