"""docs/input-limits.md's examples run as written: each ```python block in a fresh process in an empty
directory prints exactly its ```text block (test_readme's convention and checker)."""
import os

import pytest

from test_readme import check_example, readme_examples

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "input-limits.md")
with open(DOC) as _handle:
    EXAMPLES = readme_examples(_handle.read())


def test_the_page_has_its_examples():
    assert len(EXAMPLES) == 3, [example.label for example in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=["line{}".format(example.line) for example in EXAMPLES])
def test_example_prints_what_the_page_shows(example, tmp_path):
    problem = check_example(example, tmp_path)
    if problem:
        pytest.fail(problem.replace("README.md", "docs/input-limits.md"), pytrace=False)
