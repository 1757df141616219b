"""The single-op forms torch 1.10.2's exporter writes around CumSum (Slice, Gather, Unsqueeze/Squeeze, Reduce*, Pow,
Reshape, Expand, Where, Range, Concat, Cast, Softmax and LogSoftmax off the last axis, GreaterOrEqual / LessOrEqual,
Trilu, ...), exported at opsets 11, 13, 14 with static and dynamic axes (torch exports triu and tril from opset 14
on only), through pycumsum_op.onnx.prepare against onnxruntime: each matches, or is refused in one line naming the
ONNX op; none is wrong. Among them the slices Caffe2's stock converter returned unchanged (``x[:, 1:]``,
``x[:, :-1]``, ``x[:, ::2]``, ``x[:, -2:]``, ``torch.flip``) and the reverse and exclusive cumsums written with
them. nn.LSTM / nn.GRU exports: tests/test_onnx_rnn.py.
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

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from onnx_support import onnxruntime_outputs

FORMS = {
    "slice_from_1": lambda x: x[:, 1:],
    "slice_to_minus_1": lambda x: x[:, :-1],
    "slice_step_2": lambda x: x[:, ::2],
    "slice_last_2": lambda x: x[:, -2:],
    "flip": lambda x: torch.flip(x, [1]),
    "reverse_cumsum": lambda x: torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1]),
    "exclusive_cumsum": lambda x: torch.cat([torch.zeros_like(x[:, :1]), torch.cumsum(x, 1)[:, :-1]], 1),
    "gather_last": lambda x: x[:, -1],
    "index_select": lambda x: torch.index_select(x, 1, torch.tensor([0, 2, 1])),
    "unsqueeze": lambda x: x.unsqueeze(-1),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "sum_last": lambda x: x.sum(-1),
    "sum_keepdim": lambda x: x.sum((0, 1), keepdim=True),
    "mean": lambda x: x.mean(-1, keepdim=True),
    "max_reduce": lambda x: x.max(1)[0],
    "slice_odd": lambda x: x[:, 1::2],
    "pow_2": lambda x: x ** 2,
    "pow_tensor": lambda x: torch.pow(x.abs() + 1, x),
    "reshape": lambda x: x.reshape(-1),
    "view": lambda x: x.view(x.size(0), -1, 1),
    "expand": lambda x: x[:, :1].expand(-1, x.size(1)),
    "where": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "masked_fill": lambda x: x.masked_fill(x < 0, -1.0),
    "arange": lambda x: torch.arange(x.size(1)).float() + x,
    "concat": lambda x: torch.cat([x, x], -1),
    "cast_cumsum": lambda x: (x > 0).long().cumsum(1),
    "positions": lambda x: (torch.cumsum((x > 0).int(), 1).type_as(x) * (x > 0).float()).long(),
    "maximum": lambda x: torch.max(x, torch.zeros_like(x)),
    "clamp": lambda x: x.clamp(min=-0.5, max=0.5),
    "softmax": lambda x: torch.softmax(x, -1),
    "softmax_first": lambda x: torch.softmax(x, 0),
    "log_softmax_first": lambda x: torch.log_softmax(x, 0),
    "greater_equal": lambda x: (x >= 0.5) | (x <= -0.5),
    "triu": lambda x: torch.triu(x, 1),
    "tril": lambda x: torch.tril(x, -2),
}


class Form(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


def exported(name, opset, dynamic):
    buffer = io.BytesIO()
    axes = {"x": {0: "batch", 1: "length"}, "y": {0: "batch"}} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Form(FORMS[name]), torch.randn(4, 5), buffer, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes=axes)
    return onnx.load_from_string(buffer.getvalue())


def result(name, opset, dynamic):
    """"match", or "refused: <one line>"; a wrong result fails here."""
    x = np.random.default_rng(opset).standard_normal((4, 5)).astype(np.float32)
    try:
        model = exported(name, opset, dynamic)
    except Exception as error:  # torch's exporter itself
        return "export fails: " + str(error).splitlines()[0]
    expected = onnxruntime_outputs(model, {"x": x})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rep = pycumsum_op.onnx.prepare(model)
        except FormRefused as error:
            assert len(str(error).splitlines()) == 1 and str(error).startswith("ONNX "), error
            return "refused: " + str(error)
        ours = rep.run({"x": x})[0]
    assert ours.shape == expected.shape and ours.dtype == expected.dtype, (name, opset, dynamic)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5, err_msg="{} {} {}".format(name, opset, dynamic))
    return "match"


OUTCOMES = {}


@pytest.mark.slow  # a torch.onnx.export each
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("opset", [11, 13, 14])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_torch_form_matches_onnxruntime_or_is_refused(name, opset, dynamic):
    OUTCOMES[name, opset, dynamic] = result(name, opset, dynamic)


@pytest.mark.slow
def test_at_least_nine_in_ten_forms_match():
    """Runs after the parametrized cases (file order): the measured fraction."""
    outcomes = [OUTCOMES.get(key) or result(*key) for key in
                [(name, opset, dynamic) for name in FORMS for opset in (11, 13, 14) for dynamic in (False, True)]]
    matched = sum(outcome == "match" for outcome in outcomes)
    assert matched >= 0.9 * len(outcomes), [outcome for outcome in outcomes if outcome != "match"]

