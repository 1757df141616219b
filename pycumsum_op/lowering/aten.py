"""Target "aten": a scan as Caffe2's ``ATen`` operator, which runs torch's own C++ kernels.

``ATen(operator=<scan>, dim=d)`` with the ``(self, dim)`` overload is torch's own scan, bit for bit:
``cumsum`` and ``cumprod`` (integers give int64, like torch), ``logcumsumexp``, and ``cummax`` /
``cummin`` with their two outputs (values, int64 indices). ``reverse`` adds ``flip`` around the scan
(cummax/cummin indices are then mapped back to positions in the input: ``n - 1 - flip(indices)``,
with n from ``Shape``); ``exclusive`` shifts the result by one with ``roll`` and puts the scan's
identity (0, 1, -inf) in the first entry with ``index_fill`` (any rank; the index is [0], or none on an
empty scan axis, read off ``Shape`` at run time);
``dtype=`` is a Caffe2 ``Cast`` in front (and behind, for integer types other than int64, which
ATen's cumsum/cumprod widen); uint16 inputs, which ATen cannot read, are cast exactly to int32 (cummax,
cummin: back to uint16 behind) or int64 (cumsum, cumprod). Only these forms are emitted;
`aten_gradient` gives them gradients. The ATen operator is in every CPU build of Caffe2 from PyPI's
torch but not in mobile builds: use target "portable" there.

A scan's ATen operator, the capability it needs and its identity are its registry entry's
(`pycumsum_op.scans.Scan.aten`, ``identity``); its result dtype is the entry's one rule (``dtypes``).
"""
import numpy as np

from ..scans import scan as registered_scan
from ..torch_versions import has, require, torch_version
from .emitter import TENSOR_TYPES
from .errors import LoweringError
from .input_facts import normalized_axis


def _refuse_float16(scan, where, what):
    raise LoweringError("{}: {} cannot be lowered to target 'aten': torch 1.10's CPU {} has no Half kernel and "
                        "Caffe2's CPU Cast has no float16; cast to float32 first, or keep the Python op".format(
                            where, what, scan))


def _reversed_indices(emitter, indices, blob_in, spec, facts, where):
    """Indices found on the flipped input, as positions in the input: n - 1 - flip(indices)."""
    if spec.axis < 0 and facts.rank is None:
        raise LoweringError("{}: reverse=True with axis={} needs the rank of its input {!r} (Caffe2's Shape takes "
                            "no negative axis); give shapes={{{!r}: (...)}}, a non-negative axis, or feed the blob "
                            "into the workspace".format(where, spec.axis, blob_in, blob_in))
    axis = spec.axis if facts.rank is None else normalized_axis(spec, where, facts.rank)
    length = emitter.step("Shape", [blob_in], axes=[axis])
    one = emitter.step("GivenTensorInt64Fill", [], values=[1], shape=[1])
    last = emitter.step("Sub", [length, one])
    flipped = emitter.step("ATen", [indices], operator="flip", dims=[spec.axis])
    return emitter.step("Sub", [last, flipped])


def _refuse_rank_zero_at_run_time(emitter, blob_in, where):
    """A reversed scan of an input of unknown rank on a torch whose flip of a 0-d tensor crashes the process: an
    Assert fails the net with a message when it is 0-d (a known rank 0 is scanned as a 1-element vector instead;
    a forward scan flips nothing, and the gradients check their own flips: `aten_gradient`)."""
    rank = emitter.step("Shape", [emitter.step("Shape", [blob_in])])
    zero = emitter.step("GivenTensorInt64Fill", [], values=[0], shape=[1])
    emitter.op("Assert", [emitter.step("GT", [rank, zero])], [], error_msg=(
        "{}: a 0-d input {!r} on torch {}, whose flip of a 0-d tensor crashes the process; lower with "
        "shapes={{{!r}: ()}}".format(where, blob_in, torch_version(), blob_in)))


def emit_scan(emitter, scan, spec, blob_in: str, facts, where) -> list:
    """Append the ATen form of ``scan`` (``spec``) of ``blob_in``; returns the blobs holding its outputs."""
    if facts.rank is None and spec.reverse and not has("torch.flip 0-d"):
        _refuse_rank_zero_at_run_time(emitter, blob_in, where)
    float16 = np.dtype(np.float16)
    if spec.dtype == float16:
        _refuse_float16(scan, where, "dtype=float16")
    if facts.dtype == float16 and spec.dtype is None:
        _refuse_float16(scan, where, "its float16 input {!r}".format(blob_in))
    entry = registered_scan(scan, where)
    form, keeps_dtype, indexed = entry.aten, not entry.dtypes.integers_to_int64, len(entry.outputs) > 1
    if form.needs is not None:
        require(form.needs, "{}: target 'aten' (ATen operator {!r})".format(where, form.operator), LoweringError)
    if facts.rank == 0:  # one element: reversing it changes nothing (and Shape cannot index a 0-d tensor)
        spec = spec._replace(reverse=False)
    current = blob_in
    rank_zero = facts.rank == 0
    if rank_zero:  # roll needs an axis (and torch 1.9 crashes flipping a 0-d gradient): a 1-element vector
        current = emitter.step("ExpandDims", [current], dims=[0])
    working = spec.dtype if spec.dtype is not None else facts.dtype  # the dtype the scan reads
    if spec.dtype is not None:
        cast = {"to": TENSOR_TYPES[spec.dtype]}
        if facts.dtype is not None:
            cast["from_type"] = TENSOR_TYPES[facts.dtype]  # Caffe2's Cast gradient needs it
        current = emitter.step("Cast", [current], **cast)
    bool_flip = working == np.dtype(np.bool_) and spec.reverse and not has("aten flip bool")
    if working == np.dtype(np.uint16) or bool_flip:  # not an ATen dtype (or no bool flip): widen exactly
        kept = np.dtype(np.int32) if working == np.dtype(np.uint16) else np.dtype(np.uint8)
        working_to = kept if keeps_dtype else np.dtype(np.int64)
        current = emitter.step("Cast", [current], to=TENSOR_TYPES[working_to], from_type=TENSOR_TYPES[working])
        aten_dtype = working_to
    else:
        aten_dtype = working
    if spec.reverse:
        current = emitter.step("ATen", [current], operator="flip", dims=[spec.axis])
    outputs = [emitter.fresh() for _ in entry.outputs]
    emitter.op("ATen", [current], outputs, operator=form.operator, dim=spec.axis)
    current = outputs[0]
    if spec.exclusive:  # the first entry's index, none on an empty axis (index 0 of one fails in index_fill)
        # Caffe2's Shape takes no negative axis, its Slice counts -1 as the end: dims[axis] either way
        bounds = [spec.axis, spec.axis + 1] if spec.axis >= 0 else [spec.axis - 1, spec.axis]
        length = emitter.step("Slice", [emitter.step("Shape", [current])], starts=bounds[:1], ends=bounds[1:])
        zero = emitter.step("GivenTensorInt64Fill", [], values=[0], shape=[1])
        nonempty = emitter.step("Cast", [emitter.step("GT", [length, zero])], to=TENSOR_TYPES[np.dtype(np.int64)])
        first = emitter.step("Range", [emitter.step("Squeeze", [nonempty], dims=[0])])
        current = emitter.step("ATen", [current], operator="roll", shifts=[1], dims=[spec.axis])
        current = emitter.step("ATen", [current, first], operator="index_fill", dim=spec.axis, value=entry.identity)
    if spec.reverse:
        current = emitter.step("ATen", [current], operator="flip", dims=[spec.axis])
    if aten_dtype is not None and aten_dtype.kind in "biu" and not keeps_dtype:
        aten_dtype = np.dtype(np.int64)  # ATen's cumsum / cumprod widen integers
    wanted = entry.result_dtype(spec, facts.dtype)
    if wanted is not None and aten_dtype is not None and wanted != aten_dtype:
        current = emitter.step("Cast", [current], to=TENSOR_TYPES[wanted], from_type=TENSOR_TYPES[aten_dtype])
    if rank_zero:
        current = emitter.step("Squeeze", [current], dims=[0])
    if not indexed:
        return [current]
    indices = outputs[1]
    if spec.reverse:
        indices = _reversed_indices(emitter, indices, blob_in, spec, facts, where)
    if rank_zero:
        indices = emitter.step("Squeeze", [indices], dims=[0])
    return [current, indices]
