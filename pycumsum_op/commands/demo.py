"""``pycumsum-op demo`` (``make demo``): see `pycumsum_op.demo`."""
from ._common import _BadInput, whole_number

DEFAULT_STEPS = 1000


def _run(args) -> int:
    from ..demo import check_drawing_targets, run_demo
    if args.draw:
        try:
            check_drawing_targets(args.draw)
        except OSError as error:
            raise _BadInput("--draw: cannot write {!r}: {}".format(error.filename, error.strerror))
    return run_demo(steps=args.steps, seed=args.seed, draw_directory=args.draw)


def add_parser(subparsers) -> None:
    demo = subparsers.add_parser("demo", help="the legacy SparseLengthsSum cumsum net, its diagnosis and fixes, then EMD training")
    demo.add_argument("--steps", type=whole_number(1), default=DEFAULT_STEPS, metavar="N",
                      help="SGD steps of the EMD training (default: %(default)s)")
    demo.add_argument("--seed", type=whole_number(0), default=0, metavar="S",
                      help="random seed (default: %(default)s)")
    demo.add_argument("--draw", metavar="DIR",
                      help="draw the legacy net around its finding and the fixed net (before.svg, after.svg) in DIR "
                           "with graphviz (needs its dot program)")
    demo.set_defaults(run=_run)
