"""The foundations every layer may use: counters (`stats`), environment settings
(`config`), the count of open contexts (`contexts`), numeric constants shared by
the dialects and NumPy paths (`numerics`), the profiler (`profiler`) and the
declaration of each core elementwise primitive that primitives, autodiff, the eager
tables and codegen read (`vocabulary`). Nothing
here imports another rune package except `rune.errors` (tests/api/test_layering.py)."""
