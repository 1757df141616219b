"""The ``pycumsum-op`` command line: one subcommand per module of `pycumsum_op.commands`.

    pycumsum-op --version
    pycumsum-op doctor PREDICT_NET [--init-net INIT_NET] --loss BLOB [--loss BLOB ...] [--fix OUT]
    pycumsum-op demo [--steps N] [--seed S]
    pycumsum-op lower NET [--target aten|portable] -o OUT
    pycumsum-op onnx import|export ...
    pycumsum-op train --workers N --steps S [--seed K]

Building the parser imports neither Caffe2 nor numpy nor torch, so ``--help`` and ``--version``
work anywhere. A command module's ``add_parser(subparsers)`` registers its subcommand and
``set_defaults(run=...)``: a function of the parsed arguments returning the exit status, which
imports what it uses. Before ``run``, `main` loads Caffe2 once, quietly, and, unless the command
declared ``set_defaults(needs="caffe2")``, the whole package as ``import pycumsum_op`` does
(``net.PyCumSum``, ``brew.cumsum``).

Exit status 0: done; 1: command specific (the doctor's findings); 2: bad input, as one line
``pycumsum-op COMMAND: error: REASON`` on stderr (raise `_BadInput`), a missing Caffe2 included.

>>> main(["doctor", "/no/such/net.pb", "--loss", "loss"])
2
"""
import argparse
import sys

from . import __version__
from ._runtime import COMMAND, init_caffe2_quietly, require_caffe2

EXIT_BAD_INPUT = 2


class _BadInput(Exception):
    """Bad command-line input: reported in one line, exit status 2."""


def _first_line(error: Exception) -> str:
    """The reason in one line, without the path the message already names ("[Errno 13] Permission denied:
    'x'"); a refused net (`UnsafeNetError`, which has ``problems``) as its first line and first problem."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.replace("load_net: ", "").lower()
    lines = str(error).strip().splitlines() or [type(error).__name__]
    problems = getattr(error, "problems", None)
    if problems:
        more = len(problems) - 1
        return "{} {}{}".format(lines[0], problems[0], "; and {} more".format(more) if more else "")
    return lines[0]


def parse_dims(text: str) -> tuple:
    """A command-line shape: ``"4,10"`` -> (4, 10), ``""`` -> () (a 0-d blob); a ValueError for anything else.

    >>> parse_dims("4, 10"), parse_dims("")
    ((4, 10), ())
    >>> parse_dims("4,-1")
    Traceback (most recent call last):
    ...
    ValueError: expected comma-separated sizes of at least 0 (e.g. 4,10), got '4,-1'
    """
    try:
        dims = tuple(int(size) for size in text.split(",")) if text.strip() else ()
    except ValueError:
        dims = None
    if dims is None or any(size < 0 for size in dims):
        raise ValueError("expected comma-separated sizes of at least 0 (e.g. 4,10), got {!r}".format(text))
    return dims


def read_net(path: str, what: str):
    """A NetDef from a binary .pb or a text .pbtxt, not verified: the commands that use this never
    create the net, so nothing in it runs. Unreadable or unparsable input is `_BadInput`."""
    from .serialization import load_net
    try:
        return load_net(path, verify=False)
    except (OSError, ValueError) as error:
        raise _BadInput("cannot read {} {!r}: {}".format(what, path, _first_line(error)))


def require_ops(netdef, path: str) -> None:
    """`_BadInput` unless ``netdef`` (read from ``path``) has ops: there is nothing to lower, export or fix
    in a net without any (an init net may be empty)."""
    if not netdef.op:
        raise _BadInput("net {!r} has no ops: is it a Caffe2 NetDef?".format(path))


def write_file(data: bytes, path: str, what: str) -> None:
    """Write ``data`` to ``path`` whole or not at all, never through a symlink (`_atomic_files`);
    an OSError is `_BadInput` naming ``what``."""
    from ._atomic_files import write_atomically
    try:
        write_atomically(path, lambda handle: handle.write(data))
    except OSError as error:
        raise _BadInput("cannot write the {} to {!r}: {}".format(what, path, error.strerror or error))


def whole_number(minimum: int):
    """An argparse ``type``: an integer >= ``minimum``, refused in words.

    >>> whole_number(1)("3")
    3
    >>> whole_number(1)("abc")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a whole number of at least 1, got 'abc'
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError("expected a whole number of at least {}, got {!r}".format(minimum, text))
        return value
    return parse


def _parser() -> argparse.ArgumentParser:
    # One import and one add_parser call per command (each in its own module).
    from .commands import doctor
    from .commands import demo
    from .commands import onnx
    from .commands import lower
    from .commands import train

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
