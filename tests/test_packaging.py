"""Packaging: the wheel's metadata (requirements, license), a build and install free of deprecation
warnings, the command line in an environment without Caffe2, the ImportError without Caffe2, and
build_hooks' guard on the stable builder entry points."""
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

pytestmark = pytest.mark.slow  # builds and installs wheels

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDERS = os.path.join("pycumsum_op", "ops", "builders.py")


def copy_source_tree(destination):
    """The repository's sources (no venv, git or build output) copied to ``destination``."""
    shutil.copytree(REPO, destination, ignore=shutil.ignore_patterns(
        ".venv", ".matrix", ".git", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache"))
    return str(destination)


def build_wheel(source, output):
    """``pip wheel --no-deps -v`` in pip's isolated build environment (no torch, no caffe2 there);
    verbose, so that the build backend's own warnings are in the output too."""
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(output), source],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)


def assert_no_deprecation_warnings(output):
    flagged = [line for line in output.splitlines() if "deprecat" in line.lower()]
    assert not flagged, "\n".join(flagged)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel ``pip wheel .`` builds from a copy of the sources, and pip's output."""
    root = tmp_path_factory.mktemp("wheel")
    result = build_wheel(copy_source_tree(root / "src"), root / "wheels")
    assert result.returncode == 0, result.stdout
    (name,) = os.listdir(str(root / "wheels"))
    return str(root / "wheels" / name), result.stdout


def wheel_metadata(path):
    with zipfile.ZipFile(path) as archive:
        (metadata_name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        return archive.namelist(), Parser().parsestr(archive.read(metadata_name).decode("utf-8"))


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


def test_wheel_keeps_torch_out_of_the_unconditional_requirements(wheel):
    """`pip install .` must not replace a training environment's torch: torch==1.10.2 only under [caffe2]."""
    names, metadata = wheel_metadata(wheel[0])
    assert "pycumsum_op/ops/builders.py" in names
    requirements = metadata.get_all("Requires-Dist")
    torch_requirements = [r for r in requirements if requirement_name(r) == "torch"]
    assert torch_requirements, requirements
    for requirement in torch_requirements:
        specifier, _, marker = requirement.partition(";")
        assert re.sub(r"[\s()]", "", specifier) == "torch==1.10.2", requirement  # (older setuptools: "torch (==...)")
        assert re.sub(r"\s", "", marker).replace("'", '"') == 'extra=="caffe2"', requirement
    assert "caffe2" in metadata.get_all("Provides-Extra")
    networkx = [re.sub(r"[\s()]", "", r).replace("'", '"')  # (older setuptools puts the marker in parentheses)
                for r in requirements if requirement_name(r) == "networkx"]
    assert 'networkx==2.8.8;python_version>="3.8"andextra=="caffe2"' in networkx, networkx  # data_parallel_model
    unconditional = [requirement_name(r) for r in requirements if ";" not in r]
    assert "numpy" in unconditional and "torch" not in unconditional


def extra_requirements(metadata, extra):
    """{requirement name: [its specifier and Python marker, spaces and parentheses removed]} of one extra."""
    found = {}
    for requirement in metadata.get_all("Requires-Dist"):
        flat = re.sub(r"[\s()]", "", requirement).replace("'", '"')
        if 'extra=="{}"'.format(extra) in flat:
            specifier = re.sub(r'(and)?extra=="{}"'.format(extra), "", flat).rstrip(";")
            found.setdefault(requirement_name(requirement), []).append(specifier)
    return found


def test_each_optional_package_comes_from_an_extra_that_keeps_torch(wheel):
    """The extras the one-line refusals name (`_runtime.EXTRAS`) exist; `train` is networkx alone (per Python),
    `fast` states its numpy floor, and only `caffe2` may pin torch."""
    from pycumsum_op._runtime import EXTRAS
    _, metadata = wheel_metadata(wheel[0])
    extras = set(metadata.get_all("Provides-Extra"))
    assert set(EXTRAS.values()) <= extras, extras
    for extra in extras - {"caffe2"}:
        assert "torch" not in extra_requirements(metadata, extra), extra
    train = extra_requirements(metadata, "train")  # (the markers' order in METADATA varies with setuptools)
    assert set(train) == {"networkx"} and sorted(train["networkx"]) == [
        'networkx==2.5.1;python_version<"3.8"', 'networkx==2.8.8;python_version>="3.8"'], train
    fast = extra_requirements(metadata, "fast")
    assert fast["numba"] == ['numba==0.56.4;python_version>="3.7"'], fast  # numba 0.56.4 needs numpy >= 1.18
    ((numpy, marker),) = [requirement.split(";") for requirement in fast["numpy"]]
    assert set(numpy[len("numpy"):].split(",")) == {">=1.18", "<1.24"} and marker == 'python_version>="3.7"', fast
    for extra, package in [("onnx", "onnx"), ("train", "networkx"), ("fast", "numba")]:
        assert EXTRAS[package] == extra


def test_the_onnx_extra_installs_a_supported_onnx(wheel):
    from onnx_support import onnx_backend_refusal
    if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
        pytest.skip(onnx_backend_refusal())
    from pycumsum_op.onnx import onnx_refusal
    _, metadata = wheel_metadata(wheel[0])
    (pin,) = extra_requirements(metadata, "onnx")["onnx"]
    assert pin.startswith("onnx==") and onnx_refusal(pin[len("onnx=="):]) is None, pin


def test_pip_wheel_prints_no_deprecation_warning(wheel):
    assert_no_deprecation_warnings(wheel[1])


def test_the_wheel_carries_the_license_version_and_command(wheel):
    names, metadata = wheel_metadata(wheel[0])
    assert metadata["License"] == "BSD-3-Clause" and metadata["Version"] == "0.2.0"
    # setuptools >= 77 puts license files in .dist-info/licenses/, older ones (CPython 3.6's) in .dist-info/
    (license_name,) = [name for name in names if re.search(r"\.dist-info/(licenses/)?LICENSE$", name)]
    with zipfile.ZipFile(wheel[0]) as archive:
        license_text = archive.read(license_name).decode("utf-8")
        dist_info = license_name[:license_name.index(".dist-info/") + len(".dist-info/")]
        entry_points = archive.read(dist_info + "entry_points.txt").decode("utf-8")
    with open(os.path.join(REPO, "LICENSE")) as handle:
        assert license_text == handle.read()
    assert license_text.startswith("BSD 3-Clause License") and "the pycumsum_op authors" in license_text
    assert "pycumsum-op = pycumsum_op.cli:main" in entry_points
    with open(os.path.join(REPO, "pycumsum_op", "__init__.py")) as handle:
        assert '__version__ = "0.2.0"' in handle.read()


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    """A new virtual environment with no torch, Caffe2 or numpy, and ``pip install --no-deps .`` into it
    (from a copy of the sources); returns (its bin directory, pip's output)."""
    root = tmp_path_factory.mktemp("bare")
    base_python = os.path.join(sys.base_prefix, "bin", "python{}.{}".format(*sys.version_info[:2]))
    subprocess.run([base_python, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    bin_dir = root / "venv" / "bin"
    if sys.version_info < (3, 7):  # CPython 3.6's own pip (18.1) cannot build from source: the documented upgrade
        subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "-U", "pip<24"], check=True, timeout=300,
                       env=without_pythonpath())
    result = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "-v",
                             copy_source_tree(root / "src")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, timeout=300, env=without_pythonpath())
    assert result.returncode == 0, result.stdout
    return bin_dir, result.stdout


def without_pythonpath():
    """This environment minus PYTHONPATH (which may point at a source tree with Caffe2 next to it)."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def run_bare(bin_dir, *args):
    return subprocess.run([str(bin_dir / args[0])] + list(args[1:]), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120, env=without_pythonpath())


def test_pip_install_prints_no_deprecation_warning(bare_venv):
    _, output = bare_venv
    assert re.search(r"Successfully installed pycumsum[-_]op-0\.2\.0", output), output  # (pip 22: pycumsum-op)
    assert_no_deprecation_warnings(output)


def test_without_caffe2_help_and_version_work(bare_venv):
    bin_dir, _ = bare_venv
    assert run_bare(bin_dir, "python", "-c", "import caffe2").returncode != 0  # really no Caffe2 here
    top = run_bare(bin_dir, "pycumsum-op", "--help")
    assert top.returncode == 0 and top.stderr == "", top.stderr
    assert "doctor" in top.stdout and "demo" in top.stdout and "--version" in top.stdout
    doctor = run_bare(bin_dir, "pycumsum-op", "doctor", "--help")
    assert doctor.returncode == 0 and "--init-net" in doctor.stdout and "--strategy" in doctor.stdout
    version = run_bare(bin_dir, "pycumsum-op", "--version")
    assert (version.returncode, version.stdout) == (0, "pycumsum-op 0.2.0\n")


@pytest.mark.parametrize("command", [["doctor", "net.pb", "--loss", "loss"], ["demo", "--steps", "1"]])
def test_without_caffe2_a_command_exits_2_with_the_one_line_import_error(bare_venv, command):
    bin_dir, _ = bare_venv
    result = run_bare(bin_dir, "pycumsum-op", *command)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("pycumsum-op {}: error: pycumsum_op needs the Caffe2 runtime".format(command[0]))
    assert "torch 1.10.2" in line and "No module named 'caffe2'" in line


def test_without_caffe2_import_raises_the_import_error(bare_venv):
    bin_dir, _ = bare_venv
    result = run_bare(bin_dir, "python", "-c", "import pycumsum_op")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith("ImportError: pycumsum_op needs the Caffe2 runtime")


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
