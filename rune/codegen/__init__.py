"""Kernel code generation: the kernel IR and its renderers, below the backends.

- kernel.py: the kernel IR (`Kernel`, `Load`, `Node`, `Store`, `Buffer`), target independent;
- cstyle.py: the C-style core both dialects share (the IR op vocabulary, expression
  rules, reductions, index math, exact-semantics helpers, `CStyle.can_render`);
- c.py: the C dialect (`CDialect`: OpenMP loops for the CPU);
- cuda.py: the CUDA dialect (`CudaDialect`: grid-stride loops, warp-shuffle reductions);
- complexc.py: complex values in both dialects;
- windows.py: window geometry of convolution and pooling.

Rendering is a pure function `dialect.render_unit(kernels) -> RenderedUnit`: it
never writes into the IR and keeps no per-call state on the dialect. codegen
imports neither the backends nor the compiler (only rune.errors, rune.base.numerics,
NumPy and the standard library)."""
