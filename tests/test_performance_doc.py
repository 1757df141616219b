"""docs/performance.md's examples, run as tests/test_readme.py runs README.md's: each ```python block in a fresh
process in an empty directory, its stdout compared with the ```text block after it."""
import os

import pytest

from test_readme import check_example, readme_examples

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "performance.md")
with open(DOC) as _handle:
    EXAMPLES = readme_examples(_handle.read())


def test_the_page_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("example", EXAMPLES, ids=["line{}".format(example.line) for example in EXAMPLES])
def test_example_prints_what_the_page_shows(example, tmp_path):
    problem = check_example(example, tmp_path)
    if problem:
        pytest.fail(problem.replace("README.md", "docs/performance.md"), pytrace=False)
