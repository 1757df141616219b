"""Hostile models and inputs at run time: what an imported ONNX model is fed or computes cannot read memory, kill the
process or change the result.

Each case is imported and run in its own process (forked from one child that imported Caffe2 once), its address space
capped (`ADDRESS_SPACE`), with a sentinel blob of a distinctive pattern planted in the rep's workspace. For each
case: no signal, the time and resident memory bounded, no output holding the sentinel's bytes, and either a refusal of
one line (at import, or `RunRefused` when the net runs) or the answer of an independent oracle (onnxruntime, else
numpy in float64 where onnxruntime departs from ONNX's definition).

Before these checks, the cases marked "refused" read heap bytes (ConstantOfShape, Reshape), died of SIGSEGV or SIGFPE
(Tile, Conv, MatMul, Einsum, Split, ConstantOfShape fetched), gave a wrong shape (Expand, OneHot), asked for 8.6 to 17.2
GB from at most 512 KB of input, or were accepted and then failed (BatchNormalization, ReduceProd).
"""
import base64
import io
import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_forms_support import in_child
from onnx_support import needs_onnx_backend, onnxruntime_outputs

#: the address space of a case's process: the imports map about 1.8 GB, and every case asks for more than 8 GB unchecked
ADDRESS_SPACE = 4 * 2 ** 30
#: the most resident memory a case may take (the imports take about 350 MB)
RESIDENT = 1 << 30
#: the seconds a case may take
SECONDS = 30
#: a float32 pattern no case computes: planted in the workspace, it must appear in no output
SENTINEL = (np.arange(4096, dtype=np.float32) * np.float32(0.0078125) + np.float32(-7654.321)).astype(np.float32)

_F, _I = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, opset=13, constants=(), value_infos=()):
    graph = helper.make_graph(nodes, "hostile", [helper.make_tensor_value_info(*given) for given in inputs],
                              [helper.make_tensor_value_info(*made) for made in outputs],
                              [numpy_helper.from_array(value, name) for name, value in constants],
                              value_info=[helper.make_tensor_value_info(*info) for info in value_infos])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _rows_gathered(maker, inputs, constants=()):
    """``maker`` node(s) making 'big', then a Gather of its rows 0..8191 (what would read past a wrapped buffer)."""
    return _model(maker + [helper.make_node("Gather", ["big", "rows"], ["y"], axis=0)], inputs,
                  [("y", _F, [8192, 4])], constants=[("rows", np.arange(8192, dtype=np.int64))] + list(constants))


def _one(op, inputs, outputs, attrs=None, opset=13, constants=(), order=None, value_infos=()):
    names = order or [given[0] for given in inputs] + [name for name, _ in constants]
    return _model([helper.make_node(op, names, [made[0] for made in outputs], **(attrs or {}))], inputs, outputs,
                  opset, constants, value_infos)


_HUGE_ROWS = np.array([2 ** 62 + 1, 4], np.int64)
_FOUR = np.ones(4, np.float32)


def _cases():
    """name -> (model, feeds, expected): "refused", "oracle" (onnxruntime's outputs, bit for bit), "close"
    (onnxruntime's within float32 rounding) or a list of numpy references (where onnxruntime departs from ONNX's
    definition)."""
    double = numpy_helper.from_array(np.array([0.1]), "value")
    huge_double = numpy_helper.from_array(np.array([1e300]), "value")
    empty = np.zeros((2, 0, 3), np.float32)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    statistics = [("scale", np.array([1, 2, 3], np.float32)), ("bias", np.array([0, 1, 2], np.float32)),
                  ("mean", np.array([0, 0.5, 1], np.float32)), ("var", np.array([0, 1, 2], np.float32))]
    return {
        # memory disclosure: the element count wraps to 4 while axis 0 claims 2**62 + 1 rows
        "constant_of_shape_wrapped": (_rows_gathered([helper.make_node("ConstantOfShape", ["shape"], ["big"])],
                                                     [("shape", _I, [2])]), {"shape": _HUGE_ROWS}, "refused"),
        "reshape_wrapped": (_rows_gathered([helper.make_node("Reshape", ["x", "shape"], ["big"])],
                                           [("x", _F, [4]), ("shape", _I, [2])]),
                            {"x": _FOUR, "shape": _HUGE_ROWS}, "refused"),
        "tile_wrapped": (_rows_gathered([helper.make_node("Tile", ["x", "repeats"], ["big"])],
                                        [("x", _F, [1, 4]), ("repeats", _I, [2])]),
                         {"x": _FOUR.reshape(1, 4), "repeats": np.array([2 ** 62 + 1, 1], np.int64)}, "refused"),
        # kernels that died
        "conv_fed_empty_w": (_one("Conv", [("x", _F, [1, 1, 5]), ("w", _F, [1, 1, 2])], [("y", _F, [1, 1, 4])]),
                             {"x": np.ones((1, 1, 5), np.float32), "w": np.ones((0, 1, 2), np.float32)}, "refused"),
        "conv_w_sliced_empty": (_model([helper.make_node("Slice", ["w0", "starts", "ends"], ["w"]),
                                        helper.make_node("Conv", ["x", "w"], ["y"])],
                                       [("x", _F, [1, 1, 5]), ("ends", _I, [1])], [("y", _F, [1, 1, 4])],
                                       constants=[("w0", np.ones((1, 1, 2), np.float32)),
                                                  ("starts", np.array([0], np.int64))],
                                       value_infos=[("w", _F, [1, 1, 2])]),
                                {"x": np.ones((1, 1, 5), np.float32), "ends": np.array([0], np.int64)}, "refused"),
        "matmul_computed_rank_1": (_model([helper.make_node("Reshape", ["a0", "shape"], ["a"]),
                                           helper.make_node("MatMul", ["a", "b"], ["y"])],
                                          [("a0", _F, ["k"]), ("shape", _I, [1]), ("b", _F, [3, "n"])],
                                          [("y", _F, [2, "n"])], value_infos=[("a", _F, [2, 3])]),
                                   {"a0": np.ones(3, np.float32), "shape": np.array([3], np.int64),
                                    "b": np.ones((3, 0), np.float32)}, "refused"),
        "matmul_fed_rank_1": (_one("MatMul", [("a", _F, [2, 3]), ("b", _F, [3, 2])], [("y", _F, [2, 2])]),
                              {"a": np.ones(3, np.float32), "b": np.ones((3, 0), np.float32)}, "refused"),
        "einsum_fed_rank_1": (_one("Einsum", [("a", _F, ["b", "i", "j"]), ("b", _F, ["b", "j", "k"])],
                                   [("y", _F, ["b", "i", "k"])], {"equation": "bij,bjk->bik"}, opset=12),
                              {"a": np.ones(3, np.float32), "b": np.ones(0, np.float32)}, "refused"),
        "gemm_fed_empty_b": (_one("Gemm", [("a", _F, [2, "k"]), ("b", _F, ["n", "k"]), ("c", _F, ["n"])],
                                  [("y", _F, [2, "n"])], {"transB": 1}, opset=11),
                             {"a": np.ones((2, 0), np.float32), "b": np.ones((3, 0), np.float32),
                              "c": np.ones(3, np.float32)}, "refused"),
        "constant_of_shape_2_62": (_one("ConstantOfShape", [("shape", _I, [2])], [("y", _F, ["a", "b"])]),
                                   {"shape": np.array([2 ** 62, 4], np.int64)}, "refused"),
        "split_negative_part": (_one("Split", [("x", _F, ["n"])], [("y", _F, ["p"]), ("z", _F, ["q"])],
                                     constants=[("split", np.array([2 ** 26 + 4, -2 ** 26], np.int64))]),
                                {"x": _FOUR}, "refused"),
        "split_parts_past_32_bits": (_one("Split", [("x", _F, ["n"])], [("y", _F, ["p"]), ("z", _F, ["q"]),
                                                                        ("w", _F, ["r"])],
                                          constants=[("split", np.array([2 ** 31 - 1, 2 ** 31 - 1, 6], np.int64))]),
                                     {"x": _FOUR}, "refused"),
        # silently wrong
        "expand_2_62": (_one("Expand", [("x", _F, [4]), ("shape", _I, [2])], [("y", _F, ["a", "b"])]),
                        {"x": _FOUR, "shape": np.array([2 ** 62, 4], np.int64)}, "refused"),
        "one_hot_depth_past_32_bits": (_one("OneHot", [("i", _I, ["n"]), ("depth", _I, [1])], [("y", _F, ["a", "b"])],
                                            opset=11, constants=[("values", np.array([0, 1], np.float32))]),
                                       {"i": np.array([1, 3], np.int64), "depth": np.array([2 ** 32 + 5], np.int64)},
                                       "refused"),
        "constant_of_shape_double": (_one("ConstantOfShape", [("shape", _I, [2])], [("y", TensorProto.DOUBLE,
                                                                                    ["a", "b"])], {"value": double}),
                                     {"shape": np.array([2, 3], np.int64)}, [np.full((2, 3), 0.1)]),
        "constant_of_shape_int64_past_2_24": (_one("ConstantOfShape", [("shape", _I, [1])], [("y", _I, ["n"])],
                                                   {"value": numpy_helper.from_array(np.array([2 ** 40 + 3]),
                                                                                     "value")}),
                                              {"shape": np.array([2], np.int64)}, "oracle"),
        "constant_of_shape_double_cumsum": (
            _model([helper.make_node("ConstantOfShape", ["shape"], ["filled"], value=huge_double),
                    helper.make_node("CumSum", ["filled", "axis"], ["y"])], [("shape", _I, [1])],
                   [("y", TensorProto.DOUBLE, ["n"])], constants=[("axis", np.array(0, np.int64))]),
            {"shape": np.array([3], np.int64)}, [np.array([1e300, 2e300, 3e300])]),
        "reduce_max_empty_axis": (_one("ReduceMax", [("x", _F, [2, "e", 3])], [("y", _F, [2, 3])],
                                       {"axes": [1], "keepdims": 0}), {"x": empty},
                                  [np.max(empty, axis=1, initial=-np.inf)]),
        # accepted, then failing when run
        "batch_norm_epsilon_0": (_one("BatchNormalization", [("x", _F, [2, 3, 4])], [("y", _F, [2, 3, 4])],
                                      {"epsilon": 0.0}, constants=statistics), {"x": x}, "close"),
        "reduce_prod_scalar": (_one("ReduceProd", [("x", _F, [])], [("y", _F, [])], {"keepdims": 1}),
                               {"x": np.array(3.5, np.float32)}, "oracle"),
        # unbounded: each asks 8.6-17.2 GB from at most 512 KB of input
        "conv_wide_kernel": (_one("Conv", [("x", _F, [1, 1, "n"])], [("y", _F, [1, 1, "m"])],
                                  constants=[("w", np.ones((1, 1, 32768), np.float32))]),
                             {"x": np.ones((1, 1, 65536), np.float32)}, "refused"),
        "tile_2_32": (_one("Tile", [("x", _F, [1]), ("repeats", _I, [1])], [("y", _F, ["n"])]),
                      {"x": np.ones(1, np.float32), "repeats": np.array([2 ** 32], np.int64)}, "refused"),
        "one_hot_depth_2_30": (_one("OneHot", [("i", _I, ["n"]), ("depth", _I, [1])], [("y", _F, ["a", "b"])],
                                    opset=11, constants=[("values", np.array([0, 1], np.float32))]),
                               {"i": np.array([1, 3], np.int64), "depth": np.array([2 ** 30], np.int64)}, "refused"),
        "one_hot_symbolic_indices": (_one("OneHot", [("i", _I, ["n"])], [("y", _F, ["a", "b"])], opset=11,
                                          constants=[("depth", np.array([2 ** 20], np.int64)),
                                                     ("values", np.array([0, 1], np.float32))]),
                                     {"i": np.zeros(2 ** 12, np.int64)}, "refused"),
        "range_2_31": (_one("Range", [("start", _I, []), ("limit", _I, []), ("delta", _I, [])], [("y", _I, ["n"])],
                            opset=11),
                       {"start": np.array(0, np.int64), "limit": np.array(2 ** 31 - 1, np.int64),
                        "delta": np.array(1, np.int64)}, "refused"),
        "constant_of_shape_2_32_elements": (_one("ConstantOfShape", [("shape", _I, [2])], [("y", _F, ["a", "b"])]),
                                            {"shape": np.array([2 ** 17, 2 ** 15], np.int64)}, "refused"),
        "expand_2_32_elements": (_one("Expand", [("x", _F, [1]), ("shape", _I, [2])], [("y", _F, ["a", "b"])]),
                                 {"x": np.ones(1, np.float32), "shape": np.array([2 ** 17, 2 ** 15], np.int64)},
                                 "refused"),
        "expand_broadcast_2_32_elements": (_one("Expand", [("x", _F, [2 ** 15, 1]), ("shape", _I, [2])],
                                                [("y", _F, ["a", "b"])]),
                                           {"x": np.ones((2 ** 15, 1), np.float32),
                                            "shape": np.array([1, 2 ** 17], np.int64)}, "refused"),
        "einsum_outer_2_16": (_one("Einsum", [("a", _F, ["i"]), ("b", _F, ["j"])], [("y", _F, ["i", "j"])],
                                   {"equation": "i,j->ij"}, opset=12),
                              {"a": np.ones(2 ** 16, np.float32), "b": np.ones(2 ** 16, np.float32)}, "refused"),
        "pad_2_32_symbolic": (_one("Pad", [("x", _F, ["n"])], [("y", _F, ["m"])], opset=11,
                                   constants=[("pads", np.array([0, 2 ** 32], np.int64))]),
                              {"x": _FOUR}, "refused"),
        "pad_2_28_symbolic": (_one("Pad", [("x", _F, ["n"])], [("y", _F, ["m"])], opset=11,
                                   constants=[("pads", np.array([0, 2 ** 28], np.int64))]),
                              {"x": _FOUR}, "refused"),
        "slice_strided_axis_past_32_bits": (_one("Slice", [("x", _F, [0, "n"])], [("y", _F, [0, "m"])],
                                                 constants=[("starts", np.array([0], np.int64)),
                                                            ("ends", np.array([2 ** 63 - 1], np.int64)),
                                                            ("axes", np.array([1], np.int64)),
                                                            ("steps", np.array([2], np.int64))]),
                                             {"x": np.zeros((0, 2 ** 33 + 2 ** 31), np.float32)}, "refused"),
        "reshape_constant_negative_dims": (_one("Reshape", [("x", _F, [4])], [("y", _F, ["a", "b"])],
                                                constants=[("shape", np.array([-2, -1], np.int64))]),
                                           {"x": _FOUR}, "refused"),
        "constant_of_shape_constant_negative_dims": (_one("ConstantOfShape", [], [("y", _F, ["a", "b"])],
                                                          constants=[("shape", np.array([-2, -2], np.int64))]),
                                                     {}, "refused"),
        # fed inputs against the declarations
        "input_of_another_type": (_one("Relu", [("x", _F, [4])], [("y", _F, [4])]),
                                  {"x": np.ones(4, np.float64)}, "refused"),
        "input_of_another_dim": (_one("Relu", [("x", _F, [4])], [("y", _F, [4])]),
                                 {"x": np.ones(5, np.float32)}, "refused"),
        "inputs_tied_dims_differ": (_one("Add", [("a", _F, ["n"]), ("b", _F, ["n"])], [("y", _F, ["n"])]),
                                    {"a": np.ones(4, np.float32), "b": np.ones(1, np.float32)}, "refused"),
        # the same forms on ordinary values: the checks take nothing from them
        "ordinary_sizes": (_model([helper.make_node("ConstantOfShape", ["shape"], ["filled"]),
                                   helper.make_node("Reshape", ["x", "target"], ["folded"]),
                                   helper.make_node("Tile", ["folded", "repeats"], ["tiled"]),
                                   helper.make_node("Expand", ["tiled", "shape"], ["wide"]),
                                   helper.make_node("Add", ["wide", "filled"], ["y"])],
                                  [("x", _F, [4]), ("shape", _I, [2]), ("target", _I, [2]), ("repeats", _I, [2])],
                                  [("y", _F, ["a", "b"])]),
                           {"x": np.arange(4, dtype=np.float32), "shape": np.array([2, 4], np.int64),
                            "target": np.array([-1, 2], np.int64), "repeats": np.array([1, 2], np.int64)}, "oracle"),
    }


_CHILD = r"""
import base64, io, json, os, resource, signal, sys, time, warnings
import numpy as np
import onnx
warnings.simplefilter("ignore")
import pycumsum_op.onnx
from pycumsum_op.input_limits import InputTooLarge
from pycumsum_op.onnx.ops.contract import FormRefused
from pycumsum_op.onnx.run_checks import RunRefused

cases = json.load(open(sys.argv[1]))
sentinel = np.array(cases.pop("__sentinel__"), np.float32)
for name, (model_text, feeds_text) in sorted(cases.items()):
    read, write = os.pipe()
    started = time.time()
    pid = os.fork()
    if pid == 0:  # the case: capped, its answer one JSON line on the pipe
        os.close(read)
        resource.setrlimit(resource.RLIMIT_AS, (%(space)d, %(space)d))
        signal.alarm(%(seconds)d)
        model = onnx.load_model_from_string(base64.b64decode(model_text))
        feeds = {key: np.load(io.BytesIO(base64.b64decode(value))) for key, value in feeds_text.items()}
        try:
            rep = pycumsum_op.onnx.prepare(model)
            rep.workspace.FeedBlob("sentinel", sentinel)
            outputs = list(rep.run(feeds))
            saved = []
            for value in outputs:
                buffer = io.BytesIO()
                np.save(buffer, np.asarray(value))
                saved.append(base64.b64encode(buffer.getvalue()).decode())
            answer = ["ran", saved]
        except (FormRefused, InputTooLarge, RunRefused) as error:
            answer = ["refused", type(error).__name__ + ": " + str(error)]
        except Exception as error:
            answer = ["failed", type(error).__name__ + ": " + str(error)]
        os.write(write, (json.dumps(answer) + "\n").encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    print(json.dumps([name, code, time.time() - started, usage.ru_maxrss * 1024,
                      json.loads(text) if text else None]), flush=True)
"""


def _array_text(value) -> str:
    buffer = io.BytesIO()
    np.save(buffer, value)
    return base64.b64encode(buffer.getvalue()).decode()


@needs_onnx_backend
def test_hostile_models_and_inputs_are_refused_in_one_line_or_computed_right(tmp_path):
    cases = _cases()
    listed = {name: [base64.b64encode(model.SerializeToString()).decode(),
                     {key: _array_text(value) for key, value in feeds.items()}]
              for name, (model, feeds, _) in cases.items()}
    listed["__sentinel__"] = SENTINEL.tolist()
    (tmp_path / "cases.json").write_text(json.dumps(listed))
    code = _CHILD % {"space": ADDRESS_SPACE, "seconds": SECONDS}
    returncode, lines, stderr = in_child("import sys; sys.argv[1:] = [{!r}]\n{}".format(str(tmp_path / "cases.json"),
                                                                                     code), timeout=600)
    assert returncode == 0, stderr[-3000:]
    results = {line[0]: line[1:] for line in lines}
    assert sorted(results) == sorted(cases), stderr[-3000:]
    pattern = SENTINEL[:8].tobytes()
    for name, (model, feeds, expected) in sorted(cases.items()):
        code, seconds, resident, answer = results[name]
        assert code >= 0, (name, "killed by signal", -code)
        assert code == 0 and answer is not None, (name, code, stderr[-2000:])
        assert seconds < SECONDS and resident < RESIDENT, (name, seconds, resident)
        kind, detail = answer
        if expected == "refused":
            assert kind == "refused" and "\n" not in detail, (name, kind, detail)
            continue
        assert kind == "ran", (name, kind, detail)
        outputs = [np.load(io.BytesIO(base64.b64decode(text))) for text in detail]
        assert all(pattern not in output.tobytes() for output in outputs), name
        wanted = onnxruntime_outputs(model, feeds) if expected in ("oracle", "close") else expected
        for got, want in zip(outputs, wanted):
            assert got.dtype == want.dtype and got.shape == want.shape, (name, got, want)
            if expected == "close":  # onnxruntime divides by the root, torch multiplies by its inverse
                assert np.allclose(got, want, rtol=1e-6, atol=0, equal_nan=True), (name, got, want)
            else:
                np.testing.assert_array_equal(got, want, err_msg=name)
