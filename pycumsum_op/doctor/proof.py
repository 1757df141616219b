"""Before `fix` writes a replaced idiom, it runs the idiom's own ops and their replacement on the same random
input, in a workspace of its own, and measures how far apart they are (`replacement_error`).

A CumSum-typed op has no Caffe2 operator to run: its replacement is held against ONNX's definition of CumSum
(numpy, float64). Other dims are small (3); the scanned axis has the idiom's own length C (4 when no constant
fixes it). The user's workspace is not touched: its blobs the idiom reads as constants are copied over.
"""
import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import workspace

from .patterns import CUMSUM_OP, SPARSE_LENGTHS, Constants

_SCRATCH = "pycumsum_op_doctor_proof"
_OTHER_SIZE = 3
#: What the proof runs in place of ToDense (no Caffe2 operator): the conversion it stands for.
_RUNNABLE = {"ToDense": "EnsureDense"}


def _input_shape(netdef, idiom) -> tuple:
    """A shape whose axis ``idiom.axis`` has C entries, of the rank the idiom's ops fix (else 2)."""
    rank = 2
    if idiom.form == SPARSE_LENGTHS:
        axes = [arg for arg in netdef.op[idiom.ops[0]].arg if arg.name == "axes"]
        rank = len(axes[0].ints) if axes and axes[0].ints else 2
    axis = 1 if idiom.axis is None else idiom.axis
    rank = max(rank, axis + 1 if axis >= 0 else -axis)
    shape = [_OTHER_SIZE] * rank
    shape[axis] = idiom.columns or 4
    return tuple(shape)


def _onnx_cumsum(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """ONNX CumSum in float64: the running sum along ``axis``, shifted by one (exclusive), from the end (reverse)."""
    values = np.flip(x, axis) if reverse else x
    result = np.cumsum(values, axis=axis, dtype=np.float64)
    if exclusive:
        result = result - values
    return np.flip(result, axis) if reverse else result


def _constant_sources(netdef, idiom, init_net):
    """(fill ops to run, {blob: value from the workspace}) for each blob the idiom's ops read but do not make."""
    made = {blob for index in idiom.ops for blob in netdef.op[index].output}
    constants = Constants(netdef, init_net)
    fills, fed = [], {}
    for index in idiom.ops:
        for blob in netdef.op[index].input:
            if blob in made or blob == idiom.blob_in or blob in fed or any(blob in op.output for op in fills):
                continue
            fill = constants.fill_op(blob, idiom.ops[0])
            if fill is not None:
                fills.append(fill)
            else:
                fed[blob] = workspace.FetchBlob(blob)
    return fills, fed


def _runnable(op):
    if op.type not in _RUNNABLE:
        return op
    runnable = caffe2_pb2.OperatorDef()
    runnable.CopyFrom(op)
    runnable.type = _RUNNABLE[op.type]
    return runnable


def replacement_error(netdef, idiom, replacement, init_net=None, seed: int = 0) -> float:
    """max |idiom - replacement| / max(1, max |idiom|) on one random input; ``replacement`` is a list of ops
    writing ``idiom.blob_out`` from ``idiom.blob_in``."""
    shape = _input_shape(netdef, idiom)
    x = np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)
    axis = 1 if idiom.axis is None else idiom.axis
    fills, fed = ([], {}) if idiom.form == CUMSUM_OP else _constant_sources(netdef, idiom, init_net)
    previous = workspace.CurrentWorkspace()
    workspace.SwitchWorkspace(_SCRATCH, True)
    try:
        outputs = []
        runs = [replacement] if idiom.form == CUMSUM_OP else [[_runnable(netdef.op[i]) for i in idiom.ops], replacement]
        for ops in runs:
            workspace.ResetWorkspace()
            for blob, value in fed.items():
                workspace.FeedBlob(blob, value)
            workspace.FeedBlob(idiom.blob_in, x)
            if idiom.axis_blob:
                workspace.FeedBlob(idiom.axis_blob, np.array(axis, dtype=np.int64))
            workspace.RunOperatorsOnce(list(fills) + list(ops))
            outputs.append(workspace.FetchBlob(idiom.blob_out).astype(np.float64))
        if idiom.form == CUMSUM_OP:
            outputs.insert(0, _onnx_cumsum(x.astype(np.float64), axis, idiom.exclusive, idiom.reverse))
    finally:
        workspace.ResetWorkspace()
        workspace.SwitchWorkspace(previous)
    reference, replaced = outputs
    if reference.shape != replaced.shape:
        return float("inf")
    return float(np.abs(reference - replaced).max(initial=0.0) / max(1.0, np.abs(reference).max(initial=0.0)))
