"""A new user's first five minutes, in this venv: scripts/first-five-minutes.py with the optional packages that
`pip install .` does not give made unimportable in its child processes (a sitecustomize on PYTHONPATH). The
real fresh venvs, after `pip install .` alone, are `make test-matrix`'s (scripts/test-matrix.sh).
"""
import importlib.util
import os
import subprocess
import sys

import pytest

from pycumsum_op._runtime import EXTRAS, install_command

pytestmark = pytest.mark.slow  # a Caffe2 process per door

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "first-five-minutes.py")
#: What `pip install .` does not install: every optional package.
OPTIONAL = ",".join(sorted(EXTRAS))


def load_script():
    spec = importlib.util.spec_from_file_location("first_five_minutes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_after_pip_install_the_quickstart_runs_and_each_door_names_its_extra():
    result = subprocess.run([sys.executable, SCRIPT, "--without", OPTIONAL], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "optional packages missing here: {}".format(", ".join(sorted(EXTRAS))),
        "README quickstart: ok",
        "pycumsum-op onnx import: ok",
        "pycumsum-op onnx export: ok",
        "pycumsum-op train: ok",
        "import pycumsum_op.onnx: ok",
        "import pycumsum_op.training: ok",
    ]


def test_the_checks_fail_where_the_package_is_there_or_the_line_differs(tmp_path):
    """The script's checks are not vacuous: with onnx importable, `onnx export` of a missing net is refused for
    the net (not for onnx) and `import pycumsum_op.onnx` succeeds; both checks then report a problem."""
    script = load_script()
    env = dict(os.environ)
    install = install_command(EXTRAS["onnx"])
    door = script.check_door(["onnx", "export", "missing.pb", "--input", "x=float32:2", "-o", "m.onnx"], "onnx",
                             install, env, str(tmp_path))
    assert door.startswith("exit 2, stdout '', stderr:") and "needs onnx" not in door, door  # refused for the file
    assert script.check_import("pycumsum_op.onnx", "onnx", install, env, str(tmp_path)) is not None
    blocked = script.blocking_environment({"onnx"}, str(tmp_path))
    assert script.check_import("pycumsum_op.onnx", "onnx", install, blocked, str(tmp_path)) is None
    assert script.missing_packages(blocked, str(tmp_path), {"onnx", "numpy"}) == {"onnx"}
