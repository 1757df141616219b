"""What the doctor reports: one `Finding` per place the backward pass breaks.

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

    @property
    def fixable(self) -> bool:
        """True when `fix` can repair it by editing the net."""
        return self.kind in (SPARSE_GRADIENT, MIXED_GRADIENTS) and self.source_index is not None

    @property
    def source(self) -> str:
        return _op(self.source_index, self.source_type)

    def _headline(self) -> str:
        where = _op(self.op_index, self.op_type)
        if self.kind == MIXED_GRADIENTS:
            made_by = "an external input" if self.op_index is None else "an output of " + where
            return ("blob {!r} ({}) gets a sparse gradient from one consumer and a dense one from another, "
                    "and Caffe2 cannot add the two up.".format(self.blob, made_by))
        if self.kind == GRADIENT_ERROR:
            return "{}: Caffe2 cannot build its gradient.".format(where)
        return ("{}: the gradient of its output {!r} would be sparse, but {} needs a dense gradient."
                .format(where, self.blob, self.op_type))

    def _why(self) -> str:
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
            cure += " " + self.idiom.describe()
        elif self.unknown_constants:
            cure += (" It looks like the Transpose → SparseLengthsSum → Transpose cumsum idiom, but the values of "
                     "{} are not in the net or the workspace: pass the init net that fills them (init_net=, "
                     "--init-net) to let strategy=\"pycumsum\" replace it by one PyCumSum.".format(
                         " and ".join(repr(blob) for blob in self.unknown_constants)))
        return cure

    def __str__(self) -> str:
        return "\n".join([textwrap.fill(self._headline(), width=_WIDTH, subsequent_indent="  ")] + [
            textwrap.fill(text, width=_WIDTH, initial_indent="  " + label, subsequent_indent="       ")
            for label, text in (("Why:  ", self._why()), ("Cure: ", self._cure()))])
