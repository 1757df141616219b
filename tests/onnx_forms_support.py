"""One-node ONNX models run through pycumsum_op.onnx.prepare and onnxruntime (the oracle)."""
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper

import pycumsum_op.onnx
from pycumsum_op.onnx.forms import FormRefused
from onnx_support import onnxruntime_outputs


def node_model(op_type, inputs, constants=(), attrs=None, opset=13, dynamic=False, outputs=1, order=None,
               out_rank=None):
    """A one-node model: ``inputs`` {name: array} are graph inputs (dims symbolic when ``dynamic``),
    ``constants`` {name: array} initializers; the node reads ``order`` (default: inputs, then constants).
    Outputs get the inferred types; where ONNX infers none, the first input's type and ``out_rank`` dims."""
    inputs, constants = dict(inputs), dict(constants)
    names = list(order) if order is not None else list(inputs) + list(constants)
    outs = ["out{}".format(i) for i in range(outputs)]
    node = helper.make_node(op_type, names, outs, **(attrs or {}))
    infos = [helper.make_tensor_value_info(
        name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype],
        ["d{}_{}".format(k, i) for i in range(value.ndim)] if dynamic else value.shape)
        for k, (name, value) in enumerate(inputs.items())]
    initializers = [numpy_helper.from_array(value, name) for name, value in constants.items()]
    opsets = [helper.make_opsetid("", opset)]
    graph = helper.make_graph([node], "one_" + op_type, infos, [], initializers)
    inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=opsets)).graph
    typed = {info.name: info for info in inferred.value_info if info.type.tensor_type.HasField("shape")}
    first = next(iter(inputs.values()), None)
    elem_type = 1 if first is None else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[first.dtype]
    graph.output.extend(typed[name] if name in typed else helper.make_tensor_value_info(
        name, elem_type, ["r{}".format(i) for i in range(out_rank or 0)]) for name in outs)
    return helper.make_model(graph, opset_imports=opsets)


def outcome(model, feeds, expected=None):
    """("match", None), ("refused", one line) or ("mismatch", description): ours against onnxruntime (or the
    ``expected`` outputs). A refusal is `FormRefused` at import; any other exception is reported as an error."""
    expected = onnxruntime_outputs(model, feeds) if expected is None else expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rep = pycumsum_op.onnx.prepare(model)
        except FormRefused as error:
            return "refused", str(error)
        ours = rep.run(feeds)
    for got, want in zip(ours, expected):
        got = np.asarray(got)
        if got.shape != want.shape or got.dtype != want.dtype:
            return "mismatch", "shape/dtype {} {} vs {} {}".format(got.shape, got.dtype, want.shape, want.dtype)
        if want.dtype.kind == "f":
            if not np.allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True):
                return "mismatch", "values differ by {}".format(np.nanmax(np.abs(got - want)))
        elif not np.array_equal(got, want):
            return "mismatch", "values differ"
    return "match", None
