"""Fuzzed ONNX graphs: random elementwise/CumSum graphs with random declared shapes are either refused for
their size (exactly when a declared tensor passes PYCUMSUM_OP_MAX_TENSOR_BYTES) or prepared and run to
onnxruntime's result; random external-data locations, offsets and lengths load exactly the bytes of a file
inside the model's folder, or are refused, and never load the secret beside it."""
import os
import shutil
import tempfile

import numpy as np
import onnxruntime
import pytest

from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

from hypothesis import given, settings, strategies as st
from onnx import TensorProto, helper

from pycumsum_op.input_limits import InputTooLarge
from pycumsum_op.onnx import load_model, prepare
from pycumsum_op.onnx.model_input import ExternalDataError

TENSOR_CAP = 4096  # bytes: float32 tensors of more than 1024 elements are refused in the graph fuzz
UNARY = ["Relu", "Neg", "Abs", "Sigmoid", "Tanh"]
#: onnxruntime 1.10.0 (the oracle on CPython 3.6/3.7) fails an exclusive reverse CumSum over a length-1 axis
#: ("SafeIntOnOverflow() Integer overflow"); 1.19.2 runs it. There the graphs draw no such node.
ORACLE_SCANS_ONE_EXCLUSIVE_REVERSED = tuple(int(part) for part in onnxruntime.__version__.split(".")[:2]) >= (1, 19)


@st.composite
def graphs(draw):
    """(model, input array, largest declared tensor in bytes): a chain of unary ops, Adds of the input and
    CumSums over a random axis, on a float32 input of random (declared) shape."""
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 24)) for _ in range(rank)]
    nodes, initializers, current = [], [], "x"
    for index in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(UNARY + ["Add", "CumSum"]))
        out = "t{}".format(index)
        if kind == "Add":
            nodes.append(helper.make_node("Add", [current, "x"], [out]))
        elif kind == "CumSum":
            axis = "axis{}".format(index)
            dim = draw(st.integers(-rank, rank - 1))
            initializers.append(helper.make_tensor(axis, TensorProto.INT64, [], [dim]))
            reverse, exclusive = draw(st.integers(0, 1)), draw(st.integers(0, 1))
            if shape[dim] == 1 and not ORACLE_SCANS_ONE_EXCLUSIVE_REVERSED:
                exclusive *= 1 - reverse
            nodes.append(helper.make_node("CumSum", [current, axis], [out], reverse=reverse, exclusive=exclusive))
        else:
            nodes.append(helper.make_node(kind, [current], [out]))
        current = out
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    graph = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    x = np.random.RandomState(draw(st.integers(0, 2 ** 16))).randn(*shape).astype(np.float32)
    return model, x, 4 * int(np.prod(shape))


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_fuzzed_graphs_are_refused_for_size_or_match_onnxruntime(drawn):
    model, x, declared_bytes = drawn
    os.environ["PYCUMSUM_OP_MAX_TENSOR_BYTES"] = str(TENSOR_CAP)
    try:
        if declared_bytes > TENSOR_CAP:
            with pytest.raises(InputTooLarge, match="PYCUMSUM_OP_MAX_TENSOR_BYTES"):
                prepare(model)
            return
        got = prepare(model).run([x]).y
    finally:
        del os.environ["PYCUMSUM_OP_MAX_TENSOR_BYTES"]
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected, = session.run(None, {"x": x})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# --- external data ---------------------------------------------------------------------------------

WEIGHTS = np.arange(64, dtype=np.uint8).tobytes()
SECRET = b"\xee" * 64
PIECES = ["..", ".", "sub", "weights.bin", "secret.bin", "link_in", "link_out", "dir_out", "", "/", "pipe"]


@pytest.fixture(scope="module")
def store():
    """root/secret.bin (outside), root/models/{weights.bin, sub/weights.bin, link_in -> sub, link_out ->
    ../secret.bin, dir_out -> .., pipe (a FIFO)}."""
    root = tempfile.mkdtemp()
    models = os.path.join(root, "models")
    os.makedirs(os.path.join(models, "sub"))
    for path, data in ((os.path.join(root, "secret.bin"), SECRET), (os.path.join(models, "weights.bin"), WEIGHTS),
                       (os.path.join(models, "sub", "weights.bin"), WEIGHTS)):
        with open(path, "wb") as handle:
            handle.write(data)
    os.symlink("sub", os.path.join(models, "link_in"))
    os.symlink(os.path.join("..", "secret.bin"), os.path.join(models, "link_out"))
    os.symlink("..", os.path.join(models, "dir_out"))
    os.mkfifo(os.path.join(models, "pipe"))
    yield models
    shutil.rmtree(root)


def expected_bytes(folder, location, offset, length):
    """The oracle: the bytes a confined reader gives, or None when it must refuse. Confined: a relative
    location without '..' whose real path is a regular file inside the folder's real path."""
    parts = location.split("/")
    if not location or location.startswith("/") or ".." in parts:
        return None
    real = os.path.realpath(os.path.join(folder, location))
    if not real.startswith(os.path.realpath(folder) + os.sep) or not os.path.isfile(real):
        return None
    size = os.path.getsize(real)
    length = size - offset if length is None else length
    if offset + length > size or length < 0:
        return None
    with open(real, "rb") as handle:
        handle.seek(offset)
        return handle.read(length)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4), st.integers(0, 80),
       st.one_of(st.none(), st.integers(0, 80)))
def test_fuzzed_external_data_loads_only_bytes_inside_the_folder(store, pieces, offset, length):
    location = "/".join(pieces)
    tensor = helper.make_tensor("w", TensorProto.UINT8, [0], [])
    tensor.ClearField("dims")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset))) + (
            (("length", str(length)),) if length is not None else ()):
        tensor.external_data.add(key=key, value=value)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "ext", [],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], [tensor])
    path = os.path.join(store, "model_{}.onnx".format(os.getpid()))
    with open(path, "wb") as handle:
        handle.write(helper.make_model(graph).SerializeToString())
    expected = expected_bytes(store, location, offset, length)
    try:
        loaded = load_model(path)
    except ExternalDataError:
        assert expected is None, (location, offset, length)
        return
    raw = loaded.graph.initializer[0].raw_data
    assert expected is not None and raw == expected, (location, offset, length)
    assert not raw or raw != SECRET[:len(raw)]
