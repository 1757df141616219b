"""The doctor: find and fix "Gradient of output … is sparse (expected dense)" in existing nets.

`diagnose` reports where and why ``AddGradientOperators`` fails; `fix` returns a
repaired copy of the net (EnsureDense, or PyCumSum for the cumsum idiom).
"""
from .diagnose import diagnose
from .findings import Finding
from .fix import UnfixableError, fix

__all__ = ["diagnose", "fix", "Finding", "UnfixableError"]
