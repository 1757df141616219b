"""The set-up path of `make demo` / `make test`: scripts/find-python.sh picks a CPython 3.6-3.9
for the .venv or says, in plain words, what is needed."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIND_PYTHON = os.path.join(REPO, "scripts", "find-python.sh")


def find_python(**environment):
    env = dict(os.environ, **environment)
    return subprocess.run([FIND_PYTHON], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=60)


def test_an_explicit_python_3_9_is_used():
    """The interpreter running these tests is the .venv's CPython 3.9."""
    result = find_python(PYTHON=sys.executable)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == sys.executable


def test_an_unusable_python_gets_one_clear_message_and_no_venv():
    result = find_python(PYTHON="/bin/false")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "needs CPython 3.6-3.9" in result.stderr
    assert "PYTHON=/bin/false is not a working CPython 3.6-3.9" in result.stderr


def test_without_any_python_3_9_the_message_says_how_to_get_one(tmp_path):
    """No $PYTHON, nothing on PATH, an empty pyenv root: the case of a fresh machine without 3.9."""
    empty = tmp_path / "empty"
    empty.mkdir()
    result = find_python(PYTHON="", PATH="/usr/bin:/bin", HOME=str(empty), PYENV_ROOT=str(empty))
    if result.returncode == 0:  # this machine has a system python3.9 on /usr/bin: then it must be a real one
        check = subprocess.run([result.stdout.strip(), "-c", "import sys; print(sys.version_info[:2])"],
                               stdout=subprocess.PIPE, universal_newlines=True)
        assert check.stdout.strip() in {"(3, 6)", "(3, 7)", "(3, 8)", "(3, 9)"}
    else:
        assert "Install one (e.g. pyenv install 3.9) or set PYTHON=/path/to/python3.9" in result.stderr


def test_the_matrix_runs_the_first_five_minutes_on_what_pip_install_left():
    """scripts/test-matrix.sh (make test-matrix, make first-five-minutes): after `pip install <checkout>` and
    before the test tools, with the optional packages a rerun added removed first."""
    script = os.path.join(REPO, "scripts", "test-matrix.sh")
    assert subprocess.run(["bash", "-n", script], timeout=60).returncode == 0
    with open(script) as handle:
        text = handle.read()
    order = [text.index(step) for step in ('pip uninstall --quiet -y onnx onnxruntime numba llvmlite networkx',
                                           '-m pip install --quiet "$source"', "scripts/first-five-minutes.py)",
                                           "-r scripts/matrix-requirements.txt", "-m pytest")]
    assert order == sorted(order), order
    make = subprocess.run(["make", "-n", "--no-print-directory", "-C", REPO, "first-five-minutes"],
                          stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert make.stdout.strip() == "MATRIX_FIRST_FIVE_ONLY=1 scripts/test-matrix.sh", make.stdout
