"""The ``pycumsum-op`` command: ``doctor`` (diagnose/fix a saved net) and ``demo``.

    pycumsum-op doctor PREDICT_NET [--init-net INIT_NET] --loss BLOB [--loss BLOB ...] [--fix OUT]
    pycumsum-op demo [--steps N] [--seed S]

``doctor`` exits 0 when the net is healthy, 1 when it has findings (also when
``--fix`` wrote a repaired net), 2 on bad input (unreadable file, unknown blob,
a failure no net edit can cure), with a one-line reason on stderr.

>>> main(["doctor", "/no/such/net.pb", "--loss", "loss"])
2
"""
import argparse
import sys

from google.protobuf import text_format

from .commands import train
from .demo import DEFAULT_STEPS, run_demo
from .doctor import diagnose, fix
from .doctor.fix import UnfixableError
from .serialization import load_net

EXIT_CLEAN, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2


class _BadInput(Exception):
    """Bad command-line input: reported in one line, exit status 2."""


def _read_net(path: str, what: str):
    """A NetDef from a binary .pb or a text .pbtxt; the doctor never creates the net, so nothing runs."""
    try:
        return load_net(path, verify=False)
    except (OSError, ValueError) as error:
        raise _BadInput("cannot read {} {!r}: {}".format(what, path, str(error).splitlines()[0]))


def _parse_loss(text: str):
    """``BLOB`` (gradient of ones) or ``BLOB=GRADIENT_BLOB``."""
    loss, _, gradient = text.partition("=")
    return loss, gradient or None


def _write_net(netdef, path: str) -> None:
    """Write text for .pbtxt/.prototxt/.txt paths, binary otherwise."""
    text = path.lower().endswith((".pbtxt", ".prototxt", ".txt"))
    try:
        with open(path, "w" if text else "wb") as handle:
            handle.write(text_format.MessageToString(netdef) if text else netdef.SerializeToString())
    except OSError as error:
        raise _BadInput("cannot write the fixed net to {!r}: {}".format(path, error.strerror or error))


def _doctor(args) -> int:
    netdef = _read_net(args.predict_net, "net")
    init_net = _read_net(args.init_net, "init net") if args.init_net else None
    losses = dict(_parse_loss(text) for text in args.loss)
    try:
        findings = diagnose(netdef, losses, init_net)
    except ValueError as error:  # a loss blob that is not in the net
        raise _BadInput(str(error))
    if not findings:
        print("{}: healthy: AddGradientOperators({}) works.".format(args.predict_net, sorted(losses)))
        return EXIT_CLEAN
    print("{}: {} finding(s):".format(args.predict_net, len(findings)))
    for number, finding in enumerate(findings, 1):
        print("\n[{}] {}".format(number, finding))
    if args.fix:
        try:
            fixed = fix(netdef, losses, init_net, strategy=args.strategy)
        except UnfixableError as error:
            raise _BadInput("--fix: " + str(error).splitlines()[0] + " (see the findings above)")
        _write_net(fixed, args.fix)
        print("\nwrote the fixed net ({} strategy, {} ops) to {}".format(args.strategy, len(fixed.op), args.fix))
    return EXIT_FINDINGS


def _demo(args) -> int:
    return run_demo(steps=args.steps, seed=args.seed)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, got {}".format(value))
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pycumsum-op", description="torch.cumsum for Caffe2 (PyCumSum) and a doctor for "
                                        "'Gradient of output ... is sparse (expected dense)'.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    doctor = commands.add_parser("doctor", help="find (and fix) sparse-gradient errors in a saved net",
                                 description="Walks the backward pass of PREDICT_NET as Caffe2's "
                                             "AddGradientOperators does and reports where it fails. "
                                             "Exit 0: healthy, 1: findings, 2: bad input.")
    doctor.add_argument("predict_net", metavar="PREDICT_NET", help="the forward net (.pb binary or .pbtxt text)")
    doctor.add_argument("--init-net", metavar="INIT_NET", help="its init net (constants for the cumsum idiom)")
    doctor.add_argument("--loss", metavar="BLOB[=GRAD]", action="append", required=True,
                        help="a loss blob, optionally with the name of its gradient blob; repeatable")
    doctor.add_argument("--fix", metavar="OUT", help="write the fixed net here (.pbtxt: text, else binary)")
    doctor.add_argument("--strategy", choices=("ensure_dense", "pycumsum"), default="ensure_dense",
                        help="cure for --fix: EnsureDense everywhere, or PyCumSum for the cumsum idiom "
                             "(default: %(default)s)")
    doctor.set_defaults(run=_doctor)
    demo = commands.add_parser("demo", help="the question's net, its diagnosis and fixes, then EMD training")
    demo.add_argument("--steps", type=_positive_int, default=DEFAULT_STEPS,
                      help="SGD steps of the EMD training (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    demo.set_defaults(run=_demo)
    train.add_parser(commands)
    return parser


def main(argv=None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except _BadInput as error:
        print("pycumsum-op {}: error: {}".format(args.command, error), file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
