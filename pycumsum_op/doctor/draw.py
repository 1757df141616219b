"""Draw the part of a net around each finding, with Caffe2's own `net_drawer` (pydot, and graphviz's ``dot``).

`draw_findings` draws the ops within `RADIUS` data-flow steps of each finding: the op that refuses a sparse
gradient red, the op that makes it sparse orange, the other ops of a recognised idiom (or of a loop that is
no cumulative sum) yellow. `draw_repairs` draws a fixed net around what `fix` put in: new ops green, ops
given other inputs light green. Both
return the SVG bytes; `drawing_tools` raises `DrawingUnavailable`, naming what to install, when pydot or
``dot`` is missing.
"""
import importlib.util
import shutil

from .findings import MIXED_GRADIENTS, SPARSE_GRADIENT, TWO_CHARACTER_GRADIENT_NAME

#: How many data-flow steps (op → blob → op) around a finding's ops are drawn.
RADIUS = 2
#: Fill colours by role; the rest of the net keeps net_drawer's own green ops.
REFUSES, MAKES_SPARSE, IDIOM, CURE, CHANGED, CONTEXT = ("#DB4437", "#F4B400", "#FFE082", "#0F9D58", "#A5D6A7",
                                                       "#B0BEC5")
_ROLE_TEXT = {REFUSES: "refuses the sparse gradient", MAKES_SPARSE: "makes the gradient sparse",
              IDIOM: "", CURE: "put in by fix", CHANGED: "its inputs changed by fix", CONTEXT: ""}


class DrawingUnavailable(RuntimeError):
    """pydot or graphviz's ``dot`` program is missing; the message says what to install."""


def drawing_tools() -> None:
    """Raise `DrawingUnavailable` unless net_drawer can draw: pydot importable and ``dot`` on PATH."""
    if importlib.util.find_spec("pydot") is None:
        raise DrawingUnavailable("drawing needs the Python package pydot, which Caffe2's net_drawer uses: "
                                 "pip install pydot (and graphviz's dot program: apt-get install graphviz)")
    if shutil.which("dot") is None:
        raise DrawingUnavailable("drawing needs graphviz's dot program on PATH (pydot runs it): apt-get install "
                                 "graphviz (Debian/Ubuntu), brew install graphviz (macOS)")


def _neighbourhood(netdef, centres, radius: int = RADIUS) -> list:
    """Indices of the ops within ``radius`` data-flow steps of the ops ``centres``, in net order."""
    reached, frontier = set(centres), set(centres)
    for _ in range(radius):
        blobs = {blob for index in frontier for blob in list(netdef.op[index].input) + list(netdef.op[index].output)}
        frontier = {index for index, op in enumerate(netdef.op)
                    if index not in reached and blobs & (set(op.input) | set(op.output))}
        reached |= frontier
    return sorted(reached)


def _roles(findings) -> dict:
    """{op index: fill colour} for the ops of ``findings``."""
    roles = {}
    for finding in findings:
        members = (finding.idiom.ops if finding.idiom is not None else ()) + (
            finding.loop.ops if finding.loop is not None else ())
        for index in members:
            roles.setdefault(index, IDIOM)
        if finding.kind in (SPARSE_GRADIENT, MIXED_GRADIENTS, TWO_CHARACTER_GRADIENT_NAME):
            if finding.source_index is not None:
                roles[finding.source_index] = MAKES_SPARSE
            if finding.op_index is not None:
                roles[finding.op_index] = REFUSES
        elif finding.op_index is not None and finding.loop is None and finding.idiom is None:
            roles[finding.op_index] = REFUSES
    return roles


def _svg(netdef, roles: dict, title: str) -> bytes:
    """net_drawer's graph of the ops around ``roles``' ops, coloured by role, as SVG."""
    drawing_tools()
    import pydot  # optional: drawing_tools said it is there
    from caffe2.python import net_drawer  # imported after that check: without pydot it prints a warning

    indices = _neighbourhood(netdef, roles)

    def op_node(op, position):
        index = indices[position]
        colour = roles.get(index, CONTEXT)
        text = _ROLE_TEXT[colour]
        label = "#{} {}{}{}".format(index, op.type, " " + op.name if op.name else "", "\\n" + text if text else "")
        return pydot.Node("op{}".format(index), label=label, shape="box", style="filled", fillcolor=colour,
                          fontcolor="#000000")

    graph = net_drawer.GetPydotGraph([netdef.op[index] for index in indices], name=title, rankdir="TB",
                                     op_node_producer=op_node)
    return graph.create_svg()


def draw_findings(netdef, findings, title: str = "") -> bytes:
    """The SVG of ``netdef`` around each of ``findings`` (`pycumsum_op.doctor.diagnose`'s result)."""
    return _svg(netdef, _roles(findings), title or netdef.name or "net")


def draw_repairs(original, fixed, title: str = "") -> bytes:
    """The SVG of ``fixed`` (`pycumsum_op.doctor.fix`'s result) around the ops it has and ``original`` lacks:
    new ops green, ops that write the same blobs from other inputs light green."""
    before = {op.SerializeToString() for op in original.op}
    writes = {(op.type, tuple(op.output)) for op in original.op}
    roles = {index: CHANGED if (op.type, tuple(op.output)) in writes else CURE
             for index, op in enumerate(fixed.op) if op.SerializeToString() not in before}
    return _svg(fixed, roles, title or (fixed.name or "net") + " (fixed)")
