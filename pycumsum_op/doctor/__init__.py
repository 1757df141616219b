"""The doctor: find and fix "Gradient of output … is sparse (expected dense)" in existing nets.

`diagnose` reports where and why ``AddGradientOperators`` fails; `fix` returns a
repaired copy of the net (EnsureDense, or PyCumSum for the cumsum idiom); `repair` also
says what it applied at each site.
"""
from .diagnose import diagnose
from .findings import Finding
from .fix import STRATEGIES, Repair, UnfixableError, fix, repair

__all__ = ["diagnose", "fix", "repair", "Repair", "STRATEGIES", "Finding", "UnfixableError"]
