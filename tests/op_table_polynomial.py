"""Op-table rows of rune/nx/polynomial.py: each case is checked eagerly against NumPy, under jit
against eager, its jvp/vjp against finite differences and under vmap against a loop."""
from op_table import *  # noqa: F401,F403  (case, the samplers, dtypes)
