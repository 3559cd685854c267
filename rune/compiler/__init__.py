"""The compiler: plans (rune/compiler/plan.py), their steps, lowering and fusion
into kernels, donation, `rune.jit` (rune/compiler/api.py) and `rune.trace`
(rune/compiler/tracing.py).

Importing the package installs the eager evaluation of the primitives whose
bodies are programs (scan, while, cond, checkpoints, custom rules) through
plans (rune/compiler/eager.py).
"""
from .eager import install_eval_rules

install_eval_rules()
