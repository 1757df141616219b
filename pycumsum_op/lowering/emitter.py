"""`OpEmitter`: appends Caffe2 OperatorDefs with fresh intermediate blob names on one device.

Both lowering targets (`aten`, `portable`) write their ops through it, so every op of a lowered
PyCumSum sits on the replaced op's device and no intermediate name clashes with a blob of the net.
Names come from `FreshNames`, one per lowered net, whose counter per base goes on from op to op: many
ops writing the same blob cost one name each, not a search past every name the earlier ones took.

>>> names = FreshNames({"y_scan1"})
>>> emitter = OpEmitter(names, base="y")
>>> emitter.fresh(), OpEmitter(names, base="y").fresh()
('y_scan2', 'y_scan3')
>>> emitter.op("Copy", ["x"], ["y"]).type, [op.type for op in emitter.ops]
('Copy', ['Copy'])
"""
from caffe2.proto import caffe2_pb2
from caffe2.python import core

from ..ops.builders import _CAFFE2_TENSOR_TYPES

#: numpy dtype -> Caffe2 TensorProto type, for every dtype a lowered scan reads or writes (the Python ops').
TENSOR_TYPES = dict(_CAFFE2_TENSOR_TYPES)
#: Caffe2 TensorProto type -> numpy dtype.
NUMPY_TYPES = {proto: dtype for dtype, proto in TENSOR_TYPES.items()}


class FreshNames(object):
    """Blob names not in ``taken`` (a set of the net's names, which `fresh` extends): ``<base>_scan<k>``, with
    ``k`` counted on per base."""

    def __init__(self, taken: set):
        self._taken = taken
        self._counters = {}

    def fresh(self, base: str) -> str:
        counter = self._counters.get(base, 0)
        while True:
            counter += 1
            name = "{}_scan{}".format(base, counter)
            if name not in self._taken:
                self._taken.add(name)
                self._counters[base] = counter
                return name


class OpEmitter(object):
    """Collects ops; `fresh` names come from ``names`` (a `FreshNames`); ops get ``like``'s device.

    ``copy_outputs``: the outputs are always written by a final Copy, which writes into the memory the
    output blob already has. ATen ops give their output new memory, which would cut a blob that shares
    another's memory loose from it: a RecurrentNetwork step net's links are such blobs.
    """

    def __init__(self, names: FreshNames, base: str, like=None, copy_outputs=False):
        self.ops = []
        self._names = names
        self._base = base
        self._like = like
        self._copy_outputs = copy_outputs
        self._made = set()

    def fresh(self) -> str:
        """A blob name not used by the net nor by an earlier `fresh`."""
        name = self._names.fresh(self._base)
        self._made.add(name)
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
        """Make the last op write ``blob_out``; returns the ops (see `finish_outputs`)."""
        return self.finish_outputs([current], blob_in, [blob_out])

    def finish_outputs(self, currents, blob_in: str, blob_outs) -> list:
        """Make the ops write each of ``blob_outs`` (from the matching fresh blob of ``currents``), which no
        emitted op then reads, and leave no fresh blob unread; returns the ops.

        Caffe2's ``mobile_exporter.Export`` makes exactly the blobs no op reads the predictor's outputs, so:
        a fresh result no op reads is renamed; one that its last op rewrites in place (a Reshape) gets that op
        to write the output instead; otherwise a Copy writes it (also where an op reads the output's name:
        ATen and Slice ops cannot run in place). The second outputs that Reshape and Concat must write (the
        old shape, the split sizes; their gradients read them at the version they wrote, so nothing may
        rewrite them) are then read by a ZeroGradient, which has no output and does nothing at run time.
        """
        for current, blob_out in zip(currents, blob_outs):
            if current != blob_out:  # (equal: in place, and nothing to compute)
                self._write_output(current, blob_in, blob_out)
        read = {blob for op in self.ops for blob in op.input}
        unread = [blob for op in self.ops for blob in op.output
                  if blob in self._made and blob not in read and blob not in blob_outs]
        for blob in sorted(set(unread), key=unread.index):
            self.op("ZeroGradient", [blob], [])
        return self.ops

    def _write_output(self, current: str, blob_in: str, blob_out: str) -> None:
        readers = [index for index, op in enumerate(self.ops) if current in op.input]
        writers = [index for index, op in enumerate(self.ops) if current in op.output]
        if (self._copy_outputs or current == blob_in or not writers
                or any(blob_out in op.input for op in self.ops)):
            self.op("Copy", [current], [blob_out])
        elif not readers:
            for op in self.ops:
                _rename(op.output, current, blob_out)
        elif readers[-1] <= writers[-1]:  # only the last op reads it, in place: it writes the output instead
            _rename(self.ops[writers[-1]].output, current, blob_out)
        else:
            self.op("Copy", [current], [blob_out])


def _rename(names, old: str, new: str) -> None:
    for position, name in enumerate(names):
        if name == old:
            names[position] = new
