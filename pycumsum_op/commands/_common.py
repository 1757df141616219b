"""What the ``pycumsum-op`` commands share: the one-line refusal (`_BadInput`, exit status 2), a missing
optional package as one (`require_optional`), reading and writing nets, and argument types. Imports nothing
heavy at module level (``--help`` loads no Caffe2).
"""
import argparse

from .. import _runtime
from .._atomic_files import write_atomically


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


def require_optional(package: str):
    """The optional ``package`` (`_runtime.EXTRAS`), imported; if it does not import, `_BadInput` naming it and
    the extra that installs it. A command calls this first, so a missing package is reported before any
    input is read."""
    try:
        return _runtime.require_optional(package, "this command")
    except _runtime.MissingDependency as error:
        raise _BadInput(str(error))


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
        raise ValueError("expected comma-separated sizes of at least 0 (e.g. 4,10), got {!r}{}".format(
            text[:200], "...(+{} chars)".format(len(text) - 200) if len(text) > 200 else ""))
    return dims


def read_net(path: str, what: str):
    """A NetDef from a binary .pb or a text .pbtxt through `load_net`, verified: every command reads nets
    within the same budgets (sizes, ops, text and pickle bytes, declared tensors), and none reads on in a
    net whose Python ops are refused. Unreadable, unparsable, refused or too large input is `_BadInput`."""
    from ..serialization import load_net
    try:
        return load_net(path)
    except (OSError, ValueError) as error:
        raise _BadInput("cannot read {} {!r}: {}".format(what, path, _first_line(error)))


def require_ops(netdef, path: str) -> None:
    """`_BadInput` unless ``netdef`` (read from ``path``) has ops: there is nothing to lower, export or fix
    in a net without any (an init net may be empty)."""
    if not netdef.op:
        raise _BadInput("net {!r} has no ops: is it a Caffe2 NetDef?".format(path))


def write_file(data: bytes, path: str, what: str) -> None:
    """Write ``data`` to ``path`` whole or not at all, never through a symlink (`write_atomically`);
    an OSError is `_BadInput` naming ``what``."""
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
