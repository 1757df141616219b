"""LSTM, GRU and RNN as Caffe2's RecurrentNetwork, built by Caffe2's own RNN converter: ONNX's default activations
(RNN: Tanh or Relu), no clip, no peepholes (refused by the translation)."""
from caffe2.proto import caffe2_pb2
from caffe2.python import core, utils
from caffe2.python.onnx.backend import Caffe2Backend, OnnxNode  # torch >= 1.10: checked by pycumsum_op.onnx
from onnx import TensorProto, helper

from ..run_checks import make_op
from .contract import ANY, FLOAT, NEWEST, ZERO_ONE, Form, declare, given, label
from .helpers import attribute, constant_blob, int64_scalar, refuse

_LSTM = {"hidden_size": ANY, "direction": frozenset(["forward", "bidirectional"]), "input_forget": frozenset([0])}
_GRU = {"hidden_size": ANY, "direction": frozenset(["forward", "bidirectional"]), "linear_before_reset": ZERO_ONE}
#: Caffe2's BasicRNN takes one activation for both directions
_RNN = {"hidden_size": ANY, "direction": frozenset(["forward", "bidirectional"]),
        "activations": frozenset([("Tanh",), ("Relu",), ("Tanh", "Tanh"), ("Relu", "Relu")])}


#: ONNX LSTM / GRU / RNN -> (gates per direction, initial states, outputs)
_RECURRENT = {"LSTM": (4, 2, 3), "GRU": (3, 1, 2), "RNN": (1, 1, 2)}


def _zero_states(node, x: str, directions: int, hidden_size: int, fresh) -> tuple:
    """(ops, blob): zeros of shape (directions, batch, hidden_size), the batch read off ``x`` on every run."""
    shape, batch, dims, zeros = fresh(), fresh(), fresh(), fresh()
    front, front_fill = constant_blob([directions], fresh)
    back, back_fill = constant_blob([hidden_size], fresh)
    return [make_op("Shape", [x], [shape], node.name), make_op("Slice", [shape], [batch], node.name, starts=[1],
                                                               ends=[2]),
            front_fill, back_fill, make_op("Concat", [front, batch, back], [dims, fresh()], node.name, axis=0),
            make_op("ConstantFill", [dims], [zeros], node.name, input_as_shape=1, value=0.0)], zeros


def _checked_lengths(node, opset, x: str, lengths: str, fresh) -> list:
    """Ops that fail the net unless every sequence length lies in [0, seq_length]: Caffe2's recurrent ops do not
    check them (a negative one corrupts the process' memory; one past the end is read as the end)."""
    length, wide, zero, low, high, valid = (fresh() for _ in range(6))
    return [make_op("Shape", [x], [length], node.name, axes=[0]),
            make_op("Cast", [lengths], [wide], node.name, to=caffe2_pb2.TensorProto.INT64),
            int64_scalar(node, zero, 0),
            make_op("GE", [wide, zero], [low], node.name), make_op("LE", [wide, length], [high], node.name),
            make_op("And", [low, high], [valid], node.name),
            make_op("Assert", [valid], [], node.name, error_msg="{}: input 4 (sequence_lens) {!r} holds a length "
                "outside [0, sequence length]".format(label(node, opset), lengths))]


#: the recurrent inputs' names (ONNX's), by position
_RECURRENT_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c")
#: a dim that is the batch size (X's dim 1), and one that is free (X's sequence length)
_BATCH, _FREE = "batch", None


def _recurrent_shapes(gates: int, directions: int, hidden_size: int, input_size: int) -> dict:
    """Input position -> the dims ONNX requires of it (ints, `_BATCH` or `_FREE`)."""
    return {0: [_FREE, _BATCH, input_size], 1: [directions, gates * hidden_size, input_size],
            2: [directions, gates * hidden_size, hidden_size], 3: [directions, 2 * gates * hidden_size],
            4: [_BATCH], 5: [directions, _BATCH, hidden_size], 6: [directions, _BATCH, hidden_size]}


def _spelled(want) -> str:
    return "[{}]".format(", ".join("seq_length" if dim is _FREE else str(dim) for dim in want))


def _checked_recurrent_shapes(node, opset, facts, positions, shapes, fresh) -> list:
    """Every given recurrent input's shape against ``shapes`` (`_recurrent_shapes`): a dim the model states is
    checked here (`FormRefused`), one it leaves symbolic by ops that fail the net in one line before Caffe2's
    RecurrentNetwork reads it. That op checks none of them: too few directions in an initial state or in R make
    it write past its buffers (the process dies: "double free or corruption", SIGSEGV), an empty one gives a
    wrong sequence length, a wrong batch or input size stops it in an enforce naming no ONNX node."""
    x_dims = facts.dims(node.input[0])
    batch = x_dims[1] if x_dims is not None and len(x_dims) == 3 else None  # the run's batch: X's dim 1
    ops, batch_blob = [], None
    for position in positions:
        name, want = node.input[position], shapes[position]
        what = "input {} ({}) {!r}".format(position, _RECURRENT_INPUTS[position], name)
        dims = facts.dims(name)
        spelled = _spelled(["batch {}".format(batch) if d is _BATCH and batch is not None else d for d in want])
        stated = "[{}]".format(", ".join("?" if dim is None else str(dim) for dim in dims or []))
        if dims is not None and len(dims) != len(want):
            raise refuse(node, opset, "{} has rank {}, but its dims must be {}".format(what, len(dims), spelled))
        if dims is not None and any(dim is not None and expected is not _FREE and (
                dim != expected if expected is not _BATCH else batch is not None and dim != batch)
                for dim, expected in zip(dims, want)):
            raise refuse(node, opset, "{} has dims {}, but hidden_size={}, {} direction(s), W and X make them "
                                       "{}".format(what, stated, shapes[2][2], shapes[1][0], spelled))
        if dims is not None and all(expected is _FREE or (position == 0 and expected is _BATCH) or (
                dim is not None and (expected is not _BATCH or batch is not None))
                for dim, expected in zip(dims, want)):
            continue  # every dim the run reads is stated and right
        message = "{}: {} does not have the dims {} (from hidden_size, direction, W and X's dim 1)".format(
            label(node, opset), what, _spelled(["batch" if d is _BATCH else d for d in want]))
        shape = fresh()
        ops.append(make_op("Shape", [name], [shape], node.name))
        if dims is None:  # the rank first: the dims are then compared position by position
            count, rank, same = fresh(), fresh(), fresh()
            ops += [make_op("Size", [shape], [count], node.name), int64_scalar(node, rank, len(want)),
                    make_op("EQ", [count, rank], [same], node.name),
                    make_op("Assert", [same], [], node.name, error_msg=message)]
        pieces = []
        for k, expected in enumerate(want):
            if expected is _BATCH and position != 0:
                if batch_blob is None:  # X is checked first: its rank is 3 here
                    whole, batch_blob = fresh(), fresh()
                    ops += [make_op("Shape", [node.input[0]], [whole], node.name),
                            make_op("Slice", [whole], [batch_blob], node.name, starts=[1], ends=[2])]
                pieces.append(batch_blob)
            elif expected is _FREE or expected is _BATCH:  # X's own sequence length and batch size
                piece = fresh()
                ops.append(make_op("Slice", [shape], [piece], node.name, starts=[k], ends=[k + 1]))
                pieces.append(piece)
            else:
                piece, fill = constant_blob([expected], fresh)
                ops.append(fill)
                pieces.append(piece)
        expected_dims, equal = fresh(), fresh()
        ops += [make_op("Concat", pieces, [expected_dims, fresh()], node.name, axis=0),
                make_op("EQ", [shape, expected_dims], [equal], node.name),
                make_op("Assert", [equal], [], node.name, error_msg=message)]
    # RecurrentNetwork fails on an empty batch, in an enforce naming no ONNX node (onnxruntime 1.19.2 aborts the
    # process on one)
    if batch == 0:
        raise refuse(node, opset, "input 0 (X) {!r} has batch size 0, on which Caffe2's RecurrentNetwork "
                                   "fails".format(node.input[0]))
    if batch is None:
        whole, count, zero, positive = fresh(), fresh(), fresh(), fresh()
        ops += [make_op("Shape", [node.input[0]], [whole], node.name),
                make_op("Slice", [whole], [count], node.name, starts=[1], ends=[2]),
                int64_scalar(node, zero, 0),
                make_op("GT", [count, zero], [positive], node.name),
                make_op("Assert", [positive], [], node.name, error_msg="{}: input 0 (X) {!r} has batch size 0, on "
                    "which Caffe2's RecurrentNetwork fails".format(label(node, opset), node.input[0]))]
    return ops


@declare("LSTM", Form((7, 13), _LSTM), Form((14, NEWEST), dict(_LSTM, layout=frozenset([0]))), types=FLOAT)
@declare("GRU", Form((7, 13), _GRU), Form((14, NEWEST), dict(_GRU, layout=frozenset([0]))), types=FLOAT)
@declare("RNN", Form((7, 13), _RNN), Form((14, NEWEST), dict(_RNN, layout=frozenset([0]))), types=FLOAT)
def _recurrent(node, facts, opset, fresh):
    """ONNX LSTM, GRU and RNN as Caffe2's C++ ``RecurrentNetwork`` operator, built by Caffe2's own RNN converter
    (``Caffe2Backend._create_rnn_variant``: ``rnn_cell.LSTM`` / ``gru_cell.GRU`` / ``rnn_cell.BasicRNN``, ONNX's
    gates reordered into Caffe2's: LSTM i o f c -> i f o c, GRU z r h -> r z h), which cannot take
    torch.onnx.export's nodes as they are written:

    - it finds the input size only in a graph input or value info named like W, and torch's W is an
      initializer that is neither: the size is given from the model's facts (W's dims, else X's last dim);
    - it reshapes W, R and B in place (to drop the direction axis), so a second run of the net would fail and
      the model's own weights would change: it is given copies, made on every run;
    - it takes every input and output by position: an absent B becomes zeros, absent initial states zeros of
      the run's batch size, and the outputs the model does not read get fresh names (their ops are dropped);
    - with both directions its Y is (seq, hidden, batch, 2), not ONNX's (seq, 2, batch, hidden) (torch's own
      export reshapes Y back to (seq, batch, 2 * hidden) and hides it): its Reshape is corrected.
    """
    gates, states, outputs = _RECURRENT[node.op_type]
    if attribute(node, "hidden_size") is None:
        raise refuse(node, opset, "attribute hidden_size is not given")
    hidden_size = int(attribute(node, "hidden_size"))
    directions = 2 if attribute(node, "direction", b"forward") == b"bidirectional" else 1
    if hidden_size < 1:
        raise refuse(node, opset, "hidden_size {} is not positive".format(hidden_size))
    x, w = node.input[:2]
    if facts.elem_type(x) != TensorProto.FLOAT:
        raise refuse(node, opset, "input {!r} is not float (Caffe2's recurrent cells compute in float)".format(x))
    activations = attribute(node, "activations")
    if activations is not None and len(activations) != directions:
        raise refuse(node, opset, "{} activations for {} direction(s)".format(len(activations), directions))
    if given(node, 7):
        raise refuse(node, opset, "input 7 (P, the peephole weights) is given; Caffe2's LSTM cell has no "
                                   "peepholes")
    w_dims, x_dims = facts.dims(w), facts.dims(x)
    expected = [directions, gates * hidden_size]
    if w_dims and len(w_dims) == 3 and any(dim is not None and dim != want for dim, want in zip(w_dims, expected)):
        raise refuse(node, opset, "W {!r} has dims {}, but hidden_size={} and {} direction(s) make them [{}, {}, "
                                   "input size]".format(w, w_dims, hidden_size, directions, *expected))
    input_size = w_dims[2] if w_dims and len(w_dims) == 3 else None
    if input_size is None and x_dims and len(x_dims) == 3:
        input_size = x_dims[2]
    if input_size is None:
        raise refuse(node, opset, "the input size is unknown (neither W {!r} nor X {!r} has a known last "
                                   "dim)".format(w, x))
    shapes = _recurrent_shapes(gates, directions, hidden_size, input_size)
    ops = _checked_recurrent_shapes(node, opset, facts, [p for p in range(5 + states) if given(node, p)], shapes,
                                    fresh)
    ops += _checked_lengths(node, opset, x, node.input[4], fresh) if given(node, 4) else []
    inputs = [x]
    for position in (1, 2, 3):
        copy = fresh()
        if given(node, position):
            ops.append(make_op("Copy", [node.input[position]], [copy], node.name))
        else:  # B
            ops.append(make_op("ConstantFill", [], [copy], node.name, shape=[directions, 2 * gates * hidden_size],
                           value=0.0))
        inputs.append(copy)
    inputs.append(node.input[4] if given(node, 4) else "")  # sequence_lens
    zeros = None
    for position in range(5, 5 + states):
        if given(node, position):
            inputs.append(node.input[position])
            continue
        if zeros is None:
            more, zeros = _zero_states(node, x, directions, hidden_size, fresh)
            ops += more
        inputs.append(zeros)
    wanted = [name for name in node.output[:outputs] if name]
    names = [name or fresh() for name in list(node.output[:outputs]) + [""] * (outputs - len(node.output))]
    stock_node = OnnxNode(node)
    stock_node.inputs, stock_node.outputs = inputs, names
    for default in ("layout", "input_forget"):  # 0, the forms' only value: the converter knows neither
        stock_node.attrs.pop(default, None)
    stand_in = helper.make_model(helper.make_graph([], "stand_in", [], [], value_info=[
        helper.make_tensor_value_info(inputs[1], TensorProto.FLOAT, [directions, gates * hidden_size, input_size])]))
    with core.NameScope("", reset=True):
        converted = Caffe2Backend._create_rnn_variant(stand_in, stand_in, stock_node, opset)
    for op in list(converted.init_ops) + list(converted.ops):
        if op.output and op.output[0] in names and op.output[0] not in wanted:
            continue  # an output the model does not read
        if op.type == "Reshape" and [list(arg.ints) for arg in op.arg if arg.name == "shape"] == [[0, 0, -1, 2]]:
            # both directions' outputs, concatenated as (seq, batch, 2 * hidden), go to (seq, 2, batch, hidden)
            # through (seq, batch, 2, hidden); the converter's (seq, batch, hidden, 2) gives (seq, hidden, batch, 2)
            del op.arg[:]
            op.arg.extend([utils.MakeArgument("shape", [0, 0, 2, -1])])
        op.name = node.name
        ops.append(op)
    return ops
