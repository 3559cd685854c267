"""The CUDA platform: its registration, known without CuPy (platform.py); a Backend on
CuPy (backend.py); NVRTC as its `Compiler` (nvrtc.py) and cubins loaded as CuPy
modules (module.py); launching a unit's kernels (launch.py) and a compiled stretch's
buffers on a GPU (stretch.py); its `Uploader`, pinned memory and a side stream
(upload.py), and its `Communicator`, NCCL (nccl.py)."""
