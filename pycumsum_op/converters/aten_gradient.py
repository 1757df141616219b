"""Gradients for the ATen forms `aten` emits; every other ATen op keeps Caffe2's behaviour.

Caffe2 has no gradient for its ``ATen`` operator. ``core.GradientRegistry.GetGradientForOp`` asks
C++ first and, when that fails, the Python registry by op type; `install` registers one function
for "ATen" there. It handles exactly these forms (one input, one output, no other arguments):

- ``cumsum`` with ``dim``: the gradient is the reverse cumsum of the output's gradient
  (flip, cumsum, flip);
- ``flip`` with ``dims``: flip the gradient the same way;
- ``constant_pad_nd`` with ``pad`` (value 0): pad the gradient by the negated pads.

For any other ATen op it raises the very exception Caffe2 raised before (same type and message).
"""
from caffe2.python import core

_FORMS = {"cumsum": "dim", "flip": "dims", "constant_pad_nd": "pad"}


def emitted_form(op):
    """(operator, its one argument's value) when ``op`` is an ATen form this module differentiates, else None."""
    if op.type != "ATen" or len(op.input) != 1 or len(op.output) != 1:
        return None
    args = {arg.name: arg for arg in op.arg}
    operator = args["operator"].s.decode() if "operator" in args else None
    if operator not in _FORMS or set(args) != {"operator", _FORMS[operator]}:
        return None
    value = args[_FORMS[operator]]
    if operator == "cumsum":
        return (operator, value.i) if value.HasField("i") else None
    return (operator, list(value.ints)) if value.ints or operator == "constant_pad_nd" else None


def _caffe2_error(op, g_output):
    """The exception Caffe2's registry raises for ``op`` without this module (re-asking its C++ side)."""
    try:
        core.GradientRegistry._GetGradientForOpCC(op, g_output)
    except Exception as error:
        return Exception("Exception when creating gradient for [{}]:{}.\nOp: \n{}".format(op.type, error, str(op)))
    return None


def aten_gradient(op, g_output):
    """Gradient maker for "ATen" ops (``GradientRegistry`` signature: (ops, input gradients))."""
    form = emitted_form(op)
    if form is None:
        error = _caffe2_error(op, g_output)
        if error is not None:
            raise error
        return core.GradientRegistry._GetGradientForOpCC(op, g_output)
    (grad_out,) = g_output
    if grad_out is None:
        return [], [None]
    if isinstance(grad_out, core.GradientSlice):
        raise Exception("Exception when creating gradient for [ATen]: the gradient of output {} is sparse "
                        "(expected dense); put EnsureDense in front.\nOp: \n{}".format(op.output[0], str(op)))
    operator, value = form
    grad_in = op.input[0] + "_grad"
    device = {"device_option": op.device_option} if op.HasField("device_option") else {}
    if operator == "flip":
        ops = [core.CreateOperator("ATen", [grad_out], [grad_in], operator="flip", dims=value, **device)]
    elif operator == "constant_pad_nd":
        ops = [core.CreateOperator("ATen", [grad_out], [grad_in], operator="constant_pad_nd",
                                   pad=[-pad for pad in value], **device)]
    else:
        flipped, summed = grad_in + "_flip", grad_in + "_rcumsum"
        ops = [core.CreateOperator("ATen", [grad_out], [flipped], operator="flip", dims=[value], **device),
               core.CreateOperator("ATen", [flipped], [summed], operator="cumsum", dim=value, **device),
               core.CreateOperator("ATen", [summed], [grad_in], operator="flip", dims=[value], **device)]
    return ops, [grad_in]


def install() -> None:
    """Register `aten_gradient` for "ATen" in Caffe2's Python gradient registry (idempotent)."""
    core.GradientRegistry.RegisterGradient("ATen")(aten_gradient)
