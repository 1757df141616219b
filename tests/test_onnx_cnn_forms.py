"""The CNN core's forms (Conv, MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool, BatchNormalization, Flatten,
Dropout, Pad) and the classification heads' (Softmax and LogSoftmax on any axis of ranks 1 to 5, ArgMax) at the
edges: windows of every stride, dilation, padding, SAME padding and ceil_mode, 1 to 3 spatial dims, empty batches and
channels, size-1 dims, and ±inf, NaN and -0.0 in the input, static and dynamic shapes. Each matches onnxruntime
(graph optimizations off), is refused at import in one line naming the op, or, where the model leaves a dim symbolic
that Caffe2's kernel fails on when empty, fails the run in one line naming the op. Where onnxruntime is itself wrong
or inconsistent, ONNX's definition (numpy) is the reference: MaxPool on NaN (onnxruntime's 2-D pool propagates it,
its 1-D pool skips it and writes the lowest float for a window of -inf; torch's max_pool gives NaN), Pad with a
negative pad next to a positive one, ArgMax of an empty input.
"""
import pytest
from onnx_support import onnx_backend_refusal, onnxruntime_outputs

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from onnx_forms_support import EDGE_FLOATS, edge_arrays, node_model, outcome, pad_reference, unranked_model

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: a window's sum runs in each kernel's own order: values whose sums overflow would differ by order alone
ORDERLESS_FLOATS = tuple(value for value in EDGE_FLOATS if abs(value) != 3e38)
RNG = np.random.default_rng(0)
AUTO_PADS = st.sampled_from(["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])


def assert_refused_or_guarded(result, detail, dynamic, op, words):
    """A dim the model states that Caffe2 fails on is refused at import; a symbolic one stops the net when it runs
    (a run-time Assert): either way one line naming the node and ``words``."""
    assert result == ("failed" if dynamic else "refused"), detail
    assert "ONNX {} node 'out0'".format(op) in detail and words in detail, detail


def _result(model, feeds, expected=None):
    """outcome(), with a run that fails turned into ("failed", message)."""
    try:
        return outcome(model, feeds, expected)
    except RuntimeError as error:
        return "failed", " ".join(str(error).split())


def _window(data, rank, pooling):
    """(attributes, spatial dims) of a window over ``rank`` spatial dims that ONNX defines an output for; pools'
    pads are smaller than the kernel, Conv's are not bounded."""
    kernel = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    strides = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    dilations = [1] * rank if pooling else data.draw(st.lists(st.integers(1, 2), min_size=rank, max_size=rank))
    auto_pad = data.draw(AUTO_PADS)
    pads = data.draw(st.lists(st.integers(0, 2), min_size=2 * rank, max_size=2 * rank))
    if pooling:
        pads = [min(pad, kernel[k % rank] - 1) for k, pad in enumerate(pads)]
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    attrs = {"kernel_shape": kernel, "strides": strides, "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        attrs["pads"] = pads
    if not pooling:
        attrs["dilations"] = dilations
    reach = [span - (pads[k] + pads[k + rank] if auto_pad == "NOTSET" else 0) for k, span in enumerate(spans)]
    spatial = [data.draw(st.integers(max(1, low), max(1, low) + 3)) for low in reach]
    return attrs, spatial


@SETTINGS
@given(data=st.data(), rank=st.integers(1, 3), batch=st.sampled_from([0, 1, 2]), group=st.sampled_from([1, 2]),
       dynamic=st.booleans())
def test_conv_matches_onnxruntime(data, rank, batch, group, dynamic):
    attrs, spatial = _window(data, rank, pooling=False)
    attrs["group"] = group
    channels = group * data.draw(st.integers(1, 2))
    x = data.draw(edge_arrays(np.float32, (batch, channels) + tuple(spatial), ORDERLESS_FLOATS))
    w = data.draw(edge_arrays(np.float32, (group * data.draw(st.integers(1, 2)), channels // group)
                              + tuple(attrs["kernel_shape"]), ORDERLESS_FLOATS))
    constants = {"w": w}
    if data.draw(st.booleans()):
        constants["b"] = data.draw(edge_arrays(np.float32, (w.shape[0],), ORDERLESS_FLOATS))
    if data.draw(st.booleans()):
        del attrs["kernel_shape"]  # then W's dims
    model = node_model("Conv", {"x": x}, constants, attrs, opset=data.draw(st.sampled_from([9, 11, 13])),
                       dynamic=dynamic)
    same = attrs["auto_pad"].startswith("SAME")
    result, detail = _result(model, {"x": x}, [] if same and set(attrs["dilations"]) != {1} else None)
    if same and set(attrs["dilations"]) != {1}:  # onnxruntime refuses it
        assert result == "refused" and "with dilations" in detail, detail
    elif dynamic and same:  # SAME padding needs the spatial dims
        assert result == "refused" and "auto_pad={} needs the input's spatial dims".format(attrs["auto_pad"]) in detail
    elif same and any((-(-n // s) - 1) * s + k < n for n, s, k in zip(spatial, attrs["strides"],
                                                                       w.shape[2:])):  # a stride past the kernel
        assert result == "refused" and "a negative pad has no Caffe2 form" in detail, detail
    else:
        assert (result, detail) == ("match", None)


def max_pool_reference(x, kernel, strides, pads, ceil_mode):
    """ONNX's MaxPool: the max over each window's elements in the input (NaN where the window holds one; the
    padding never counts), the output ``ceil_mode``'s length."""
    rank = len(kernel)
    spatial = x.shape[2:]
    outs = [(-(-(n + pads[k] + pads[k + rank] - kernel[k]) // strides[k]) if ceil_mode else
             (n + pads[k] + pads[k + rank] - kernel[k]) // strides[k]) + 1 for k, n in enumerate(spatial)]
    ends = [max(pads[k + rank], (out - 1) * strides[k] + kernel[k] - n - pads[k])
            for k, (n, out) in enumerate(zip(spatial, outs))]
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(pads[:rank], ends)), constant_values=-np.inf)
    # every window's elements as trailing axes (numpy before 1.20, CPython 3.6's, has no sliding_window_view)
    starts = tuple(n - k + 1 for n, k in zip(padded.shape[2:], kernel))
    windows = np.lib.stride_tricks.as_strided(padded, padded.shape[:2] + starts + tuple(kernel),
                                              padded.strides + padded.strides[2:], writeable=False)
    windows = windows[(slice(None), slice(None)) + tuple(slice(None, out * s, s) for out, s in zip(outs, strides))]
    return windows.max(axis=tuple(range(-rank, 0))).astype(x.dtype)


def _same_pads(spatial, attrs):
    """onnxruntime's explicit pads of a SAME window (to give the reference)."""
    rank, pads = len(spatial), list(attrs.get("pads", [0] * 2 * len(spatial)))
    if attrs["auto_pad"] == "VALID":
        return [0] * 2 * rank
    if attrs["auto_pad"].startswith("SAME"):
        for k, (n, kernel, stride) in enumerate(zip(spatial, attrs["kernel_shape"], attrs["strides"])):
            total = max(0, (-(-n // stride) - 1) * stride + kernel - n)
            pads[k] = (total + (attrs["auto_pad"] == "SAME_LOWER")) // 2
            pads[k + rank] = total - pads[k]
    return pads


@SETTINGS
@given(data=st.data(), rank=st.integers(1, 3), batch=st.sampled_from([0, 1, 2]), channels=st.sampled_from([0, 1, 3]),
       dynamic=st.booleans(), op=st.sampled_from(["MaxPool", "AveragePool"]), ceil_mode=st.booleans(),
       opset=st.sampled_from([10, 11, 13]))
def test_pools_match_onnxruntime_or_onnx(data, rank, batch, channels, dynamic, op, ceil_mode, opset):
    attrs, spatial = _window(data, rank, pooling=True)
    attrs["ceil_mode"] = int(ceil_mode)
    if op == "AveragePool":
        attrs["count_include_pad"] = data.draw(st.sampled_from([0, 1]))
    x = data.draw(edge_arrays(np.float32, (batch, channels) + tuple(spatial), ORDERLESS_FLOATS))
    model = node_model(op, {"x": x}, {}, attrs, opset=opset, dynamic=dynamic)
    pads = _same_pads(spatial, attrs)
    expected = None
    if op == "MaxPool":
        expected = [max_pool_reference(x, attrs["kernel_shape"], attrs["strides"], pads, ceil_mode)]
    result, detail = _result(model, {"x": x}, expected if channels else [])
    if op == "MaxPool" and result == "match" and np.isfinite(x).all():
        # the reference's output length and padding are onnxruntime's
        np.testing.assert_array_equal(onnxruntime_outputs(model, {"x": x})[0], expected[0])
    if (ceil_mode or attrs["auto_pad"].startswith("SAME")) and dynamic:
        assert result == "refused" and "needs the input's spatial dims" in detail, detail
    elif result == "refused":  # ceil_mode's extra window wholly in the padding: onnxruntime gives it the lowest float
        assert (ceil_mode and "adds a window wholly in the padding" in detail) or (
            channels == 0 and not dynamic and "fails on an empty channel or spatial dim" in detail) or (
            attrs["auto_pad"].startswith("SAME") and "a negative pad has no Caffe2 form" in detail), detail
    elif channels == 0:
        assert dynamic and result == "failed" and "ONNX {} node 'out0'".format(op) in detail, detail
    else:
        assert (result, detail) == ("match", None)


@pytest.mark.parametrize("op, attrs", [("MaxPool", {"kernel_shape": [2, 1, 2]}), ("GlobalMaxPool", {})])
def test_a_3d_max_pool_of_minus_inf_is_minus_inf(op, attrs):
    """Caffe2's 3-D MaxPool (and onnxruntime's) writes the lowest float for a window of -inf only; ONNX's max (and
    torch's max_pool3d) is -inf."""
    x = np.full((1, 2, 2, 1, 2), -np.inf, np.float32)
    x[0, 1, 0, 0, 0] = 3
    ours = pycumsum_op.onnx.prepare(node_model(op, {"x": x}, attrs=attrs, opset=13)).run({"x": x})[0]
    np.testing.assert_array_equal(ours.reshape(-1), [-np.inf, 3])


def test_max_pool_nan_is_the_windows_max():
    """Caffe2's MaxPool skipped the NaN starting a window ([NaN, NaN, -inf, -inf] gave -inf, [NaN, 1] gave 1); ONNX's
    max (and torch's max_pool) is NaN."""
    x = np.array([[[[1, np.nan, 3, -np.inf], [np.nan, np.nan, -np.inf, -np.inf]]]], np.float32)
    model = node_model("MaxPool", {"x": x}, attrs={"kernel_shape": [1, 2], "strides": [1, 2]}, opset=13)
    ours = pycumsum_op.onnx.prepare(model).run({"x": x})[0]
    np.testing.assert_array_equal(ours, [[[[np.nan, 3], [np.nan, -np.inf]]]])


@SETTINGS
@given(data=st.data(), rank=st.integers(1, 3), batch=st.sampled_from([0, 1, 2]), channels=st.sampled_from([0, 1, 3]),
       dynamic=st.booleans(), op=st.sampled_from(["GlobalMaxPool", "GlobalAveragePool"]))
def test_global_pools(data, rank, batch, channels, dynamic, op):
    spatial = tuple(data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
    x = data.draw(edge_arrays(np.float32, (batch, channels) + spatial, ORDERLESS_FLOATS))
    model = node_model(op, {"x": x}, opset=13, dynamic=dynamic)
    axes = tuple(range(2, 2 + rank))
    empty = channels == 0 or 0 in spatial
    expected = ([] if empty else [x.max(axis=axes, keepdims=True)] if op == "GlobalMaxPool" else None)
    result, detail = _result(model, {"x": x}, expected)
    if empty:
        assert_refused_or_guarded(result, detail, dynamic, op, "empty channel or spatial dim")
    else:
        assert (result, detail) == ("match", None)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=2, max_size=4), dynamic=st.booleans(),
       opset=st.sampled_from([9, 13, 14, 15]))
def test_batch_normalization(data, shape, dynamic, opset):
    x = data.draw(edge_arrays(np.float32, tuple(shape), ORDERLESS_FLOATS))
    channels = (shape[1],)
    stats = {name: data.draw(edge_arrays(np.float32, channels, ORDERLESS_FLOATS))
             for name in ("scale", "bias", "mean")}
    stats["var"] = data.draw(edge_arrays(np.float32, channels, (0.0, 1.0, 2.5, np.inf, np.nan)))
    attrs = {"epsilon": data.draw(st.sampled_from([1e-5, 0.1]))}
    model = node_model("BatchNormalization", {"x": x}, stats, attrs, opset=opset, dynamic=dynamic)
    result, detail = _result(model, {"x": x})
    if shape[1] == 0:
        assert_refused_or_guarded(result, detail, dynamic, "BatchNormalization", "empty channel dim")
    else:
        assert (result, detail) == ("match", None)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=0, max_size=4), dynamic=st.booleans(),
       opset=st.sampled_from([9, 11, 13]), kind=st.sampled_from([np.float32, np.int64, bool]))
def test_flatten(data, shape, dynamic, opset, kind):
    x = data.draw(edge_arrays(kind, tuple(shape)))
    axis = data.draw(st.integers(-len(shape) if opset >= 11 else 0, len(shape)))
    model = node_model("Flatten", {"x": x}, {}, {"axis": axis}, opset=opset, dynamic=dynamic)
    assert _result(model, {"x": x}) == ("match", None)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=0, max_size=3), opset=st.sampled_from([11, 12, 13]),
       mask=st.booleans())
def test_dropout_in_inference(data, shape, opset, mask):
    x = data.draw(edge_arrays(np.float32, tuple(shape)))
    if opset >= 12:
        model = node_model("Dropout", {"x": x}, {"ratio": np.array(0.5, np.float32), "training": np.array(False)},
                           opset=opset, outputs=1 + mask)
    else:
        model = node_model("Dropout", {"x": x}, {}, {"ratio": 0.25}, opset=opset, outputs=1 + mask)
    result, detail = _result(model, {"x": x})
    if mask and opset < 12:
        assert result == "refused" and detail.endswith("output 1 (mask) has no inference value before opset 12")
    else:
        assert (result, detail) == ("match", None)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=1, max_size=4), dynamic=st.booleans(),
       opset=st.sampled_from([10, 11, 13]), kind=st.sampled_from([np.float32, np.float64, np.int64]))
def test_constant_pad(data, shape, dynamic, opset, kind):
    """Pads of every sign (a negative one crops), zero pads, empty dims; the value ±inf, NaN, -0.0. Held to ONNX's
    definition: onnxruntime's Pad with a negative pad next to a positive one returns uninitialized memory (its output
    for a (1, 1) zero padded by [0, 2, 2, -1] changed from run to run: zeros, NaN, 3e16)."""
    if opset < 11 and kind == np.int64:  # Pad-2 takes floats only
        kind = np.float32
    x = data.draw(edge_arrays(kind, tuple(shape), ORDERLESS_FLOATS))
    pads = [0] * 2 * len(shape)
    for axis, dim in enumerate(shape):
        pads[axis] = data.draw(st.integers(-dim, 2))
        pads[axis + len(shape)] = data.draw(st.integers(-(dim + min(pads[axis], 0)), 2))
    value = data.draw(st.sampled_from(ORDERLESS_FLOATS[:7] if kind != np.int64 else (0, -3, 7)))
    if opset < 11:
        model = node_model("Pad", {"x": x}, {}, {"pads": pads, "value": float(value)}, opset=opset, dynamic=dynamic)
    else:
        constants = {"pads": np.array(pads, np.int64)}
        if data.draw(st.booleans()):
            constants["value"] = np.array(value, kind)
        else:
            value = 0
        model = node_model("Pad", {"x": x}, constants, opset=opset, dynamic=dynamic)
    expected = pad_reference(x, pads, value)
    result, detail = _result(model, {"x": x}, [expected])
    if result == "match" and min(pads) >= 0:  # the reference is onnxruntime's
        np.testing.assert_array_equal(onnxruntime_outputs(model, {"x": x})[0], expected)
    assert (result, detail) == ("match", None)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=0, max_size=3), dynamic=st.booleans(),
       opset=st.sampled_from([11, 13, 14]), alpha=st.sampled_from([0.2, 1 / 6, -1.0]), beta=st.sampled_from([0.5, 0.0]))
def test_hard_sigmoid(data, shape, dynamic, opset, alpha, beta):
    """torch's hardsigmoid (and, before opset 14, x * hardsigmoid(x) for hardswish: MobileNetV3)."""
    x = data.draw(edge_arrays(np.float32, tuple(shape), EDGE_FLOATS))
    model = node_model("HardSigmoid", {"x": x}, {}, {"alpha": alpha, "beta": beta}, opset=opset, dynamic=dynamic)
    assert _result(model, {"x": x}) == ("match", None)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=1, max_size=5), dynamic=st.booleans(),
       opset=st.sampled_from([11, 12, 13, 15]), op=st.sampled_from(["Softmax", "LogSoftmax"]))
def test_softmax_and_log_softmax(data, shape, dynamic, opset, op):
    """Any axis (negative ones too) of ranks 1 to 5, empty and size-1 dims, rows holding ±inf, NaN, -0.0 and values
    whose exponentials overflow. Before opset 13 both normalise over the axes from ``axis`` on, as ONNX then defines
    them; from 13 on along any one axis."""
    x = data.draw(edge_arrays(np.float32, tuple(shape), EDGE_FLOATS))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    model = node_model(op, {"x": x}, {}, {"axis": axis}, opset=opset, dynamic=dynamic)
    result, detail = _result(model, {"x": x})
    assert (result, detail) == ("match", None)


#: rows at the edges of the exponential: ±inf, NaN, a lone -inf, overflowing and signed-zero values
EDGE_ROWS = np.array([[0, 1, 2], [np.inf, 1, 0], [-np.inf, 1, 0], [np.inf, np.inf, 1], [-np.inf, -np.inf, -np.inf],
                      [np.nan, 1, 0], [3e38, -3e38, 0], [-0.0, 0.0, -0.0], [1e-45, 0, -1e-45]], np.float32)


def softmax_reference(x, axis, log):
    """ONNX's (Log)Softmax along ``axis`` in float64, the maximum subtracted first (a row holding +inf is NaN)."""
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = wide - wide.max(axis=axis, keepdims=True)
        total = np.exp(shifted).sum(axis=axis, keepdims=True)
        return (shifted - np.log(total) if log else np.exp(shifted) / total).astype(x.dtype)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [0, 1, -2, 3])
def test_softmax_rows_at_the_edges(op, axis):
    """Each edge row along an inner axis of a rank-4 input: onnxruntime and the float64 definition agree, and so
    does the translation."""
    x = np.moveaxis(np.broadcast_to(EDGE_ROWS[:, None, :, None], (9, 2, 3, 2)), 2, axis).copy()
    model = node_model(op, {"x": x}, {}, {"axis": axis}, opset=13)
    expected = softmax_reference(x, axis, op == "LogSoftmax")
    np.testing.assert_allclose(onnxruntime_outputs(model, {"x": x})[0], expected, rtol=1e-6, atol=1e-7)
    assert _result(model, {"x": x}) == ("match", None)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset, axis", [(11, 1), (12, 1), (13, -1)])
def test_softmax_of_rank_0_is_refused(op, opset, axis):
    """ONNX's axis lies in [-rank, rank - 1]: none for a scalar (onnxruntime's shape inference refuses it too), at
    every opset (the default axis is 1 before 13)."""
    x = np.array(1.0, np.float32)
    with pytest.raises(FormRefused, match=r"^ONNX {} node 'out0' \(opset {}\): axis {} is out of range for rank "
                                          r"0$".format(op, opset, axis)):
        pycumsum_op.onnx.prepare(node_model(op, {"x": x}, opset=opset))


@pytest.mark.parametrize("op, attrs, message", [
    ("Softmax", {"axis": 0}, r"axis 0 with the rank of input 'r' unknown"),
    ("LogSoftmax", {"axis": -1}, r"the rank of input 'r' is unknown"),
])
def test_softmax_off_the_last_axis_of_a_rank_the_model_does_not_state_is_refused(op, attrs, message):
    with pytest.raises(FormRefused, match=r"^ONNX {} node 'y' \(opset 14\): {}$".format(op, message)):
        pycumsum_op.onnx.prepare(unranked_model(op, attrs))


def test_softmax_on_the_last_axis_runs_whatever_the_rank():
    feeds = {"x": np.array([1.0, -np.inf, np.nan, 3e38], np.float32), "shape": np.array([2, 1, 4], np.int64)}
    assert outcome(unranked_model("Softmax", {"axis": -1}), feeds) == ("match", None)


@settings(SETTINGS, max_examples=60)
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=1, max_size=3), dynamic=st.booleans(),
       opset=st.sampled_from([11, 12, 13]), kind=st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
       keepdims=st.sampled_from([0, 1]), op=st.sampled_from(["ArgMax", "ArgMin"]))
def test_arg_max_and_min(data, shape, dynamic, opset, kind, keepdims, op):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    shape[axis] = max(shape[axis], 1)  # ONNX has no ArgMax of an empty axis
    x = data.draw(edge_arrays(kind, tuple(shape), EDGE_FLOATS))
    model = node_model(op, {"x": x}, {}, {"axis": axis, "keepdims": keepdims}, opset=opset, dynamic=dynamic)
    if kind == np.int64:  # onnxruntime has no int64 kernel: ONNX's definition (numpy's, the first index) is the oracle
        x[tuple(slice(0, 1) for _ in shape)] = data.draw(st.sampled_from([2 ** 63 - 1, -2 ** 63, 2 ** 40]))
    # onnxruntime keeps a negative axis of an empty input with keepdims=0 ((0, 1) for (0, 1), axis -1; its own
    # shape check warns): there numpy's is the reference
    reference = np.argmax if op == "ArgMax" else np.argmin
    expected = None if x.size and kind != np.int64 else [
        reference(x, axis).reshape(x.shape[:axis % x.ndim] + (1,) * keepdims + x.shape[axis % x.ndim + 1:])]
    assert _result(model, {"x": x}, expected) == ("match", None)


@pytest.mark.parametrize("node, message", [
    (("Dropout", {"training": np.array(True)}, {}), r"input 2 \(training_mode\) must be a constant false"),
    (("BatchNormalization", {}, {"training_mode": 1}), r"attribute training_mode=1 is not accepted \(accepted: 0\)"),
    (("MaxPool", {}, {"kernel_shape": [2, 2], "dilations": [2, 2]}), r"dilations other than 1"),
    (("MaxPool", {}, {"kernel_shape": [2, 2], "storage_order": 1}), r"attribute storage_order=1 is not accepted"),
    (("AveragePool", {}, {"kernel_shape": [2, 2], "pads": [2, 0, 0, 0]}), r"not smaller than the kernel"),
    (("Conv", {"w": np.zeros((0, 3, 1, 1), np.float32)}, {}), r"Caffe2's Conv fails on an empty W"),
    (("Pad", {"pads": np.ones(8, np.int64)}, {"mode": "wrap"}), r"attribute mode='wrap' is not accepted"),
])
def test_other_cnn_forms_are_refused_in_one_line(node, message):
    op, constants, attrs = node
    x = np.zeros((1, 3, 4, 4), np.float32)
    if op == "BatchNormalization":
        constants = {name: np.ones(3, np.float32) for name in ("scale", "bias", "mean", "var")}
    if op == "Dropout":
        constants = dict({"ratio": np.array(0.5, np.float32)}, **constants)
    model = node_model(op, {"x": x}, constants, attrs, opset=14)
    with pytest.raises(FormRefused, match=r"^ONNX {} node 'out0' \(opset 14\): .*{}".format(op, message)) as caught:
        pycumsum_op.onnx.prepare(model)
    assert len(str(caught.value).splitlines()) == 1


def test_a_pad_value_float32_cannot_hold_is_refused():
    """Caffe2's op arguments hold float32: a double 0.1 would pad with 0.10000000149."""
    x = np.zeros((1, 2), np.float64)
    model = node_model("Pad", {"x": x}, {"pads": np.array([0, 1, 0, 0], np.int64), "value": np.array(0.1)}, opset=13)
    with pytest.raises(FormRefused, match=r"^ONNX Pad node 'out0' \(opset 13\): constant_value 0.1 is not a float32 "
                                          r"value \(Caffe2 passes it as one\)$"):
        pycumsum_op.onnx.prepare(model)
    assert outcome(node_model("Pad", {"x": x}, {"pads": np.array([0, 1, 0, 0], np.int64), "value": np.array(0.5)},
                              opset=13), {"x": x}) == ("match", None)


def test_a_global_pool_named_by_torch_runs():
    """Caffe2's ConvPoolOpBase wants explicit kernels of an op whose name holds "Pool": torch names its nodes so."""
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        model = node_model(op, {"x": x}, opset=13, dynamic=True)
        model.graph.node[0].name = op + "_46"
        assert outcome(model, {"x": x}) == ("match", None)
