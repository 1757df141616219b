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

from .patterns import CUMSUM_OP, Constants, CumsumIdiom, int_arg

UNREGISTERED_TYPES = ("CumSum", "ToDense")


def _axis(op, index: int, constants: Constants):
    """(axis, axis blob): from ``axis`` / ``axes`` (exactly one), else a constant second input, else that
    input read on every run; None when the op names no single axis."""
    for arg in op.arg:
        if arg.name == "axis" and arg.HasField("i"):
            return arg.i, ""
        if arg.name == "axes":
            return (arg.ints[0], "") if len(arg.ints) == 1 else None
    if len(op.input) == 2:
        value = constants.value(op.input[1], index)
        if value is None:
            return None, op.input[1]
        return (int(value.reshape(-1)[0]), "") if value.size == 1 else None
    return None


def match_cumsum_op(netdef, index: int, init_net=None, constants=None) -> Optional[CumsumIdiom]:
    """The PyCumSum an op of type CumSum stands for, or None (not CumSum, or its axis is not one axis).
    ``constants``: a `Constants` of the net and ``init_net``, when one is at hand."""
    op = netdef.op[index]
    if op.type != "CumSum" or len(op.input) not in (1, 2) or len(op.output) != 1:
        return None
    axis = _axis(op, index, constants or Constants(netdef, init_net))
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


def _first_reader(netdef, readers: dict, blob: str, op_type: str, after: int, accept=lambda op: True):
    """The first op after op ``after`` of type ``op_type`` that reads ``blob`` (and that ``accept``s), or None."""
    return next((index for index in readers.get(blob, ()) if index > after and netdef.op[index].type == op_type
                 and accept(netdef.op[index])), None)


def _iteration(netdef, readers: dict, slice_index: int):
    """(ops, running blob after, output after) of one iteration starting at Slice op ``slice_index``, or None."""
    ops = netdef.op
    running = ops[slice_index].input[0]
    expand = _first_reader(netdef, readers, ops[slice_index].output[0], "Expand", slice_index) \
        if ops[slice_index].output else None
    expanded = None if expand is None or not ops[expand].output else ops[expand].output[0]
    # net.Add(running, expanded), as the answer types it, makes `expanded` Add's output, not its second input
    add = None if expanded is None else _first_reader(
        netdef, readers, running, "Add", expand,
        lambda op: op.output and expanded in list(op.input) + list(op.output))
    if add is None:
        return None
    concat = _first_reader(netdef, readers, ops[add].output[0], "Concat", add)
    if concat is None or len(ops[concat].input) != 2 or ops[concat].input[1] != ops[add].output[0]:
        return None
    return (slice_index, expand, add, concat), ops[add].output[0], ops[concat].output[0]


def match_concat_loops(netdef) -> List[ConcatLoop]:
    """Each Slice + Expand + Add + Concat loop of ``netdef`` (one iteration or more, chained through the
    running blob and the output)."""
    ops, loops, taken, readers = netdef.op, [], set(), {}
    for index, op in enumerate(ops):
        for blob in set(op.input):
            readers.setdefault(blob, []).append(index)
    for start, op in enumerate(ops):
        if op.type != "Slice" or start in taken or not op.input:
            continue
        iteration = _iteration(netdef, readers, start)
        if iteration is None:
            continue
        blob_in = op.input[0]
        if ops[iteration[0][3]].input[0] != blob_in:  # the loop's output starts as its input
            continue
        members, count = list(iteration[0]), 1
        while True:
            running = iteration[1]
            following = _first_reader(netdef, readers, running, "Slice", members[-1],
                                      lambda op, running=running: op.input[0] == running)
            step = None if following is None else _iteration(netdef, readers, following)
            if step is None or ops[step[0][3]].input[0] != iteration[2]:
                break
            members += step[0]
            iteration, count = step, count + 1
        taken.update(members)
        expands = [ops[index] for index in members if ops[index].type == "Expand"]
        loops.append(ConcatLoop(tuple(sorted(members)), blob_in, iteration[2], int_arg(ops[members[3]], "axis", 1),
                                count, any(len(expand.input) == 1 for expand in expands)))
    return loops
