"""Matrix products: MatMul (Caffe2's BatchMatMul, or one GEMM), Gemm (Caffe2's FC by its C++ converter after checks
of A's and B's shapes: FC dies on an empty B) and Einsum of one or two operands (Caffe2's ReduceSum, Transpose,
Reshape and BatchMatMul)."""
import string

from caffe2.proto import caffe2_pb2
from caffe2.python import workspace
from caffe2.python.onnx.backend import Caffe2Backend  # torch >= 1.10: checked by pycumsum_op.onnx
from onnx import TensorProto

from ...input_limits import shape_text
from ..run_checks import as_double, capped_scalar, declared, element_cap, itemsize, make_op, refusal, size_message
from .contract import ANY, FLOAT, NEWEST, Form, declare, fixed_rank, label
from .helpers import attribute, constant_blob, int64_scalar, rank_checked, refuse


def _matmul_rank(node, known, facts):
    """numpy's matmul: a 1-D operand loses its dim."""
    first, second = known(node.input[0]), known(node.input[1])
    if first is None or second is None:
        return None
    return 0 if first == second == 1 else max(first, second) - (first == 1) - (second == 1)


def _einsum_terms(node):
    """(input terms, output term) of the node's equation, the output spelled out where the equation leaves it implicit
    (ONNX's and numpy's rule: the letters written once, in alphabetical order); None for an ellipsis, a letter
    repeated within a term, a term other than letters, more than two terms or a count other than the node's inputs."""
    inputs, arrow, out = _equation(node).replace(" ", "").partition("->")
    terms = inputs.split(",")
    written = "".join(terms)
    if not arrow:
        out = "".join(sorted(letter for letter in set(written) if written.count(letter) == 1))
    letters = written + out
    if len(terms) != len(node.input) or len(terms) > 2 or \
            not all(letter in string.ascii_letters for letter in letters) or \
            any(len(set(term)) != len(term) for term in terms + [out]) or not set(out) <= set(written):
        return None
    return terms, out


def _einsum_rank(node, known, facts):
    """One letter per output axis."""
    parsed = _einsum_terms(node)
    return None if parsed is None else len(parsed[1])


@declare("MatMul", Form((9, NEWEST)), types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE]), rank=_matmul_rank)
def _matmul(node, facts, opset, fresh):
    """Caffe2's BatchMatMul (broadcast=1, as Caffe2's converter writes it) multiplies as ONNX's MatMul when both
    operands have rank 2 or more, empty dims included; with a 1-D operand it gives (1,) for ONNX's scalar and
    dies of SIGFPE on an empty dim ((3,) x (3, 0), (0,) x (0, 3), (2, 0) x (0,)). Where an operand may be 1-D, and
    for double (Caffe2's BatchMatMul is float only), the ATen op runs torch's matmul, which is numpy's (ONNX's)."""
    if facts.elem_type(node.input[0]) == TensorProto.DOUBLE:
        if not facts.torch_kernels:
            raise refuse(node, opset, "input 0 {!r} is DOUBLE: Caffe2's BatchMatMul is float only, and the portable "
                                      "target runs no torch kernel".format(node.input[0]))
        return [make_op("ATen", list(node.input), [node.output[0]], node.name, operator="matmul")]
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


@declare("Einsum", Form((12, NEWEST), {"equation": ANY}), types=FLOAT, rank=_einsum_rank)
def _einsum(node, facts, opset, fresh):
    """Einsum of one or two operands, each letter at most once in a term and no ellipsis, as one matrix product. The
    letters of an operand that neither the other operand nor the output holds are summed first (Caffe2's ReduceSum,
    right on empty dims); the others are batch letters (both operands and the output), contracted letters (both
    operands only) and each operand's free letters (it and the output). The operands are transposed to (batch, free,
    contracted) and (batch, contracted, free) and, unless the free and contracted groups are one letter each (Caffe2's
    BatchMatMul multiplies those as they are), reshaped to 3-D by their dims read when the net runs; Caffe2's
    BatchMatMul of operands of rank 2 or more and the same batch is right on every empty dim (it dies of SIGFPE only
    on 1-D operands, which these never are). The product is reshaped to the batch and free letters' dims and
    transposed to the output's order. One operand: its sums, then a transpose. Refused: three operands or more, an
    ellipsis, a letter twice in a term (a diagonal)."""
    parsed = _einsum_terms(node)
    if parsed is None:
        raise refuse(node, opset, "equation {!r}: only one or two operands, each letter at most once in a term and no "
                                  "ellipsis, are translated".format(_equation(node)[:200]))
    terms, out = parsed
    for position, (name, term) in enumerate(zip(node.input, terms)):
        if facts.rank(name) not in (None, len(term)):
            raise refuse(node, opset, "equation {!r} needs input {} {!r} of rank {}; the model states {}".format(
                _equation(node)[:200], position, name, len(term), facts.rank(name)))
    # the kernels below were chosen by the ranks the equation writes: checked when the net runs (BatchMatMul dies of
    # SIGFPE on a 1-D operand)
    ops = [op for position, (name, term) in enumerate(zip(node.input, terms))
           for op in rank_checked(node, opset, position, name, facts, fresh, len(term), why="as the equation writes")]
    if len(terms) == 2:
        ops += _same_dims(node, opset, facts, terms, fresh)
    operands, summed_from = [], []
    for position, (name, term) in enumerate(zip(node.input, terms)):
        kept = set(out).union(*(other for place, other in enumerate(terms) if place != position))
        lone = [axis for axis, letter in enumerate(term) if letter not in kept]
        if lone:
            summed_from.append(name)
            summed = fresh()
            ops.append(make_op("ReduceSum", [name], [summed], node.name, axes=lone, keepdims=0))
            name, term = summed, "".join(letter for letter in term if letter in kept)
        operands.append((name, term))
    if len(operands) == 1:
        return _to_output(node, ops, operands[0][0], operands[0][1], out)
    (a, ta), (b, tb) = operands
    batch = "".join(letter for letter in out if letter in ta and letter in tb)
    free_a = "".join(letter for letter in out if letter in ta and letter not in tb)
    free_b = "".join(letter for letter in out if letter in tb and letter not in ta)
    contracted = "".join(letter for letter in ta if letter in tb and letter not in out)
    ops += _capped_product(node, opset, facts, (a, ta), (b, tb), batch, free_a, free_b, contracted, fresh)
    a, more = _transposed(node, a, ta, batch + free_a + contracted, fresh)
    b, most = _transposed(node, b, tb, batch + contracted + free_b, fresh)
    ops += more + most
    product = fresh()
    if len(free_a) == len(contracted) == len(free_b) == 1 and not summed_from:
        ops.append(make_op("BatchMatMul", [a, b], [product], node.name, broadcast=1))
        return _to_output(node, ops, product, batch + free_a + free_b, out)
    # each operand as (batch, rows, columns): the products of its groups' dims (int64: each within the cap, checked)
    one, fill = constant_blob([1], fresh)
    ops.append(fill)
    flat = []
    for blob, groups in ((a, (batch, free_a, contracted)), (b, (batch, contracted, free_b))):
        dims, wanted, entries, start = fresh(), fresh(), [], 0
        ops.append(make_op("Shape", [blob], [dims], node.name))
        for group in groups:
            more, entry = _product(node, dims, range(start, start + len(group)), one, fresh)
            ops += more
            entries.append(entry)
            start += len(group)
        flat.append(fresh())
        ops += [make_op("Concat", entries, [wanted, fresh()], node.name, axis=0),
                make_op("Reshape", [blob, wanted], [flat[-1], fresh()], node.name)]
    if summed_from:  # the last entries are the second operand's: (batch, contracted, free)
        more, flat = _emptied(node, summed_from, entries[1], flat, fresh)
        ops += more
    flat_product = fresh()
    ops.append(make_op("BatchMatMul", flat, [flat_product], node.name))
    if not batch + free_a + free_b:  # Caffe2's Reshape refuses an empty shape (a scalar's)
        ops.append(make_op("Squeeze", [flat_product], [product], node.name, dims=[0, 1, 2]))
        return _to_output(node, ops, product, "", out)
    parts = []
    for blob, axes in ((a, range(len(batch + free_a))), (b, range(len(batch + contracted), len(tb)))):
        if axes:
            parts.append(fresh())
            ops.append(make_op("Shape", [blob], [parts[-1]], node.name, axes=list(axes)))
    unflat = fresh()
    ops += [make_op("Concat", parts, [unflat, fresh()], node.name, axis=0),
            make_op("Reshape", [flat_product, unflat], [product, fresh()], node.name)]
    return _to_output(node, ops, product, batch + free_a + free_b, out)


def _emptied(node, summed_from, length: str, flat, fresh) -> tuple:
    """(ops, flat): the 3-D operands ``flat`` with their summed axis (of ``length``, a (1,) int64 blob) cut to none
    where an operand of ``summed_from`` (those whose lone letters were summed first) is empty. ONNX's Einsum of such
    an operand is a sum over no terms, 0; the operand summed first is 0 too, but its product with an infinity or NaN
    of the other operand is NaN. An operand empty by another letter leaves the product empty or its summed axis
    empty already, so its element count decides."""
    ops, length_left = [], length
    for name in summed_from:
        count, zero, filled, flag, column, cut = fresh(), fresh(), fresh(), fresh(), fresh(), fresh()
        ops += [make_op("Size", [name], [count], node.name), int64_scalar(node, zero, 0),
                make_op("GT", [count, zero], [filled], node.name),
                make_op("Cast", [filled], [flag], node.name, to=caffe2_pb2.TensorProto.INT64),
                make_op("ExpandDims", [flag], [column], node.name, dims=[0]),
                make_op("Mul", [length_left, column], [cut], node.name)]
        length_left = cut
    whole, fill = constant_blob([-1], fresh)
    zeros, zero_fill = constant_blob([0, 0, 0], fresh)
    ops += [fill, zero_fill]
    out = []
    for operand, ends in zip(flat, ([whole, whole, length_left], [whole, length_left, whole])):
        bounds, sliced = fresh(), fresh()
        ops += [make_op("Concat", ends, [bounds, fresh()], node.name, axis=0),
                make_op("Slice", [operand, zeros, bounds], [sliced], node.name)]
        out.append(sliced)
    return ops, out


def _equation(node) -> str:
    equation = attribute(node, "equation", b"")
    return equation.decode("ascii", "replace") if isinstance(equation, bytes) else str(equation)


def _same_dims(node, opset, facts, terms, fresh) -> list:
    """Ops stopping the net unless each letter of both terms has one dim in both operands: onnxruntime broadcasts a
    dim of 1 against the other operand's (numpy's einsum refuses it), which the product below would not; refused at
    import where the model states both dims and they differ."""
    (a, b), (ta, tb) = node.input, terms
    shared = [letter for letter in ta if letter in tb]
    if not shared:
        return []
    dims_a, dims_b = facts.dims(a), facts.dims(b)
    static_a = [None if dims_a is None else dims_a[ta.index(letter)] for letter in shared]
    static_b = [None if dims_b is None else dims_b[tb.index(letter)] for letter in shared]
    for letter, first, second in zip(shared, static_a, static_b):
        if None not in (first, second) and first != second:
            raise refuse(node, opset, "letter {!r} has dim {} in input 0 {!r} and {} in input 1 {!r}; one dim per "
                                      "letter is translated".format(letter, first, a, second, b))
    if declared(facts, a) and declared(facts, b) and None not in static_a + static_b:
        return []
    first, second, same = fresh(), fresh(), fresh()
    return [make_op("Shape", [a], [first], node.name, axes=[ta.index(letter) for letter in shared]),
            make_op("Shape", [b], [second], node.name, axes=[tb.index(letter) for letter in shared]),
            make_op("EQ", [first, second], [same], node.name),
            refusal(node.name, same, "{}: the letters {} of equation {!r} have other dims in input 0 {!r} than in "
                                     "input 1 {!r}; one dim per letter is translated".format(
                                         label(node, opset), "".join(shared), _equation(node)[:200], a, b), second)]


def _product(node, vector: str, positions, one: str, fresh) -> tuple:
    """(ops, blob): the product of entries ``positions`` of 1-D ``vector`` as a (1,) blob; ``one``, a (1,) blob of
    1 of its type, for none (Caffe2 has no product reduction; torch's prod is an ATen op)."""
    ops, product = [], one
    for position in positions:
        entry = fresh()
        ops.append(make_op("Slice", [vector], [entry], node.name, starts=[position], ends=[position + 1]))
        if product == one:
            product = entry
            continue
        multiplied = fresh()
        ops.append(make_op("Mul", [product, entry], [multiplied], node.name))
        product = multiplied
    return ops, product


def _capped_product(node, opset, facts, first, second, batch, free_a, free_b, contracted, fresh) -> list:
    """Ops stopping the net unless the product's groups (the products of the batch, free and contracted letters'
    dims, each a dim of the 3-D operands) and its element count (batch x free_a x free_b) are within the cap before
    BatchMatMul allocates it: in float64, as `capped_dims` counts (an operand with an empty dim may state others
    whose product wraps 64 bits)."""
    size = itemsize(facts.elem_type(node.input[0]))
    ops, vectors, one = [], [], fresh()
    ops.append(make_op("ConstantFill", [], [one], node.name, shape=[1], dtype=caffe2_pb2.TensorProto.DOUBLE,
                       value=1.0))
    for blob, term in (first, second):
        dims = fresh()
        more, double = as_double(node.name, dims, fresh)
        ops += [make_op("Shape", [blob], [dims], node.name)] + more
        vectors.append((double, term))
    entries = []
    for (double, term), group in zip([vectors[0], vectors[0], vectors[1], vectors[0]],
                                     (batch, free_a, free_b, contracted)):
        more, entry = _product(node, double, [term.index(letter) for letter in group], one, fresh)
        ops += more
        entries.append(entry)
    rows, count, groups = fresh(), fresh(), fresh()
    ops += [make_op("Mul", entries[:2], [rows], node.name), make_op("Mul", [rows, entries[2]], [count], node.name),
            make_op("Concat", entries + [count], [groups, fresh()], node.name, axis=0)]
    return ops + capped_scalar(node.name, groups, element_cap(size), size_message(
        label(node, opset), "the product of {!r} and {!r} (its batch, rows, columns, summed length, elements)".format(
            *node.input), size), fresh)


def _transposed(node, blob: str, letters: str, order: str, fresh) -> tuple:
    """(blob, ops): ``blob`` (its axes ``letters``) with its axes in ``order`` (no op where they are)."""
    perm = [letters.index(letter) for letter in order]
    if perm == sorted(perm):
        return blob, []
    moved = fresh()
    return moved, [make_op("Transpose", [blob], [moved], node.name, axes=perm)]


def _to_output(node, ops: list, blob: str, letters: str, out: str) -> list:
    """``ops`` and what moves ``blob`` (its axes ``letters``) to the node's output, its axes in the order of ``out``: a
    Transpose; else the last op, writing the output itself where it made ``blob``; else a Copy."""
    perm = [letters.index(letter) for letter in out]
    if perm != sorted(perm):
        return ops + [make_op("Transpose", [blob], [node.output[0]], node.name, axes=perm)]
    if ops and list(ops[-1].output[:1]) == [blob]:
        ops[-1].output[0] = node.output[0]
        return ops
    return ops + [make_op("Copy", [blob], [node.output[0]], node.name)]
