"""The package's modules import each other top-down: no import circles.

`import_graph` reads every module's source (nothing is imported) and records which of the package's
modules it imports — at module level (what runs on import), or anywhere, imports inside functions
included. Importing ``p.q.m`` runs ``p.q``'s ``__init__`` first, so that is an edge too; an edge to a
module's own parent packages is left out: Python runs those before the module, whichever way in.
"""
import ast
import os
import subprocess
import sys
from typing import Dict, List, Set

import pytest

import pycumsum_op

PACKAGE = "pycumsum_op"
PACKAGE_DIR = os.path.dirname(os.path.abspath(pycumsum_op.__file__))

# The command-line tools: nothing in the package below them imports them, deferred imports included.
TOOLS = ("pycumsum_op.cli", "pycumsum_op.commands", "pycumsum_op.demo", "pycumsum_op.progress",
         "pycumsum_op.training", "pycumsum_op.doctor", "pycumsum_op.examples")
#: The layers, bottom up (DEVELOPERS.md): a module imports from its own layer and those below, never from
#: one above, deferred imports included. Each module (and its submodules) belongs to exactly one; the
#: package itself, which loads the public API, stands above them all.
LAYERS = (
    ("core", ("pycumsum_op.scans", "pycumsum_op.kernels", "pycumsum_op.torch_versions")),
    ("binding", ("pycumsum_op.ops", "pycumsum_op.serialization", "pycumsum_op._safe_unpickle",
                 "pycumsum_op._text_format", "pycumsum_op.input_limits", "pycumsum_op.wire_census",
                 "pycumsum_op._atomic_files",
                 "pycumsum_op.netdefs", "pycumsum_op.idioms", "pycumsum_op._runtime")),
    ("converters", ("pycumsum_op.lowering", "pycumsum_op.onnx")),
    ("tools", TOOLS),
)


def package_modules(root: str = PACKAGE_DIR, package: str = PACKAGE) -> Dict[str, str]:
    """{dotted module name: path} of every module under ``root`` (a package's name is its __init__'s)."""
    modules = {}
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(name for name in subdirectories if name != "__pycache__")
        parts = [package] + os.path.relpath(directory, root).split(os.sep)
        parts = [part for part in parts if part != "."]
        for name in files:
            if name.endswith(".py"):
                dotted = ".".join(parts) if name == "__init__.py" else ".".join(parts + [name[:-3]])
                modules[dotted] = os.path.join(directory, name)
    return modules


def _imports(tree: ast.Module, module_level_only: bool):
    """The Import / ImportFrom nodes that run on import (``module_level_only``), or all of them."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if module_level_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        pending.extend(ast.iter_child_nodes(node))


def import_graph(modules: Dict[str, str], module_level_only: bool) -> Dict[str, Set[str]]:
    """{module: the package modules it imports}, read from the sources of ``modules``.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> for name, text in {"__init__.py": "", "a.py": "from . import b", "b.py": "def f():\\n    from .a import x"}.items():
    ...     with open(os.path.join(root, name), "w") as handle:
    ...         _ = handle.write(text)
    >>> found = package_modules(root, "p")
    >>> sorted(found)
    ['p', 'p.a', 'p.b']
    >>> import_graph(found, module_level_only=True)
    {'p': set(), 'p.a': {'p.b'}, 'p.b': set()}
    >>> import_graph(found, module_level_only=False)["p.b"]
    {'p.a'}
    """
    graph = {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        targets = set()
        for node in _imports(tree, module_level_only):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = package.split(".")
                if node.level:
                    base = base[:len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module
                names = [source] + [source + "." + alias.name for alias in node.names]
            for name in names:
                while name and name not in modules:  # `import a.b.c` of a module, or `from m import function`
                    name = name.rpartition(".")[0]
                while name:  # importing p.q.m runs p.q's __init__ first, unless it is the importer's own package
                    if name != module and not module.startswith(name + "."):
                        targets.add(name)
                    name = name.rpartition(".")[0]
        graph[module] = targets
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted.

    >>> cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c']]
    >>> cycles({"a": {"b"}, "b": set()})
    []
    """
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


MODULES = package_modules()


def test_the_graph_sees_the_package():
    graph = import_graph(MODULES, module_level_only=True)
    assert {"pycumsum_op.cli", "pycumsum_op.commands._common", "pycumsum_op.progress"} <= set(graph)
    assert "pycumsum_op.commands._common" in graph["pycumsum_op.commands.lower"]
    assert "pycumsum_op.progress" in graph["pycumsum_op.training.worker"]


def test_no_import_circles_deferred_imports_included():
    """Imports inside functions load heavy modules late (``--help`` needs no Caffe2); none closes a circle."""
    assert cycles(import_graph(MODULES, module_level_only=True)) == []
    assert cycles(import_graph(MODULES, module_level_only=False)) == []


def layer_of(module: str, layers=LAYERS) -> int:
    """The index in ``layers`` of the layer holding ``module``; ValueError for a module in none (or several).

    >>> layer_of("pycumsum_op.scans.family"), layer_of("pycumsum_op.lowering"), layer_of("pycumsum_op.cli")
    (0, 2, 3)
    """
    found = [index for index, (_, prefixes) in enumerate(layers)
             for prefix in prefixes if module == prefix or module.startswith(prefix + ".")]
    if len(found) != 1:
        raise ValueError("{} is in {} layers; put it in exactly one of LAYERS".format(module, len(found)))
    return found[0]


def test_every_module_is_in_one_layer():
    for module in sorted(set(MODULES) - {PACKAGE}):
        layer_of(module)


def upward_imports(graph: Dict[str, Set[str]], layers=LAYERS) -> List[str]:
    """Each import in ``graph`` from a module to one in a higher layer, said in words.

    >>> upward_imports({"p.low": {"p.high"}, "p.high": {"p.low"}}, (("low", ("p.low",)), ("high", ("p.high",))))
    ['p.low (low) imports p.high (high)']
    """
    return ["{} ({}) imports {} ({})".format(module, layers[layer_of(module, layers)][0], target,
                                            layers[layer_of(target, layers)][0])
            for module in sorted(set(graph) - {PACKAGE}) for target in sorted(graph[module] - {PACKAGE})
            if layer_of(target, layers) > layer_of(module, layers)]


def test_no_module_imports_from_a_layer_above_deferred_imports_included():
    """core (scans, kernels) < binding (ops, serialization) < converters (lowering, onnx) < tools."""
    assert upward_imports(import_graph(MODULES, module_level_only=False)) == []


def test_the_tools_are_imported_only_from_above_deferred_imports_included():
    graph = import_graph(MODULES, module_level_only=False)
    tools = {module for module in graph if module.startswith(TOOLS)}
    assert cycles({module: graph[module] & tools for module in tools}) == []
    for module in sorted(set(graph) - tools - {PACKAGE}):
        assert not graph[module] & tools, "{} imports the tools {}".format(module, sorted(graph[module] & tools))


@pytest.mark.slow  # a fresh interpreter per module
@pytest.mark.parametrize("module", sorted(module for module in MODULES if module.startswith(TOOLS)))
def test_each_tool_module_imports_first_in_a_fresh_interpreter(module):
    """Imported first, each module of the tools finds what it needs: no import order hides a circle."""
    result = subprocess.run([sys.executable, "-c", "import " + module], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
