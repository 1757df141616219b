"""pytest's collection of the package's doctests (``testpaths`` holds pycumsum_op): the accelerator's loops import
numba at module level, so they are collected only where numba is installed (not on CPython 3.6, where the ``fast``
extra installs nothing)."""
import importlib.util

collect_ignore = [] if importlib.util.find_spec("numba") else ["pycumsum_op/kernels/loops.py"]
