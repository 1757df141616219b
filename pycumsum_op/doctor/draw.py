"""Draw the part of a net around each finding as SVG: the graph written in DOT here, laid out by graphviz's ``dot``.

`draw_findings` draws the ops within `RADIUS` data-flow steps of each finding: the op that refuses a sparse
gradient red, the op that makes it sparse orange, the other ops of a recognised idiom (or of a loop that is
no cumulative sum) yellow. `draw_repairs` draws a fixed net around what `fix` put in: new ops green, ops
given other inputs light green. Both return the SVG bytes; `drawing_tools` raises `DrawingUnavailable`,
naming what to install, when ``dot`` is missing.

A net is input like any other, so the picture is bounded and inert whatever the net holds. The graph is
written here rather than by Caffe2's net_drawer through pydot: net_drawer adds a blob again for each op that
reads it and pydot 1.4.2 rebuilds its node list on each add (a blob read by 1,000 ops took minutes), and
neither escapes a backslash for DOT (a name ending in ``\\`` broke the file; a net name could write its own
DOT statements, links included). Here the work is linear in the ops drawn: at most `MAX_DRAWN_OPS` ops
(nearest the findings first; the caption says how many were left out) and `MAX_OP_BLOBS` inputs and outputs
each; node ids are numbers, every name is a quoted DOT string with its backslashes, quotes and control
characters escaped (shown as text, cut to `MAX_NAME_CHARS`); ``dot`` runs under `DOT_SECONDS` and
`DOT_MEMORY_BYTES`; and the SVG it returns is read back and refused (`DrawingRefused`) if it holds a link,
a script or an event handler.
"""
import os
import resource
import shutil
import signal
import subprocess
import unicodedata
import xml.etree.ElementTree as ElementTree

from .findings import MIXED_GRADIENTS, SPARSE_GRADIENT, TWO_CHARACTER_GRADIENT_NAME

#: How many data-flow steps (op → blob → op) around a finding's ops are drawn.
RADIUS = 2
#: At most this many ops are drawn, the nearest to the findings first: dot's layout grows faster than the
#: graph, and a picture of more ops is no longer read.
MAX_DRAWN_OPS = 60
#: At most this many inputs, and as many outputs, of each op drawn (the label counts the rest).
MAX_OP_BLOBS = 16
#: Names longer than this are cut in the picture (the label says by how much).
MAX_NAME_CHARS = 120
#: ``dot``'s wall-clock limit and address-space limit: a bounded graph is laid out in well under a second.
DOT_SECONDS = 10.0
DOT_MEMORY_BYTES = 2 ** 30
#: Fill colours by role; the other ops drawn are grey.
REFUSES, MAKES_SPARSE, IDIOM, CURE, CHANGED, CONTEXT = ("#DB4437", "#F4B400", "#FFE082", "#0F9D58", "#A5D6A7",
                                                       "#B0BEC5")
_ROLE_TEXT = {REFUSES: "refuses the sparse gradient", MAKES_SPARSE: "makes the gradient sparse",
              IDIOM: "", CURE: "put in by fix", CHANGED: "its inputs changed by fix", CONTEXT: ""}
#: Unicode categories shown as escapes: control, format (bidirectional overrides), surrogate, private use,
#: unassigned, line and paragraph separators
_UNSEEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
#: SVG elements and attributes that link, load or run something: none may be in a picture.
_ACTIVE_ELEMENTS = {"a", "script", "foreignObject", "iframe", "image", "use", "animate", "set", "animateMotion",
                    "animateTransform", "handler", "listener", "feImage"}
_LINK_ATTRIBUTES = {"href", "src", "action", "formaction"}


class DrawingUnavailable(RuntimeError):
    """graphviz's ``dot`` program is missing; the message says what to install."""


class DrawingRefused(RuntimeError):
    """``dot`` failed or ran out of time or memory, or its SVG holds something active; one line says which."""


def drawing_tools() -> None:
    """Raise `DrawingUnavailable` unless graphviz's ``dot`` is on PATH."""
    if shutil.which("dot") is None:
        raise DrawingUnavailable("drawing needs graphviz's dot program on PATH: apt-get install graphviz "
                                 "(Debian/Ubuntu), brew install graphviz (macOS)")


def _neighbourhood(netdef, centres, radius: int = RADIUS, cap: int = MAX_DRAWN_OPS):
    """(indices of at most ``cap`` ops within ``radius`` data-flow steps of the ops ``centres``, nearest first,
    in net order; how many ops are within ``radius`` steps). Each blob and op is visited once."""
    users = {}
    for index, op in enumerate(netdef.op):
        for blob in set(op.input) | set(op.output):
            users.setdefault(blob, []).append(index)
    levels, reached, seen_blobs = [sorted(set(centres))], set(centres), set()
    for _ in range(radius):
        following = set()
        for index in levels[-1]:
            for blob in set(netdef.op[index].input) | set(netdef.op[index].output):
                if blob not in seen_blobs:
                    seen_blobs.add(blob)
                    following.update(other for other in users[blob] if other not in reached)
        reached |= following
        levels.append(sorted(following))
    chosen = []
    for level in levels:
        chosen += level[:cap - len(chosen)]
    return sorted(chosen), len(reached)


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


def shown(name: str, limit: int = MAX_NAME_CHARS) -> str:
    """``name`` as the picture shows it: cut to ``limit`` characters, control and format characters as escapes.

    >>> shown("relu\\\\"), shown("a\\nb"), shown("x" * 90, 10)
    ('relu\\\\', 'a\\\\x0ab', 'xxxxxxxxxx...(+80 chars)')
    """
    text = name[:limit] + ("...(+{} chars)".format(len(name) - limit) if len(name) > limit else "")
    return "".join(_escaped(char) if unicodedata.category(char) in _UNSEEN else char for char in text)


def _escaped(char: str) -> str:
    """A control, format, surrogate, private, unassigned or line-separating character as its escape, so that it
    is seen."""
    return "\\x{:02x}".format(ord(char)) if ord(char) < 0x100 else "\\u{:04x}".format(ord(char))


def dot_string(text: str) -> str:
    """``text`` as a quoted DOT string that graphviz shows as exactly ``text``: backslashes and quotes escaped
    (graphviz reads ``\\n``, ``\\N``, ``\\G`` ... in labels), ``&`` as ``&amp;`` (graphviz reads entities in
    labels).

    >>> print(dot_string('"x" { a [URL="javascript:b"] } \\\\'))
    "\\"x\\" { a [URL=\\"javascript:b\\"] } \\\\"
    """
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;") + '"'


def _label(*lines: str) -> str:
    """A DOT label of ``lines`` (each already `shown`), centred."""
    return "\\n".join(dot_string(line)[1:-1] for line in lines)


def _dot(netdef, roles: dict, title: str) -> str:
    """The DOT text of the ops around ``roles``' ops, coloured by role: ops as boxes, blobs as octagons, a blob
    written again as a new node (as net_drawer draws it), the caption naming the net and what was left out."""
    indices, within = _neighbourhood(netdef, roles)
    caption = [shown(title)]
    if within > len(indices):
        caption.append("{} of the {} ops within {} steps of the marked ops drawn (MAX_DRAWN_OPS)".format(
            len(indices), within, RADIUS))
    lines = ["digraph drawing {", '  graph [rankdir=TB, labelloc=t, fontname=Helvetica, label="{}"];'.format(_label(*caption)),
             "  node [fontname=Helvetica]; edge [fontname=Helvetica];"]
    blob_nodes = {}

    def blob_node(name: str, written: bool) -> str:
        if written or name not in blob_nodes:
            node = "b{}".format(len(lines))
            lines.append('  {} [shape=octagon, label="{}"];'.format(node, _label(shown(name))))
            blob_nodes[name] = node
        return blob_nodes[name]

    for index in indices:
        op = netdef.op[index]
        colour = roles.get(index, CONTEXT)
        text = ["#{} {}{}".format(index, shown(op.type), " " + shown(op.name) if op.name else "")]
        if _ROLE_TEXT[colour]:
            text.append(_ROLE_TEXT[colour])
        left_out = max(len(op.input) - MAX_OP_BLOBS, 0), max(len(op.output) - MAX_OP_BLOBS, 0)
        if any(left_out):
            text.append("({} more inputs and {} more outputs not drawn)".format(*left_out))
        node = "op{}".format(index)
        lines.append('  {} [shape=box, style=filled, fillcolor="{}", fontcolor="#000000", label="{}"];'.format(
            node, colour, _label(*text)))
        for name in op.input[:MAX_OP_BLOBS]:
            lines.append("  {} -> {};".format(blob_node(name, False), node))
        for name in op.output[:MAX_OP_BLOBS]:
            lines.append("  {} -> {};".format(node, blob_node(name, True)))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _limit_dot() -> None:
    """In ``dot``'s process before it runs: its address space capped."""
    resource.setrlimit(resource.RLIMIT_AS, (DOT_MEMORY_BYTES, DOT_MEMORY_BYTES))


def _layout(dot_text: str) -> bytes:
    """``dot -Tsvg`` of ``dot_text`` within `DOT_SECONDS` and `DOT_MEMORY_BYTES`, else `DrawingRefused`."""
    drawing_tools()
    # its own session, so that the whole group is killed on time out: a wrapper's children would keep the
    # pipes open, and communicate() would wait for them
    with subprocess.Popen([shutil.which("dot"), "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, preexec_fn=_limit_dot, start_new_session=True) as process:
        try:
            svg, errors = process.communicate(dot_text.encode("utf-8", "backslashreplace"), timeout=DOT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise DrawingRefused("graphviz's dot did not lay out the drawing within {} s (DOT_SECONDS)".format(
                DOT_SECONDS)) from None
    if process.returncode != 0:
        reason = (errors.decode("utf-8", "replace").strip().splitlines() or ["no message"])[0][:300]
        raise DrawingRefused("graphviz's dot failed (exit {}): {}".format(process.returncode, reason))
    return svg


def check_inert(svg: bytes) -> None:
    """`DrawingRefused` unless ``svg`` is well-formed XML with no element that links, loads or runs anything
    (`_ACTIVE_ELEMENTS`), no link attribute (``href``, ``xlink:href``, ...) and no event handler (``on...``)."""
    try:
        root = ElementTree.fromstring(svg)
    except ElementTree.ParseError as error:
        raise DrawingRefused("the drawing is not well-formed SVG: {}".format(error)) from None
    for element in root.iter():
        tag = element.tag.rpartition("}")[2]
        if tag in _ACTIVE_ELEMENTS:
            raise DrawingRefused("the drawing holds a <{}> element; refusing to write it".format(tag))
        for attribute in element.attrib:
            name = attribute.rpartition("}")[2].lower()
            if name in _LINK_ATTRIBUTES or name.startswith("on"):
                raise DrawingRefused("the drawing's <{}> has a {} attribute; refusing to write it".format(tag, name))


def _svg(netdef, roles: dict, title: str) -> bytes:
    """The drawing of the ops around ``roles``' ops, coloured by role, as SVG checked inert."""
    svg = _layout(_dot(netdef, roles, title))
    check_inert(svg)
    return svg


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
