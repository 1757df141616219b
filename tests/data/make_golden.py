"""Regenerate the golden serialized nets in this folder (tests load the committed files).

    .venv/bin/python tests/data/make_golden.py

writes the newest version's files: ``golden_scan_family_v0.2.0.pb`` (``NetDef.SerializeToString()``)
and ``golden_scan_family_v0.2.0.pbtxt`` (text format) for the net built by `build_golden_net_v0_2_0`: every
scan of the family (PyCumSum, PyCumProd, PyCumMax, PyCumMin, PyLogCumSumExp, with flags and an
integer input) and the gradient ops of its floating outputs. ``golden_cumsum_v0.1.0.*`` (made by
0.1.0 from `build_golden_net`: PyCumSum forward ops (float32 along axis 1; exclusive+reverse along
-1 into float64; int32 along 0 into int64) and their PythonGradient ops) stay as committed. The
files pin the builders' import paths ``pycumsum_op.ops.builders.scan_forward`` / ``scan_backward``:
if a rename breaks loading them, the tests fail rather than users' saved models. Only write a new
version's files (new file names); never overwrite an old version's files.

>>> [op.type for op in build_golden_net().Proto().op][:3]
['Python', 'Python', 'Python']
>>> sorted({op.name for op in build_golden_net_v0_2_0().Proto().op if op.type == "Python"})
['PyCumMax', 'PyCumMin', 'PyCumProd', 'PyCumSum', 'PyLogCumSumExp']
"""
import os

#: Blobs the golden net reads (besides its gradient inputs) and the ones tests fetch.
INPUTS = ("x", "xi")
GRAD_INPUTS = ("y1_grad", "y2_grad")
OUTPUTS = ("y1", "y2", "yi", "x_grad")
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))


#: The same for version 0.2.0's golden net (the scan family).
INPUTS_V0_2_0 = ("x", "xi")
GRAD_INPUTS_V0_2_0 = ("prod_grad", "max_grad", "min_grad", "lse_grad", "sum_grad")
OUTPUTS_V0_2_0 = ("prod", "max", "max_index", "min", "min_index", "lse", "sum", "prod_i", "max_i", "max_i_index",
                  "x_grad")
VERSION_V0_2_0 = "0.2.0"
NAME_V0_2_0 = "golden_scan_family"


def golden_paths(directory=HERE, version=VERSION, name="golden_cumsum"):
    """The (binary .pb, text .pbtxt) paths of a golden net (0.1.0's PyCumSum net unless told)."""
    stem = os.path.join(directory, "{}_v{}".format(name, version))
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


def build_golden_net_v0_2_0():
    """x (float32, 2x3x4) through every scan of the family; xi (int32) through cumprod and cummax;
    the gradients of the floating scans' first outputs summed into x_grad."""
    from caffe2.python import core
    import pycumsum_op  # noqa: F401  (installs the net methods)

    net = core.Net("golden_scan_family")
    grads = {
        net.PyCumProd("x", "prod", axis=1, reverse=True): "prod_grad",
        net.PyCumMax("x", ["max", "max_index"], axis=-1, reverse=True)[0]: "max_grad",
        net.PyCumMin("x", ["min", "min_index"], axis=0)[0]: "min_grad",
        net.PyLogCumSumExp("x", "lse", axis=2, exclusive=True): "lse_grad",
        net.PyCumSum("x", "sum", axis=1, exclusive=True): "sum_grad",
    }
    net.PyCumProd("xi", "prod_i", axis=0, exclusive=True)
    net.PyCumMax("xi", ["max_i", "max_i_index"], axis=1)
    for name in GRAD_INPUTS_V0_2_0:
        net.AddExternalInput(name)
    net.AddGradientOperators(grads)
    net.Proto().name = "golden_scan_family"
    return net


def main():
    from google.protobuf import text_format

    proto = build_golden_net_v0_2_0().Proto()
    pb_path, pbtxt_path = golden_paths(version=VERSION_V0_2_0, name=NAME_V0_2_0)
    if os.path.exists(pb_path) or os.path.exists(pbtxt_path):
        raise SystemExit("{} exists: golden files of a released version are never overwritten".format(pb_path))
    with open(pb_path, "wb") as handle:
        handle.write(proto.SerializeToString())
    with open(pbtxt_path, "w") as handle:
        handle.write(text_format.MessageToString(proto))
    print("wrote", pb_path, "and", pbtxt_path)


if __name__ == "__main__":
    main()
