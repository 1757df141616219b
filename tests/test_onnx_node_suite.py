"""onnx's whole backend node suite (847 node tests of onnx 1.10.2) through ``pycumsum_op.onnx.backend``
(`tests/onnx_node_suite.py` runs them in child processes, a batch per child): every test listed in
tests/data/onnx_node_refusals.txt is refused at prepare with the one line listed, every other one passes with
onnx's expected outputs and tolerances; none gives other numbers, fails when its net runs, or kills a process.
A test whose outcome changes (a refusal that now passes, or is refused for another reason) fails here with a
message to rewrite the list, so the list stays true.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import collections

import onnx_node_suite

BATCHES = 2
NAMES = sorted(onnx_node_suite.node_tests())
REFUSED = onnx_node_suite.read_refusals()
UPDATE = "update tests/data/onnx_node_refusals.txt: PYTHONPATH=. python tests/onnx_node_suite.py --write"


def test_the_refusal_list_names_node_tests():
    assert len(NAMES) == 847
    assert sorted(set(REFUSED) - set(NAMES)) == []
    assert all(reason.startswith(("ONNX ", "RuntimeError: ")) for reason in REFUSED.values())


@pytest.mark.slow
@pytest.mark.parametrize("batch", range(BATCHES))
def test_node_tests_pass_or_are_refused_as_listed(batch):
    names = NAMES[batch::BATCHES]
    results = onnx_node_suite.outcomes(names)
    problems = []
    for name in names:
        kind, detail = results[name]
        if name in REFUSED and kind != "refused":
            problems.append("{} is listed as refused but is now {}{}; {}".format(
                name, kind, ": " + detail if detail else "", UPDATE if kind == "pass" else "a wrong result"))
        elif name in REFUSED and detail != REFUSED[name]:
            problems.append("{} is refused for another reason than listed: {}; {}".format(name, detail, UPDATE))
        elif name not in REFUSED and kind != "pass":
            problems.append("{}: {}: {}{}".format(name, kind, detail, "; " + UPDATE if kind == "refused" else ""))
    tally = collections.Counter(kind for kind, _ in results.values())
    assert not problems, "{} of {} node tests ({}):\n{}".format(len(problems), len(names), dict(tally),
                                                                "\n".join(problems))


@pytest.mark.slow
@pytest.mark.parametrize("batch", range(BATCHES))
def test_the_portable_target_passes_or_refuses(batch):
    """The same node tests through ``prepare(lower="portable")``, for builds without ATen: each passes or is refused
    at prepare; none gives other numbers, fails when its net runs, kills a process or leaves an ATen op."""
    names = NAMES[batch::BATCHES]
    results = onnx_node_suite.outcomes(names, stock="portable")
    problems = ["{}: {}: {}".format(name, *results[name]) for name in names
                if results[name][0] not in ("pass", "refused")]
    tally = collections.Counter(kind for kind, _ in results.values())
    assert not problems, "{} of {} node tests ({}):\n{}".format(len(problems), len(names), dict(tally),
                                                                "\n".join(problems))
    assert tally["pass"] > len(names) // 3, dict(tally)  # 398 of 847 pass
