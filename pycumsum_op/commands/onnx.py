"""``pycumsum-op onnx import|export``: ONNX models <-> saved Caffe2 nets, with CumSum / PyCumSum.

    pycumsum-op onnx import MODEL.onnx --predict-net P.pb --init-net I.pb [--lower aten|portable]
    pycumsum-op onnx export P.pb [--init-net I.pb] --input BLOB=DTYPE:D1,D2 [...] -o MODEL.onnx [--opset N]

``import --lower`` writes CumSum as Caffe2's C++ operators (`pycumsum_op.lower`'s targets; the axis must be a
constant), so the nets run without Python. Nets are written as `save_net` writes them (text for
.pbtxt/.prototxt/.pbtext/.txt, else binary). ``export`` reads the nets as every command does (`read_net`:
`load_net`, verified; Python ops other than pycumsum_op's are refused before anything runs).
Exit 0 on success, 2 on bad input with a one-line reason on stderr.

>>> _parse_input("data=float32:4,6")
('data', ('float32', (4, 6)))
>>> _parse_input("step=int64:")
('step', ('int64', ()))
"""
import argparse
import contextlib
import io
import os
import warnings

from ._common import _BadInput, _first_line, parse_dims, read_net, require_ops, require_optional, write_file


def _parse_input(text: str):
    """``BLOB=DTYPE:D1,D2,...`` -> (blob, (dtype name, shape)); an empty shape is a 0-d blob.

    The dtype name is checked by `_value_info` once numpy is loaded (``--help`` imports no numpy)."""
    name, _, spec = text.partition("=")
    dtype, colon, dims = spec.partition(":")
    try:
        if not name or not colon:
            raise ValueError("expected BLOB=DTYPE:D1,D2,... (e.g. data=float32:4,6)")
        return name, (dtype, parse_dims(dims))
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError("bad --input {!r}: {}".format(text, error))


def _value_info(inputs) -> dict:
    """{blob: (numpy dtype, shape)} from the parsed ``--input`` values."""
    import numpy as np

    value_info = {}
    for name, (dtype, shape) in inputs:
        try:
            value_info[name] = np.dtype(dtype), shape
        except TypeError as error:
            raise _BadInput("bad --input {}={}: {}".format(name, dtype, error))
    return value_info


@contextlib.contextmanager
def _quiet_stderr():
    """Drop what Python and C++ write to stderr (onnx's checker prints "Warning: Unsupported operator" for
    custom domains, the stock backend "ONNX FATAL: <node>"): a refusal stays one line."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            with contextlib.redirect_stderr(io.StringIO()):
                yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _converters():
    """pycumsum_op.onnx, or bad input: onnx missing (naming the extra), or a torch or onnx it refuses (one line
    naming the release needed). Each action calls this first, before reading its input."""
    require_optional("onnx")
    try:
        from .. import onnx as converters
    except ImportError as error:
        raise _BadInput(str(error))
    return converters


def _import(args) -> int:
    converters = _converters()
    import onnx
    from google.protobuf.message import DecodeError

    from .._atomic_files import distinct_outputs
    from ..serialization import UnsafeNetError

    to_caffe2, load_model = converters.to_caffe2, converters.load_model

    try:
        distinct_outputs([args.predict_net, args.init_net])
    except OSError as error:
        raise _BadInput("cannot write the init net to {!r}: {}".format(error.filename, error.strerror))
    with warnings.catch_warnings():  # protobuf's and Caffe2's backend's (opset > 9) warnings
        warnings.simplefilter("ignore")
        try:
            model = load_model(args.model)
        except (OSError, DecodeError, RuntimeError, ValueError) as error:  # ExternalDataError, InputTooLarge
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise _BadInput("cannot read ONNX model {!r}: {}".format(args.model, reason))
        try:
            with _quiet_stderr():
                init_net, predict_net = to_caffe2(model, lower=args.lower)
        except UnsafeNetError as error:  # a node that becomes a Python op, or a net verify_net refuses
            raise _BadInput("cannot import {!r}: {}".format(args.model, _first_line(error)))
        except (ValueError, RuntimeError, onnx.checker.ValidationError) as error:
            reason = str(error).strip().splitlines()[-1]  # the stock backend's last line: ". Exception: <reason>"
            raise _BadInput("cannot import {!r}: {}".format(args.model, reason.split(". Exception: ", 1)[-1]))
    from ..serialization import serialized_net

    write_file(serialized_net(predict_net, args.predict_net), args.predict_net, "predict net")
    write_file(serialized_net(init_net, args.init_net), args.init_net, "init net")
    lowered = "" if args.lower is None else " (CumSum lowered to {})".format(args.lower)
    print("{}: {} ops{} -> {}, {} parameters -> {}".format(args.model, len(predict_net.op), lowered, args.predict_net,
                                                            len(init_net.op), args.init_net))
    return 0


def _export(args) -> int:
    export = _converters().export

    predict_net = read_net(args.predict_net, "predict net")
    require_ops(predict_net, args.predict_net)
    init_net = read_net(args.init_net, "init net") if args.init_net else None
    try:
        model = export(predict_net, init_net, _value_info(args.input), opset=args.opset)
    except (OSError, ValueError) as error:  # UnsafeNetError is a ValueError
        raise _BadInput(_first_line(error))
    write_file(model.SerializeToString(), args.output, "ONNX model")
    print("{}: {} nodes at opset {} -> {}".format(args.predict_net, len(model.graph.node), args.opset, args.output))
    return 0


def add_parser(subparsers) -> None:
    """Register ``onnx import`` and ``onnx export``."""
    parser = subparsers.add_parser("onnx", help="import ONNX models with CumSum, export nets with PyCumSum",
                                   description="Convert between ONNX models and saved Caffe2 nets.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    to_nets = actions.add_parser("import", help="ONNX model -> Caffe2 predict and init nets")
    to_nets.add_argument("model", metavar="MODEL", help="the .onnx model")
    to_nets.add_argument("--predict-net", required=True, metavar="PATH", help="where to write the predict net")
    to_nets.add_argument("--init-net", required=True, metavar="PATH", help="where to write the init net")
    to_nets.add_argument("--lower", choices=("aten", "portable"),
                         help="write CumSum as C++ operators, no Python op: aten (torch's kernels, any shape) or "
                              "portable (every Caffe2 build; the scan length the model fixes); the axis must be a "
                              "constant (default: PyCumSum)")
    to_nets.set_defaults(run=_import)
    to_model = actions.add_parser("export", help="Caffe2 nets -> ONNX model")
    to_model.add_argument("predict_net", metavar="PREDICT_NET", help="the predict net (.pb or .pbtxt)")
    to_model.add_argument("--init-net", metavar="PATH", help="its init net (GivenTensor*Fill ops)")
    to_model.add_argument("--input", type=_parse_input, action="append", required=True, metavar="BLOB=DTYPE:DIMS",
                          help="an input blob, its dtype and shape, e.g. data=float32:4,6; repeatable")
    to_model.add_argument("-o", "--output", required=True, metavar="MODEL", help="where to write the .onnx model")
    to_model.add_argument("--opset", type=int, default=11, help="ONNX opset (default: %(default)s)")
    to_model.set_defaults(run=_export)
