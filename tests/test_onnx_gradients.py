"""Caffe2 gradients of the ATen forms the ONNX importer emits for speed (`IMPORTED_FORMS` in
pycumsum_op.lowering.aten_gradient): add/sub/mul/div of two broadcast tensors, permute, softmax along any dim.

Oracles: torch.autograd (float64, on the same values) and Caffe2's GradientChecker (finite differences of the op);
for an imported model, torch.autograd through the module torch.onnx.export exported.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import io
import warnings

import numpy as np
import onnx
import torch
from caffe2.python import core, gradient_checker, workspace
from hypothesis import given, settings
from hypothesis import strategies as st

import pycumsum_op.onnx
from pycumsum_op.lowering.aten_gradient import IMPORTED_FORMS, emitted_form, imported_form

ARITHMETIC = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
#: (first operand's dims, second's): a scalar (rank 0) either side, a bias, an attention mask (B, 1, 1, S) against
#: scores (B, h, S, S) both ways, size-1 dims broadcast both ways, empty dims, and no broadcast at all.
BROADCASTS = [((), (2, 3)), ((2, 3), ()), ((), ()), ((3,), (2, 3)), ((2, 4, 3), (3,)), ((2, 1, 1, 4), (2, 3, 4, 4)),
              ((2, 3, 4, 4), (2, 1, 1, 4)), ((3, 1), (1, 4)), ((1,), (2, 0)), ((2, 0, 3), (1, 3)), ((0,), ()),
              ((2, 3), (2, 3))]


def operands(shapes, seed, operator):
    """float64 operands of ``shapes``; a divisor kept away from zero (its gradient divides by its square)."""
    rng = np.random.RandomState(seed)
    first, second = (rng.uniform(-2, 2, shape) for shape in shapes)
    if operator == "div":
        second = np.sign(second + (second == 0)) * rng.uniform(0.5, 2, shapes[1])
    return [np.asarray(first, np.float64), np.asarray(second, np.float64)]


def caffe2_gradients(op, feeds, grad_out):
    """The gradients of ``op``'s inputs for ``grad_out`` on its first output, by its registered gradient ops."""
    workspace.ResetWorkspace()
    try:
        for name, value in zip(op.input, feeds):
            workspace.FeedBlob(name, value)
        workspace.FeedBlob("grad_out", grad_out)
        workspace.RunOperatorOnce(op)
        gradient_ops, grad_inputs = core.GradientRegistry.GetGradientForOp(op, ["grad_out"])
        for gradient_op in gradient_ops:
            workspace.RunOperatorOnce(gradient_op)
        return workspace.FetchBlob(op.output[0]), [workspace.FetchBlob(name) for name in grad_inputs]
    finally:
        workspace.ResetWorkspace()


def torch_gradients(function, feeds, grad_out):
    tensors = [torch.tensor(value, requires_grad=True) for value in feeds]
    out = function(*tensors)
    return out.detach().numpy(), [gradient.numpy() for gradient in
                                  torch.autograd.grad(out, tensors, torch.from_numpy(grad_out))]


def assert_same_gradients(op, function, feeds, seed=0):
    """``op``'s output and its inputs' gradients (Caffe2) equal ``function``'s (torch.autograd), dims included."""
    out = function(*[torch.from_numpy(value) for value in feeds])
    grad_out = np.random.RandomState(seed + 1).standard_normal(tuple(out.shape))
    expected, expected_grads = torch_gradients(function, feeds, grad_out)
    ours, grads = caffe2_gradients(op, feeds, grad_out)
    np.testing.assert_array_equal(ours, expected)
    assert len(grads) == len(expected_grads)
    for gradient, wanted in zip(grads, expected_grads):
        assert gradient.shape == wanted.shape and gradient.dtype == wanted.dtype
        np.testing.assert_allclose(gradient, wanted, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("operator", sorted(ARITHMETIC))
def test_arithmetic_gradient_equals_torch_autograd(operator, shapes):
    """Caffe2's gradient of the same arithmetic sums over the broadcast axes, as torch.autograd does."""
    op = core.CreateOperator("ATen", ["a", "b"], ["c"], **imported_form(operator))
    assert_same_gradients(op, ARITHMETIC[operator], operands(shapes, 0, operator))


@pytest.mark.parametrize("shapes", [((), (2, 3)), ((3,), (2, 3)), ((2, 1, 1, 4), (2, 3, 4, 4)),
                                    ((2, 3, 4, 4), (2, 1, 1, 4)), ((3, 1), (1, 4))], ids=str)
@pytest.mark.parametrize("operator", sorted(ARITHMETIC))
def test_arithmetic_passes_caffe2_gradient_checker(operator, shapes):
    op = core.CreateOperator("ATen", ["a", "b"], ["c"], **imported_form(operator))
    feeds = operands(shapes, 1, operator)
    checker = gradient_checker.GradientChecker(stepsize=1e-4, threshold=1e-6, device_option=core.DeviceOption(0),
                                               workspace_name="onnx_gradients")
    for position in (0, 1):
        passed, gradient, numeric = checker.CheckSimple(op, feeds, position, [0])
        assert passed, (position, gradient, numeric)


@st.composite
def broadcast_shapes(draw):
    """Two dims numpy broadcasts: each axis of the result (up to rank 4, sizes 0-3) kept, made 1, or dropped from
    the front of either operand."""
    result = draw(st.lists(st.integers(0, 3), max_size=4))
    shapes = []
    for _ in range(2):
        dims = [draw(st.sampled_from([size, 1])) for size in result]
        shapes.append(tuple(dims[draw(st.integers(0, len(dims))):]))
    return tuple(shapes)


@settings(max_examples=60, deadline=None)
@given(operator=st.sampled_from(sorted(ARITHMETIC)), shapes=broadcast_shapes(), seed=st.integers(0, 2 ** 16))
def test_arithmetic_gradient_on_random_broadcasts_equals_torch_autograd(operator, shapes, seed):
    op = core.CreateOperator("ATen", ["a", "b"], ["c"], **imported_form(operator))
    assert_same_gradients(op, ARITHMETIC[operator], operands(shapes, seed, operator), seed)


PERMUTATIONS = [((4,), [0]), ((2, 3), [1, 0]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [1, 2, 0]),
                ((2, 3, 4, 5), [0, 2, 3, 1]), ((2, 3, 4, 5), [0, 3, 1, 2]), ((2, 0, 4, 1), [0, 2, 3, 1]),
                ((1, 3, 1, 2), [3, 2, 1, 0])]


@pytest.mark.parametrize("shape, dims", PERMUTATIONS, ids=str)
def test_permute_gradient_equals_torch_autograd(shape, dims):
    op = core.CreateOperator("ATen", ["x"], ["y"], **imported_form("permute", dims=dims))
    x = np.random.RandomState(2).standard_normal(shape)
    assert_same_gradients(op, lambda tensor: tensor.permute(*dims), [x])
    if 0 not in shape:
        checker = gradient_checker.GradientChecker(stepsize=1e-4, threshold=1e-6, device_option=core.DeviceOption(0),
                                                   workspace_name="onnx_gradients")
        passed, gradient, numeric = checker.CheckSimple(op, [x], 0, [0])
        assert passed, (gradient, numeric)


#: Every dim of ranks 1-4 (ONNX's Softmax takes no rank 0), some with size-1 and empty dims.
SOFTMAXES = [(shape, dim) for shape in [(5,), (1,), (0,), (3, 4), (3, 1), (2, 0), (2, 3, 4), (2, 1, 3), (2, 3, 4, 5),
                                        (2, 1, 1, 4), (2, 0, 3, 3)] for dim in range(len(shape))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape, dim", SOFTMAXES, ids=str)
def test_softmax_gradient_along_any_dim_equals_torch_autograd(shape, dim, dtype):
    op = core.CreateOperator("ATen", ["x"], ["y"], **imported_form("softmax", dim=dim))
    rng = np.random.RandomState(3)
    x, grad_out = rng.uniform(-4, 4, shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    ours, (gradient,) = caffe2_gradients(op, [x], grad_out)
    expected, (wanted,) = torch_gradients(lambda tensor: torch.softmax(tensor, dim), [x], grad_out)
    np.testing.assert_array_equal(ours, expected)
    assert gradient.shape == wanted.shape and gradient.dtype == wanted.dtype
    tolerance = 1e-12 if dtype == np.float64 else 1e-6  # torch's fused backward sums in another order
    np.testing.assert_allclose(gradient, wanted, rtol=tolerance, atol=tolerance)


def test_softmax_of_masked_scores_has_torchs_gradient():
    """Scores with float32's lowest value added (a padded key): their probabilities and gradients are 0."""
    scores = np.random.RandomState(4).standard_normal((2, 2, 3, 4)).astype(np.float32)
    scores[1, :, :, -2:] += np.finfo(np.float32).min
    op = core.CreateOperator("ATen", ["x"], ["y"], **imported_form("softmax", dim=3))
    grad_out = np.random.RandomState(5).standard_normal(scores.shape).astype(np.float32)
    _, (gradient,) = caffe2_gradients(op, [scores], grad_out)
    _, (wanted,) = torch_gradients(lambda tensor: torch.softmax(tensor, 3), [scores], grad_out)
    np.testing.assert_allclose(gradient, wanted, rtol=1e-6, atol=1e-6)
    assert not gradient[1, :, :, -2:].any()


@pytest.mark.parametrize("shape, dim", [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2), ((4,), 0)], ids=str)
def test_softmax_passes_caffe2_gradient_checker(shape, dim):
    op = core.CreateOperator("ATen", ["x"], ["y"], **imported_form("softmax", dim=dim))
    x = np.random.RandomState(6).uniform(-2, 2, shape)
    checker = gradient_checker.GradientChecker(stepsize=1e-4, threshold=1e-6, device_option=core.DeviceOption(0),
                                               workspace_name="onnx_gradients")
    passed, gradient, numeric = checker.CheckSimple(op, [x], 0, [0])
    assert passed, (gradient, numeric)


def test_imported_form_takes_only_the_declared_arguments():
    assert imported_form("softmax", dim=1) == {"operator": "softmax", "dim": 1}
    for operator, arguments in [("softmax", {}), ("softmax", dict(dim=1, dtype=7)), ("add", dict(other=1.0)),
                                ("permute", dict(dim=0)), ("matmul", {})]:
        with pytest.raises(ValueError, match="not one of the imported forms with a gradient"):
            imported_form(operator, **arguments)


#: ATen ops like the imported forms but not them (other arguments, inputs or outputs): no gradient of this module.
NOT_IMPORTED_FORMS = [(["a"], dict(operator="add", other=1.0)), (["a", "b", "c"], dict(operator="add")),
                      (["a"], dict(operator="mul")), (["a", "b"], dict(operator="div", rounding_mode="floor")),
                      (["a"], dict(operator="softmax", dim=0, dtype=7)), (["a"], dict(operator="softmax")),
                      (["a", "b"], dict(operator="permute", dims=[1, 0])), (["a"], dict(operator="log_softmax", dim=0))]


@pytest.mark.parametrize("inputs, arguments", NOT_IMPORTED_FORMS, ids=str)
def test_other_forms_are_not_differentiated_here(inputs, arguments):
    """Caffe2's error stands for them (tests/test_aten_gradient.py: the very error Caffe2 raised before)."""
    op = core.CreateOperator("ATen", inputs, ["y"], **arguments)
    assert emitted_form(op) is None
    with pytest.raises(Exception, match=r"Exception when creating gradient for \[ATen\]"):
        core.GradientRegistry.GetGradientForOp(op, ["y_grad"])


class MaskedChannelNet(torch.nn.Module):
    """A convolution whose activations meet a learnt bias, a scalar scale, a shift and an attention-style mask
    (B, 1, 1, W), then a softmax over the masked last axis, one over the channels, a move of the channels last
    (0, 2, 3, 1) and a linear layer: every ATen form the importer emits for speed, beside Caffe2's own ops."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)  # without a bias: Caffe2's Conv
        self.bias = torch.nn.Parameter(torch.randn(4, 1, 1))
        self.scale = torch.nn.Parameter(torch.tensor(1.5))
        self.shift = torch.nn.Parameter(torch.randn(5))
        self.linear = torch.nn.Linear(4 * 4 * 5, 6)

    def forward(self, x, mask):
        h = (self.conv(x) + self.bias) * self.scale / 2.0 - self.shift
        scores = torch.softmax(h + mask, dim=-1)
        channels = torch.softmax(scores * 3.0, dim=1)
        return self.linear(channels.permute(0, 2, 3, 1).flatten(1))


def exported(module, example, opset):
    """``module`` by torch.onnx.export (inputs x, mask; output y), unfolded: its weights keep their names."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, buffer, opset_version=opset, input_names=["x", "mask"],
                          output_names=["y"], do_constant_folding=False)
    return onnx.load_from_string(buffer.getvalue())


def aten_operators(netdef):
    return sorted({arg.s.decode() for op in netdef.op if op.type == "ATen" for arg in op.arg if arg.name == "operator"})


@pytest.mark.parametrize("opset", [13, 14])
def test_imported_model_gradients_equal_torch_autograd(opset):
    """AddGradientOperators over the imported net: the gradients of its inputs and of every weight equal
    torch.autograd's through the exported module, on the same weights."""
    module = MaskedChannelNet().eval()
    x = torch.randn(2, 3, 4, 5)
    mask = torch.zeros(2, 1, 1, 5)
    mask[1, ..., -2:] = torch.finfo(torch.float32).min  # the second row's last two columns padded
    init_net, predict_net = pycumsum_op.onnx.to_caffe2(exported(module, (x, mask), opset))
    assert aten_operators(predict_net) == sorted(IMPORTED_FORMS)  # every form, so every form's gradient is tested
    y = module(x, mask)
    grad_y = torch.from_numpy(np.random.RandomState(opset).standard_normal(tuple(y.shape)).astype(np.float32))
    inputs = [x.clone().requires_grad_(True), mask.clone().requires_grad_(True)]
    module.zero_grad()
    module(*inputs).backward(grad_y)
    expected = dict({"x": inputs[0].grad, "mask": inputs[1].grad},
                    **{name: parameter.grad for name, parameter in module.named_parameters()})
    workspace.ResetWorkspace()
    try:
        workspace.RunNetOnce(init_net)
        workspace.FeedBlob("x", x.numpy())
        workspace.FeedBlob("mask", mask.numpy())
        workspace.FeedBlob("y_grad_given", grad_y.numpy())
        net = core.Net(predict_net)
        gradients = net.AddGradientOperators({"y": "y_grad_given"})
        net.AddExternalInput("y_grad_given")
        workspace.RunNetOnce(net)
        np.testing.assert_allclose(workspace.FetchBlob("y"), y.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert set(expected) <= set(gradients)
        for name, wanted in expected.items():
            ours = workspace.FetchBlob(str(gradients[name]))
            assert ours.shape == tuple(wanted.shape), name
            np.testing.assert_allclose(ours, wanted.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    finally:
        workspace.ResetWorkspace()


def test_every_speed_form_of_an_imported_roberta_has_a_gradient():
    """The ATen add/sub/mul/div, permute and softmax ops of an imported RoBERTa (attention's mask, keys, masked
    scores) are forms with a gradient: none is left to Caffe2's missing one."""
    from transformer_models import build, export
    module, example = build("roberta")
    _, predict_net = pycumsum_op.onnx.to_caffe2(export(module, example, 14, dynamic=False))
    speed = [op for op in predict_net.op if op.type == "ATen"
             and next(arg.s.decode() for arg in op.arg if arg.name == "operator") in IMPORTED_FORMS]
    assert {"add", "permute", "softmax"} <= set(aten_operators(predict_net))
    for op in speed:
        assert emitted_form(op) is not None, op
        gradient_ops, _ = core.GradientRegistry.GetGradientForOp(op, [op.output[0] + "_grad"])
        assert gradient_ops
