"""All metadata is in setup.cfg; this adds build_hooks.py's checked build_py step."""
import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_hooks import cmdclass  # noqa: E402

setup(cmdclass=cmdclass)
