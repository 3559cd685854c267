"""Kernel code generation: the kernel IR and its renderers (a C-style core with C and CUDA dialects).

Below the backends: codegen imports neither backends nor the compiler."""
