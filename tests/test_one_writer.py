"""One writer: no module of the package but `pycumsum_op._atomic_files` opens a file for writing.

Every module's source is read (not run): `open` (and any ``.open``) with a mode that writes ("w", "a", "x",
"+") or a mode it cannot read as a constant, `os.open` (or any call given ``os.O_*`` flags, the openat2
structure included) with flags that write or that it cannot trace to constants (a parameter is traced
through the module's calls of its function), ``.write_*`` (pathlib's ``write_text``/``write_bytes``, pydot's
``write_svg``...), ``.touch``, shutil's copies and moves, tempfile's files, numpy's ``save*`` unless into a
handle bound by ``with ... as`` or a writer's ``lambda handle:``, ``.tofile``, ``torch.save``, ``onnx.save*``,
``os.mkfifo``/``mknod``/``truncate``, and importing pydot or Caffe2's net_drawer (which write through pydot).
Renaming or linking a file the writer made (`os.replace`, `os.link` of a training run's drafts) writes no
bytes and is not counted. The null device may be opened for writing (nothing is written anywhere).
The checker is itself tested on small sources that write each way and on sources that only read.
"""
import ast
import os
import re
import sys
import textwrap

import pytest

from test_imports import PACKAGE_DIR, package_modules

WRITER = "pycumsum_op._atomic_files"
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND", "O_TMPFILE"}
WRITING_CALLS = {"shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move",
                 "shutil.make_archive", "tempfile.mkstemp", "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile",
                 "tempfile.SpooledTemporaryFile", "torch.save", "onnx.save", "onnx.save_model", "onnx.save_tensor",
                 "os.mkfifo", "os.mknod", "os.truncate"}
NUMPY_SAVES = {"save", "savez", "savez_compressed", "savetxt"}
PATH_WRITES = {"write_text", "write_bytes", "touch", "tofile"}
#: pydot's ``write_<format>`` methods (pydot 1.4.2's ``Dot.formats``)
PYDOT_FORMATS = {"canon", "cmap", "cmapx", "cmapx_np", "dia", "dot", "fig", "gd", "gd2", "gif", "hpgl", "imap", "imap_np",
                 "ismap", "jpe", "jpeg", "jpg", "mif", "mp", "pcl", "pdf", "pic", "plain", "plain-ext", "png", "ps",
                 "ps2", "svg", "svgz", "vml", "vmlz", "vrml", "vtx", "wbmp", "xdot", "xlib", "raw"}
MODE = re.compile(r"^[rwxabtU+]+$")


class Unresolved(Exception):
    """An expression the checker cannot trace to constants: counted as a write (fail closed)."""


#: `literal`'s answer for a node that is no literal.
NOT_LITERAL = object()


def literal(node):
    """The value of a literal node, else `NOT_LITERAL` (CPython before 3.8 parses literals as ast.Str, ast.Num and
    ast.NameConstant; from 3.8 as ast.Constant)."""
    if isinstance(node, ast.Constant):
        return node.value
    if sys.version_info < (3, 8) and isinstance(node, (ast.Str, ast.Num, ast.NameConstant)):
        return node.s if isinstance(node, ast.Str) else node.n if isinstance(node, ast.Num) else node.value
    return NOT_LITERAL


def dotted(node) -> str:
    """``a.b.c`` of a Name/Attribute chain, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return ""


class Source:
    """One module's tree, its functions and the calls of each, its handle names."""

    def __init__(self, text: str):
        self.tree = ast.parse(text)
        self.parents = {}
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.functions = {node.name: node for node in ast.walk(self.tree)
                          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.handles = {item.optional_vars.id for node in ast.walk(self.tree) if isinstance(node, (ast.With,))
                        for item in node.items if isinstance(item.optional_vars, ast.Name)}
        self.handles |= {argument.arg for node in ast.walk(self.tree) if isinstance(node, ast.Lambda)
                         for argument in node.args.args}

    def function_of(self, node):
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None

    def assignments(self, name: str, scope) -> list:
        return [node.value for node in ast.walk(scope if scope is not None else self.tree)
                if isinstance(node, ast.Assign) and any(isinstance(target, ast.Name) and target.id == name
                                                        for target in node.targets)]

    def arguments_at_calls(self, function, name: str) -> list:
        """The expressions the module's calls of ``function`` pass as its parameter ``name`` (or its default)."""
        parameters = [argument.arg for argument in function.args.args]
        position = parameters.index(name)
        defaults = dict(zip(parameters[len(parameters) - len(function.args.defaults):], function.args.defaults))
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and dotted(node.func).rpartition(".")[2] == function.name:
                keyword = [item.value for item in node.keywords if item.arg == name]
                if keyword:
                    found.append((keyword[0], node))
                elif position < len(node.args):
                    found.append((node.args[position], node))
                elif name in defaults:
                    found.append((defaults[name], function))
                else:
                    raise Unresolved("a call of {} without {}".format(function.name, name))
        if not found:
            raise Unresolved("{} of {} is never passed in this module".format(name, function.name))
        return found

    def flags(self, node, where, depth=0) -> set:
        """The ``os.O_*`` names ``node`` (at ``where``) can hold."""
        if depth > 8:
            raise Unresolved("flags traced too deep")
        if isinstance(node, ast.Attribute) and dotted(node).startswith("os.O_"):
            return {node.attr}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.flags(node.left, where, depth + 1) | self.flags(node.right, where, depth + 1)
        if literal(node) == 0:
            return set()
        if isinstance(node, ast.Name):
            function = self.function_of(where)
            if function is not None and node.id in [argument.arg for argument in function.args.args]:
                return set().union(*(self.flags(value, site, depth + 1)
                                     for value, site in self.arguments_at_calls(function, node.id)))
            values = self.assignments(node.id, function) or self.assignments(node.id, None)
            if values:
                return set().union(*(self.flags(value, where, depth + 1) for value in values))
        raise Unresolved(ast.dump(node)[:80])

    def mode(self, node, where) -> str:
        if isinstance(literal(node), str):
            return literal(node)
        if isinstance(node, ast.Name):
            function = self.function_of(where)
            if function is not None and node.id in [argument.arg for argument in function.args.args]:
                return "".join(self.mode(value, site) for value, site in self.arguments_at_calls(function, node.id))
        raise Unresolved(ast.dump(node)[:80])

    def writes(self) -> list:
        """(line, what) of every way this source opens a file for writing, as far as it can be read."""
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] + ([node.module or ""] if isinstance(
                    node, ast.ImportFrom) else [])
                if any(name.split(".")[0] == "pydot" or name.endswith("net_drawer") for name in names):
                    found.append((node.lineno, "imports pydot / net_drawer"))
            if not isinstance(node, ast.Call):
                continue
            try:
                what = self._call_writes(node)
            except Unresolved as unresolved:
                what = "cannot be read as constants ({})".format(unresolved)
            if what:
                found.append((node.lineno, "{}: {}".format(dotted(node.func) or "call", what)))
        return found

    def _call_writes(self, call) -> str:
        name = dotted(call.func)
        last = name.rpartition(".")[2] if name else getattr(call.func, "attr", "")
        if name in WRITING_CALLS:
            return "writes a file"
        if last in PATH_WRITES or last.startswith("write_") and last[len("write_"):] in PYDOT_FORMATS:
            return "writes a file"
        if name.startswith(("np.", "numpy.")) and last in NUMPY_SAVES:
            target = call.args[0] if call.args else None
            if not (isinstance(target, ast.Name) and target.id in self.handles):
                return "saves to something other than an open handle"
        if last == "open" and name != "os.open":
            if call.args and dotted(call.args[0]) == "os.devnull":
                return ""
            keyword = [item.value for item in call.keywords if item.arg == "mode"]
            position = 1 if isinstance(call.func, ast.Name) or name.count(".") == 1 else 0
            mode = keyword[0] if keyword else call.args[position] if len(call.args) > position else None
            if mode is not None and set(self.mode(mode, call)) & set("wax+"):
                return "opens for writing"
        flag_arguments = [argument for argument in list(call.args) + [item.value for item in call.keywords]
                          if not isinstance(argument, ast.Call)  # a call is checked on its own
                          and any(dotted(inner).startswith("os.O_") for inner in ast.walk(argument))]
        if name == "os.open":
            flag_arguments = [call.args[1]] if len(call.args) > 1 else [
                item.value for item in call.keywords if item.arg == "flags"]
        for argument in flag_arguments:
            written = self.flags(argument, call) & WRITE_FLAGS
            if written:
                return "flags {}".format(sorted(written))
        return ""


def test_only_the_atomic_writer_opens_files_for_writing():
    modules = package_modules()
    assert WRITER in modules and len(modules) > 50
    found = {}
    for module, path in sorted(modules.items()):
        with open(path, encoding="utf-8") as handle:
            writes = Source(handle.read()).writes()
        if writes and module != WRITER:
            found[os.path.relpath(path, PACKAGE_DIR)] = writes
    assert found == {}, found
    with open(modules[WRITER], encoding="utf-8") as handle:
        assert Source(handle.read()).writes(), "the checker sees the writer's own writes"


WRITING_SOURCES = {
    "open_w": "open(path, 'w')",
    "open_mode_keyword": "open(path, mode='ab')",
    "open_plus": "import io\nio.open(path, 'r+b')",
    "open_mode_variable": "def f(m):\n    return open(path, m)\nf(mode_from_somewhere)",
    "open_mode_parameter": "def f(path, m='rb'):\n    return open(path, m)\nf(p, 'wb')",
    "path_open": "Path(path).open('w')",
    "write_text": "Path(path).write_text('x')",
    "write_bytes": "target.write_bytes(b'x')",
    "pydot_write": "graph.write_svg(path)",
    "pydot_import": "import pydot",
    "net_drawer_import": "from caffe2.python import net_drawer",
    "touch": "Path(path).touch()",
    "os_open": "import os\nos.open(path, os.O_WRONLY | os.O_CREAT)",
    "os_open_keyword": "import os\nos.open(path, flags=os.O_RDWR)",
    "os_open_variable": "import os\nflags = os.O_RDONLY | os.O_APPEND\nos.open(path, flags)",
    "os_open_parameter": "import os\ndef f(flags):\n    return os.open(path, flags | os.O_CLOEXEC)\nf(os.O_TRUNC)",
    "os_open_unknown": "import os\nos.open(path, some_flags())",
    "openat2_structure": "import os\ndef f(flags):\n    how = OpenHow(flags | os.O_CLOEXEC, 0)\nf(os.O_CREAT)",
    "shutil_copy": "import shutil\nshutil.copyfile(a, b)",
    "shutil_move": "import shutil\nshutil.move(a, b)",
    "mkstemp": "import tempfile\ntempfile.mkstemp()",
    "named_temporary": "import tempfile\ntempfile.NamedTemporaryFile()",
    "np_save_path": "import numpy as np\nnp.save(path, x)",
    "np_savez_expression": "import numpy as np\nnp.savez(path + '.npz', x=x)",
    "tofile": "x.tofile(path)",
    "torch_save": "import torch\ntorch.save(x, path)",
    "onnx_save": "import onnx\nonnx.save(model, path)",
    "mkfifo": "import os\nos.mkfifo(path)",
}
READING_SOURCES = {
    "open_default": "open(path)",
    "open_rb": "open(path, 'rb')",
    "devnull": "import os\nopen(os.devnull, 'w')",
    "os_open_read": "import os\nos.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)",
    "os_open_read_parameter": "import os\ndef f(flags):\n    return os.open(p, flags)\nf(os.O_RDONLY | os.O_NONBLOCK)",
    "savez_handle": "import numpy as np\nwith opened() as handle:\n    np.savez(handle, x=x)",
    "savez_lambda": "import numpy as np\nwrite_atomically(path, lambda handle: np.savez(handle, x=x))",
    "handle_write": "handle.write(b'x')",
    "package_writers": "write_atomically(path, write)\nwrite_file(data, path, 'net')",
    "mkdtemp": "import tempfile\ntempfile.mkdtemp()",
    "replace": "import os\nos.replace(a, b)",
}


@pytest.mark.parametrize("name", sorted(WRITING_SOURCES))
def test_the_checker_sees_each_way_of_writing(name):
    assert Source(textwrap.dedent(WRITING_SOURCES[name])).writes(), name


@pytest.mark.parametrize("name", sorted(READING_SOURCES))
def test_the_checker_lets_reading_be(name):
    assert Source(READING_SOURCES[name]).writes() == [], name
