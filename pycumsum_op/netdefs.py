"""NetDef helpers shared by the doctor and the converters (protobuf only: no kernels, no torch).

>>> as_netdef(42, "lower", "init_net")
Traceback (most recent call last):
...
TypeError: lower: init_net must be a Caffe2 core.Net or NetDef, got int
"""
from caffe2.proto import caffe2_pb2


def as_netdef(net, caller: str, what: str = "net") -> caffe2_pb2.NetDef:
    """The NetDef of a core.Net or NetDef (not copied); a TypeError naming ``caller`` and ``what`` otherwise."""
    proto = net.Proto() if hasattr(net, "Proto") and not isinstance(net, caffe2_pb2.NetDef) else net
    if not isinstance(proto, caffe2_pb2.NetDef):
        raise TypeError("{}: {} must be a Caffe2 core.Net or NetDef, got {}".format(caller, what, type(net).__name__))
    return proto


def blob_names(netdef) -> set:
    """Every blob name a NetDef uses (external inputs/outputs, op inputs/outputs)."""
    names = set(netdef.external_input) | set(netdef.external_output)
    for op in netdef.op:
        names.update(op.input)
        names.update(op.output)
    return names
