"""One-node ONNX models run through pycumsum_op.onnx.prepare and onnxruntime (the oracle), the edge values that
break translations as hypothesis strategies, and a child-process runner for models that could kill the process."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from onnx_support import oracle_outputs


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


def unranked_model(op_type, attrs, opset=14):
    """x (float, (4,)) -> Expand to a shape fed at run time, of a length the model leaves symbolic (a rank ONNX cannot
    infer) -> ``op_type``: a model whose node reads an input of unknown rank. Feeds: x and shape."""
    graph = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["r"]),
                               helper.make_node(op_type, ["r"], ["y"], **attrs)], "unranked",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4]),
                               helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["a", "b"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def outcome(model, feeds, expected=None, lower=None):
    """("match", None), ("refused", one line) or ("mismatch", description): ours (``prepare(model, lower=lower)``)
    against onnxruntime (or the ``expected`` outputs). A refusal is `FormRefused` at import; any other exception is
    reported as an error (a net that imports and then fails at run time is a failure)."""
    expected = oracle_outputs(model, feeds) if expected is None else expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rep = pycumsum_op.onnx.prepare(model, lower=lower)
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


def pad_reference(x, pads, value=0, mode="constant"):
    """ONNX's Pad: negative pads crop first, positive ones then pad what is left (``value`` in constant mode; numpy's
    reflect and edge are ONNX's)."""
    rank = x.ndim
    cropped = x[tuple(slice(max(-pads[axis], 0), x.shape[axis] - max(-pads[axis + rank], 0)) for axis in range(rank))]
    widths = [(max(pads[axis], 0), max(pads[axis + rank], 0)) for axis in range(rank)]
    if mode == "constant":
        return np.pad(cropped, widths, constant_values=value).astype(x.dtype)
    return np.pad(cropped, widths, mode=mode).astype(x.dtype)


#: float values that break translations: signed zeros, the infinities, NaN, values whose sums overflow float32,
#: the smallest subnormal, and ordinary ones
EDGE_FLOATS = (0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-45)
#: dimensions: empty, size 1, small
EDGE_DIMS = st.sampled_from([0, 1, 2, 3])
#: steps and deltas: negative ones, and ones that do not divide the spans below
EDGE_STEPS = st.sampled_from([1, 2, 3, -1, -2, -3, 4, -4])
#: starts, limits and bounds around the small dims
EDGE_BOUNDS = st.integers(-6, 6)


def edge_shapes(min_rank=0, max_rank=3):
    """Shapes of rank ``min_rank`` to ``max_rank`` with a 0 or a 1 at any position."""
    return st.lists(EDGE_DIMS, min_size=min_rank, max_size=max_rank).map(tuple)


def edge_arrays(dtype, shape, floats=EDGE_FLOATS):
    """Arrays of ``dtype`` and ``shape`` whose values are drawn from ``floats`` (float types), small signed
    integers (integer types) or both booleans."""
    dtype, count = np.dtype(dtype), int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "f":
        values = st.sampled_from(floats)
    elif dtype.kind == "b":
        values = st.booleans()
    else:
        values = st.integers(-4, 4)
    return st.lists(values, min_size=count, max_size=count).map(
        lambda items: np.array(items, dtype=dtype).reshape(shape))


def in_child(code: str, timeout: float = 300):
    """Run ``code`` in a child Python with this tree and tests/ on its path: (returncode, [JSON lines it printed],
    stderr). A crash (abort, SIGSEGV, a corrupted heap) shows as a nonzero or negative returncode, and the lines
    printed before it say how far it got."""
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(tests), tests, os.environ.get(
        "PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, timeout=timeout, universal_newlines=True)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(("[", "{"))]
    return done.returncode, lines, done.stderr
