"""Packaging: the wheel's requirements, the ImportError without Caffe2, and build_hooks' guard
on the stable builder entry points."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDERS = os.path.join("pycumsum_op", "ops", "builders.py")


def copy_source_tree(destination):
    """The repository's sources (no venv, git or build output) copied to ``destination``."""
    shutil.copytree(REPO, destination, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache"))
    return str(destination)


def build_wheel(source, output):
    """``pip wheel --no-deps`` in pip's isolated build environment (no torch, no caffe2 there)."""
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(output), source],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)


def requirement_name(requirement):
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower()


def load_build_hooks():
    spec = importlib.util.spec_from_file_location("build_hooks_under_test", os.path.join(REPO, "build_hooks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rename_function(tree_root, relative_path, old, new):
    path = os.path.join(tree_root, relative_path)
    with open(path) as handle:
        source = handle.read()
    assert "def {}(".format(old) in source
    with open(path, "w") as handle:
        handle.write(source.replace("def {}(".format(old), "def {}(".format(new)))


def test_wheel_keeps_torch_out_of_the_unconditional_requirements(tmp_path):
    """`pip install .` must not replace a training environment's torch: torch==1.10.2 only under [caffe2]."""
    result = build_wheel(copy_source_tree(tmp_path / "src"), tmp_path / "wheels")
    assert result.returncode == 0, result.stdout
    (wheel,) = os.listdir(str(tmp_path / "wheels"))
    with zipfile.ZipFile(str(tmp_path / "wheels" / wheel)) as archive:
        assert "pycumsum_op/ops/builders.py" in archive.namelist()
        (metadata_name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode("utf-8"))
    requirements = metadata.get_all("Requires-Dist")
    torch_requirements = [r for r in requirements if requirement_name(r) == "torch"]
    assert torch_requirements, requirements
    for requirement in torch_requirements:
        specifier, _, marker = requirement.partition(";")
        assert re.sub(r"\s", "", specifier) == "torch==1.10.2", requirement
        assert re.sub(r"\s", "", marker).replace("'", '"') == 'extra=="caffe2"', requirement
    assert "caffe2" in metadata.get_all("Provides-Extra")
    networkx = [re.sub(r"\s", "", r).replace("'", '"') for r in requirements if requirement_name(r) == "networkx"]
    assert 'networkx==2.8.8;python_version>="3.8"andextra=="caffe2"' in networkx, networkx  # data_parallel_model
    unconditional = [requirement_name(r) for r in requirements if ";" not in r]
    assert "numpy" in unconditional and "torch" not in unconditional


def import_pycumsum_op_with(shim):
    """Import pycumsum_op in a fresh interpreter after ``shim``; returns what the import raised."""
    program = shim + """
import json
try:
    import pycumsum_op
except BaseException as error:
    print(json.dumps({"type": type(error).__name__, "message": str(error),
                      "cause": repr(error.__cause__), "context_hidden": error.__suppress_context__}))
else:
    print(json.dumps({"type": None}))
"""
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_one_caffe2_import_error(raised):
    assert raised["type"] == "ImportError"
    assert raised["cause"] == "None" and raised["context_hidden"], "more than one chained error"
    for fact in ["Caffe2", "torch 1.10.2", "CPython 3.6-3.9", "newer torch wheels have no Caffe2",
                 "pip install 'torch==1.10.2'"]:
        assert fact in raised["message"]


def test_import_without_caffe2_raises_one_import_error_naming_the_torch_builds():
    """``sys.modules["caffe2"] = None`` stands in for a torch build without Caffe2 (every wheel
    after 1.10.2): ``import caffe2`` then fails exactly as when the package is absent."""
    assert_one_caffe2_import_error(import_pycumsum_op_with('import sys; sys.modules["caffe2"] = None'))


def test_import_with_caffe2_sources_but_no_compiled_runtime():
    """Caffe2's Python files without their compiled extension call sys.exit(1) on import;
    pycumsum_op turns that into the same ImportError. Blocking the three extension modules
    stands in for such an install."""
    shim = "import sys\n" + "".join(
        'sys.modules["caffe2.python.{}"] = None\n'.format(name)
        for name in ("caffe2_pybind11_state", "caffe2_pybind11_state_gpu", "caffe2_pybind11_state_hip"))
    raised = import_pycumsum_op_with(shim)
    assert_one_caffe2_import_error(raised)
    assert "caffe2_pybind11_state" in raised["message"]


def test_import_with_caffe2_succeeds():
    assert import_pycumsum_op_with("") == {"type": None}


def test_build_hooks_report_a_renamed_builder(tmp_path):
    build_hooks = load_build_hooks()
    assert build_hooks.missing_entry_points(REPO) == []
    tree = copy_source_tree(tmp_path / "src")
    assert build_hooks.missing_entry_points(tree) == []
    rename_function(tree, BUILDERS, "scan_backward", "scan_gradient")
    assert build_hooks.missing_entry_points(tree) == [BUILDERS + ":scan_backward"]


def test_wheel_build_refuses_a_renamed_builder(tmp_path):
    tree = copy_source_tree(tmp_path / "src")
    rename_function(tree, BUILDERS, "scan_forward", "scan_forward_v2")
    result = build_wheel(tree, tmp_path / "wheels")
    assert result.returncode != 0
    assert "saved nets reference these builders, which are gone: " + BUILDERS + ":scan_forward" in result.stdout


@pytest.mark.parametrize("module", ["torch", "caffe2"])
def test_build_hooks_import_neither_torch_nor_caffe2(module):
    program = "import sys; sys.path.insert(0, {!r}); import build_hooks; print({!r} in sys.modules)".format(
        REPO, module)
    result = subprocess.run([sys.executable, "-c", program], stdout=subprocess.PIPE, universal_newlines=True,
                            timeout=60)
    assert result.stdout.strip() == "False"
