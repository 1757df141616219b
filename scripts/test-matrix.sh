#!/bin/bash
# The version matrix: for each torch/CPython combination, a venv under .matrix/ (gitignored) holding that
# torch wheel and an older numpy where the wheel's era had one (the user's environment), then this package
# installed from a clean checkout of HEAD with the venv's own pip (`pip install -U "pip<24"`, `pip install
# <checkout>`), a check that torch and numpy were kept, a new user's first five minutes in that environment
# as `pip install .` left it (scripts/first-five-minutes.py: the README quickstart, and each door whose
# optional package is missing refused in one line naming its extra), the test tools of
# scripts/matrix-requirements.txt, and the test suite.
# One summary line per combination at the end (also in .matrix/<combination>.result).
#
#   scripts/test-matrix.sh                      # every combination, the whole suite
#   scripts/test-matrix.sh 1.4.0:3.6            # one combination
#   PYTEST_ARGS="tests/test_forward.py" scripts/test-matrix.sh   # a part of the suite
#   MATRIX_INSTALL_ONLY=1 scripts/test-matrix.sh                  # build the venvs, run nothing
#   MATRIX_FIRST_FIVE_ONLY=1 scripts/test-matrix.sh               # the first five minutes, no suite
#                                                                 # (make first-five-minutes)
#
# Interpreters: pyenv's newest 3.X (or python3.X on PATH). Torch wheels come from PyPI (or pip's cache,
# or PIP_FIND_LINKS); each is 750-900 MB.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MATRIX="$ROOT/.matrix"
# torch:python:numpy — an older numpy where the test tools allow it (the package's floor, 1.17, on torch 1.4;
# onnxruntime 1.19.2, the 3.9 oracle, needs numpy >= 1.21.6; 1.4.0 on 3.7 runs the `fast` extra, whose numba needs
# numpy >= 1.18).
COMBINATIONS="1.4.0:3.6:1.17.5 1.4.0:3.7:1.18.5 1.6.0:3.7:1.18.5 1.8.1:3.9:1.21.6 1.9.1:3.9:1.21.6 1.10.2:3.6:1.19.5 1.10.2:3.9:1.23.5"

python_for() {  # python_for 3.6 -> an interpreter path, or nothing
  local root candidate
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for candidate in $(ls -d "$root"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -t. -k3 -n -r) \
                   "$(command -v python"$1" 2>/dev/null)"; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
}

wanted="${*:-}"
mkdir -p "$MATRIX"
ran=""
for combination in $COMBINATIONS; do
  IFS=: read -r torch_version python_version numpy_version <<< "$combination"
  if [ -n "$wanted" ] && ! [[ " $wanted " == *" $torch_version:$python_version "* ]]; then
    continue
  fi
  name="torch$torch_version-py$python_version"
  venv="$MATRIX/$name"
  log="$MATRIX/$name.log"
  summary="$MATRIX/$name.result"  # one line; several invocations may run side by side
  : > "$summary"
  ran="$ran $summary"
  python=$(python_for "$python_version")
  if [ -z "$python" ]; then
    echo "$name: SKIPPED (no CPython $python_version found)" | tee -a "$summary"
    continue
  fi
  echo "== $name: $python (log: $log)"
  source="$MATRIX/$name.src"
  (
    set -e
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    vpy="$venv/bin/python"
    "$vpy" -m pip install --quiet -U "pip<24"
    # The user's environment: this torch and numpy (setuptools as the venv made it).
    "$vpy" -m pip install --quiet "torch==$torch_version" "numpy==$numpy_version"
    # What a rerun's test tools added beyond `pip install .` goes, so that the first five minutes see only it.
    "$vpy" -m pip uninstall --quiet -y onnx onnxruntime numba llvmlite networkx decorator pycumsum_op
    before=$("$vpy" -m pip freeze | grep -iE '^(torch|numpy)==' | sort)
    # A clean checkout of HEAD (git archive) per combination: no build directories shared between runs.
    rm -rf "$source" && mkdir -p "$source"
    git archive HEAD | tar -x -C "$source"
    "$vpy" -m pip install --quiet --force-reinstall --no-deps "$source" && "$vpy" -m pip install --quiet "$source"
    after=$("$vpy" -m pip freeze | grep -iE '^(torch|numpy)==' | sort)
    if [ "$before" != "$after" ]; then
      echo "pip install . changed the environment: before: $before; after: $after"
      exit 3
    fi
  ) > "$log" 2>&1
  status=$?
  if [ $status -ne 0 ]; then
    echo "$name: INSTALL FAILED (exit $status; see $log)" | tee -a "$summary"
    continue
  fi
  if [ -n "${MATRIX_INSTALL_ONLY:-}" ]; then
    echo "$name: installed" | tee -a "$summary"
    continue
  fi
  # From the installed checkout, with the package from site-packages (no PYTHONPATH).
  (cd "$source" && env -u PYTHONPATH "$venv/bin/python" scripts/first-five-minutes.py) >> "$log" 2>&1
  first_five=$([ $? -eq 0 ] && echo "first five minutes ok" || echo "FIRST FIVE MINUTES FAILED")
  if [ -n "${MATRIX_FIRST_FIVE_ONLY:-}" ]; then
    echo "$name: $first_five" | tee -a "$summary"
    continue
  fi
  if ! "$venv/bin/python" -m pip install --quiet -r scripts/matrix-requirements.txt "torch==$torch_version" \
       "numpy==$numpy_version" >> "$log" 2>&1; then
    echo "$name: $first_five; TEST TOOLS' INSTALL FAILED (see $log)" | tee -a "$summary"
    continue
  fi
  # shellcheck disable=SC2086
  # The suite runs on the source tree that was installed (PYTHONPATH: its child processes import it too).
  # Before torch 1.10, pycumsum_op.onnx refuses to load (tests/test_torch_versions.py): no doctests there.
  ignore=""
  case "$torch_version" in 1.10.*) ;; *) ignore="--ignore=pycumsum_op/onnx" ;; esac
  (cd "$ROOT" && PYTHONPATH="$ROOT" "$venv/bin/python" -m pytest -q -p no:randomly $ignore ${PYTEST_ARGS:-} ) \
    >> "$log" 2>&1
  status=$?
  result=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error)|no tests ran' "$log" | tail -n 1 | sed 's/=//g; s/^ *//; s/ *$//')
  echo "$name: $first_five; pytest exit $status: ${result:-no summary line (see $log)}" | tee -a "$summary"
done
echo "== summary"
# shellcheck disable=SC2086
cat $ran
