"""Gradients for the ATen forms `aten` emits; every other ATen op keeps Caffe2's behaviour.

Caffe2 has no gradient for its ``ATen`` operator. ``core.GradientRegistry.GetGradientForOp`` asks
C++ first and, when that fails, the Python registry by op type; `install` registers one function
for "ATen" there. It handles exactly these forms (one output, exactly these arguments):

- ``cumsum`` (``dim``): the gradient is the reverse cumsum of the output's gradient (flip, cumsum, flip);
- ``flip`` (``dims``): flip the gradient the same way;
- ``roll`` (``shifts``, ``dims``): roll the gradient back;
- ``index_fill`` (``dim``, ``value``; inputs: tensor, index): the filled entries get no gradient.

For any other ATen op it raises the very exception Caffe2 raised before (same type and message).
"""
from caffe2.python import core

#: ATen operator -> (its argument names, its number of inputs) for the forms differentiated here.
_FORMS = {"cumsum": ({"dim"}, 1), "flip": ({"dims"}, 1), "roll": ({"shifts", "dims"}, 1),
          "index_fill": ({"dim", "value"}, 2)}


def emitted_form(op):
    """(operator, {argument: value}) when ``op`` is an ATen form this module differentiates, else None."""
    if op.type != "ATen" or len(op.output) != 1:
        return None
    args = {arg.name: arg for arg in op.arg}
    operator = args["operator"].s.decode() if "operator" in args else None
    if operator not in _FORMS:
        return None
    names, inputs = _FORMS[operator]
    if set(args) != names | {"operator"} or len(op.input) != inputs:
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


def _gradient_ops(operator, values, grad_out, grad_in, index, device):
    def aten(inputs, output, **args):
        return core.CreateOperator("ATen", inputs, [output], **dict(args, **device))
    if operator == "flip":
        return [aten([grad_out], grad_in, operator="flip", dims=values["dims"])]
    if operator == "roll":
        return [aten([grad_out], grad_in, operator="roll", shifts=[-s for s in values["shifts"]], dims=values["dims"])]
    if operator == "index_fill":
        return [aten([grad_out, index], grad_in, operator="index_fill", dim=values["dim"], value=0.0)]
    dim, flipped, summed = values["dim"], grad_in + "_flip", grad_in + "_rcumsum"
    return [aten([grad_out], flipped, operator="flip", dims=[dim]),
            aten([flipped], summed, operator="cumsum", dim=dim),
            aten([summed], grad_in, operator="flip", dims=[dim])]


def aten_gradient(op, g_output):
    """Gradient maker for "ATen" ops (``GradientRegistry`` signature: (ops, input gradients))."""
    form = emitted_form(op)
    if form is None:
        error = _caffe2_error(op, g_output)
        if error is not None:
            raise error
        return core.GradientRegistry._GetGradientForOpCC(op, g_output)
    (grad_out,) = g_output
    no_index = [None] * (len(op.input) - 1)
    if grad_out is None:
        return [], [None] + no_index
    if isinstance(grad_out, core.GradientSlice):
        raise Exception("Exception when creating gradient for [ATen]: the gradient of output {} is sparse "
                        "(expected dense); put EnsureDense in front.\nOp: \n{}".format(op.output[0], str(op)))
    operator, values = form
    grad_in = op.input[0] + "_grad"
    device = {"device_option": op.device_option} if op.HasField("device_option") else {}
    index = op.input[1] if len(op.input) > 1 else None
    return _gradient_ops(operator, values, grad_out, grad_in, index, device), [grad_in] + no_index


def install() -> None:
    """Register `aten_gradient` for "ATen" in Caffe2's Python gradient registry (idempotent)."""
    core.GradientRegistry.RegisterGradient("ATen")(aten_gradient)
