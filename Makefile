# make demo / make test / make bench: each creates or reuses .venv on CPython 3.9 (found by
# scripts/find-python.sh: $PYTHON, python3.9 on PATH, pyenv's 3.9),
# installs the pinned Caffe2 runtime (torch==1.10.2) and this package, then runs.
VENV      := .venv
VPY       := $(VENV)/bin/python
STAMP     := $(VENV)/.pycumsum-installed

.PHONY: demo test test-matrix bench install clean

demo: $(STAMP)
	$(VENV)/bin/pycumsum-op demo

test: $(STAMP)
	$(VPY) -m pytest -q

# Not CI: venvs under .matrix/ for torch 1.4-1.10.2 on CPython 3.6-3.9 (scripts/test-matrix.sh; docs/versions.md).
test-matrix:
	scripts/test-matrix.sh

bench: $(STAMP)
	$(VPY) benchmarks/run.py

install: $(STAMP)

$(STAMP): pyproject.toml setup.cfg setup.py build_hooks.py requirements-dev.txt scripts/find-python.sh
	@if [ ! -x "$(VPY)" ]; then \
	  py=$$(scripts/find-python.sh) || exit 1; \
	  echo "creating $(VENV) with $$py"; \
	  "$$py" -m venv $(VENV); \
	fi
	$(VPY) -m pip install --quiet --upgrade pip "setuptools<80" wheel
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	$(VPY) -m pip install --quiet -e .
	touch $(STAMP)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
