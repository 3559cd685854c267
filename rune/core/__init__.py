"""The core: arrays and their avals, dtypes, primitives and their rule tables,
the interpreter stack under `bind` (eager evaluation included), staging into
Programs, and the Program IR.

Core imports nothing above it (nx, the transformations, the compiler): the nx
functions the array operators call are handed to it by `rune.nx`
(`arraylike.register_functions`).
"""
