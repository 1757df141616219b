"""``pycumsum-op doctor``: diagnose (and ``--fix``) "Gradient of output ... is sparse" in a saved net.

Exit 0 when the net is healthy, 1 when it has findings (also when ``--fix`` wrote a
repaired net), 2 on bad input (unreadable or unparsable file, a net `verify_net` refuses,
unknown blob, a failure no net edit can cure, drawing without graphviz, a drawing refused), with a one-line
reason on stderr. Needs Caffe2 only: torch and pycumsum_op's kernels load only when ``--fix`` replaces an idiom by
PyCumSum. ``--draw`` / ``--draw-fixed`` draw the net around each finding / the fixed net around each repair
(SVG laid out by graphviz's dot: bounded, every name shown as text, no link or script; see
`pycumsum_op.doctor.draw`).
"""
from ._common import _BadInput, _first_line, read_net, require_ops, write_file

EXIT_HEALTHY, EXIT_FINDINGS = 0, 1


def _parse_loss(text: str):
    """``BLOB`` (gradient of ones) or ``BLOB=GRADIENT_BLOB``."""
    loss, _, gradient = text.partition("=")
    return loss, gradient or None


def _run(args) -> int:
    from ..doctor import diagnose
    from ..doctor.fix import STRATEGIES, UnfixableError, repair
    from ..serialization import is_text_path, serialized_net

    if args.strategy not in STRATEGIES:
        raise _BadInput("--strategy {!r}: choose one of {}".format(args.strategy, ", ".join(STRATEGIES)))
    if args.draw_fixed and not args.fix:
        raise _BadInput("--draw-fixed draws the fixed net: give --fix OUT too")
    if args.draw or args.draw_fixed:
        from ..doctor.draw import DrawingUnavailable, drawing_tools
        try:
            drawing_tools()
        except DrawingUnavailable as error:
            raise _BadInput("--draw: {}".format(error))
    netdef = read_net(args.predict_net, "net")
    require_ops(netdef, args.predict_net)
    init_net = read_net(args.init_net, "init net") if args.init_net else None
    losses = dict(_parse_loss(text) for text in args.loss)
    try:
        findings = diagnose(netdef, losses, init_net)
    except ValueError as error:  # a loss blob that is not in the net; a net verify_net refuses
        raise _BadInput(_first_line(error))
    if not findings:
        print("{}: healthy: AddGradientOperators({}) works.".format(args.predict_net, sorted(losses)))
        return EXIT_HEALTHY
    print("{}: {} finding(s):".format(args.predict_net, len(findings)))
    for number, finding in enumerate(findings, 1):
        print("\n[{}] {}".format(number, finding))
    if args.draw:
        _draw(args.draw, "--draw", "findings", lambda draw: draw.draw_findings(netdef, findings))
    if args.fix:
        try:
            fixed, repairs = repair(netdef, losses, init_net, strategy=args.strategy)
        except UnfixableError as error:
            raise _BadInput("--fix: " + str(error).splitlines()[0] + " (see the findings above)")
        for applied in repairs:
            if applied.proof:
                print("\nchecked {!r}: {}".format(applied.output, applied.proof))
        if args.draw_fixed:
            _draw(args.draw_fixed, "--draw-fixed", "fixed net", lambda draw: draw.draw_repairs(netdef, fixed))
        write_file(serialized_net(fixed, args.fix), args.fix, "fixed net")
        print("\nwrote the fixed net ({} ops, {} format) to {}; repaired {} site(s):".format(
            len(fixed.op), "text" if is_text_path(args.fix) else "binary", args.fix, len(repairs)))
        for applied in repairs:
            print("  " + str(applied).replace("pass its init net", "pass --init-net INIT_NET"))
    return EXIT_FINDINGS


def _draw(path: str, flag: str, what: str, make) -> None:
    """Write the SVG ``make(pycumsum_op.doctor.draw)`` returns to ``path``; a drawing refused is `_BadInput`
    naming ``flag``."""
    from ..doctor import draw
    try:
        svg = make(draw)
    except draw.DrawingRefused as error:
        raise _BadInput("{}: {}".format(flag, _first_line(error)))
    write_file(svg, path, "drawing of the " + what)
    print("\ndrew the {} to {}".format(what, path))


def add_parser(subparsers) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="find (and fix) sparse-gradient errors in a saved net",
        description="Walks the backward pass of PREDICT_NET as Caffe2's AddGradientOperators does and "
                    "reports where it fails, and the cumsum idioms it meets (with their cost). Exit 0: healthy, "
                    "1: findings, 2: bad input.")
    doctor.add_argument("predict_net", metavar="PREDICT_NET", help="the forward net (.pb binary or .pbtxt text)")
    doctor.add_argument("--init-net", metavar="INIT_NET",
                        help="its init net: the cumsum idioms' constants (SparseLengthsSum's indices, triangular "
                             "matrices, CumSum's axis), needed to recognise them")
    doctor.add_argument("--loss", metavar="BLOB[=GRAD]", action="append", required=True,
                        help="a loss blob, optionally with the name of its gradient blob; repeatable")
    doctor.add_argument("--fix", metavar="OUT",
                        help="write the fixed net here (text for .pbtxt/.prototxt/.pbtext/.txt, else binary)")
    doctor.add_argument("--strategy", default="ensure_dense",
                        help="cure for --fix, one of pycumsum_op.doctor.fix.STRATEGIES: ensure_dense (the "
                             "default) puts EnsureDense where the gradient turns sparse; pycumsum replaces each "
                             "recognised cumsum idiom (SparseLengthsSum, triangular MatMul/FC/BatchMatMul) by one "
                             "PyCumSum, checked equal on a random input; lowered: the same in C++ operators")
    doctor.add_argument("--draw", metavar="SVG",
                        help="draw the net around each finding (SVG; needs graphviz's dot): "
                             "the op that refuses the sparse gradient red, the op that makes it sparse orange")
    doctor.add_argument("--draw-fixed", metavar="SVG", help="with --fix: draw the fixed net around what was put in")
    doctor.set_defaults(run=_run, needs="caffe2")
