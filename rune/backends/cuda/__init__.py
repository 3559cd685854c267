"""The CUDA platform: a Backend on CuPy (backend.py) and the CUDA C dialect of the kernel renderer (dialect.py, nvrtc.py)."""
