"""The doctor: find and fix "Gradient of output … is sparse (expected dense)" in existing nets.

`diagnose` reports where and why ``AddGradientOperators`` fails, and the cumsum idioms it meets
(Transpose → SparseLengthsSum → Transpose, products with a triangular constant, ops of type CumSum
or ToDense, the Slice + Expand + Add + Concat loop) with what they cost; `fix` returns a repaired
copy of the net (EnsureDense, or PyCumSum for the idioms, each checked on a random input); `repair`
also says what it applied at each site. `draw` (graphviz) draws both.
"""
from .diagnose import diagnose
from .findings import Finding
from .fix import STRATEGIES, Repair, UnfixableError, fix, repair

__all__ = ["diagnose", "fix", "repair", "Repair", "STRATEGIES", "Finding", "UnfixableError"]
