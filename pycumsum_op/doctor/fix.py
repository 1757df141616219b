"""``fix(net, losses)``: a copy of the net on which ``AddGradientOperators(losses)`` succeeds.

Three cures, all keeping every external blob name and every other op as it was:

- ``strategy="ensure_dense"`` (the general one): an ``EnsureDense`` in front of
  the op that makes the gradient sparse, on the input that receives it. Its
  gradient turns the GradientSlice into a dense tensor. Cumulative sums through a
  triangular constant work, and stay.
- ``strategy="pycumsum"``: each recognised cumsum idiom (Transpose → SparseLengthsSum → Transpose,
  dense conversions after SparseLengthsSum included; a MatMul / FC / BatchMatMul with a triangular
  constant) becomes one PyCumSum (exclusive / reverse where the idiom is) writing the same output
  blob; anything else gets EnsureDense.
- ``strategy="lowered"``: as "pycumsum", but the PyCumSum op is lowered to Caffe2's
  C++ operators (`pycumsum_op.lower`, target "aten"): the repaired net has no Python op.

Under every strategy an op of type CumSum becomes its PyCumSum (lowered under "lowered") and a ToDense
op an EnsureDense: Caffe2 has neither operator (a CumSum whose axis is read from a blob stays a PyCumSum
under "lowered": lowering needs the axis when the net is written). Each replacement is run against the ops it replaces on
a random input before it is kept (`proof.replacement_error`; CumSum against ONNX's definition); a
Slice + Expand + Add + Concat loop is refused (`UnfixableError`): it is no cumulative sum to keep.

>>> from caffe2.python import core
>>> from pycumsum_op.idioms import add_sparse_lengths_cumsum
>>> net, init = core.Net("doc_fix"), core.Net("doc_fix_init")
>>> _ = add_sparse_lengths_cumsum(net, "doc_f", 3, init_net=init)
>>> _ = net.SumElements("doc_f_cumsum", "doc_f_loss")
>>> [op.type for op in fix(net, ["doc_f_loss"]).op]
['Transpose', 'EnsureDense', 'SparseLengthsSum', 'Transpose', 'SumElements']
>>> [op.type for op in fix(net, ["doc_f_loss"], init, strategy="pycumsum").op]
['Python', 'SumElements']
>>> [op.type for op in fix(net, ["doc_f_loss"], init, strategy="lowered").op]
['ATen', 'Shape', 'Slice', 'GivenTensorInt64Fill', 'GT', 'Cast', 'Squeeze', 'Range', 'ATen', 'ATen', 'SumElements']

`repair` is `fix` that also says what it applied at each site:

>>> for site in repair(net, ["doc_f_loss"], init, strategy="pycumsum").repairs:
...     print(site)
Transpose, SparseLengthsSum, Transpose -> 'doc_f_cumsum': one PyCumSum('doc_f', 'doc_f_cumsum', axis=-1, exclusive=True)
"""
from typing import List, NamedTuple

from caffe2.python import core
from caffe2.proto import caffe2_pb2

from ..netdefs import as_netdef, blob_names
from .diagnose import diagnose, normalize_losses
from .findings import MIXED_GRADIENTS, SLOW_CUMSUM, SPARSE_GRADIENT, UNREGISTERED_OPERATOR
from .patterns import CUMSUM_OP
from .proof import replacement_error

STRATEGIES = ("ensure_dense", "pycumsum", "lowered")
#: Strategies that replace the cumsum idioms: by the PyCumSum op, or by its lowered (C++) form.
_IDIOM_STRATEGIES = ("pycumsum", "lowered")
_MAX_ROUNDS = 8
#: The largest difference (relative to the output's size) a replacement may show on its random input: float32
#: sums of a few hundred terms in another order differ by far less.
PROOF_TOLERANCE = 1e-4


class UnfixableError(ValueError):
    """The net's backward pass fails in a way no edit of the net can cure; the message says why."""


class Repair(NamedTuple):
    """One site `repair` changed: the op(s) there, the blob the site writes, what was applied, and
    (``note``) why not the strategy's own cure, when it could not be used; ``proof``: how the replacement
    compared with the ops it replaced on a random input (replacements only)."""
    ops: str
    output: str
    applied: str
    note: str = ""
    proof: str = ""

    def __str__(self) -> str:
        return "{} -> {!r}: {}{}".format(self.ops, self.output, self.applied,
                                         " (" + self.note + ")" if self.note else "")


class Repaired(NamedTuple):
    """What `repair` returns: the fixed NetDef and one `Repair` per site, in the order applied."""
    net: caffe2_pb2.NetDef
    repairs: List[Repair]


def _fresh_name(base: str, taken: set) -> str:
    name, counter = base, 1
    while name in taken:
        counter += 1
        name = "{}_{}".format(base, counter)
    taken.add(name)
    return name


def _with_ops(netdef, ops) -> caffe2_pb2.NetDef:
    """A copy of ``netdef`` (name, arguments, external blobs) holding copies of ``ops``."""
    fixed = caffe2_pb2.NetDef()
    fixed.CopyFrom(netdef)
    del fixed.op[:]
    fixed.op.extend(ops)
    return fixed


def _same_device(op, like) -> None:
    """Give ``op`` the device option of ``like``, if that has one."""
    if like.HasField("device_option"):
        op.device_option.CopyFrom(like.device_option)


def _ensure_dense_repairs(netdef, findings, strategy: str) -> List[Repair]:
    """A `Repair` per site `_insert_ensure_dense` changes; under "pycumsum", why not PyCumSum."""
    sites = {}
    for finding in findings:
        sites.setdefault((finding.source_index, finding.source_input_index), finding)
    repairs = []
    for (index, position), finding in sorted(sites.items()):
        op = netdef.op[index]
        note = ""
        if strategy in _IDIOM_STRATEGIES:
            note = ("not PyCumSum: the cumsum idiom's constants {} are unknown; pass its init net".format(
                " and ".join(repr(blob) for blob in finding.unknown_constants)) if finding.unknown_constants
                else "not PyCumSum: not the Transpose -> SparseLengthsSum -> Transpose cumsum idiom")
        repairs.append(Repair(op.type, op.output[0] if op.output else "",
                              "EnsureDense on its input {!r}".format(op.input[position]), note))
    return repairs


def _insert_ensure_dense(netdef, findings) -> caffe2_pb2.NetDef:
    """EnsureDense on each sparse-gradient source's input, just in front of the source op."""
    sources = sorted({(finding.source_index, finding.source_input_index) for finding in findings})
    taken = blob_names(netdef)
    new_ops = []
    for index, op in enumerate(netdef.op):
        copied = caffe2_pb2.OperatorDef()
        copied.CopyFrom(op)
        op = copied
        for input_index in [position for source_index, position in sources if source_index == index]:
            dense = _fresh_name(op.input[input_index] + "_dense", taken)
            ensure_dense = core.CreateOperator("EnsureDense", [op.input[input_index]], [dense])
            _same_device(ensure_dense, op)
            new_ops.append(ensure_dense)
            op.input[input_index] = dense
        new_ops.append(op)
    return _with_ops(netdef, new_ops)


def _pycumsum_op(idiom, like) -> caffe2_pb2.OperatorDef:
    """The PyCumSum OperatorDef equal to ``idiom``, on ``like``'s device."""
    from ..ops import add_scan_op  # numpy/torch kernels: loaded only when an idiom is replaced
    scratch = core.Net("doctor_pycumsum")
    source = [idiom.blob_in, idiom.axis_blob] if idiom.axis_blob else idiom.blob_in
    add_scan_op(scratch, "cumsum", source, idiom.blob_out, axis=idiom.axis, exclusive=idiom.exclusive,
                reverse=idiom.reverse)
    op = scratch.Proto().op[0]
    _same_device(op, like)
    return op


def _proved(netdef, idiom, replacement, init_net, lowered: bool) -> Repair:
    """The `Repair` of ``idiom`` once ``replacement`` equals it on a random input; UnfixableError if not."""
    against = "ONNX's CumSum" if idiom.form == CUMSUM_OP else "the replaced ops"
    try:
        error = replacement_error(netdef, idiom, replacement, init_net)
    except Exception as failure:  # Caffe2 raises plain Exception / RuntimeError for ops it cannot run
        raise UnfixableError("{}: could not run it against net.{} on a random input ({}): not replaced".format(
            idiom.where(), idiom.call(), str(failure).strip().splitlines()[0] if str(failure).strip()
            else type(failure).__name__)) from None
    if not error <= PROOF_TOLERANCE:
        raise UnfixableError("{}: its replacement net.{} differs from {} on a random input (relative difference "
                             "{:.1e}): not replaced".format(idiom.where(), idiom.call(), against, error))
    applied = "one {}{}".format(idiom.call(), ", lowered to Caffe2's ATen operators" if lowered else "")
    return Repair(", ".join(idiom.op_types), idiom.blob_out, applied,
                  proof="equal to {} on a random input (relative difference {:.1e})".format(against, error))


def _to_ensure_dense(op) -> caffe2_pb2.OperatorDef:
    ensure_dense = caffe2_pb2.OperatorDef()
    ensure_dense.CopyFrom(op)
    ensure_dense.type = "EnsureDense"
    return ensure_dense


def _replace(netdef, idioms, to_dense, lowered: bool, init_net) -> Repaired:
    """Each idiom's ops become one PyCumSum (or its lowered ops) where its last op was, each proved equal
    first; each ToDense op of ``to_dense`` becomes an EnsureDense."""
    if lowered:
        from ..lowering.lower import lower_op  # Caffe2 C++ forms: loaded only when this strategy is used
    replaced = {idiom.ops[-1]: idiom for idiom in idioms}
    dropped = {index for idiom in idioms for index in idiom.ops[:-1]}
    new_ops, repairs = [], []
    for index, op in enumerate(netdef.op):
        if index in replaced:
            idiom = replaced[index]
            scan_op = _pycumsum_op(idiom, op)
            lower_this = lowered and not idiom.axis_blob  # lowering needs the axis when the net is written
            replacement = lower_op(scan_op, netdef) if lower_this else [scan_op]
            repairs.append(_proved(netdef, idiom, replacement, init_net, lower_this))
            new_ops.extend(replacement)
        elif index in to_dense:
            new_ops.append(_to_ensure_dense(op))
            repairs.append(Repair("ToDense", op.output[0], "EnsureDense (Caffe2's dense conversion) in its place"))
        elif index not in dropped:
            new_ops.append(op)
    return Repaired(_with_ops(netdef, new_ops), repairs)


def _refuse_unfixable(findings) -> None:
    unfixable = [finding for finding in findings if not finding.fixable]
    if unfixable:
        raise UnfixableError("the net cannot be fixed by editing it:\n" + "\n".join(str(f) for f in unfixable))


def _to_edit(findings, strategy: str):
    """The findings ``strategy`` edits: all but the working (slow) cumsums under "ensure_dense"."""
    return [finding for finding in findings if finding.kind != SLOW_CUMSUM or strategy in _IDIOM_STRATEGIES]


def repair(net, losses, init_net=None, strategy: str = "ensure_dense") -> Repaired:
    """`fix`, returning ``Repaired(net, repairs)``: the fixed NetDef and what was applied where."""
    if strategy not in STRATEGIES:
        raise ValueError("strategy={!r}: use one of {}".format(strategy, ", ".join(STRATEGIES)))
    losses = normalize_losses(losses)
    init_netdef = None if init_net is None else as_netdef(init_net, "fix", "init_net")
    fixed = caffe2_pb2.NetDef()
    fixed.CopyFrom(as_netdef(net, "fix"))
    repairs = []
    for _ in range(_MAX_ROUNDS):
        findings = _to_edit(diagnose(fixed, losses, init_netdef), strategy)
        if not findings:
            return Repaired(fixed, repairs)
        _refuse_unfixable(findings)
        idioms = {f.idiom for f in findings if f.idiom is not None
                  and (strategy in _IDIOM_STRATEGIES or f.idiom.form == CUMSUM_OP)}
        in_idioms = {index for idiom in idioms for index in idiom.ops}
        to_dense = {f.op_index for f in findings if f.kind == UNREGISTERED_OPERATOR and f.op_type == "ToDense"
                    and f.op_index not in in_idioms}
        if idioms or to_dense:
            in_order = sorted(idioms, key=lambda idiom: idiom.ops)
            fixed, applied = _replace(fixed, in_order, to_dense, strategy == "lowered", init_netdef)
        else:
            gradients = [f for f in findings if f.kind in (SPARSE_GRADIENT, MIXED_GRADIENTS)]
            applied = _ensure_dense_repairs(fixed, gradients, strategy)
            fixed = _insert_ensure_dense(fixed, gradients)
        repairs += applied
    raise RuntimeError("pycumsum_op.doctor.fix: still failing after {} rounds:\n{}".format(
        _MAX_ROUNDS, "\n".join(str(f) for f in diagnose(fixed, losses, init_net))))


def fix(net, losses, init_net=None, strategy: str = "ensure_dense") -> caffe2_pb2.NetDef:
    """A fixed copy (NetDef) of forward net ``net``; ``net`` itself is not changed.

    A healthy net comes back equal to the input. Raises UnfixableError (a
    ValueError) for failures no net edit can cure, e.g. a two-character loss
    gradient name: rename that blob instead. `repair` also reports what it applied where.
    """
    return repair(net, losses, init_net, strategy).net


__all__ = ["fix", "repair", "Repair", "Repaired", "STRATEGIES", "UnfixableError"]
