"""``pycumsum-op lower``: a saved net with its PyCumSum ops as C++ operators (no Python op left).

    pycumsum-op lower NET [--init-net INIT] [--target aten|portable] [--shape BLOB=4,10 ...]
                          [--dtype BLOB=float32 ...] -o OUT

Reads binary (.pb) or text (.pbtxt) nets, writes them as `save_net` does (text for the text suffixes).
Nothing in the net is created or run: PyCumSum's parameters are read from its builder pickle by the
restricted reader. Exit 0: written; 2: bad input (one line on stderr).
"""
from ._common import _BadInput, parse_dims, read_net, require_ops, write_file


def _blob_value(text: str, what: str):
    """``BLOB=VALUE`` -> (BLOB, VALUE); argparse reports a ValueError/TypeError as a usage error."""
    blob, sep, value = text.partition("=")
    if not sep or not blob or not value:
        raise ValueError("expected BLOB={}, got {!r}".format(what, text))
    return blob, value


def _shape(text: str):
    blob, value = _blob_value(text, "4,10")
    try:
        return blob, parse_dims(value)
    except ValueError as error:
        raise ValueError("--shape {!r}: {}".format(text, error))


def _dtype(text: str):
    import numpy as np
    blob, value = _blob_value(text, "float32")
    try:
        return blob, np.dtype(value)
    except TypeError:
        raise ValueError("--dtype {!r}: {!r} is not a numpy dtype (float32, float64, int32, int64, bool)".format(
            text, value))


def _pairs(texts, parse):
    try:
        return dict(parse(text) for text in texts or ())
    except ValueError as error:
        raise _BadInput(str(error))


def run(args) -> int:
    from ..lowering import LoweringError, lower

    netdef = read_net(args.net, "net")
    require_ops(netdef, args.net)
    init_net = read_net(args.init_net, "init net") if args.init_net else None
    shapes, dtypes = _pairs(args.shape, _shape), _pairs(args.dtype, _dtype)
    try:
        lowered = lower(netdef, args.target, shapes=shapes, init_net=init_net, dtypes=dtypes)
    except LoweringError as error:
        reason = str(error).splitlines()[0]
        if "shapes={" in reason:
            reason += " (here: --shape BLOB=D0,D1,... --dtype BLOB=float32, or --init-net)"
        raise _BadInput(reason)
    from ..serialization import serialized_net, verify_net

    write_file(serialized_net(lowered, args.output), args.output, "lowered net")
    replaced = len(verify_net(netdef))  # the input's Python ops, nested ones included (read_net verified them)
    print("{}: lowered {} Python op(s) to target {} ({} ops); wrote {}".format(
        args.net, replaced, args.target, len(lowered.op), args.output))
    return 0


def add_parser(subparsers) -> None:
    """Register ``lower`` on the pycumsum-op command line."""
    parser = subparsers.add_parser(
        "lower", help="replace PyCumSum ops by C++ operators (deploy without Python)",
        description="Writes NET with every PyCumSum op (and its gradient op) replaced by Caffe2 C++ operators. "
                    "Exit 0: written, 2: bad input.")
    parser.add_argument("net", metavar="NET", help="the net (.pb binary or .pbtxt text)")
    parser.add_argument("--init-net", metavar="INIT_NET", help="its init net (shapes of parameters)")
    parser.add_argument("--target", choices=("aten", "portable"), default="aten",
                        help="aten: Caffe2's ATen op (torch kernels, any shape); portable: operators of every "
                             "Caffe2 build, scan length fixed (default: %(default)s)")
    parser.add_argument("--shape", metavar="BLOB=D0,D1,...", action="append",
                        help="shape of a scan input (portable needs it unless inferable); repeatable")
    parser.add_argument("--dtype", metavar="BLOB=DTYPE", action="append",
                        help="dtype of a scan input, e.g. x=float32 (portable needs it); repeatable")
    parser.add_argument("-o", "--output", metavar="OUT", required=True,
                        help="where to write the lowered net (.pbtxt: text, else binary)")
    parser.set_defaults(run=run)
