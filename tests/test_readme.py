"""The examples of README.md and docs/*.md, run as a new user would: every ```python block in a fresh
Python process (cwd: an empty temporary directory), its stdout compared with the ```text block right
after it.

The convention for every Markdown file there (tests/user_runs.py reads and runs the blocks): each ```python
block is followed (only blank lines between) by a ```text block holding its exact output; a python block
without one fails here. Shell examples go in ```sh blocks and are not run. Where this torch or onnx lacks a
feature, an example passes only by stopping on the documented one-line refusal (its last line on stderr),
never on an import deep inside Caffe2.
"""
import glob
import os
import re
import sys
from typing import List

import pytest
import torch

from onnx_support import onnx_backend_refusal
from pycumsum_op._runtime import EXTRAS
from pycumsum_op.torch_versions import TORCH
from user_runs import Example, check_example, readme_examples

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = ["README.md"] + sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def _document_examples(document: str) -> List[Example]:
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        return readme_examples(handle.read(), document)


EXAMPLES = [example for document in DOCUMENTS for example in _document_examples(document)]


def test_the_readme_and_the_manual_have_examples():
    """README.md has its quickstart; each chapter of docs/ about an API shows it running."""
    with_examples = {example.document for example in EXAMPLES}
    chapters = {"README.md", "docs/ops.md", "docs/saving.md", "docs/onnx.md", "docs/lowering.md", "docs/doctor.md",
                "docs/training.md", "docs/security.md", "docs/input-limits.md", "docs/deploy.md",
                "docs/performance.md"}
    assert chapters <= with_examples, sorted(chapters - with_examples)


def _example_id(example: Example) -> str:
    return "{}:line{}-{}".format(example.document, example.line,
                                 re.sub(r"[^a-z0-9]+", "-", example.heading.lower()).strip("-"))


@pytest.mark.slow  # a fresh interpreter per example
@pytest.mark.parametrize("example", EXAMPLES, ids=[_example_id(example) for example in EXAMPLES])
def test_readme_example_prints_what_the_readme_shows(example, tmp_path):
    if sys.version_info < (3, 7) and re.search(r"\b(compiled|engine)\b", example.code + (example.expected or "")):
        pytest.skip("the accelerator's examples: the `fast` extra installs no numba on CPython 3.6")
    problem = check_example(example, tmp_path)
    onnx_refusal = onnx_backend_refusal()  # torch < 1.10 (asserted: tests/test_torch_versions.py)
    if problem and onnx_refusal and re.search(r"\nImportError: {}$".format(re.escape(onnx_refusal)), problem):
        pytest.skip(onnx_refusal)  # the example stopped on pycumsum_op.onnx's own refusal, as documented
    refusal = re.search(r"[^\n:]*: [^\n]* needs torch >= (\d+)\.(\d+) \(this is torch {}\)".format(
        re.escape(torch.__version__)), problem or "")
    if refusal and TORCH[:2] < (int(refusal.group(1)), int(refusal.group(2))):
        pytest.skip(refusal.group(0))  # a feature this torch lacks, refused as docs/versions.md says
    if problem:
        pytest.fail(problem, pytrace=False)


def test_the_checker_names_the_block_and_shows_the_difference(tmp_path):
    """The harness itself: a wrong output, a crash and a missing ```text block are each reported."""
    text = ("## Sums\n```python\nprint(1 + 1)\nprint('same')\n```\n\n```text\n3\nsame\n```\n"
            "## Crash\n```python\nraise SystemExit('boom')\n```\n```text\n```\n"
            "## Alone\n```python\nprint(2)\n```\nprose\n```text\n2\n```\n")
    wrong, crash, alone = readme_examples(text)
    message = check_example(wrong, tmp_path)
    assert message.startswith("README.md:2 ('Sums', first line 'print(1 + 1)'): prints something else")
    assert "\n-3\n+2\n same" in message
    assert "status 1" in check_example(crash, tmp_path) and "boom" in check_example(crash, tmp_path)
    assert "must be followed by a ```text block" in check_example(alone, tmp_path)
    assert check_example(wrong._replace(expected="2\nsame\n"), tmp_path) is None
    assert readme_examples(text, "docs/sums.md")[0].label.startswith("docs/sums.md:2 ('Sums'")
    assert os.listdir(str(tmp_path)) == []


_LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_relative_links_name_files_that_exist(document):
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        targets = [match.group(1) for match in _LINK.finditer(handle.read())]
    here = os.path.dirname(os.path.join(ROOT, document))
    missing = [target for target in targets if "://" not in target
               and not os.path.exists(os.path.join(here, target))]
    assert missing == [], "{} links to files that do not exist: {}".format(document, missing)


_INSTALL = re.compile(r"pip install [^\n`]*?(['\"]?[\w.-]*\[[\w,]+\]['\"]?)")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_extra_is_installed_one_way(document):
    """`pip install 'pycumsum_op[EXTRA]'`, the spelling of the one-line refusals (`_runtime.install_command`),
    works after `pip install .` from a clone as from an index: no `.[EXTRA]` or unquoted forms."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        spelled = _INSTALL.findall(handle.read())
    extras = set(EXTRAS.values()) | {"caffe2"}
    wrong = [form for form in spelled if not re.fullmatch(r"'pycumsum_op\[(\w+)\]'", form)
             or re.fullmatch(r"'pycumsum_op\[(\w+)\]'", form).group(1) not in extras]
    assert wrong == [], "{}: {}".format(document, wrong)


@pytest.mark.parametrize("document", [document for document in DOCUMENTS if document.startswith("docs/")])
def test_every_docs_page_says_first_what_its_examples_need(document):
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    assert lines[1] == "" and lines[2].startswith("Needs: "), "{}: line 3 must be its 'Needs:' line".format(document)
    if any(example.document == document for example in EXAMPLES):
        assert "pip install" in lines[2], "{}: which install its examples need".format(document)
