"""Recognises what circulating answers for torch.cumsum in Caffe2 leave in saved nets.

- an op of type ``CumSum`` (ONNX's name; Caffe2 has no such operator, so creating the net fails): a
  `CumsumIdiom` of form `CUMSUM_OP`, axis from its ``axis`` / ``axes`` argument (one axis) or its second
  input (a constant, or read on every run as PyCumSum's two-input form does), ONNX's ``exclusive`` / ``reverse``;
- an op of type ``ToDense`` (no Caffe2 operator either): `to_dense_ops`; EnsureDense is Caffe2's op for it;
- the Slice + Expand + Add + Concat loop (`match_concat_loops`): one iteration slices the running blob,
  expands the slice, adds it to the running blob and concatenates the result to the output. Its Expand
  lacks the shape input (Caffe2 refuses the net when it runs), and even with one it concatenates growing
  blobs: it is not a cumulative sum, and no edit keeps its meaning.

>>> from caffe2.python import core
>>> net = core.Net("doc_answers")
>>> net.Proto().op.extend([core.CreateOperator("CumSum", ["doc_ax"], ["doc_ay"], axes=[1], exclusive=1)])
>>> match_cumsum_op(net.Proto(), 0).call()
"PyCumSum('doc_ax', 'doc_ay', axis=1, exclusive=True)"
"""
from typing import List, NamedTuple, Optional, Tuple

from .patterns import CUMSUM_OP, CumsumIdiom, constant_int_blob, int_arg

UNREGISTERED_TYPES = ("CumSum", "ToDense")


def _axis(op, netdef, index: int, init_net):
    """(axis, axis blob): from ``axis`` / ``axes`` (exactly one), else a constant second input, else that
    input read on every run; None when the op names no single axis."""
    for arg in op.arg:
        if arg.name == "axis" and arg.HasField("i"):
            return arg.i, ""
        if arg.name == "axes":
            return (arg.ints[0], "") if len(arg.ints) == 1 else None
    if len(op.input) == 2:
        value = constant_int_blob(op.input[1], netdef, index, init_net)
        if value is None:
            return None, op.input[1]
        return (int(value.reshape(-1)[0]), "") if value.size == 1 else None
    return None


def match_cumsum_op(netdef, index: int, init_net=None) -> Optional[CumsumIdiom]:
    """The PyCumSum an op of type CumSum stands for, or None (not CumSum, or its axis is not one axis)."""
    op = netdef.op[index]
    if op.type != "CumSum" or len(op.input) not in (1, 2) or len(op.output) != 1:
        return None
    axis = _axis(op, netdef, index, init_net)
    flags = [int_arg(op, name, 0) for name in ("exclusive", "reverse")]
    if axis is None or any(flag not in (0, 1) for flag in flags):
        return None
    return CumsumIdiom(CUMSUM_OP, (index,), ("CumSum",), op.input[0], op.output[0], axis[0], bool(flags[0]), None,
                       reverse=bool(flags[1]), axis_blob=axis[1])


def to_dense_ops(netdef) -> List[int]:
    """Indices of the ToDense ops (one input, one output: what the answer meant, EnsureDense, can stand in)."""
    return [index for index, op in enumerate(netdef.op)
            if op.type == "ToDense" and len(op.input) == 1 and len(op.output) == 1]


class ConcatLoop(NamedTuple):
    """The Slice + Expand + Add + Concat loop: its ops, the blob it starts from, its output, the iterations."""
    ops: Tuple[int, ...]
    blob_in: str
    blob_out: str
    axis: int
    iterations: int
    expand_without_shape: bool


def _iteration(netdef, slice_index: int):
    """(ops, running blob after, output after) of one iteration starting at Slice op ``slice_index``, or None."""
    ops = netdef.op
    running = ops[slice_index].input[0] if ops[slice_index].input else None

    def reader(blob, op_type, after):
        return next((index for index in range(after + 1, len(ops))
                     if ops[index].type == op_type and blob in ops[index].input), None)
    expand = reader(ops[slice_index].output[0], "Expand", slice_index) if ops[slice_index].output else None
    expanded = None if expand is None or not ops[expand].output else ops[expand].output[0]
    # net.Add(running, expanded), as the answer types it, makes `expanded` Add's output, not its second input
    add = None if expanded is None else next((index for index in range(expand + 1, len(ops)) if ops[index].type == "Add"
                                              and running in ops[index].input and ops[index].output
                                              and expanded in list(ops[index].input) + list(ops[index].output)), None)
    if add is None:
        return None
    concat = reader(ops[add].output[0], "Concat", add)
    if concat is None or len(ops[concat].input) != 2 or ops[concat].input[1] != ops[add].output[0]:
        return None
    return (slice_index, expand, add, concat), ops[add].output[0], ops[concat].output[0]


def match_concat_loops(netdef) -> List[ConcatLoop]:
    """Each Slice + Expand + Add + Concat loop of ``netdef`` (one iteration or more, chained through the
    running blob and the output)."""
    ops, loops, taken = netdef.op, [], set()
    for start, op in enumerate(ops):
        if op.type != "Slice" or start in taken or not op.input:
            continue
        iteration = _iteration(netdef, start)
        if iteration is None:
            continue
        blob_in = op.input[0]
        if ops[iteration[0][3]].input[0] != blob_in:  # the loop's output starts as its input
            continue
        members, count = list(iteration[0]), 1
        while True:
            following = next((index for index in range(members[-1] + 1, len(ops)) if ops[index].type == "Slice"
                              and ops[index].input and ops[index].input[0] == iteration[1]), None)
            step = None if following is None else _iteration(netdef, following)
            if step is None or ops[step[0][3]].input[0] != iteration[2]:
                break
            members += step[0]
            iteration, count = step, count + 1
        taken.update(members)
        expands = [ops[index] for index in members if ops[index].type == "Expand"]
        loops.append(ConcatLoop(tuple(sorted(members)), blob_in, iteration[2], int_arg(ops[members[3]], "axis", 1),
                                count, any(len(expand.input) == 1 for expand in expands)))
    return loops
