"""The ``pycumsum-op`` command line: one subcommand per module of `pycumsum_op.commands`.

    pycumsum-op --version
    pycumsum-op doctor PREDICT_NET [--init-net INIT_NET] --loss BLOB [--loss BLOB ...] [--fix OUT]
    pycumsum-op demo [--steps N] [--seed S]
    pycumsum-op lower NET [--target aten|portable] -o OUT
    pycumsum-op onnx import|export ...
    pycumsum-op train --workers N --steps S [--seed K]
    pycumsum-op explain --shape 64,4096 --axis 0 [--dtype float32] [--op cumprod] [--exclusive] [--reverse]

Building the parser imports neither Caffe2 nor numpy nor torch, so ``--help`` and ``--version``
work anywhere. A command module's ``add_parser(subparsers)`` registers its subcommand and
``set_defaults(run=...)``: a function of the parsed arguments returning the exit status, which
imports what it uses. Before ``run``, `main` loads Caffe2 once, quietly, and, unless the command
declared ``set_defaults(needs="caffe2")``, the whole package as ``import pycumsum_op`` does
(``net.PyCumSum``, ``brew.cumsum``).

Exit status 0: done; 1: command specific (the doctor's findings); 2: bad input, as one line
``pycumsum-op COMMAND: error: REASON`` on stderr (raise `pycumsum_op.commands._common._BadInput`), a
missing Caffe2 included.

>>> main(["doctor", "/no/such/net.pb", "--loss", "loss"])
2
"""
import argparse
import sys

from . import __version__
from ._runtime import COMMAND, init_caffe2_quietly, require_caffe2
from .commands import demo, doctor, explain, lower, onnx, train
from .commands._common import _BadInput

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    # One import (above) and one add_parser call per command (each in its own module).
    parser = argparse.ArgumentParser(
        prog=COMMAND, description="torch.cumsum for Caffe2 (PyCumSum) and a doctor for "
                                  "'Gradient of output ... is sparse (expected dense)'.",
        epilog="'{} COMMAND --help' shows a command's options.".format(COMMAND))
    parser.add_argument("--version", action="version", version="{} {}".format(COMMAND, __version__))
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor.add_parser(commands)
    demo.add_parser(commands)
    onnx.add_parser(commands)
    lower.add_parser(commands)
    train.add_parser(commands)
    explain.add_parser(commands)
    parser.set_defaults(command_names=sorted(commands.choices))
    return parser


def _load(needs: str) -> None:
    """Caffe2 (a missing one is bad input), initialised quietly; then the package unless ``needs == "caffe2"``."""
    try:
        require_caffe2()
    except ImportError as error:
        raise _BadInput(str(error))
    init_caffe2_quietly()
    if needs != "caffe2":
        import pycumsum_op
        pycumsum_op._load()


def main(argv=None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("no command given; choose one of: {}".format(", ".join(args.command_names)))
    try:
        _load(getattr(args, "needs", "pycumsum_op"))
        return args.run(args)
    except _BadInput as error:
        print("{} {}: error: {}".format(COMMAND, args.command, error), file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
