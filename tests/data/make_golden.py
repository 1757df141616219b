"""Regenerate the golden serialized nets in this folder (tests load the committed files).

    .venv/bin/python tests/data/make_golden.py

writes ``golden_cumsum_v0.1.0.pb`` (``NetDef.SerializeToString()``) and
``golden_cumsum_v0.1.0.pbtxt`` (text format) for the net built by `build_golden_net`:
PyCumSum forward ops (float32 along axis 1; exclusive+reverse along -1 into float64; int32
along 0 into int64) and their PythonGradient ops. The files pin the builders' import paths
``pycumsum_op.ops.builders.scan_forward`` / ``scan_backward``: if a rename breaks loading them,
the tests fail rather than users' saved models. Only regenerate them for a new version (new
file names); never overwrite an old version's files.

>>> [op.type for op in build_golden_net().Proto().op][:3]
['Python', 'Python', 'Python']
"""
import os

#: Blobs the golden net reads (besides its gradient inputs) and the ones tests fetch.
INPUTS = ("x", "xi")
GRAD_INPUTS = ("y1_grad", "y2_grad")
OUTPUTS = ("y1", "y2", "yi", "x_grad")
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))


def golden_paths(directory=HERE):
    """The (binary .pb, text .pbtxt) paths of this version's golden net."""
    stem = os.path.join(directory, "golden_cumsum_v{}".format(VERSION))
    return stem + ".pb", stem + ".pbtxt"


def build_golden_net():
    """x (float32) -> y1, y2; xi (int32) -> yi; gradients of y1, y2 into x_grad."""
    from caffe2.python import core
    import pycumsum_op  # noqa: F401  (installs net.PyCumSum)

    net = core.Net("golden_cumsum")
    y1 = net.PyCumSum("x", "y1", axis=1)
    y2 = net.PyCumSum("x", "y2", axis=-1, exclusive=True, reverse=True, dtype="double")
    net.PyCumSum("xi", "yi", axis=0)
    for name in GRAD_INPUTS:
        net.AddExternalInput(name)
    net.AddGradientOperators({y1: "y1_grad", y2: "y2_grad"})
    net.Proto().name = "golden_cumsum"  # core.Net may have made the name unique
    return net


def main():
    from google.protobuf import text_format

    proto = build_golden_net().Proto()
    pb_path, pbtxt_path = golden_paths()
    with open(pb_path, "wb") as handle:
        handle.write(proto.SerializeToString())
    with open(pbtxt_path, "w") as handle:
        handle.write(text_format.MessageToString(proto))
    print("wrote", pb_path, "and", pbtxt_path)


if __name__ == "__main__":
    main()
