"""Resize and InstanceNormalization at their edges against onnxruntime (graph optimizations off): ±inf, NaN and
-0.0 in the input, empty and size-1 dims, scales that are not whole numbers, down- and upsampling, scales and sizes
constant or fed, dims symbolic; torch's interpolate and instance norms as torch.onnx.export writes them; the forms
without a translation refused in one line naming the attribute, and sizes past the tensor cap or that onnxruntime
refuses stopping the run in one line before anything is allocated.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import warnings

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from pycumsum_op.onnx.run_checks import RunRefused
from onnx_forms_support import EDGE_FLOATS, edge_arrays, node_model, outcome
from onnx_support import onnxruntime_outputs, torch_model

TORCH_ATTRS = {"cubic_coeff_a": -0.75, "nearest_mode": "floor"}
#: (mode, coordinate_transformation_mode) of each accepted Resize
MODES = [("nearest", "asymmetric"), ("nearest", "half_pixel"), ("nearest", "pytorch_half_pixel"),
         ("nearest", "align_corners"), ("linear", "asymmetric"), ("linear", "half_pixel"),
         ("linear", "pytorch_half_pixel"), ("linear", "align_corners")]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: an example takes milliseconds; the cases that broke the translation (every output length the input's, neighbours
#: near float32's extremes cancelling) are a few in a hundred of them
RESIZE_SETTINGS = settings(SETTINGS, max_examples=500)


def resize_model(x, opset, mode, coordinates, scales=None, sizes=None, fed=False, dynamic=False, other=None):
    """(model, feeds): one Resize of ``x`` by ``scales`` or ``sizes``, constants or fed (``fed``), with the
    ``other`` attributes; ``dynamic``: the dims of x symbolic."""
    attrs = {**TORCH_ATTRS, "mode": mode, "coordinate_transformation_mode": coordinates, **(other or {})}
    empty = np.zeros(0, np.float32)
    given_name, value = ("scales", np.asarray(scales, np.float32)) if sizes is None else (
        "sizes", np.asarray(sizes, np.int64))
    inputs, constants = {"x": x}, {"roi": empty}
    (inputs if fed else constants)[given_name] = value
    if given_name == "sizes":
        if opset < 13:
            constants["scales"] = empty
            order = ["x", "roi", "scales", "sizes"]
        else:
            order = ["x", "", "", "sizes"]
    else:
        order = ["x", "roi", "scales"]
    model = node_model("Resize", inputs, constants, attrs, opset, dynamic=dynamic, order=order, out_rank=x.ndim)
    for info in model.graph.input[1:]:  # a fed scales or sizes of a stated length, as exporters write it
        info.type.tensor_type.shape.dim[0].dim_value = value.size
    return model, inputs


def images(shape, rng, edges=True):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    if edges and x.size >= 4:
        x.reshape(-1)[rng.choice(x.size, 4, replace=False)] = [np.inf, -np.inf, np.nan, -0.0]
    return x


def resized(model, feeds, coordinates, shape, given_value, fed, dynamic):
    """The outcome of a Resize model: onnxruntime's values, or, for align_corners by scales where the model does not
    prove each scale x length whole (ONNX's definition and onnxruntime differ where it is not: onnx's node test of a
    downsampling by 0.6), a refusal at import naming it."""
    scales = given_value.get("scales")
    if coordinates != "align_corners" or scales is None or not fed and all(
            float(scale).is_integer() or not dynamic and float(np.float32(scale) * np.float32(dim)).is_integer()
            for scale, dim in zip(scales[2:], shape[2:])):
        return outcome(model, feeds)
    kind, detail = outcome(model, feeds)
    assert kind == "refused" and "whole number the model proves" in detail, (kind, detail)
    return "match", None


@pytest.mark.parametrize("mode, coordinates", MODES)
@pytest.mark.parametrize("opset", [11, 13])
def test_resize_at_the_edges_equals_onnxruntime(mode, coordinates, opset):
    """Up, down, by scales that are not whole numbers and by 1, to and from size-1 and empty dims, ±inf and NaN
    next to the positions read, scales and sizes constant and fed, dims stated and symbolic."""
    rng = np.random.default_rng(opset)
    cases = [((2, 3, 5, 4), {"scales": [1, 1, 2, 2]}), ((2, 3, 5, 4), {"scales": [1, 1, 1.5, 0.7]}),
             ((2, 3, 5, 4), {"scales": [1, 1, 0.3, 2.6]}), ((2, 3, 5, 4), {"scales": [1, 1, 1, 1]}),
             ((1, 2, 1, 4), {"scales": [1, 1, 3, 0.5]}), ((2, 3, 0, 4), {"scales": [1, 1, 2, 2]}),
             ((2, 3, 5, 4), {"sizes": [2, 3, 7, 1]}), ((2, 3, 5, 4), {"sizes": [2, 3, 1, 9]}),
             ((2, 3, 5, 4), {"sizes": [2, 3, 5, 4]}), ((2, 3, 0, 4), {"sizes": [2, 3, 0, 3]}),
             ((0, 3, 5, 4), {"sizes": [0, 3, 2, 3]})]
    if mode == "nearest":
        cases += [((2, 3, 7), {"scales": [1, 1, 1.7]}), ((2, 3, 6), {"sizes": [2, 3, 4]}),
                  ((1, 2, 3, 2, 4), {"scales": [1, 1, 2, 1.5, 0.5]})]
    for shape, given_value in cases:
        x = images(shape, rng)
        for fed in (False, True):
            for dynamic in (False, True):
                model, feeds = resize_model(x, opset, mode, coordinates, fed=fed, dynamic=dynamic, **given_value)
                assert resized(model, feeds, coordinates, shape, given_value, fed, dynamic) == ("match", None), (
                    shape, given_value, fed, dynamic)


#: (H, W) inputs whose neighbours cancel near float32's extremes: interpolating one axis after the other rounds them
#: otherwise than onnxruntime, which sums the four neighbours times the products of their weights
CANCELLING_5X2 = [[0, 0], [-0.0, 0], [-3e38, 3e38], [0, -2.5], [0, 0]]
CANCELLING_4X5 = [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 3e38], [0, 0, 0, 0, -3e38]]


@pytest.mark.parametrize("mode, coordinates, values, given_value", [
    ("nearest", "asymmetric", [[0, 0, 0, 0], [-2.5, 0, 0, 0]], {"scales": [1, 1, 1.25, 1.0]}),
    ("nearest", "asymmetric", np.arange(15).reshape(3, 5), {"scales": [1, 1, 1.25, 1.0]}),
    ("linear", "half_pixel", CANCELLING_5X2, {"sizes": [1, 2, 4, 1]}),
    ("linear", "half_pixel", CANCELLING_4X5, {"scales": [1, 1, 2.8359375, 1.5]}),
], ids=["nearest-kept-2x4", "nearest-kept-3x5", "linear-cancelling-5x2", "linear-cancelling-4x5"])
@pytest.mark.parametrize("fed", [False, True])
def test_resize_property_falsifying_examples_equal_onnxruntime(mode, coordinates, values, given_value, fed):
    """The examples that told the translation from onnxruntime: scales keeping every output length (int(1.25 x 2)
    is 2: onnxruntime then copies the input) and neighbours near float32's extremes; the second channel is the first
    negated and upside down."""
    x = np.asarray(values, np.float32)[None, None]
    x = np.concatenate([x, -x[:, :, ::-1]], axis=1)
    model, feeds = resize_model(x, 13, mode, coordinates, fed=fed, dynamic=True, **given_value)
    assert outcome(model, feeds) == ("match", None)


#: (shape, scales) whose output lengths are all the input's, the scales not all 1
KEPT = [((1, 2, 2, 4), [1, 1, 1.25, 1.0]), ((1, 2, 3, 3), [1, 1, 1.0, 1.25]), ((2, 3, 1, 3), [1, 1, 1.1, 1.25]),
        ((1, 2, 3, 3), [1, 1, 1.0833334, 1.1666666]), ((1, 2, 4, 5), [1, 1, 1.2, 1.0]), ((1, 2, 3), [1, 1, 1.3]),
        ((1, 2, 2, 3, 2), [1, 1, 1.25, 1.0, 1.4])]


@pytest.mark.parametrize("mode, coordinates, shape, scales", [
    (mode, coordinates, shape, scales) for mode, coordinates in MODES for shape, scales in KEPT
    if mode == "nearest" or len(shape) == 4])
@pytest.mark.parametrize("fed", [False, True])
def test_resize_by_scales_keeping_every_length_copies_as_onnxruntime(mode, coordinates, shape, scales, fed):
    """onnxruntime copies the input (no position is computed, no 0 x inf of a next neighbour), which the net finds
    out at run time where the dims are symbolic or the scales fed."""
    x = images(shape, np.random.default_rng(len(shape)))
    for dynamic in (False, True):
        model, feeds = resize_model(x, 13, mode, coordinates, scales=scales, fed=fed, dynamic=dynamic)
        assert resized(model, feeds, coordinates, shape, {"scales": scales}, fed, dynamic) == ("match", None), dynamic


def drawn_scale(data, dim):
    """A scale of 0.25 to 4 (most not whole numbers), or one a little past a whole output length near ``dim``: where
    it is ``dim`` itself on every axis, onnxruntime copies the input whatever the scales."""
    near = st.builds(lambda length, part: float(np.float32((length + part) / dim)),
                     st.sampled_from([dim, dim, dim + 1, max(dim - 1, 1)]), st.sampled_from([0.0, 0.25, 0.5, 0.75]))
    return data.draw(st.floats(0.25, 4.0, width=32) | near if dim else st.floats(0.25, 4.0, width=32))


@given(data=st.data(), mode=st.sampled_from(MODES), fed=st.booleans(), by_sizes=st.booleans())
@RESIZE_SETTINGS
def test_resize_property(data, mode, fed, by_sizes):
    """Drawn spatial dims (0 to 6) and output lengths (often the input's) or scales (0.25 to 4, most not whole
    numbers, often keeping a length), inputs of ±inf, NaN, -0.0, float32's extremes and ordinary values."""
    spatial = data.draw(st.lists(st.integers(0, 6), min_size=2, max_size=2))
    x = data.draw(edge_arrays(np.float32, (1, 2, *spatial), floats=EDGE_FLOATS))
    if by_sizes:
        given_value = {"sizes": [1, 2] + [data.draw(st.integers(1, 9) | st.just(dim)) if dim else 0
                                          for dim in spatial]}
    else:
        given_value = {"scales": [1, 1] + [drawn_scale(data, dim) for dim in spatial]}
    model, feeds = resize_model(x, 13, *mode, fed=fed, dynamic=True, **given_value)
    assert resized(model, feeds, mode[1], x.shape, given_value, fed, True) == ("match", None), (spatial, given_value)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("kwargs", [{"scale_factor": 2, "mode": "nearest"},
                                    {"scale_factor": 1.5, "mode": "bilinear", "align_corners": False},
                                    {"size": (7, 9), "mode": "bilinear", "align_corners": True},
                                    {"size": (3, 2), "mode": "nearest"}],
                         ids=["nearest-scale", "bilinear-scale", "align-corners-size", "nearest-down"])
def test_torch_interpolate_equals_onnxruntime(kwargs, opset, dynamic):
    class Interpolate(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, **kwargs)

    x = images((1, 2, 5, 6), np.random.default_rng(0))
    model = torch_model(Interpolate(), torch.from_numpy(x), opset)
    if dynamic:
        for dim in model.graph.input[0].type.tensor_type.shape.dim[2:]:
            dim.dim_param = "side"
        x = images((1, 2, 5, 5), np.random.default_rng(1))
    assert "Resize" in {node.op_type for node in model.graph.node}
    assert outcome(model, {"x": x}) == ("match", None)


@pytest.mark.parametrize("attrs, message", [
    ({"mode": "cubic"}, r"attribute mode='cubic' is not accepted"),
    ({"nearest_mode": "round_prefer_ceil"}, r"attribute nearest_mode='round_prefer_ceil' is not accepted"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"},
     r"attribute coordinate_transformation_mode='tf_crop_and_resize' is not accepted"),
    ({"exclude_outside": 1}, r"attribute exclude_outside=1 is not accepted"),
    ({"extrapolation_value": 1.0}, r"attribute 'extrapolation_value' is not accepted"),
    ({"cubic_coeff_a": -0.5}, r"attribute cubic_coeff_a=-0.5 is not accepted"),
])
def test_resize_forms_without_a_translation_are_refused_naming_the_attribute(attrs, message):
    x = images((1, 2, 3, 3), np.random.default_rng(0))
    model, feeds = resize_model(x, 13, "nearest", "asymmetric", scales=[1, 1, 2, 2], other=attrs)
    with pytest.raises(FormRefused, match=r"^ONNX Resize node 'out0' \(opset 13\): " + message) as caught:
        pycumsum_op.onnx.prepare(model)
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize("case, message", [
    ({"shape": (1, 2, 3, 3), "scales": [1, 2, 2, 2]}, r"input 2 \(scales\) \[1.0, 2.0, 2.0, 2.0\] resizes N or C"),
    ({"shape": (3, 3), "scales": [2, 2]}, r"input 0 'x' has rank 2"),
    ({"shape": (2, 3, 7), "scales": [1, 1, 2]}, r"input 0 'x' has rank 3; linear Resize is translated for rank 4"),
    ({"shape": (1, 2, 3, 3), "scales": [1, 1, 0, 2]}, r"holds a scale that is not positive"),
    ({"shape": (1, 2, 3, 3), "scales": [1, 1, 2, 2], "target": "portable"}, r"the portable target has no form"),
])
def test_resize_values_without_a_translation_are_refused_in_one_line(case, message):
    case = dict(case)
    shape, target = case.pop("shape"), case.pop("target", None)
    model, feeds = resize_model(images(shape, np.random.default_rng(0)), 13, "linear", "half_pixel", **case)
    with warnings.catch_warnings(), pytest.raises(FormRefused, match=message) as caught:
        warnings.simplefilter("ignore")
        pycumsum_op.onnx.prepare(model, lower=target)
    assert len(str(caught.value).splitlines()) == 1


def test_resize_default_nearest_mode_is_refused():
    model, _ = resize_model(images((1, 1, 2, 2), np.random.default_rng(0)), 13, "nearest", "asymmetric",
                            scales=[1, 1, 2, 2])
    del model.graph.node[0].attribute[[a.name for a in model.graph.node[0].attribute].index("nearest_mode")]
    with pytest.raises(FormRefused, match=r"nearest_mode round_prefer_floor \(the default\) has no form"):
        pycumsum_op.onnx.prepare(model)


@pytest.mark.parametrize("given_value, message", [
    ({"sizes": [1, 2, 0, 3]}, r"input 3 \(sizes\) 'sizes' makes dim 2 of input 0 'x' empty"),
    ({"sizes": [1, 2, 2 ** 40, 2 ** 40]}, r"its output .* asks for a tensor of more than"),
    ({"sizes": [1, 2, -3, 3]}, r"makes dim 2 of input 0 'x' empty or an empty one not"),
    ({"sizes": [1, 3, 4, 4]}, r"input 3 \(sizes\) 'sizes' resizes N or C"),
    ({"scales": [1, 1, 1e30, 2]}, r"dim 2 of input 0 'x' times its scale asks for a tensor of more than"),
    ({"scales": [1, 1, np.nan, 2]}, r"holds a scale that is not positive"),
    ({"scales": [1, 1, -2, 2]}, r"holds a scale that is not positive"),
])
def test_resize_values_onnxruntime_refuses_or_past_the_cap_stop_the_run_in_one_line(given_value, message):
    """Fed scales and sizes that ask for an output onnxruntime refuses (a scale of 0, a negative one, another N or
    C) or past the tensor cap stop the net before any position is counted."""
    x = images((1, 2, 3, 3), np.random.default_rng(0))
    model, feeds = resize_model(x, 13, "linear", "pytorch_half_pixel", fed=True, dynamic=True, **given_value)
    if "2 ** 40" not in str(given_value) and "1e30" not in str(given_value):
        with pytest.raises(Exception):  # onnxruntime refuses it too
            onnxruntime_outputs(model, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = pycumsum_op.onnx.prepare(model)
    with pytest.raises(RunRefused, match=r"^ONNX Resize node 'out0' \(opset 13\): .*" + message) as caught:
        rep.run(feeds)
    assert len(str(caught.value).splitlines()) == 1


def instance_model(x, scale, bias, epsilon=None, dynamic=False, opset=13):
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    return node_model("InstanceNormalization", {"x": x}, {"scale": scale, "bias": bias}, attrs, opset,
                      dynamic=dynamic, out_rank=x.ndim)


@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 5, 4), (1, 3, 2, 3, 2), (2, 3, 1), (2, 3, 1, 1), (1, 1, 6)])
@pytest.mark.parametrize("epsilon", [None, 1e-3, 0.0])
@pytest.mark.parametrize("dynamic", [False, True])
def test_instance_normalization_at_the_edges_equals_onnxruntime(shape, epsilon, dynamic):
    """Ranks 3 to 5, instances of one element (variance 0) and of ±inf and NaN, constant instances with epsilon 0,
    dims stated and symbolic."""
    rng = np.random.default_rng(len(shape))
    x = images(shape, rng)
    if x.shape[-1] > 2:
        x[0, -1] = 1.5  # a constant instance
    scale = rng.standard_normal(shape[1]).astype(np.float32)
    bias = rng.standard_normal(shape[1]).astype(np.float32)
    model = instance_model(x, scale, bias, epsilon, dynamic)
    assert outcome(model, {"x": x}) == ("match", None)


@given(data=st.data())
@SETTINGS
def test_instance_normalization_property(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=3, max_size=5)))
    x = data.draw(edge_arrays(np.float32, shape, floats=[value for value in EDGE_FLOATS if abs(value) != 3e38]))
    scale, bias = (data.draw(edge_arrays(np.float32, shape[1:2], floats=(1.0, -2.5, 0.0, 0.5))) for _ in range(2))
    model = instance_model(x, scale, bias, dynamic=data.draw(st.booleans()))
    assert outcome(model, {"x": x}) == ("match", None), shape


@pytest.mark.parametrize("values", [[1000.0, 1000.01, 999.99, 1000.02], [2e19, 1.0, 1.0, 1.0], [3e38, 1.0, 2.0, 3.0],
                                    [5e18, 5e18, 5e18, 5.00001e18], [1e19, 2e19, -1e19, 3e19]])
def test_instance_normalization_subtracts_the_mean_first(values):
    """A small deviation about a large mean, and squares that overflow float32: the variance of the centred values,
    as onnxruntime computes it (E[x**2] - E[x]**2, Caffe2's InstanceNorm's, cancels to far other numbers)."""
    rng = np.random.default_rng(1)
    x = np.array(values, np.float32)[rng.permutation(4)].reshape(1, 1, 4)
    x = np.concatenate([x, x * -1.0, x + 1.0]).reshape(3, 1, 4)
    model = instance_model(x, np.array([1.5], np.float32), np.array([0.25], np.float32))
    assert outcome(model, {"x": x}) == ("match", None)


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 3, 0), (2, 0, 4)])
def test_instance_normalization_of_an_empty_dim_is_refused_or_stops_the_run(shape):
    """An empty dim leaves an instance without a mean (and Caffe2's InstanceNorm died of it): refused where the model
    states the dims, an Assert naming the node where they are symbolic."""
    x = np.zeros(shape, np.float32)
    scale, bias = np.ones(shape[1], np.float32), np.zeros(shape[1], np.float32)
    with pytest.raises(FormRefused, match=r"^ONNX InstanceNormalization node 'out0' \(opset 13\): input 0 'x' has "
                                          r"dims .*; an empty dim leaves an instance without a mean$"):
        pycumsum_op.onnx.prepare(instance_model(x, scale, bias))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = pycumsum_op.onnx.prepare(instance_model(x, scale, bias, dynamic=True))
    with pytest.raises(RunRefused, match=r"^ONNX InstanceNormalization node 'out0' \(opset 13\): input 0 'x' has an "
                                         r"empty dim"):
        rep.run({"x": x})


@pytest.mark.parametrize("module, shape", [(torch.nn.InstanceNorm1d(3), (2, 3, 6)),
                                           (torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 5, 4)),
                                           (torch.nn.GroupNorm(1, 3), (2, 3, 5))], ids=["1d", "2d-affine", "groupnorm"])
@pytest.mark.parametrize("opset", [11, 13])
def test_torch_instance_norms_equal_onnxruntime(module, shape, opset):
    """torch's instance norms, and GroupNorm (which torch exports as an InstanceNormalization over the groups:
    wav2vec2's feature encoder)."""
    torch.manual_seed(0)
    x = images(shape, np.random.default_rng(0), edges=False)
    model = torch_model(module.eval(), torch.from_numpy(x), opset)
    assert "InstanceNormalization" in {node.op_type for node in model.graph.node}
    assert outcome(model, {"x": x}) == ("match", None)

