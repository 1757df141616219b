"""What the doctor reports: one `Finding` per place the backward pass breaks, and per cumulative sum written
the slow way (a triangular product), with an operator Caffe2 lacks (CumSum, ToDense) or not at all (a loop).

Every finding reads well on its own; ``str(finding)`` says where, why and the cure:

>>> print(Finding(kind=SPARSE_GRADIENT, op_index=0, op_type="Transpose", blob="t", source_index=1,
...               source_type="Gather", source_input="t",
...               caffe2_error="Gradient of output t is sparse (expected dense)"))
op #0 Transpose: the gradient of its output 't' would be sparse, but Transpose needs a dense
  gradient.
  Why:  op #1 Gather gives its input 't' a sparse gradient (a GradientSlice: indices + values), and
       the gradient of op #0 Transpose cannot take one. Caffe2 fails in AddGradientOperators with
       "Gradient of output t is sparse (expected dense)".
  Cure: make that gradient dense where it is born: an EnsureDense on 't' in front of op #1 Gather
       (pycumsum_op.doctor.fix(net, losses, strategy="ensure_dense")).
"""
import textwrap
from typing import NamedTuple, Optional, Tuple

from .answers import ConcatLoop
from .costs import describe
from .patterns import CumsumIdiom

_WIDTH = 100

#: A sparse gradient reaches an op whose gradient needs a dense one.
SPARSE_GRADIENT = "sparse_gradient"
#: The loss gradient was named with two characters, which Caffe2 unpacks as (indices, values).
TWO_CHARACTER_GRADIENT_NAME = "two_character_gradient_name"
#: A blob gets a sparse gradient from one consumer and a dense one from another.
MIXED_GRADIENTS = "mixed_gradients"
#: Caffe2 cannot build an op's gradient for another reason; the doctor reports it and cannot fix it.
GRADIENT_ERROR = "gradient_error"
#: An op of a type Caffe2 has no operator for (CumSum, ToDense): creating the net fails.
UNREGISTERED_OPERATOR = "unregistered_operator"
#: A cumulative sum that works, the slow way: a product with a triangular constant, O(N·C²).
SLOW_CUMSUM = "slow_cumsum"
#: The Slice + Expand + Add + Concat loop: Caffe2 refuses it, and it is no cumulative sum.
NOT_A_CUMSUM = "not_a_cumsum"


def _op(index: Optional[int], op_type: Optional[str]) -> str:
    return "the net" if index is None else "op #{} {}".format(index, op_type)


class Finding(NamedTuple):
    """One place where ``AddGradientOperators(losses)`` fails, with its cause and cure.

    op_index/op_type: the op whose gradient Caffe2 cannot build (for mixed gradients: the op
    that makes the blob, None for an external input). blob: the blob whose gradient is the problem. source_*: the op
    that makes the gradient sparse and its input that receives it (None when the loss gradient
    itself is sparse). idiom: the Transpose → SparseLengthsSum → Transpose cumsum the source op
    belongs to, if any. unknown_constants: the source op has that idiom's shape but the values of
    these INDICES / LENGTHS blobs are unknown (its init net was not given), so it cannot be matched.
    """
    kind: str
    op_index: Optional[int]
    op_type: Optional[str]
    blob: str
    source_index: Optional[int] = None
    source_type: Optional[str] = None
    source_input: Optional[str] = None
    source_input_index: int = 0
    loss: Optional[str] = None
    loss_gradient: Optional[str] = None
    idiom: Optional[CumsumIdiom] = None
    caffe2_error: str = ""
    unknown_constants: Tuple[str, ...] = ()
    loop: Optional[ConcatLoop] = None

    @property
    def fixable(self) -> bool:
        """True when `fix` can repair it by editing the net."""
        if self.kind == UNREGISTERED_OPERATOR:
            return self.op_type == "ToDense" or self.idiom is not None
        return self.kind == SLOW_CUMSUM or (self.kind in (SPARSE_GRADIENT, MIXED_GRADIENTS)
                                            and self.source_index is not None)

    @property
    def source(self) -> str:
        return _op(self.source_index, self.source_type)

    def _headline(self) -> str:
        where = _op(self.op_index, self.op_type)
        if self.kind == UNREGISTERED_OPERATOR:
            return "{}: Caffe2 has no {} operator, so creating the net fails.".format(where, self.op_type)
        if self.kind == SLOW_CUMSUM:
            # ASCII, as every message: CPython 3.6 writes stdout in ASCII under the C locale
            return "{}: a cumulative sum through a {}x{} triangular constant {!r}: it works, in O(N*C^2).".format(
                where, self.idiom.columns, self.idiom.columns, self.idiom.constant)
        if self.kind == NOT_A_CUMSUM:
            return ("ops #{}..#{} (Slice + Expand + Add + Concat, {} iteration{}): not a cumulative sum of {!r}."
                    .format(self.loop.ops[0], self.loop.ops[-1], self.loop.iterations,
                            "s" if self.loop.iterations > 1 else "", self.loop.blob_in))
        if self.kind == MIXED_GRADIENTS:
            made_by = "an external input" if self.op_index is None else "an output of " + where
            return ("blob {!r} ({}) gets a sparse gradient from one consumer and a dense one from another, "
                    "and Caffe2 cannot add the two up.".format(self.blob, made_by))
        if self.kind == GRADIENT_ERROR:
            return "{}: Caffe2 cannot build its gradient.".format(where)
        return ("{}: the gradient of its output {!r} would be sparse, but {} needs a dense gradient."
                .format(where, self.blob, self.op_type))

    def _why(self) -> str:
        if self.kind == UNREGISTERED_OPERATOR:
            return ('CreateNet / RunNetOnce raise for it, and net.{} raises "Method {} is not a registered '
                    'operator" (without pycumsum_op). Its gradient cannot be built either.'.format(
                        self.op_type, self.op_type))
        if self.kind == SLOW_CUMSUM:
            return describe(self.idiom)
        if self.kind == NOT_A_CUMSUM:
            refused = ("Caffe2 refuses the net when it runs: Expand takes the target shape as a second input, not "
                       "dims=/axes= arguments (\"did not pass schema checking\"). And "
                       if self.loop.expand_without_shape else "")
            return ("{}the loop concatenates {} blobs as wide as {!r}, each its running sum plus a slice of it, to "
                    "{!r}: the output is {}x as wide as {!r}, and no column of it is a cumulative sum. No edit of "
                    "these ops keeps their meaning and gives one.".format(
                        refused, self.loop.iterations + 1, self.loop.blob_in, self.loop.blob_out,
                        self.loop.iterations + 1, self.loop.blob_in))
        caffe2 = 'Caffe2 fails in AddGradientOperators with "{}".'.format(self.caffe2_error)
        if self.kind == GRADIENT_ERROR:
            return caffe2 + " This is not the sparse-gradient problem the doctor cures."
        if self.kind == TWO_CHARACTER_GRADIENT_NAME:
            return ("the gradient of loss {!r} was given as the two-character blob name {!r}; Caffe2 unpacks "
                    "any two-character string as an (indices, values) pair, i.e. a sparse gradient {!r} + {!r}. "
                    .format(self.loss, self.loss_gradient, self.loss_gradient[0], self.loss_gradient[1]) + caffe2)
        if self.source_index is None:
            return "the sparse gradient comes from {}. {}".format(
                "the gradient given for loss {!r}".format(self.loss) if self.loss else "a sum of sparse gradients",
                caffe2)
        return ("{} gives its input {!r} a sparse gradient (a GradientSlice: indices + values), and {}"
                .format(self.source, self.source_input,
                        "Caffe2 cannot add it to the dense one." if self.kind == MIXED_GRADIENTS
                        else "the gradient of {} cannot take one.".format(_op(self.op_index, self.op_type)))
                + " " + caffe2)

    def _cure(self) -> str:
        if self.kind == UNREGISTERED_OPERATOR and self.op_type == "ToDense":
            return ("EnsureDense is Caffe2's dense conversion: fix() puts one in its place (any strategy). Where "
                    "the gradient turns sparse, a conversion must go on the op's input instead: see the "
                    "sparse-gradient finding, if any.")
        if self.kind == UNREGISTERED_OPERATOR:
            if self.idiom is None:
                return ("give it one axis (axis=k or axes=[k]; ONNX's exclusive/reverse are 0 or 1), or write "
                        "net.PyCumSum(x, y, axis=k) / net.CumSum(x, axes=[k]) after import pycumsum_op.")
            return ("it is one net.{}: fix(net, losses) puts it in its place (any strategy; "
                    "\"lowered\": Caffe2's own C++ operators), checked on random inputs against ONNX's "
                    "definition.".format(self.idiom.call()))
        if self.kind == SLOW_CUMSUM:
            return ('fix(net, losses, strategy="pycumsum") puts one net.{} in its place, checked equal on random '
                    "inputs (the default strategy leaves it: it works).".format(self.idiom.call()))
        if self.kind == NOT_A_CUMSUM:
            return ("replace the loop by one net.PyCumSum({!r}, {!r}, axis={}) (torch.cumsum; net.CumSum({!r}, "
                    "axes=[{}]) after import pycumsum_op is the same op). fix() refuses: it would change what "
                    "the net computes.".format(self.loop.blob_in, self.loop.blob_out, self.loop.axis,
                                               self.loop.blob_in, self.loop.axis))
        if self.kind == GRADIENT_ERROR:
            return "see Caffe2's message; the op needs a registered gradient or must be left out of the backward pass."
        if self.kind == TWO_CHARACTER_GRADIENT_NAME:
            return ("give the gradient blob a name of any other length, e.g. AddGradientOperators({{{!r}: {!r}}}) "
                    "(and declare it with net.AddExternalInput). The net itself is fine."
                    .format(self.loss, self.loss_gradient + "_grad"))
        if self.source_index is None:
            return "give the loss a dense gradient (a blob name, or None for ones)."
        cure = ("make that gradient dense where it is born: an EnsureDense on {!r} in front of {} "
                '(pycumsum_op.doctor.fix(net, losses, strategy="ensure_dense")).'
                .format(self.source_input, self.source))
        if self.idiom is not None:
            cure += " " + describe(self.idiom)
        elif self.unknown_constants:
            cure += (" It looks like the Transpose -> SparseLengthsSum -> Transpose cumsum idiom, but the values of "
                     "{} are not in the net or the workspace: pass the init net that fills them (init_net=, "
                     "--init-net) to let strategy=\"pycumsum\" replace it by one PyCumSum.".format(
                         " and ".join(repr(blob) for blob in self.unknown_constants)))
        return cure

    def __str__(self) -> str:
        return "\n".join([textwrap.fill(self._headline(), width=_WIDTH, subsequent_indent="  ")] + [
            textwrap.fill(text, width=_WIDTH, initial_indent="  " + label, subsequent_indent="       ")
            for label, text in (("Why:  ", self._why()), ("Cure: ", self._cure()))])
