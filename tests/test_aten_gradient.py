"""The gradient registered for Caffe2's ATen operator (pycumsum_op.lowering.aten_gradient).

The forms `lower` emits (cumsum, cumprod, cummax, cummin, logcumsumexp, flip, roll, index_fill) are
checked with Caffe2's own GradientChecker (finite differences of the op itself; the ONNX importer's forms:
tests/test_onnx_gradients.py); every other ATen op must raise exactly
what Caffe2 raises in a process that never imported pycumsum_op.
"""
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from caffe2.python import core, gradient_checker, workspace

import pycumsum_op  # noqa: F401  (registers the ATen gradient)
from pycumsum_op.lowering import LoweringError
from pycumsum_op.scans import SCANS, AtenForm
from pycumsum_op.torch_versions import SINCE, has

#: ATen operator -> the capability its form or gradient needs (the registry's; lower refuses them without).
FORM_NEEDS = {entry.aten.operator: entry.aten.needs or entry.aten.backward_needs for entry in SCANS.values()
              if isinstance(entry.aten, AtenForm)}


def skip_unless_this_torch_has(operator, op):
    """Skip the test of ``op``'s gradient where this torch lacks what its form needs; for cumprod, whose
    gradient form is refused, after asserting that refusal."""
    capability = FORM_NEEDS.get(operator)
    if capability is None or has(capability):
        return
    if operator == "cumprod":
        with pytest.raises(LoweringError, match=r"needs torch >= {}\.{} \(this is torch ".format(*SINCE[capability])):
            core.GradientRegistry.GetGradientForOp(op, ["Y_grad"])
    pytest.skip("torch {} lacks {!r}, which the {} form needs (lower refuses it)".format(
        torch.__version__, capability, operator))

FORMS = [
    ("cumsum", dict(dim=1), 1), ("cumsum", dict(dim=-1), 1), ("cumsum", dict(dim=0), 1),
    ("flip", dict(dims=[0]), 1), ("flip", dict(dims=[-1]), 1),
    ("roll", dict(shifts=[1], dims=[1]), 1), ("roll", dict(shifts=[1], dims=[-3]), 1),
    ("index_fill", dict(dim=1, value=0.0), 2),
    ("cumprod", dict(dim=1), 1), ("cumprod", dict(dim=-1), 1),
    ("logcumsumexp", dict(dim=1), 1), ("logcumsumexp", dict(dim=-3), 1),
]
#: Forms with two outputs (values, indices): only the values have a gradient.
INDEXED_FORMS = [("cummax", dict(dim=1)), ("cummin", dict(dim=0)), ("cummax", dict(dim=-1))]


@pytest.mark.parametrize("operator, args, inputs", FORMS)
def test_emitted_forms_pass_caffe2_gradient_checker(operator, args, inputs):
    x = np.random.RandomState(0).uniform(-1, 1, (3, 4, 2)).astype(np.float64)
    feeds = [x, np.array([0, 2], np.int64)][:inputs]
    op = core.CreateOperator("ATen", ["X", "I"][:inputs], ["Y"], operator=operator, **args)
    skip_unless_this_torch_has(operator, op)
    checker = gradient_checker.GradientChecker(stepsize=1e-4, threshold=1e-6,
                                               device_option=core.DeviceOption(0), workspace_name="aten_gradient")
    passed, gradient, numeric = checker.CheckSimple(op, feeds, 0, [0])
    assert passed, (gradient, numeric)


@pytest.mark.parametrize("operator, args", INDEXED_FORMS)
def test_indexed_forms_pass_caffe2_gradient_checker(operator, args):
    x = np.random.RandomState(1).permutation(24).reshape(3, 4, 2).astype(np.float64)  # no ties
    op = core.CreateOperator("ATen", ["X"], ["Y", "I"], operator=operator, **args)
    skip_unless_this_torch_has(operator, op)
    checker = gradient_checker.GradientChecker(stepsize=1e-2, threshold=1e-6,
                                               device_option=core.DeviceOption(0), workspace_name="aten_gradient")
    passed, gradient, numeric = checker.CheckSimple(op, [x], 0, [0])
    assert passed, (gradient, numeric)


def test_cumprod_form_with_zeros_matches_torch_autograd():
    """The emitted cumprod form's gradient (torch's cumprod_backward) with zeros, against torch.autograd."""
    x = np.array([[0., 2., 3.], [2., 0., 0.], [2., 3., 0.]])
    w = np.array([[0.5, -1., 2.], [1., 3., -2.], [-1., 1., 4.]])
    forward = core.CreateOperator("ATen", ["cp_x"], ["cp_y"], operator="cumprod", dim=1)
    skip_unless_this_torch_has("cumprod", forward)
    gradient_ops, _ = core.GradientRegistry.GetGradientForOp(forward, ["cp_w"])
    workspace.FeedBlob("cp_x", x)
    workspace.FeedBlob("cp_w", w)
    workspace.RunOperatorOnce(forward)
    for gradient_op in gradient_ops:
        workspace.RunOperatorOnce(gradient_op)
    x64 = torch.tensor(x, requires_grad=True)
    (expected,) = torch.autograd.grad(torch.cumprod(x64, 1), x64, torch.from_numpy(w))
    np.testing.assert_allclose(workspace.FetchBlob("cp_x_grad"), expected.numpy(), rtol=1e-12)


#: ATen ops that are not forms `lower` emits: other operators, extra arguments, other input counts.
OTHER_ATEN_OPS = [
    dict(inputs=["X"], operator="sin"),
    dict(inputs=["X"], operator="cumsum", dim=0, dtype=7),
    dict(inputs=["X", "X"], operator="flip", dims=[0]),
    dict(inputs=["X"], operator="roll", shifts=[1]),
    dict(inputs=["X"], operator="index_fill", dim=0, value=0.0),
    dict(inputs=["X"], operator="constant_pad_nd", pad=[1, 0]),
    dict(inputs=["X"]),
    dict(inputs=["X"], operator="logcumsumexp", dim=0, dtype=7),
    dict(inputs=["X"], operator="cumprod", dim=0, dtype=7),
    dict(inputs=["X"], operator="cummax", dim=0),
    dict(inputs=["X"], operator="cummin", dim=0, keepdim=1),
    dict(inputs=["X"], operator="add", other=1.0),
    dict(inputs=["X"], operator="mul"),
    dict(inputs=["X", "X"], operator="permute", dims=[0]),
    dict(inputs=["X"], operator="softmax", dim=0, dtype=7),
]
#: The child imports torch as pycumsum_op does (importing torch turns off C++ frames in c10's messages).
_CHILD = r"""
import json, sys
import torch
from caffe2.python import core
assert "pycumsum_op" not in sys.modules
messages = []
for spec in json.loads(sys.argv[1]):
    inputs = spec.pop("inputs")
    op = core.CreateOperator("ATen", inputs, ["Y"], **spec)
    try:
        core.GradientRegistry.GetGradientForOp(op, ["Y_grad"])
        messages.append(None)
    except Exception as error:
        messages.append([type(error).__name__, str(error)])
print(json.dumps(messages))
"""


@pytest.mark.slow  # a Caffe2 child process
def test_other_aten_ops_raise_exactly_what_caffe2_raises():
    child = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(OTHER_ATEN_OPS)], stdout=subprocess.PIPE,
                           universal_newlines=True, check=True, timeout=120)
    before = json.loads(child.stdout.strip().splitlines()[-1])
    for spec, expected in zip(OTHER_ATEN_OPS, before):
        spec = dict(spec)
        op = core.CreateOperator("ATen", spec.pop("inputs"), ["Y"], **spec)
        with pytest.raises(Exception) as raised:
            core.GradientRegistry.GetGradientForOp(op, ["Y_grad"])
        assert expected is not None
        assert [type(raised.value).__name__, without_frames(str(raised.value))] == [expected[0],
                                                                                      without_frames(expected[1])]


def without_frames(message):
    """``message`` without C++ stack frames (torch 1.4 prints them, with each process's own addresses)."""
    return "\n".join(line for line in message.splitlines() if not re.match(r"frame #\d+: ", line))
