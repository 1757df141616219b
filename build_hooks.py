"""setup.py's build customisation (the metadata is in setup.cfg). Imports neither torch
nor caffe2: pip's isolated build environment has neither.

Saved Caffe2 nets name ``pycumsum_op.ops.builders.scan_forward`` / ``scan_backward``
inside their pickled builders, so a build that lost one of them would ship a package
that cannot load its users' models. `CheckedBuildPy` refuses to build it.
"""
import ast
import os

from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))

#: module path -> names that saved nets reference and that must stay importable.
STABLE_ENTRY_POINTS = {
    os.path.join("pycumsum_op", "ops", "builders.py"): ("scan_forward", "scan_backward"),
}


def missing_entry_points(root: str = HERE) -> list:
    """The stable builder names that the source tree under ``root`` no longer defines."""
    missing = []
    for relative_path, names in STABLE_ENTRY_POINTS.items():
        with open(os.path.join(root, relative_path)) as handle:
            tree = ast.parse(handle.read())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        missing += ["{}:{}".format(relative_path, name) for name in names if name not in defined]
    return missing


class CheckedBuildPy(build_py):
    """build_py that fails when a stable builder entry point was renamed or removed."""

    def run(self):
        missing = missing_entry_points()
        if missing:
            raise RuntimeError(
                "pycumsum_op build: saved nets reference these builders, which are gone: {}".format(
                    ", ".join(missing)))
        super().run()


cmdclass = {"build_py": CheckedBuildPy}
