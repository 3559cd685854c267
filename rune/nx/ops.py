"""nx's building blocks under one name, for the modules that reach them as
`ops.<name>`: the functions of conversion, elementwise, shapes, complex,
reductions and contractions (each topic is its own module; this one defines
nothing), plus the few private helpers those modules share.

It is also the namespace the array operators and methods call
(rune/core/arraylike.py, registered by rune/nx/__init__.py).
"""
from .conversion import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .shapes import *  # noqa: F401,F403
from .complex import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .contractions import *  # noqa: F401,F403
from .conversion import _all_weak, _dtype_of, _operands  # noqa: F401
from .elementwise import _INT_FLOAT  # noqa: F401
from .shapes import _axes, _slice  # noqa: F401
from .reductions import _mask, _masked_statistic  # noqa: F401
