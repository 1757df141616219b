#!/bin/sh
# Prints a CPython 3.6-3.9 interpreter for the .venv (Caffe2's last runtime, torch 1.10.2, needs one):
# $PYTHON if set, else python3.9 on PATH, else pyenv's newest 3.9. Exits 1 with a clear message otherwise.
usable() {
  [ -n "$1" ] && "$1" -c 'import sys; sys.exit(not ((3, 6) <= sys.version_info[:2] <= (3, 9)))' 2>/dev/null
}
if [ -n "${PYTHON:-}" ]; then
  candidates="$PYTHON"
else
  pyenv_root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  candidates="$(command -v python3.9 2>/dev/null) $(ls -d "$pyenv_root"/versions/3.9*/bin/python3.9 2>/dev/null | sort -r -t. -k3 -n)"
fi
for candidate in $candidates; do
  if usable "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done
echo "pycumsum_op needs CPython 3.6-3.9: the last Caffe2 runtime (torch 1.10.2) has no wheels for newer Pythons." >&2
if [ -n "${PYTHON:-}" ]; then
  echo "PYTHON=$PYTHON is not a working CPython 3.6-3.9." >&2
else
  echo "Found none (tried: python3.9 on PATH, pyenv's 3.9). Install one (e.g. pyenv install 3.9) or set PYTHON=/path/to/python3.9." >&2
fi
exit 1
