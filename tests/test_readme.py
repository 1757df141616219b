"""The examples of README.md and docs/*.md, run as a new user would: every ```python block in a fresh
Python process (cwd: an empty temporary directory), its stdout compared with the ```text block right
after it.

The convention for every Markdown file there: each ```python block is followed (only blank lines
between) by a ```text block holding its exact output; a python block without one fails here. Shell
examples go in ```sh blocks and are not run.
"""
import difflib
import glob
import os
import re
import subprocess
import sys
from typing import List, NamedTuple, Optional

import pytest
import torch

from onnx_support import onnx_backend_refusal
from pycumsum_op.torch_versions import TORCH

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = ["README.md"] + sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))
TIMEOUT_SECONDS = 120
_FENCE = re.compile(r"^```(\S*)\s*$")


class Example(NamedTuple):
    """A ```python block: where it is, its code, and the output its ```text block promises."""
    document: str              # the Markdown file, relative to the repository
    line: int                  # 1-based line of the opening fence
    heading: str               # the last Markdown heading above it
    code: str
    expected: Optional[str]    # None: no ```text block follows

    @property
    def label(self) -> str:
        first = next((line.strip() for line in self.code.splitlines() if line.strip()), "")
        return "{}:{} ({!r}, first line {!r})".format(self.document, self.line, self.heading, first)


def _fenced_blocks(text: str, document: str):
    """(opening line, language, body) of each fenced block, and the headings outside them."""
    blocks, headings = [], []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        fence = _FENCE.match(lines[number])
        if fence is None:
            if lines[number].startswith("#"):
                headings.append((number + 1, lines[number].lstrip("#").strip()))
            number += 1
            continue
        end = number + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError("{}:{}: a ``` fence is never closed".format(document, number + 1))
        blocks.append((number + 1, end + 1, fence.group(1), "\n".join(lines[number + 1:end]) + "\n"))
        number = end + 1
    return blocks, headings, lines


def readme_examples(text: str, document: str = "README.md") -> List[Example]:
    """The ```python blocks of a Markdown text, each with the ```text block that follows it.

    >>> doc = "# A\\n```python\\nprint(1)\\n```\\n\\n```text\\n1\\n```\\n## B\\n```python\\npass\\n```\\n"
    >>> [(e.line, e.heading, e.code, e.expected) for e in readme_examples(doc)]
    [(2, 'A', 'print(1)\\n', '1\\n'), (10, 'B', 'pass\\n', None)]
    """
    blocks, headings, lines = _fenced_blocks(text, document)
    examples = []
    for position, (start, end, language, body) in enumerate(blocks):
        if language != "python":
            continue
        expected = None
        if position + 1 < len(blocks):
            next_start, _, next_language, next_body = blocks[position + 1]
            only_blank_between = not any(line.strip() for line in lines[end:next_start - 1])
            if next_language == "text" and only_blank_between:
                expected = next_body
        heading = ([title for line, title in headings if line < start] or ["(top)"])[-1]
        examples.append(Example(document, start, heading, body, expected))
    return examples


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


def check_example(example: Example, cwd) -> Optional[str]:
    """Run ``example`` in a fresh interpreter in ``cwd``; None if it prints what it promises, else why not."""
    if example.expected is None:
        return "{}: a ```python block must be followed by a ```text block holding its exact output".format(
            example.label)
    try:
        result = subprocess.run([sys.executable, "-c", example.code], cwd=str(cwd), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return "{}: still running after {} s".format(example.label, TIMEOUT_SECONDS)
    if result.returncode != 0:
        return "{}: exited with status {}; stderr ends with:\n{}".format(
            example.label, result.returncode, "\n".join(result.stderr.splitlines()[-15:]))
    if result.stdout != example.expected:
        diff = difflib.unified_diff(example.expected.splitlines(), result.stdout.splitlines(),
                                    example.document + " (expected)", "printed", lineterm="")
        return "{}: prints something else than its ```text block:\n{}".format(example.label, "\n".join(diff))
    return None


def _example_id(example: Example) -> str:
    return "{}:line{}-{}".format(example.document, example.line,
                                 re.sub(r"[^a-z0-9]+", "-", example.heading.lower()).strip("-"))


@pytest.mark.slow  # a fresh interpreter per example
@pytest.mark.parametrize("example", EXAMPLES, ids=[_example_id(example) for example in EXAMPLES])
def test_readme_example_prints_what_the_readme_shows(example, tmp_path):
    if re.search(r"\b(pycumsum_op|caffe2\.python)\.onnx\b", example.code) and onnx_backend_refusal():
        pytest.skip(onnx_backend_refusal())  # torch < 1.10 with onnx >= 1.9 (asserted: tests/test_torch_versions.py)
    if sys.version_info < (3, 7) and re.search(r"\b(compiled|engine)\b", example.code):
        pytest.skip("the accelerator's examples: the `fast` extra installs no numba on CPython 3.6")
    problem = check_example(example, tmp_path)
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
