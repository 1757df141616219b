"""`OpEmitter`: appends Caffe2 OperatorDefs with fresh intermediate blob names on one device.

Both lowering targets (`aten`, `portable`) write their ops through it, so every op of a lowered
PyCumSum sits on the replaced op's device and no intermediate name clashes with a blob of the net.

>>> emitter = OpEmitter(taken={"y_scan1"}, base="y")
>>> emitter.fresh()
'y_scan2'
>>> emitter.op("Copy", ["x"], ["y"]).type, [op.type for op in emitter.ops]
('Copy', ['Copy'])
"""
import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import core

from ..ops.builders import _CAFFE2_TENSOR_TYPES

#: numpy dtype -> Caffe2 TensorProto type, for every dtype a lowered scan reads or writes.
TENSOR_TYPES = dict(_CAFFE2_TENSOR_TYPES)
TENSOR_TYPES.update({
    np.dtype(np.bool_): caffe2_pb2.TensorProto.BOOL,
    np.dtype(np.int8): caffe2_pb2.TensorProto.INT8,
    np.dtype(np.uint8): caffe2_pb2.TensorProto.UINT8,
    np.dtype(np.int16): caffe2_pb2.TensorProto.INT16,
    np.dtype(np.uint16): caffe2_pb2.TensorProto.UINT16,
})
#: Caffe2 TensorProto type -> numpy dtype.
NUMPY_TYPES = {proto: dtype for dtype, proto in TENSOR_TYPES.items()}


class OpEmitter(object):
    """Collects ops; `fresh` names avoid ``taken`` (which it extends); ops get ``like``'s device.

    ``copy_outputs``: the outputs are always written by a final Copy, which writes into the memory the
    output blob already has. ATen ops give their output new memory, which would cut a blob that shares
    another's memory loose from it: a RecurrentNetwork step net's links are such blobs.
    """

    def __init__(self, taken, base: str, like=None, copy_outputs=False):
        self.ops = []
        self._taken = taken
        self._base = base
        self._like = like
        self._counter = 0
        self._copy_outputs = copy_outputs

    def fresh(self) -> str:
        """A blob name not used by the net nor by an earlier `fresh`."""
        while True:
            self._counter += 1
            name = "{}_scan{}".format(self._base, self._counter)
            if name not in self._taken:
                self._taken.add(name)
                return name

    def op(self, op_type: str, inputs, outputs, **args) -> caffe2_pb2.OperatorDef:
        """Append ``op_type(inputs) -> outputs`` with arguments ``args``; returns the OperatorDef."""
        return self.append(core.CreateOperator(op_type, list(inputs), list(outputs), **args))

    def append(self, created: caffe2_pb2.OperatorDef) -> caffe2_pb2.OperatorDef:
        """Append an OperatorDef made elsewhere, moved to ``like``'s device; returns it."""
        if self._like is not None and self._like.HasField("device_option"):
            created.device_option.CopyFrom(self._like.device_option)
        self.ops.append(created)
        return created

    def step(self, op_type: str, inputs, **args) -> str:
        """Append an op writing one fresh blob; returns its name."""
        out = self.fresh()
        self.op(op_type, inputs, [out], **args)
        return out

    def finish(self, current: str, blob_in: str, blob_out: str) -> list:
        """Make the last op write ``blob_out``; returns the ops. A Copy does it when nothing was emitted or
        when the last op reads ``blob_out`` (in place: ATen and Slice ops cannot run in place)."""
        return self.finish_outputs([current], blob_in, [blob_out])

    def finish_outputs(self, currents, blob_in: str, blob_outs) -> list:
        """Make the ops write each of ``blob_outs`` (from the matching fresh blob of ``currents``); returns
        the ops. A fresh blob is renamed where no emitted op reads the output's name (in place: ATen and
        Slice ops cannot run in place), else copied at the end."""
        read = {blob for op in self.ops for blob in op.input}
        written = {blob for op in self.ops for blob in op.output}
        for current, blob_out in zip(currents, blob_outs):
            if current == blob_out:  # in place, and nothing to compute
                continue
            if self._copy_outputs or current == blob_in or current not in written or blob_out in read:
                self.op("Copy", [current], [blob_out])
                continue
            for op in self.ops:
                for names in (op.input, op.output):
                    for position, name in enumerate(names):
                        if name == current:
                            names[position] = blob_out
        return self.ops
