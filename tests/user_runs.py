"""How the tests run what a user runs, with the standard library only (scripts/first-five-minutes.py uses it
in environments without the test tools): the ```python examples of a Markdown file, each in a fresh process
compared with the ```text block after it, and a command's own stderr lines without the runtime's notices.

The convention for every Markdown file (README.md, docs/*.md): each ```python block is followed (only blank
lines between) by a ```text block holding its exact output; a python block without one fails. Shell examples
go in ```sh blocks and are not run.
"""
import difflib
import re
import subprocess
import sys
from typing import List, NamedTuple, Optional

TIMEOUT_SECONDS = 120
_FENCE = re.compile(r"^```(\S*)\s*$")
#: What torch's CUDA wheels print on a machine without a GPU before a command runs (torch 1.6's Caffe2:
#: "[W common_gpu.cc:35] Insufficient cuda driver. Cannot use cuda."; torch's "Found no NVIDIA driver" warning).
RUNTIME_NOTICE = re.compile(r"^\[W \S+\.(cc|cpp):\d+\] .*cuda|no NVIDIA driver|^\s+warnings\.warn\(", re.IGNORECASE)


def own_stderr_lines(stderr: str) -> List[str]:
    """A command's own lines on stderr: without the runtime's GPU notices."""
    return [line for line in stderr.strip().splitlines() if not RUNTIME_NOTICE.search(line)]


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


def check_example(example: Example, cwd, env=None) -> Optional[str]:
    """Run ``example`` in a fresh interpreter in ``cwd`` (environment ``env``, default this process's); None if
    it prints what it promises, else why not."""
    if example.expected is None:
        return "{}: a ```python block must be followed by a ```text block holding its exact output".format(
            example.label)
    try:
        result = subprocess.run([sys.executable, "-c", example.code], cwd=str(cwd), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT_SECONDS, env=env)
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
