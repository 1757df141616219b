"""What an ONNX op's one declaration states: the forms accepted (`Form`), who translates them, and the facts every
other part of the import reads off the op (its rank rule, the inputs shape inference reads as a shape, the dims the
census counts, the bound of its element count, its input names for refusals).

A family module declares each op once, in the manner of onnx2torch's ``@add_converter``, plus the contract those
lack::

    @declare("Softsign", Form((1, NEWEST)), types=FLOAT, rank=same_rank)
    def softsign(node, facts, opset, fresh):
        ...

and an op Caffe2's stock converter translates right is declared without a translation (`stock`). The checker
(`pycumsum_op.onnx.forms`), the facts (`pycumsum_op.onnx.facts`), the census and shape inference
(`pycumsum_op.onnx.model_input`, `pycumsum_op.onnx.inference`), the backend and the docs' table read
`DECLARATIONS`; `withdraw` takes an op back (tests declare one and withdraw it).
"""
from typing import Callable, Dict, FrozenSet, Mapping, NamedTuple, Optional, Tuple

from onnx import TensorProto

STOCK = "stock"
OWN = "pycumsum_op"
#: The newest opset any form covers (onnx 1.10's newest): a later opset's changes are unreviewed.
NEWEST = 15


class FormRefused(ValueError):
    """A node whose form is not on the allow-list: one line naming the op, the opset and why."""


class Form(NamedTuple):
    """One accepted form of an ONNX op."""
    #: the model opsets (of the default domain) the form covers, first and last
    opsets: Tuple[int, int]
    #: the attributes the node may carry -> the values accepted (None: any value)
    attributes: Mapping[str, Optional[FrozenSet]] = {}
    #: the input positions that must be constants
    constants: Tuple[int, ...] = ()
    #: who translates it: `STOCK` (Caffe2's converter) or `OWN` (the declaration's translation); None: the
    #: declaration's (`OWN` when it has a translation)
    translation: Optional[str] = None
    #: the ONNX element types (TensorProto.DataType) of blob `typed` that Caffe2's kernels run right, as measured
    #: by tests/onnx_form_types.py; None: the declaration's ``types``. A blob of another type, or of a type the
    #: graph does not state, is refused
    types: Optional[FrozenSet[int]] = None
    #: the blob whose element type is checked: ("input", position) or ("output", position); None: the
    #: declaration's
    typed: Optional[Tuple[str, int]] = None


#: ``known(name)`` -> the rank of blob ``name`` or None; a rank rule is ``rule(node, known, facts)`` -> the rank of
#: the node's outputs by ONNX's definition of the op, or None
RankRule = Callable[..., Optional[int]]
#: ``known_dims(name)`` -> the dims of blob ``name`` (a dim None: not known) or None; a dims rule is
#: ``rule(node, known_dims, facts)`` -> the dims of the node's first output by ONNX's definition of the op, or None
DimsRule = Callable[..., Optional[list]]


class Declaration(NamedTuple):
    """Everything the import knows of one ONNX op."""
    op: str
    #: its accepted forms, each complete (translation, types and typed filled in)
    forms: Tuple[Form, ...]
    #: ``translate(node, facts, opset, fresh)`` -> the Caffe2 OperatorDefs of an `OWN` form; None: Caffe2's converter
    translate: Optional[Callable]
    #: the names of its inputs (how refusals name them)
    inputs: Tuple[str, ...]
    #: why the forms it refuses would be wrong in Caffe2, where that is known (added to refusals)
    why: str
    #: its rank rule (None: its outputs' ranks are only what shape inference says)
    rank: Optional[RankRule]
    #: its dims rule (None: its output's dims are only what shape inference says)
    dims: Optional[DimsRule]
    #: the input ONNX shape inference reads as a shape (one dimension per entry), or None
    shape_input: Optional[int]
    #: whether inference turns the *length* of `shape_input` into the output's rank (ConstantOfShape)
    length_is_rank: bool
    #: (input, dim, what it names, what it counts): dims that inference or the translation makes one entry per
    counted: Tuple[Tuple[int, int, str, str], ...]
    #: a bound of its output's element count: `AT_MOST_FIRST`, `BROADCAST` or None (no bound known)
    elements: Optional[str]


#: ``Declaration.elements``: no more elements than its first input; at most the product of its inputs' counts
AT_MOST_FIRST = "at most first"
BROADCAST = "broadcast"

#: ONNX op -> its declaration
DECLARATIONS: Dict[str, Declaration] = {}

_F = TensorProto
FLOAT = frozenset([_F.FLOAT])
BOOL = frozenset([_F.BOOL])
SMALL_INTS = frozenset([_F.INT8, _F.INT16, _F.UINT8])
#: Caffe2's arithmetic, comparison and reduction kernels
NUMBERS = frozenset([_F.FLOAT, _F.DOUBLE, _F.INT32, _F.INT64])
#: what Caffe2 moves without arithmetic (gathers, slices, reshapes, copies): every type its tensors hold but
#: uint32/uint64 (no Caffe2 tensor type) and strings (no numpy array in and out of its workspace)
MOVED = frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16, _F.INT8, _F.INT16, _F.INT32, _F.INT64, _F.UINT8, _F.UINT16,
                   _F.BOOL])
#: an attribute taking any value
ANY = None
ZERO_ONE = frozenset([0, 1])


def declare(op: str, *forms: Form, types: Optional[FrozenSet[int]] = None, typed: Tuple[str, int] = ("input", 0),
            inputs: Tuple[str, ...] = (), why: str = "", rank: Optional[RankRule] = None,
            dims: Optional[DimsRule] = None, shape_input: Optional[int] = None, length_is_rank: bool = False,
            counted=(),
            elements: Optional[str] = None):
    """Declare ONNX ``op``: decorates its translation (called with None: `stock`). ``types`` are the element
    types of blob ``typed`` its forms run right on, measured (tests/onnx_form_types.py); a form may state its own.
    An op without measured types accepts none (tests/test_onnx_forms.py fails on it)."""
    if op in DECLARATIONS:
        raise ValueError("ONNX {} is declared twice: once in {}".format(op, DECLARATIONS[op].translate))
    if not forms:
        raise ValueError("ONNX {} is declared without a form".format(op))

    def register(translate: Optional[Callable]) -> Optional[Callable]:
        complete = tuple(form._replace(
            translation=form.translation or (OWN if translate is not None else STOCK),
            types=form.types if form.types is not None else (types if types is not None else frozenset()),
            typed=form.typed or typed) for form in forms)
        if any(form.translation == OWN for form in complete) and translate is None:
            raise ValueError("ONNX {}: a form translated by pycumsum_op needs a translation".format(op))
        DECLARATIONS[op] = Declaration(op, complete, translate, tuple(inputs), why, rank, dims, shape_input,
                                       length_is_rank, tuple(counted), elements)
        return translate
    return register


def stock(op: str, *forms: Form, **contract) -> None:
    """Declare ONNX ``op`` translated by Caffe2's stock converter (`declare`'s arguments)."""
    declare(op, *forms, **contract)(None)


def withdraw(op: str) -> None:
    """Take back the declaration of ``op``."""
    DECLARATIONS.pop(op, None)


def label(node, opset) -> str:
    """How refusals name a node: ``ONNX Slice node 'y' (opset 13)``."""
    return "ONNX {} node {!r} (opset {})".format(node.op_type, node.name or ",".join(node.output), opset)


def given(node, position: int) -> bool:
    """Whether the node has input ``position`` (ONNX leaves an optional input out, or names it "")."""
    return position < len(node.input) and bool(node.input[position])


def type_name(elem_type: Optional[int]) -> str:
    """``FLOAT``, ``INT64``, ...: the ONNX name of an element type."""
    return TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else str(elem_type)


# Rank rules: ``rule(node, known, facts)``, ``known(name)`` the rank of an input so far (None: unknown).

def same_rank(node, known, facts) -> Optional[int]:
    """Each output has the first input's rank."""
    return known(node.input[0])


def broadcast_rank(node, known, facts) -> Optional[int]:
    """numpy's broadcasting: the largest rank of the inputs."""
    ranks = [known(name) for name in node.input]
    return None if None in ranks else max(ranks)


def first_known_rank(node, known, facts) -> Optional[int]:
    """Every input has the output's rank (Concat): the first one known."""
    return next((rank for rank in (known(name) for name in node.input) if rank is not None), None)


def shape_length_rank(node, known, facts) -> Optional[int]:
    """As many dimensions as the shape input (the declaration's ``shape_input``) has entries."""
    dims = facts.dims(node.input[DECLARATIONS[node.op_type].shape_input])
    return None if not dims or len(dims) != 1 or dims[0] is None else dims[0]


def fixed_rank(rank: int) -> RankRule:
    """Always ``rank`` dimensions (Shape: 1, Size: 0)."""
    def rule(node, known, facts) -> Optional[int]:
        return rank
    rule.__doc__ = "Always {} dimensions.".format(rank)
    return rule


def reduced_rank(node, known, facts) -> Optional[int]:
    """A reduction's (or ArgMax's): the input's rank with keepdims=1 (the default), without the reduced axes
    otherwise."""
    rank = known(node.input[0])
    attributes = {attr.name: attr.i for attr in node.attribute if attr.name in ("keepdims", "noop_with_empty_axes")}
    if rank is None or attributes.get("keepdims", 1):
        return rank
    if node.op_type in ("ArgMax", "ArgMin"):
        return rank - 1
    axes = facts.axes(node)
    if axes is None and len(node.input) > 1 and node.input[1]:
        return None  # axes computed at run time
    if not axes:  # every axis, or none at all when told so (opset 13's ReduceSum)
        return rank if attributes.get("noop_with_empty_axes", 0) else 0
    return rank - len({axis % rank for axis in axes}) if rank else 0


# Dims rules: ``rule(node, known_dims, facts)``, ``known_dims(name)`` the dims of an input so far.

def same_dims(node, known_dims, facts) -> Optional[list]:
    """The first input's dims (elementwise ops of one input)."""
    return known_dims(node.input[0])


def broadcast_dims(node, known_dims, facts) -> Optional[list]:
    """numpy's broadcast of the inputs' dims: per axis the one size other than 1, else 1 where every operand's is 1,
    else None (not known); None where two known sizes other than 1 differ (the run fails then)."""
    operands = [known_dims(name) for name in node.input]
    if None in operands:
        return None
    rank = max(len(dims) for dims in operands)
    result = []
    for column in zip(*([1] * (rank - len(dims)) + list(dims) for dims in operands)):
        sizes = {size for size in column if size not in (1, None)}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1 if None not in column else None)
    return result
