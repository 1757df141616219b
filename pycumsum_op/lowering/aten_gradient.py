"""Gradients for the ATen forms `aten` emits; every other ATen op keeps Caffe2's behaviour.

Caffe2 has no gradient for its ``ATen`` operator. ``core.GradientRegistry.GetGradientForOp`` asks
C++ first and, when that fails, the Python registry by op type; `install` registers one function
for "ATen" there. It handles exactly these forms (exactly these arguments, inputs and outputs): the
ATen operator of each registered scan (`pycumsum_op.scans.AtenForm`: ``dim``, one input, the scan's
outputs), whose gradient its form's own emitter writes (``AtenForm.backward``; the family's are in
`pycumsum_op.scans.aten_backward`), and the ops around them:

- ``flip`` (``dims``): flip the gradient the same way;
- ``roll`` (``shifts``, ``dims``): roll the gradient back;
- ``index_fill`` (``dim``, ``value``; inputs: tensor, index): the filled entries get no gradient.

It handles as well the forms `pycumsum_op.onnx` emits where torch's kernel is faster than Caffe2's operator
(`IMPORTED_FORMS`; those translations build their arguments by `imported_form`, so they emit no other form; others
that emit the same form, such as ONNX's Sum by ``add``, get the same gradient). They are declared here, not in the
importer, so that a net imported and saved has its gradient in any process that imported pycumsum_op (which
imports this package, not the optional importer):

- ``add``, ``sub``, ``mul``, ``div`` (no argument; two tensors broadcast as numpy): the gradient of Caffe2's
  ``Add``, ``Sub``, ``Mul``, ``Div`` of the same blobs, which broadcast the same way and whose gradient ops sum
  over the broadcast axes;
- ``permute`` (``dims``): permute the gradient by the inverse permutation;
- ``softmax`` (``dim``): ``y * (g - sum(g * y, dim, keepdim))`` by ATen ops, along any dim (Caffe2's
  ``SoftmaxGradient`` flattens to 2-D at its axis: right for the last axis only).

For any other ATen op it raises the very exception Caffe2 raised before (same type and message).
"""
from caffe2.proto import caffe2_pb2
from caffe2.python import core

from ..scans import SCANS, AtenForm
from ..torch_versions import has, require, torch_version
from .errors import LoweringError

#: ATen operator -> (its argument names, its number of inputs, of outputs) for the forms around the scans.
_ARRANGING_FORMS = {"flip": ({"dims"}, 1, 1), "roll": ({"shifts", "dims"}, 1, 1),
                    "index_fill": ({"dim", "value"}, 2, 1)}
#: The ATen forms `pycumsum_op.onnx` emits for speed: ATen operator -> (its argument names, inputs, outputs).
IMPORTED_FORMS = {"add": (set(), 2, 1), "sub": (set(), 2, 1), "mul": (set(), 2, 1), "div": (set(), 2, 1),
                  "permute": ({"dims"}, 1, 1), "softmax": ({"dim"}, 1, 1)}
#: ATen operator -> the Caffe2 operator computing the same of two tensors (numpy's broadcasting): its gradient.
_CAFFE2_ARITHMETIC = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}


def imported_form(operator: str, **arguments) -> dict:
    """The ATen op's arguments (``operator`` and ``arguments``) for a form of `IMPORTED_FORMS`: the importer builds
    them here, so that it emits only forms this module differentiates (ValueError for any other)."""
    if operator not in IMPORTED_FORMS or set(arguments) != IMPORTED_FORMS[operator][0]:
        raise ValueError("ATen {} with arguments {} is not one of the imported forms with a gradient: {}".format(
            operator, sorted(arguments), sorted(IMPORTED_FORMS)))
    return dict(arguments, operator=operator)


def _scan_forms() -> dict:
    """ATen operator -> its `AtenForm` and the number of outputs, for every registered scan's operator."""
    return {entry.aten.operator: (entry.aten, len(entry.outputs)) for entry in SCANS.values()
            if isinstance(entry.aten, AtenForm)}


def emitted_form(op):
    """(operator, {argument: value}) when ``op`` is an ATen form this module differentiates, else None."""
    if op.type != "ATen":
        return None
    args = {arg.name: arg for arg in op.arg}
    operator = args["operator"].s.decode() if "operator" in args else None
    scans = _scan_forms()
    if operator in scans:
        names, inputs, outputs = {"dim"}, 1, scans[operator][1]
    elif operator in _ARRANGING_FORMS:
        names, inputs, outputs = _ARRANGING_FORMS[operator]
    elif operator in IMPORTED_FORMS:
        names, inputs, outputs = IMPORTED_FORMS[operator]
    else:
        return None
    if set(args) != names | {"operator"} or len(op.input) != inputs or len(op.output) != outputs:
        return None
    values = {name: (list(args[name].ints) if args[name].ints else
                     args[name].i if args[name].HasField("i") else args[name].f) for name in names}
    return operator, values


def _caffe2_error(op, g_output):
    """The exception Caffe2's registry raises for ``op`` without this module (re-asking its C++ side)."""
    try:
        core.GradientRegistry._GetGradientForOpCC(op, g_output)
    except Exception as error:
        return Exception("Exception when creating gradient for [{}]:{}.\nOp: \n{}".format(op.type, error, str(op)))
    return None


class _Steps(object):
    """ATen ops writing blobs named after the gradient (``<grad_in>_<step>``), on the forward op's device."""

    def __init__(self, grad_in, device):
        self.ops, self._grad_in, self._device = [], grad_in, device

    def __call__(self, name, inputs, operator_type="ATen", **args):
        output = self._grad_in if name is None else "{}_{}".format(self._grad_in, name)
        self.ops.append(core.CreateOperator(operator_type, inputs, [output], **dict(args, **self._device)))
        return output

    def refuse_rank_zero(self, name, blob):
        """Shape -> Shape -> GT 0 -> Assert: fails the net with a message where ``blob`` is 0-d."""
        rank = self(name + "_rank", [self(name + "_shape", [blob], "Shape")], "Shape")
        zero = self(name + "_zero", [], "GivenTensorInt64Fill", values=[0], shape=[1])
        positive = self(name + "_rank_positive", [rank, zero], "GT")
        self.ops.append(core.CreateOperator("Assert", [positive], [], error_msg=(
            "the gradient {!r}: a 0-d gradient on torch {}, whose flip of a 0-d tensor crashes the process; "
            "lower with the input's shape".format(self._grad_in, torch_version())), **self._device))

    def reversed_scan(self, name, blob, operator, dim, last=False):
        """flip -> scan -> flip: the scan from each element to the end of its lane (into grad_in if ``last``)."""
        if not has("torch.flip 0-d"):  # torch 1.9's flip of a 0-d tensor crashes the process: fail the net instead
            self.refuse_rank_zero(name, blob)
        flipped = self(name + "_flip", [blob], operator="flip", dims=[dim])
        scanned = self(name + "_scan", [flipped], operator=operator, dim=dim)
        return self(None if last else name + "_back", [scanned], operator="flip", dims=[dim])


def _gradient_ops(operator, values, grad_out, grad_in, op, device):
    step, x = _Steps(grad_in, device), op.input[0]
    form = _scan_forms().get(operator, (None,))[0]  # a scan's operator: its form carries its gradient's emitter
    if form is not None:
        if form.backward_needs is not None:
            require(form.backward_needs, "the gradient of ATen {} ({})".format(operator, form.backward.__name__),
                    LoweringError)
        form.backward(step, x, list(op.output), grad_out, values["dim"])
    elif operator == "flip":
        step(None, [grad_out], operator="flip", dims=values["dims"])
    elif operator == "roll":
        step(None, [grad_out], operator="roll", shifts=[-s for s in values["shifts"]], dims=values["dims"])
    elif operator == "permute":  # axis dims[i] of the input is axis i of the output: move it back
        rank = len(values["dims"])
        inverse = [0] * rank
        for position, axis in enumerate(values["dims"]):
            inverse[axis % rank] = position
        step(None, [grad_out], operator="permute", dims=inverse)
    elif operator == "softmax":  # y * (g - sum(g * y)) along dim: softmax's Jacobian applied to g
        y, dim = op.output[0], values["dim"]
        total = step("total", [step("product", [grad_out, y], operator="mul")], operator="sum", dim=[dim],
                     keepdim=True)
        step(None, [y, step("centred", [grad_out, total], operator="sub")], operator="mul")
    else:  # index_fill: the filled entries get no gradient
        step(None, [grad_out, op.input[1]], operator="index_fill", dim=values["dim"], value=0.0)
    return step.ops


def aten_gradient(op, g_output):
    """Gradient maker for "ATen" ops (``GradientRegistry`` signature: (ops, input gradients))."""
    form = emitted_form(op)
    if form is None:
        error = _caffe2_error(op, g_output)
        if error is not None:
            raise error
        return core.GradientRegistry._GetGradientForOpCC(op, g_output)
    grad_out = g_output[0]  # cummax/cummin: their indices output has no gradient
    no_index = [None] * (len(op.input) - 1)
    if grad_out is None:
        return [], [None] + no_index
    if isinstance(grad_out, core.GradientSlice):
        raise Exception("Exception when creating gradient for [ATen]: the gradient of output {} is sparse "
                        "(expected dense); put EnsureDense in front.\nOp: \n{}".format(op.output[0], str(op)))
    operator, values = form
    if operator in _CAFFE2_ARITHMETIC:  # Caffe2's own gradient of the same arithmetic (ops and input gradients)
        equivalent = caffe2_pb2.OperatorDef()
        equivalent.CopyFrom(op)
        equivalent.type = _CAFFE2_ARITHMETIC[operator]
        del equivalent.arg[:]
        return core.GradientRegistry.GetGradientForOp(equivalent, g_output)
    grad_in = op.input[0] + "_grad"
    device = {"device_option": op.device_option} if op.HasField("device_option") else {}
    return _gradient_ops(operator, values, grad_out, grad_in, op, device), [grad_in] + no_index


def install() -> None:
    """Register `aten_gradient` for "ATen" in Caffe2's Python gradient registry (idempotent)."""
    core.GradientRegistry.RegisterGradient("ATen")(aten_gradient)
