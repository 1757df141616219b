"""The portable target (``lower="portable"``) builds without ATen: its nets hold Caffe2's stock operators only, each
form held to onnxruntime (torch where onnxruntime's kernels disagree) at the values that break kernels, and a form
that has no stock operators is refused by node at import, never handed to a build that lacks ATen."""
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_forms_support import node_model
from onnx_support import onnx_backend_refusal, onnxruntime_outputs

pytestmark = pytest.mark.skipif(onnx_backend_refusal() is not None, reason=onnx_backend_refusal() or "")

EDGES = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1e-30, 3.0, -3.0, 20.0, 88.0, 89.0, -100.0, 1e4, -1e4, 3e38,
                  -3e38, np.inf, -np.inf, np.nan, 1e-45, 0.99999994, 1.0000001], np.float32)


def _portable(model):
    """``prepare(model, lower="portable")``, after asserting that its nets hold no ATen and no Python op."""
    from pycumsum_op.onnx import prepare
    rep = prepare(model, lower="portable")
    types = {op.type for net in (rep.init_net, rep.predict_net) for op in net.op}
    assert not types & {"ATen", "Python"}, types
    return rep


def _same(got, want, rtol=0.0):
    """Equal shapes and types; floats within ``rtol`` relative, NaN where NaN, and the sign of every zero."""
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
        np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0]))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op_type, attrs", [
    ("Sin", {}), ("Cos", {}), ("Tan", {}), ("Asin", {}), ("Acos", {}), ("Atan", {}), ("Sinh", {}), ("Cosh", {}),
    ("Elu", {"alpha": 0.7}), ("Selu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Softsign", {})])
def test_unary_forms_take_caffe2s_kernels_within_two_ulps(op_type, attrs):
    """Caffe2's float kernels, within 2e-6 relative of onnxruntime's (±inf, NaN, -0.0, overflow)."""
    model = node_model(op_type, {"x": EDGES.reshape(1, -1)}, attrs=attrs)
    rep = _portable(model)
    assert [op.type for op in rep.predict_net.op][-1] == op_type
    _same(rep.run({"x": EDGES.reshape(1, -1)})[0], onnxruntime_outputs(model, {"x": EDGES.reshape(1, -1)})[0], 2e-6)


@pytest.mark.parametrize("op_type, dtype, kernel", [
    ("Ceil", np.float32, "ceil"),  # Caffe2's Ceil gives -0.0 for -0.5, onnxruntime 0.0: no stock form proven
    ("Sign", np.float32, "sign"),  # Caffe2's Sign of NaN is 0, ONNX's NaN
    ("Sin", np.float64, "sin"),  # Caffe2's Sin is float32 only
    ("Softplus", np.float32, "softplus"),  # Caffe2's overflows to inf from 89
    ("Abs", np.float64, "abs"),  # Caffe2's Abs is float32 only; a sign product would make -0.0 of -0.0
    ("IsNaN", np.float32, "isnan")])  # Caffe2's IsNaN writes uint8
def test_a_form_without_stock_operators_is_refused_by_node(op_type, dtype, kernel):
    from pycumsum_op.onnx import prepare
    from pycumsum_op.onnx.ops.contract import FormRefused
    model = node_model(op_type, {"x": EDGES.astype(dtype).reshape(1, -1)})
    with pytest.raises(FormRefused) as refusal:
        prepare(model, lower="portable")
    assert str(refusal.value).startswith("ONNX {} node".format(op_type)), refusal.value
    assert re.search(r"torch's (\w+, )*{}(, \w+)* \(Caffe2's ATen operator\)".format(kernel), str(refusal.value)), \
        refusal.value
    assert "lower='aten'" in str(refusal.value)
    prepare(model, lower="aten")  # the target with torch's kernels takes it


def test_xor_broadcasts_as_numpy():
    """Caffe2's Xor, broadcasting as numpy, empty dims included."""
    for first, second in (((2, 1, 3), (4, 1)), ((0, 3), (1, 3)), ((), (2,))):
        feeds = {"a": np.resize([True, False, True], first).astype(np.bool_),
                 "b": np.resize([False, True], second).astype(np.bool_)}
        _same(_portable(node_model("Xor", feeds)).run(feeds)[0], np.logical_xor(feeds["a"], feeds["b"]))


@pytest.mark.parametrize("op_type, dtype", [("Neg", np.float64), ("Neg", np.int32), ("Neg", np.int64),
                                            ("Abs", np.int32), ("Abs", np.int64)])
def test_negation_and_integer_magnitudes(op_type, dtype):
    """Caffe2's Negative, and |x| of integers as x times its sign: the lowest integer wraps as in onnxruntime."""
    info = np.iinfo(dtype) if np.dtype(dtype).kind == "i" else None
    x = (np.array([0, 1, -1, 7, -7, info.max, info.min], dtype) if info else EDGES.astype(dtype)).reshape(1, -1)
    model = node_model(op_type, {"x": x})
    _same(_portable(model).run({"x": x})[0], onnxruntime_outputs(model, {"x": x})[0])


# (condition, x, y) shapes: every broadcast direction, a scalar, and empty dims (Caffe2's Expand reads a 0 as a 1;
# the portable Where broadcasts by Mul, whose broadcasting keeps them)
WHERE_SHAPES = [((2, 1, 3), (1, 4, 1), ()), ((3,), (2, 3), (2, 1)), ((0, 1), (1, 3), (1,)), ((1,), (2, 0), (1, 1)),
                ((), (), ()), ((2, 3), (2, 3), (2, 3))]


@settings(max_examples=60, deadline=None)
@given(shapes=st.sampled_from(WHERE_SHAPES), dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
       dynamic=st.booleans(), data=st.data())
def test_where_broadcasts_as_numpy(shapes, dtype, dynamic, data):
    cond_shape, x_shape, y_shape = shapes
    cond = np.asarray(data.draw(st.lists(st.booleans(), min_size=int(np.prod(cond_shape)),
                                         max_size=int(np.prod(cond_shape))))).reshape(cond_shape)
    values = EDGES if np.dtype(dtype).kind == "f" else np.array([0, 1, -3, 5, 9, -8])
    x = np.resize(values, x_shape).astype(dtype)
    y = np.resize(values[::-1], y_shape).astype(dtype)
    feeds = {"c": cond.astype(np.bool_), "x": x, "y": y}
    model = node_model("Where", feeds, dynamic=dynamic)
    # numpy's where (ONNX's definition): onnxruntime's broadcasting Where writes 0.0 for a -0.0 it picks
    _same(_portable(model).run(feeds)[0], np.where(feeds["c"], x, y))


@pytest.mark.parametrize("data_shape, shape", [((1, 3), [0, 3]), ((2, 1), [2, 0]), ((0, 1), [0, 4]),
                                               ((3, 1), [2, 3, 4]), ((1,), [5]), ((), [2, 2])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_expand_of_a_fed_shape_keeps_empty_dims(data_shape, shape, dtype):
    """A shape fed at run time: Caffe2's Mul by ones of it (±inf, NaN and -0.0 kept; empty dims as ONNX's)."""
    x = np.resize(EDGES if np.dtype(dtype).kind == "f" else np.array([3, -1, 0]), data_shape).astype(dtype)
    feeds = {"x": x, "shape": np.array(shape, np.int64)}
    model = node_model("Expand", feeds, out_rank=len(shape))
    _same(_portable(model).run(feeds)[0], onnxruntime_outputs(model, feeds)[0])


def test_a_fed_reshape_is_counted_with_stock_operators():
    """Reshape's bounds with Caffe2's Mul: a fed shape whose product overflows int64 ([2**62 + 1, 4] counts 4
    elements in Caffe2's own product) is refused when the net runs, naming the node; -1 and 0 as onnxruntime's."""
    from pycumsum_op.onnx.run_checks import RunRefused
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for shape in ([4, 3], [-1, 6], [0, -1], [0, 2, 2]):
        feeds = {"x": x, "shape": np.array(shape, np.int64)}
        model = node_model("Reshape", {"x": x, "shape": np.zeros(len(shape), np.int64)}, out_rank=len(shape))
        _same(_portable(model).run(feeds)[0], onnxruntime_outputs(model, feeds)[0])
    model = node_model("Reshape", {"x": x, "shape": np.zeros(2, np.int64)}, out_rank=2)
    rep = _portable(model)
    for shape in ([2 ** 62 + 1, 4], [2 ** 31, 2 ** 31], [5, 3]):
        with pytest.raises(RunRefused, match="ONNX Reshape node"):
            rep.run({"x": x, "shape": np.array(shape, np.int64)})


@pytest.mark.parametrize("spatial", [2, 3])
def test_max_pool_fills_nan_and_minus_inf_windows_as_torch(spatial):
    """Caffe2's MaxPool, then NaN wherever a window holds one (its kernel skips some) and, in 3-D, -inf in windows
    of -inf only (its kernel writes float32's lowest): torch's max_pool."""
    rng = np.random.RandomState(0)
    x = rng.randn(*(2, 3) + (5,) * spatial).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, 12, replace=False)] = np.nan
    x[0, 0] = -np.inf
    x[1, 1, ..., :2] = -0.0
    model = node_model("MaxPool", {"x": x}, attrs={"kernel_shape": [2] * spatial, "strides": [2] * spatial,
                                                   "pads": [0] * spatial + [1] * spatial})
    pool = torch.nn.functional.max_pool2d if spatial == 2 else torch.nn.functional.max_pool3d
    want = pool(torch.from_numpy(x), 2, 2, ceil_mode=True).numpy()
    _same(_portable(model).run({"x": x})[0], want)


@settings(max_examples=40, deadline=None)
@given(op_type=st.sampled_from(["Max", "Min", "Sum", "Mean"]),
       shapes=st.sampled_from([[(2, 1, 3), (1, 4, 1)], [(3,), (2, 3), ()], [(0, 1), (1, 3)], [(2, 3)] * 3, [(4,)]]),
       dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64]), dynamic=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_variadic_extrema_and_sums_as_torch(op_type, shapes, dtype, dynamic, seed):
    """torch's maximum, minimum and add, input after input (Mean: divided by their number): NaN on either side kept,
    a tie of 0.0 and -0.0 giving the first, broadcasting with empty dims."""
    if op_type == "Mean" and dtype != np.float32 or op_type == "Sum" and np.dtype(dtype).kind != "f":
        return  # the declarations' types
    rng = np.random.RandomState(seed)
    pool = EDGES[np.isfinite(EDGES) | (op_type in ("Max", "Min"))] if np.dtype(dtype).kind == "f" else \
        np.array([0, 1, -1, 5, -7, 2 ** 31 - 1, -2 ** 31])
    feeds = {"x{}".format(k): rng.choice(pool, size=shape).astype(dtype) for k, shape in enumerate(shapes)}
    model = node_model(op_type, feeds, dynamic=dynamic)
    step = {"Max": torch.maximum, "Min": torch.minimum, "Sum": torch.add, "Mean": torch.add}[op_type]
    values = [torch.from_numpy(np.asarray(value)) for value in feeds.values()]
    want = values[0]
    for value in values[1:]:
        want = step(want, value)
    if op_type == "Mean":
        want = want / len(values)
    _same(_portable(model).run(feeds)[0], want.numpy())


@settings(max_examples=200, deadline=None)
@given(length=st.integers(0, 6), start=st.integers(-9, 9), end=st.sampled_from([-9, -2, 0, 3, 9, 2 ** 63 - 1,
                                                                                 -2 ** 63]),
       step=st.sampled_from([1, 2, 3, -1, -2]), fed=st.booleans(), dynamic=st.booleans())
def test_slice_bounds_clamp_as_numpy(length, start, end, step, fed, dynamic):
    """Slice's bounds, counted from the end when negative and clamped at run time (fed, or constant over an axis the
    model leaves symbolic), a reversal and strides included: stock Caffe2 operators, onnxruntime's values (ONNX
    clamps a negative step's start to [0, length - 1]: numpy's x[-9::-1] of 5 entries is empty, ONNX's is x[0])."""
    x = np.resize(EDGES, (2, length)).astype(np.float32)
    bounds = {name: np.array([value], np.int64) for name, value in (("starts", start), ("ends", end), ("axes", 1),
                                                                     ("steps", step))}
    if step < 0 and end >= length and not dynamic:
        end = length - 1  # refused at import: onnxruntime and the ONNX specification disagree past the end
        bounds["ends"] = np.array([end], np.int64)
    inputs = {"x": x}
    if fed:
        if step != 1:
            return  # a step with fed bounds is refused at import
        inputs.update(starts=bounds.pop("starts"), ends=bounds.pop("ends"))
    model = node_model("Slice", inputs, constants=bounds, dynamic=dynamic,
                       order=["x", "starts", "ends", "axes", "steps"])
    try:
        rep = _portable(model)
    except Exception as error:
        from pycumsum_op.onnx.ops.contract import FormRefused
        assert isinstance(error, FormRefused) and "step" in str(error), error
        return
    _same(rep.run(inputs)[0], onnxruntime_outputs(model, inputs)[0])


SCATTER_CASES = [  # (data dims, indices, updates dims)
    ((4, 3), [[2], [0]], (2, 3)), ((4, 3), [[-1], [1]], (2, 3)), ((2, 3, 4), [[1, -3], [0, 2]], (2, 4)),
    ((2, 3), [[1, 2]], (1,)), ((5,), [[[1], [3]], [[-5], [4]]], (2, 2)), ((4, 3), np.zeros((0, 1)), (0, 3)),
    ((0, 3), np.zeros((0, 1)), (0, 3)), ((4, 0), [[3], [1]], (2, 0)), ((1, 1), [[0, 0]], (1,))]


@pytest.mark.parametrize("dims, indices, update_dims", SCATTER_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_scatter_nd_assigns_rows_as_onnxruntime(dims, indices, update_dims, dtype):
    """Caffe2's ScatterAssign on the rows of the indexed dims: negative indices from the end, empty data, indices and
    rows (its kernel dies of SIGFPE on data of no row), ±inf, NaN and -0.0 moved as they are."""
    values = EDGES if np.dtype(dtype).kind == "f" else np.array([3, -1, 0, 7, 0])
    feeds = {"data": np.resize(values, dims).astype(dtype), "indices": np.array(indices, np.int64),
             "updates": np.resize(values[::-1], update_dims).astype(dtype)}
    model = node_model("ScatterND", feeds)
    want = onnxruntime_outputs(model, feeds)[0] if feeds["data"].size else feeds["data"]  # onnxruntime: no empty
    _same(_portable(model).run(feeds)[0], want)


@pytest.mark.parametrize("index", [[[4]], [[-5]], [[2 ** 62]]])
def test_scatter_nd_of_an_index_out_of_range_stops_the_net(index):
    from pycumsum_op.onnx.run_checks import RunRefused
    feeds = {"data": np.zeros((4, 3), np.float32), "indices": np.array(index, np.int64),
             "updates": np.ones((1, 3), np.float32)}
    rep = _portable(node_model("ScatterND", feeds))
    with pytest.raises(RunRefused, match="ONNX ScatterND node .* out of range for dim 0 of data 'data'"):
        rep.run(feeds)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("low, high", [(-1.0, 2.0), (3.0, -3.0), (np.nan, 0.5), (-0.0, np.nan), (None, 0.0),
                                       (-np.inf, None)])
def test_clip_by_input_bounds_as_onnxruntime(dtype, low, high):
    """min(max(x, min), max) by the stock extremum form: a min above the max gives the max, a NaN x stays NaN, a NaN
    bound is none, an absent bound of float32 is its lowest or max finite value (of float64: refused, no float64
    argument holds it; of an integer: no bound)."""
    floating = np.dtype(dtype).kind == "f"
    if not floating and any(value is not None and not np.isfinite(value) for value in (low, high)):
        return  # an integer bound is finite
    x = (EDGES if floating else np.array([0, 5, -5, 2 ** 31 - 1, -2 ** 31, 3])).astype(dtype).reshape(1, -1)
    feeds = {"x": x}
    for name, value in (("low", low), ("high", high)):
        if value is not None:
            feeds[name] = np.array(value, dtype)
    order = ["x", "low" if low is not None else "", "high" if high is not None else ""]
    model = node_model("Clip", feeds, order=order)
    if (low is None or high is None) and dtype == np.float64:
        from pycumsum_op.onnx.ops.contract import FormRefused
        with pytest.raises(FormRefused, match="ONNX Clip node"):
            _portable(model)
        return
    _same(_portable(model).run(feeds)[0], onnxruntime_outputs(model, feeds)[0])


@pytest.mark.parametrize("dims", [(3, 4), (2, 4, 3), (0, 3), (3, 0), (1, 1)])
@pytest.mark.parametrize("k, fed", [(0, False), (2, False), (-1, True), (-2 ** 62, True), (2 ** 63 - 1, True)])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_trilu_zeroes_as_numpy(dims, k, fed, upper, dtype):
    """The entries whose column - row is below k (upper) or above it (lower) zeroed by Caffe2's Where, k constant or
    fed (far diagonals included), empty and size-1 matrices, -0.0, ±inf and NaN kept where kept: numpy's triu / tril
    (onnxruntime refuses empty inputs)."""
    x = np.resize(EDGES if np.dtype(dtype).kind == "f" else np.array([3, -1, 0, 7]), dims).astype(dtype)
    feeds, constants = {"x": x}, {}
    (feeds if fed else constants)["k"] = np.array(k, np.int64)
    model = node_model("Trilu", feeds, constants=constants, attrs={"upper": upper}, opset=14)
    clipped = max(-2 ** 62, min(2 ** 62, k))
    want = np.triu(x, clipped) if upper else np.tril(x, clipped)
    _same(_portable(model).run(feeds)[0], want)


GATHER_CASES = [  # (data dims, index dims, axis)
    ((3, 4), (3, 4), 1), ((3, 4), (2, 2), 0), ((2, 3, 4), (2, 3, 5), 2), ((2, 3, 4), (1, 3, 2), -2), ((5,), (7,), 0),
    ((3, 4), (0, 4), 1), ((3, 4), (3, 0), 0), ((1, 1), (1, 3), 1)]


@pytest.mark.parametrize("dims, index_dims, axis", GATHER_CASES)
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
@pytest.mark.parametrize("dynamic", [False, True])
def test_gather_elements_from_the_flattened_data_as_numpy(dims, index_dims, axis, index_type, dynamic):
    """Caffe2's Gather from the data flattened, by each entry's position: negative indices from the end, indices
    smaller than the data off the axis, empty indices, -0.0, ±inf and NaN moved as they are: numpy's
    take_along_axis (ONNX's definition)."""
    rng = np.random.RandomState(len(index_dims) + axis)
    data = np.resize(EDGES, dims)
    length = dims[axis]
    index = rng.randint(-length, length, size=index_dims).astype(index_type)
    feeds = {"data": data, "index": index}
    model = node_model("GatherElements", feeds, attrs={"axis": axis}, dynamic=dynamic)
    wrapped = np.where(index < 0, index + length, index)
    want = np.take_along_axis(data[tuple(slice(0, n) if k != axis % len(dims) else slice(None)
                                         for k, n in enumerate(index_dims))], wrapped.astype(np.int64), axis)
    _same(_portable(model).run(feeds)[0], want)


@pytest.mark.parametrize("index, message", [([[3, 0]], "out of range for axis 1"), ([[-4, 0]], "out of range"),
                                            ([[2 ** 62, 0]], "out of range"), ([[-2 ** 63, 0]], "out of range"),
                                            ([[0], [0], [0], [0]], "has a dim past input 0")])
def test_gather_elements_refuses_what_would_address_other_entries(index, message):
    from pycumsum_op.onnx.run_checks import RunRefused
    feeds = {"data": np.arange(9, dtype=np.float32).reshape(3, 3), "index": np.array(index, np.int64)}
    rep = _portable(node_model("GatherElements", feeds, attrs={"axis": 1}, dynamic=True))
    with pytest.raises(RunRefused, match="ONNX GatherElements node .*" + message):
        rep.run(feeds)


PAD_CASES = [[0, 1, 0, 2], [2, 0, 1, 0], [-1, 0, 0, -1], [-1, 2, 1, -2], [0, -3, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]


@pytest.mark.parametrize("pads", PAD_CASES)
@pytest.mark.parametrize("dims", [(3, 4), (0, 4), (3, 0)])
@pytest.mark.parametrize("dtype, value", [(np.float32, 0.0), (np.float32, -np.inf), (np.float32, np.nan),
                                          (np.float64, 2.5), (np.int32, 7), (np.int64, -1)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_constant_pad_by_concatenated_slabs_as_the_definition(pads, dims, dtype, value, dynamic):
    """Negative pads crop first, then slabs of the value are concatenated on each side (Caffe2's Slice,
    ConstantFill and Concat), empty inputs and outputs included: ONNX's definition (`pad_reference`)."""
    from onnx_forms_support import pad_reference
    x = np.resize(EDGES if np.dtype(dtype).kind == "f" else np.array([3, -1, 0, 7]), dims).astype(dtype)
    cropped_past = any(dims[axis] + min(0, pads[axis]) + min(0, pads[axis + 2]) < 0 for axis in range(2))
    if cropped_past and not dynamic:
        return  # onnx's inference refuses the model (a negative dim)
    model = node_model("Pad", {"x": x}, constants={"pads": np.array(pads, np.int64),
                                                   "value": np.array(value, dtype)}, dynamic=dynamic)
    if cropped_past:
        from pycumsum_op.onnx.run_checks import RunRefused
        with pytest.raises(RunRefused, match="ONNX Pad node .* crop input 0 'x' past its dims"):
            _portable(model).run({"x": x})
        return
    _same(_portable(model).run({"x": x})[0], pad_reference(x, pads, value).astype(dtype))


@pytest.mark.parametrize("pads", PAD_CASES[:-1])
@pytest.mark.parametrize("dims", [(3, 4), (0, 4)])
@pytest.mark.parametrize("dtype, value", [(np.float32, np.nan), (np.int64, -1)])
def test_constant_pad_by_fed_pads_gathers_from_a_bordered_input(pads, dims, dtype, value):
    """Pads fed at run time: one Gather per axis from the input with one value on each side (Caffe2's slabs), the
    indices clamped by the stock extremum form: ONNX's definition."""
    from onnx_forms_support import pad_reference
    x = np.resize(EDGES if np.dtype(dtype).kind == "f" else np.array([3, -1, 0, 7]), dims).astype(dtype)
    feeds = {"x": x, "pads": np.array(pads, np.int64)}
    model = node_model("Pad", feeds, constants={"value": np.array(value, dtype)})
    if any(dims[axis] + min(0, pads[axis]) + min(0, pads[axis + 2]) < 0 for axis in range(2)):
        return  # cropped past the dims: the definition has no value
    _same(_portable(model).run(feeds)[0], pad_reference(x, pads, value).astype(dtype))


@pytest.mark.parametrize("op_type, feeds", [
    ("Expand", {"x": np.ones((1, 3), np.float32), "shape": np.array([2 ** 40, 2 ** 40, 3], np.int64)}),
    ("Expand", {"x": np.ones((1, 3), np.float32), "shape": np.array([2 ** 62 + 1, 4], np.int64)}),
    ("Tile", {"x": np.ones((2, 3), np.float32), "repeats": np.array([2 ** 31, 2 ** 31], np.int64)}),
    ("Pad", {"x": np.ones((2, 3), np.float32), "pads": np.array([0, 2 ** 62, 0, 2 ** 62], np.int64)}),
    ("Reshape", {"x": np.ones((2, 3), np.float32), "shape": np.array([-1, 2 ** 62, 4], np.int64)}),
    ("ConstantOfShape", {"shape": np.array([2 ** 31, 2 ** 31, 2 ** 31], np.int64)})])
def test_fed_sizes_past_the_cap_stop_the_net(op_type, feeds):
    """Sizes read at run time are held to PYCUMSUM_OP_MAX_TENSOR_BYTES by stock operators (products of dims by Mul):
    a shape past 2**62, whose product overflows int64, stops the net in one line naming the node."""
    from pycumsum_op.onnx.run_checks import RunRefused
    rank = 3 if op_type in ("ConstantOfShape", "Reshape") and len(feeds.get("shape", ())) == 3 else 2
    model = node_model(op_type, feeds, out_rank=rank)
    with pytest.raises(RunRefused, match="ONNX {} node".format(op_type)):
        _portable(model).run(feeds)
