"""``pycumsum-op explain``: the route a scan follows for a shape, dtype and axis, and why, with the accelerator
and without it (`pycumsum_op.explain`).

    pycumsum-op explain --shape 64,4096 --axis 0 [--dtype float32] [--op cumprod] [--exclusive] [--reverse]

Exit 0: explained; 2: bad input (one line on stderr: an unknown scan, a flag the scan does not take, an axis
out of range, a dtype the scan refuses, a shape or dtype no numpy array can have: checked on the numbers before
anything is allocated).
"""
from ._common import _BadInput, parse_dims


def _shape(text: str) -> tuple:
    try:
        return parse_dims(text)
    except ValueError as error:
        raise _BadInput("--shape: {}".format(error))


def run(args) -> int:
    from ..kernels import ScanArgumentError
    from ..scans.explain import explain

    try:
        print(explain(_shape(args.shape), args.axis, args.dtype, args.op, args.exclusive, args.reverse))
    except ScanArgumentError as error:
        raise _BadInput(str(error))
    return 0


def add_parser(subparsers) -> None:
    """Register ``explain`` on the pycumsum-op command line."""
    parser = subparsers.add_parser(
        "explain", help="say which path a scan takes for a shape, and why",
        description="Prints the route a scan's forward follows for a C-contiguous input of SHAPE and DTYPE along "
                    "AXIS (the path, its variant, its buffers and the rule that chose it), with the accelerator "
                    "and without it, and whether the accelerator is on here (if not, why). Exit 0: explained, "
                    "2: bad input.")
    parser.add_argument("--shape", metavar="D0,D1,...", required=True, help="the input's shape, e.g. 64,4096")
    parser.add_argument("--axis", type=int, required=True, help="the scan's axis (negative counts from the end)")
    parser.add_argument("--dtype", default="float32", help="the input's numpy dtype (default: %(default)s)")
    parser.add_argument("--op", default="cumsum", help="a registered scan, by name or op name (default: "
                                                       "%(default)s)")
    parser.add_argument("--exclusive", action="store_true", help="the exclusive scan")
    parser.add_argument("--reverse", action="store_true", help="the scan from the end")
    parser.set_defaults(run=run)
