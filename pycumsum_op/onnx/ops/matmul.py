"""Matrix products: MatMul (Caffe2's BatchMatMul, or one GEMM), Gemm (Caffe2's FC by its C++ converter after checks
of A's and B's shapes: FC dies on an empty B) and Einsum's batched matrix products."""
from caffe2.proto import caffe2_pb2
from caffe2.python import workspace
from caffe2.python.onnx.backend import Caffe2Backend  # torch >= 1.10: checked by pycumsum_op.onnx

from ...input_limits import shape_text
from ..run_checks import as_double, capped_dims, element_cap, itemsize, make_op, refusal, size_message
from .contract import ANY, FLOAT, NEWEST, Form, declare, fixed_rank, label
from .helpers import attribute, int64_scalar, rank_checked, refuse


def _matmul_rank(node, known, facts):
    """numpy's matmul: a 1-D operand loses its dim."""
    first, second = known(node.input[0]), known(node.input[1])
    if first is None or second is None:
        return None
    return 0 if first == second == 1 else max(first, second) - (first == 1) - (second == 1)


def _einsum_rank(node, known, facts):
    """One letter per output axis, unless an ellipsis stands for some."""
    equation = next((attr.s for attr in node.attribute if attr.name == "equation"), b"")
    output = equation.decode("ascii", "replace").replace(" ", "").partition("->")[2]
    return len(output) if output.isalpha() else None


@declare("MatMul", Form((9, NEWEST)), types=FLOAT, rank=_matmul_rank)
def _matmul(node, facts, opset, fresh):
    """Caffe2's BatchMatMul (broadcast=1, as Caffe2's converter writes it) multiplies as ONNX's MatMul when both
    operands have rank 2 or more, empty dims included; with a 1-D operand it gives (1,) for ONNX's scalar and
    dies of SIGFPE on an empty dim ((3,) x (3, 0), (0,) x (0, 3), (2, 0) x (0,)). Where an operand may be 1-D, the
    ATen op runs torch's matmul, which is numpy's (ONNX's)."""
    ranks = [facts.rank(name) for name in node.input]
    if all(rank is not None and rank >= 2 for rank in ranks):
        # the ranks the model states chose BatchMatMul: checked when the net runs, as a 1-D operand kills it
        ops = [op for position, name in enumerate(node.input)
               for op in rank_checked(node, opset, position, name, facts, fresh, 2, exact=False)]
        return ops + [make_op("BatchMatMul", list(node.input), [node.output[0]], node.name, broadcast=1)]
    return [make_op("ATen", list(node.input), [node.output[0]], node.name, operator="matmul")]


@declare("Gemm", Form((9, NEWEST), {"alpha": ANY, "beta": ANY, "transA": ANY, "transB": ANY}), types=FLOAT,
         rank=fixed_rank(2))
def _gemm(node, facts, opset, fresh):
    """Caffe2's FC (what its C++ converter makes of Gemm), after checks: FC dies of SIGFPE on an empty B (a K or N of
    0), so a constant B must hold elements and any other is checked when the net runs, with A's and B's rank 2."""
    a, b = node.input[:2]
    ops = rank_checked(node, opset, 0, a, facts, fresh, 2) + rank_checked(node, opset, 1, b, facts, fresh, 2)
    weights = facts.constant(b)
    if weights is not None and weights.size == 0:
        raise refuse(node, opset, "input 1 (B) {!r} has dims {}; Caffe2's FC dies on an empty B".format(
            b, shape_text(weights.shape)))
    if weights is None:
        dims, zero, filled = fresh(), fresh(), fresh()
        ops += [make_op("Shape", [b], [dims], node.name), int64_scalar(node, zero, 0),
                make_op("GT", [dims, zero], [filled], node.name),
                refusal(node.name, filled, "{}: input 1 (B) {!r} is empty, on which Caffe2's FC dies".format(
                    label(node, opset), b), dims)]
    converter = workspace.C.Caffe2Backend(Caffe2Backend._dummy_name)
    try:
        init_ops, made = converter.convert_node(node.SerializeToString(), facts.value_infos(node.input), opset)
    except RuntimeError as error:  # as `backend.node_ops` reports the stock converters' failures
        raise refuse(node, opset, "Caffe2's converter failed: {}".format(
            (str(error).strip().splitlines() or ["RuntimeError"])[0])) from None
    for serialized in list(init_ops) + list(made):
        ops.append(caffe2_pb2.OperatorDef())
        ops[-1].ParseFromString(serialized)
    return ops


# batched matrix products only
@declare("Einsum", Form((12, NEWEST), {"equation": ANY}), types=FLOAT, rank=_einsum_rank)
def _einsum(node, facts, opset, fresh):
    """Einsum of the two kinds transformers write: the outer product of two vectors (`_outer`; rotary embeddings),
    and a matrix product (ProphetNet's attention: ``nbtc,nbsc->nbts``) of two operands over the same leading batch
    letters, each operand's last two letters a matrix (either way round) sharing the one letter summed, the output
    the batch letters and the other two in either order: Caffe2's BatchMatMul between Transposes of the last two
    axes where a term has them the other way round, the form proven at the edges (empty dims among them); any other
    equation is refused."""
    equation = attribute(node, "equation", b"")
    equation = (equation.decode("ascii", "replace") if isinstance(equation, bytes) else str(equation)).replace(" ", "")
    inputs, _, out = equation.partition("->")
    terms = inputs.split(",")
    if len(node.input) == 2 and len(terms) == 2 and all(len(t) == 1 and t.isalpha() for t in terms) and \
            len(out) == 2 and sorted(out) == sorted(terms) and terms[0] != terms[1]:
        return _outer(node, opset, facts, fresh, terms, out)
    shape_ok = (len(node.input) == 2 and len(terms) == 2 and out and all(t.isalpha() for t in terms + [out]) and
                all(len(set(t)) == len(t) for t in terms + [out]))
    if shape_ok:
        (a, b), batch = terms, out[:-2]
        contracted = set(a[-2:]) & set(b[-2:])
        shape_ok = (len(a) == len(b) == len(out) >= 2 and a[:-2] == b[:-2] == batch and len(contracted) == 1 and
                    not contracted & set(out) and set(out[-2:]) == (set(a[-2:]) ^ set(b[-2:])))
    if not shape_ok:
        raise refuse(node, opset, "equation {!r}: only a matrix product over shared leading batch letters "
                                   "(such as 'nbtc,nbsc->nbts') or the outer product of two vectors ('i,j->ij') is "
                                   "translated".format(equation[:200]))
    ranks = [facts.rank(name) for name in node.input]
    if ranks != [len(a), len(b)]:
        raise refuse(node, opset, "equation {!r} needs inputs of ranks {} and {}; the model states {}".format(
            equation, len(a), len(b), ranks))
    (summed,) = contracted
    swap = list(range(len(a) - 2)) + [len(a) - 1, len(a) - 2]
    ops, operands = [op for position, (name, term) in enumerate(zip(node.input, terms))
                     for op in rank_checked(node, opset, position, name, facts, fresh, len(term))], []
    for name, term, wanted in ((node.input[0], a, 1), (node.input[1], b, 0)):
        if term.index(summed) - len(term) + 2 == wanted:  # the summed letter is where a matrix product wants it
            operands.append(name)
        else:
            moved = fresh()
            ops.append(make_op("Transpose", [name], [moved], node.name, axes=swap))
            operands.append(moved)
    if out[-2] == (set(a[-2:]) - contracted).pop():
        return ops + [make_op("BatchMatMul", operands, [node.output[0]], node.name, broadcast=1)]
    product = fresh()
    return ops + [make_op("BatchMatMul", operands, [product], node.name, broadcast=1),
                  make_op("Transpose", [product], [node.output[0]], node.name, axes=swap)]


def _outer(node, opset, facts, fresh, terms, out) -> list:
    """The outer product of two vectors (a rotary embedding's ``i,j->ij``): the output's row vector as a column
    (Caffe2's ExpandDims) times the other, by torch's mul (the ATen op: numpy's broadcasting, empty vectors too)."""
    if [facts.rank(name) for name in node.input] != [1, 1]:
        raise refuse(node, opset, "equation '{},{}->{}' needs two vectors; the model states ranks {}".format(
            terms[0], terms[1], out, [facts.rank(name) for name in node.input]))
    rows, columns = node.input if out[0] == terms[0] else reversed(node.input)
    ops = [op for position, name in enumerate(node.input) for op in rank_checked(node, opset, position, name, facts,
                                                                                   fresh, 1)]
    # the product's size, one vector's length times the other's, within the cap before torch allocates it
    size = itemsize(facts.elem_type(node.input[0]))
    lengths, length, joined = fresh(), fresh(), fresh()
    ops += [make_op("Shape", [rows], [lengths], node.name), make_op("Shape", [columns], [length], node.name),
            make_op("Concat", [lengths, length], [joined, fresh()], node.name, axis=0)]
    more, dims = as_double(node.name, joined, fresh)
    ops += more + capped_dims(node.name, dims, element_cap(size), size_message(
        label(node, opset), "the outer product of {!r} and {!r}".format(*node.input), size), fresh, checked=joined)
    column = fresh()
    return ops + [make_op("ExpandDims", [rows], [column], node.name, dims=[1]),
                  make_op("ATen", [column, columns], [node.output[0]], node.name, operator="mul")]
