"""Kernel code generation: the kernel IR and its renderers, below the backends.

- kernel.py: the kernel IR (`Kernel`, `Load`, `Node`, `Store`, `Buffer`), target independent;
- expressions.py: the IR op vocabulary and the expression rules (each per-point op as a C
  expression, with NumPy's semantics where C differs);
- reductions.py: the reducers and the one order every reduction combines in (blocks,
  lanes, trees; `Fold`, `fold_plan`);
- index_math.py: loops and offsets (`collapse`, `nest`, `offset`, guards);
- cstyle.py: `CStyle`, the base both dialects share (types, constants, statements, the
  loops of a reduction, `can_render`), and `RenderedUnit`;
- helpers.py and c_src/*.h: the C helper text of the preludes (exact-semantics helpers,
  index math, Threefry, complex arithmetic, each dialect's head), C files read once;
- c.py: the C dialect (`CDialect`: OpenMP loops for the CPU);
- cuda.py: the CUDA dialect (`CudaDialect`: grid-stride loops, warp-shuffle reductions);
- complexc.py: complex values in both dialects;
- rows.py: consecutive kernels over the same rows run row by row (C);
- windows.py: window geometry of convolution and pooling.

Rendering is a pure function `dialect.render_unit(kernels) -> RenderedUnit`: it
never writes into the IR and keeps no per-call state on the dialect. codegen
imports neither the backends nor the compiler (only rune.errors, rune.base.numerics,
NumPy and the standard library)."""
