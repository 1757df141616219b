"""``diagnose(net, losses)``: walk the backward pass as Caffe2 does, and report where it breaks.

The walk is Caffe2's own: `core.IR.GetBackwardPass`, which asks Caffe2's gradient
registry for each op's gradient. Where Caffe2 would raise "Gradient of output X
is sparse (expected dense)" (or cannot add a sparse and a dense gradient), the
doctor records a `Finding`, remembers which op made the gradient sparse, carries
on with a dense stand-in, and so finds every such place in one pass.

>>> from caffe2.python import core
>>> from pycumsum_op.idioms import add_sparse_lengths_cumsum
>>> net = core.Net("doc_diagnose")
>>> _ = add_sparse_lengths_cumsum(net, "doc_d", 3)
>>> _ = net.SumElements("doc_d_cumsum", "doc_d_loss")
>>> [(f.op_index, f.op_type, f.blob, f.source_type) for f in diagnose(net, ["doc_d_loss"])]
[(0, 'Transpose', 'doc_d_cumsum_T', 'SparseLengthsSum')]
"""
import re
from collections import namedtuple
from typing import List

from caffe2.proto import caffe2_pb2
from caffe2.python import core

from ..netdefs import as_netdef
from ..serialization import verify_net

from .answers import match_concat_loops, match_cumsum_op
from .findings import (GRADIENT_ERROR, MIXED_GRADIENTS, NOT_A_CUMSUM, SLOW_CUMSUM, SPARSE_GRADIENT,
                       TWO_CHARACTER_GRADIENT_NAME, UNREGISTERED_OPERATOR, Finding)
from .patterns import Constants, match_cumsum_idiom, unknown_idiom_constants
from .triangular import match_triangular_product

#: What the backward walk puts in place of ops Caffe2 has no operator for: the same first input and output and
#: a dense gradient, as a cumulative sum has and a dense conversion would have.
_STAND_INS = {"CumSum": "Copy", "ToDense": "EnsureDense"}
_SPARSE_OUTPUT = re.compile(r"Gradient of output (.+?) is sparse \(expected dense\)")
_MIXED = "mix of sparse and dense gradients"

#: Who made a sparse gradient: a forward op (index, type, input) or the loss gradient the user gave.
_Origin = namedtuple("_Origin", "op_index op_type input_index input_blob loss loss_gradient")


def normalize_losses(losses) -> dict:
    """{loss blob name: gradient (None, a name, or a GradientSlice)}, as AddGradientOperators reads them."""
    if isinstance(losses, (str, core.BlobReference)):
        losses = [losses]
    if isinstance(losses, dict):
        return {str(loss): gradient for loss, gradient in losses.items()}
    if isinstance(losses, (list, tuple)):
        return {str(loss): None for loss in losses}
    raise TypeError("losses must be a blob, a list of blobs or a dict {{loss: gradient}}, got {}".format(
        type(losses).__name__))


def check_losses_exist(netdef, losses: dict) -> None:
    """Raise ValueError naming any loss blob the net neither makes nor takes."""
    known = set(netdef.external_input).union(*(op.output for op in netdef.op))
    unknown = [loss for loss in losses if loss not in known]
    if unknown:
        raise ValueError("loss blob {} is neither an output of an op of net {!r} nor one of its external "
                         "inputs".format(", ".join(repr(loss) for loss in unknown), netdef.name))


def caffe2_error_summary(error: Exception) -> str:
    """The human part of a Caffe2 error (no C++ frames, no enforce prefix).

    >>> caffe2_error_summary(Exception("Exception when creating gradient for [Transpose]:[enforce fail at "
    ...     "operator_gradient.h:150] g_output_.at(i).IsDense(). Gradient of output t is sparse (expected dense).."))
    'Gradient of output t is sparse (expected dense)'
    """
    text = str(error)
    sparse = _SPARSE_OUTPUT.search(text)
    if sparse:
        return sparse.group(0)
    line = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return re.sub(r"\[enforce fail at [^\]]*\][\s.]*", " ", line).strip()


def _sparse_key(gradient):
    """What Caffe2 will unpack as a sparse gradient: a GradientSlice or any two-character string."""
    if isinstance(gradient, core.GradientSlice):
        return (str(gradient.indices), str(gradient.values))
    if gradient is not None and len(str(gradient)) == 2:
        return str(gradient)
    return None


class _DiagnosingIR(core.IR):
    """Caffe2's IR, recording findings instead of raising and tracking who makes gradients sparse."""

    def __init__(self, operators):
        self.findings = []
        self._origins = {}   # sparse key -> _Origin
        self._stand_ins = 0
        super().__init__(operators)

    def _dense_stand_in(self) -> str:
        self._stand_ins += 1
        return "_doctor_dense_stand_in_{}".format(self._stand_ins)

    def _GetInitGradients(self, ys):
        input_to_grad, gradient_ops = super()._GetInitGradients(ys)
        for loss, gradient in input_to_grad.items():
            key = _sparse_key(gradient)
            if key is not None:
                name = gradient if isinstance(gradient, str) else None
                self._origins[key] = _Origin(None, None, None, None, loss, name)
        return input_to_grad, gradient_ops

    def _record(self, kind, op_index, blob, origin, error):
        op_type = None if op_index is None else self.ssa[op_index].op.type
        if origin is None:
            origin = _Origin(None, None, None, None, None, None)
        if kind == SPARSE_GRADIENT and origin.loss_gradient is not None:
            kind = TWO_CHARACTER_GRADIENT_NAME
        self.findings.append(Finding(
            kind=kind, op_index=op_index, op_type=op_type, blob=blob, source_index=origin.op_index,
            source_type=origin.op_type, source_input=origin.input_blob, source_input_index=origin.input_index or 0,
            loss=origin.loss, loss_gradient=origin.loss_gradient, caffe2_error=caffe2_error_summary(error)))

    def _GenerateGradientsForForwardOp(self, forward_op_idx, input_to_grad):
        forward_op = self.ssa[forward_op_idx].op
        view = input_to_grad
        while True:
            try:
                new_input_to_grad, gradient_ops = super()._GenerateGradientsForForwardOp(forward_op_idx, view)
                break
            except Exception as error:  # Caffe2 raises plain Exception from its gradient registry
                sparse = _SPARSE_OUTPUT.search(str(error))
                blob = sparse.group(1) if sparse else None
                key = _sparse_key(view.get(blob)) if blob in forward_op.output else None
                if key is None:
                    self._record(GRADIENT_ERROR, forward_op_idx, forward_op.output[0] if forward_op.output else "",
                                 None, error)
                    return {}, []
                self._record(SPARSE_GRADIENT, forward_op_idx, blob, self._origins.get(key), error)
                view = dict(view)
                view[blob] = self._dense_stand_in()
        self._note_origins(forward_op_idx, new_input_to_grad)
        return new_input_to_grad, gradient_ops

    def _note_origins(self, forward_op_idx, new_input_to_grad):
        """Sparse input gradients an op passes through keep their origin; new ones start at this op."""
        forward_op = self.ssa[forward_op_idx].op
        for name, gradient in new_input_to_grad.items():
            key = _sparse_key(gradient)
            if key is not None and key not in self._origins:
                index = list(forward_op.input).index(name)
                self._origins[key] = _Origin(forward_op_idx, forward_op.type, index, name, None, None)

    def DoGradientAccumulation(self, fwd_op_idx):
        while True:
            try:
                return super().DoGradientAccumulation(fwd_op_idx)
            except RuntimeError as error:
                if _MIXED not in str(error) or not self._densify_mixed_generators(fwd_op_idx, error):
                    self._record(GRADIENT_ERROR, fwd_op_idx, "", None, error)
                    return [], {}

    def _densify_mixed_generators(self, fwd_op_idx, error) -> bool:
        """Record each input whose gradients mix sparse and dense; make its sparse ones dense stand-ins."""
        forward_op, in_versions, _ = self.ssa[fwd_op_idx]
        found = False
        for name in sorted(set(forward_op.input)):
            generators = self.gradient_generators[name][in_versions[name]]
            if len({type(generator) for generator in generators}) < 2:
                continue
            found = True
            for position, generator in enumerate(generators):
                if isinstance(generator, core.SparseGradGenMeta):
                    origin = self._origins.get(_sparse_key(generator.gradient))
                    producer = next((index for index in range(fwd_op_idx - 1, -1, -1)
                                     if name in self.ssa[index].op.output), None)
                    self._record(MIXED_GRADIENTS, producer, name, origin, error)
                    generators[position] = core.GradGenMeta(
                        None, 0, self._dense_stand_in(), generator.device_option)
        return found


def _net_level_finding(error: Exception) -> Finding:
    return Finding(kind=GRADIENT_ERROR, op_index=None, op_type=None, blob="", caffe2_error=caffe2_error_summary(error))


def _attach_idioms(findings, netdef, constants: Constants) -> List[Finding]:
    attached = []
    for finding in findings:
        if finding.source_type == "SparseLengthsSum":
            idiom = match_cumsum_idiom(netdef, finding.source_index, constants=constants)
            unknown = () if idiom else unknown_idiom_constants(netdef, finding.source_index, constants=constants)
            finding = finding._replace(idiom=idiom, unknown_constants=unknown)
        attached.append(finding)
    return attached


def _walked_ops(netdef) -> list:
    """The ops the backward walk sees: those Caffe2 has no operator for replaced by `_STAND_INS`."""
    ops = []
    for op in netdef.op:
        if op.type in _STAND_INS and op.input and op.output:
            stand_in = caffe2_pb2.OperatorDef()
            stand_in.CopyFrom(op)
            stand_in.type = _STAND_INS[op.type]
            del stand_in.input[1:], stand_in.output[1:], stand_in.arg[:]
            op = stand_in
        ops.append(op)
    return ops


def _with_real_types(finding: Finding, netdef) -> Finding:
    """The finding naming the net's own op types, not the walk's stand-ins."""
    return finding._replace(
        op_type=finding.op_type if finding.op_index is None else netdef.op[finding.op_index].type,
        source_type=finding.source_type if finding.source_index is None else netdef.op[finding.source_index].type)


def _idiom_findings(netdef, constants: Constants) -> List[Finding]:
    """Ops Caffe2 has no operator for, cumulative sums through triangular products, Slice/Expand/Concat loops."""
    findings = []
    for index, op in enumerate(netdef.op):
        blob = op.output[0] if op.output else ""
        if op.type in _STAND_INS:
            findings.append(Finding(kind=UNREGISTERED_OPERATOR, op_index=index, op_type=op.type, blob=blob,
                                    idiom=match_cumsum_op(netdef, index, constants=constants)))
            continue
        idiom = match_triangular_product(netdef, index, constants=constants)
        if idiom is not None:
            findings.append(Finding(kind=SLOW_CUMSUM, op_index=index, op_type=op.type, blob=blob, idiom=idiom))
    for loop in match_concat_loops(netdef):
        findings.append(Finding(kind=NOT_A_CUMSUM, op_index=loop.ops[0], op_type="Slice", blob=loop.blob_out,
                                loop=loop))
    return sorted(findings, key=lambda finding: finding.op_index)


def diagnose(net, losses, init_net=None) -> List[Finding]:
    """Findings for every place ``AddGradientOperators(losses)`` on ``net`` would fail, then for each op
    Caffe2 has no operator for (CumSum, ToDense), each cumulative sum through a triangular constant
    (MatMul / FC / BatchMatMul) and each Slice + Expand + Add + Concat loop, in net order (empty: healthy).

    net: a core.Net or NetDef without gradient ops; losses: as AddGradientOperators takes
    them (list of blobs, or dict blob -> gradient blob / None); init_net (core.Net or
    NetDef) only helps recognise the idioms' constants. Nothing is run or changed, and both
    nets are verified first: a net whose Python ops `verify_net` refuses is not called healthy.
    Raises `UnsafeNetError` (a ValueError) for such a net, ValueError when a loss blob is not in the
    net, TypeError for wrong argument types.
    """
    netdef = as_netdef(net, "diagnose")
    init_netdef = None if init_net is None else as_netdef(init_net, "diagnose", "init_net")
    for checked in (netdef, init_netdef) if init_netdef is not None else (netdef,):
        verify_net(checked)
    losses = normalize_losses(losses)
    check_losses_exist(netdef, losses)
    constants = Constants(netdef, init_netdef)
    idioms = _idiom_findings(netdef, constants)
    in_loops = {index for finding in idioms if finding.loop is not None for index in finding.loop.ops}
    try:
        ir = _DiagnosingIR(_walked_ops(netdef))
    except Exception as error:  # e.g. an orphan StopGradient: Caffe2 refuses the net before any gradient
        return [_net_level_finding(error)] + idioms
    try:
        ir.GetBackwardPass(losses)
    except Exception as error:  # anything Caffe2 raises outside the per-op steps the doctor watches
        ir.findings.append(_net_level_finding(error))
    gradients = [_with_real_types(finding, netdef) for finding in ir.findings
                 if not (finding.kind == GRADIENT_ERROR and finding.op_index in in_loops)]
    return _attach_idioms(gradients, netdef, constants) + idioms
