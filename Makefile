# make demo / make test / make bench: each creates or reuses .venv on CPython 3.9 (or 3.6-3.8),
# installs the pinned Caffe2 runtime (torch==1.10.2) and this package, then runs.
VENV      := .venv
VPY       := $(VENV)/bin/python
STAMP     := $(VENV)/.pycumsum-installed
# Interpreter: $PYTHON, else python3.9 on PATH, else pyenv's newest 3.9.
FIND_PY   := $(or $(PYTHON),$(shell command -v python3.9 2>/dev/null),$(lastword $(sort $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.9*/bin/python3.9))))

.PHONY: demo test bench install clean

demo: $(STAMP)
	$(VENV)/bin/pycumsum-op demo

test: $(STAMP)
	$(VPY) -m pytest

bench: $(STAMP)
	$(VPY) benchmarks/run.py

install: $(STAMP)

$(STAMP): setup.py requirements-dev.txt
	@if [ ! -x "$(VPY)" ]; then \
	  py="$(FIND_PY)"; \
	  if [ -z "$$py" ] || ! "$$py" -c 'import sys; sys.exit(not ((3, 6) <= sys.version_info[:2] <= (3, 9)))' 2>/dev/null; then \
	    echo "pycumsum_op needs CPython 3.6-3.9 (the last Caffe2 runtime, torch 1.10.2, has no wheels for newer Pythons)." >&2; \
	    echo "Set PYTHON=/path/to/python3.9, put python3.9 on PATH, or install it with: pyenv install 3.9" >&2; \
	    exit 1; \
	  fi; \
	  echo "creating $(VENV) with $$py"; \
	  "$$py" -m venv $(VENV); \
	fi
	$(VPY) -m pip install --quiet --upgrade pip setuptools wheel
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	$(VPY) -m pip install --quiet -e .
	touch $(STAMP)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
