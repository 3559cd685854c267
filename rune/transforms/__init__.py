"""The transformations, one layer above `rune.nx` and below the compiler:
automatic differentiation (`autodiff/`), batching (`batching`, which `rune.vmap`
runs), control flow (`control`: scan, cond, switch, while_loop, fori_loop) and
host callbacks (`callback`). Each reads the rules that primitive families
register on their `Primitive`s (docs/design.md, "Layers")."""
