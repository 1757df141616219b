"""Gradients for the ATen forms `aten` emits; every other ATen op keeps Caffe2's behaviour.

Caffe2 has no gradient for its ``ATen`` operator. ``core.GradientRegistry.GetGradientForOp`` asks
C++ first and, when that fails, the Python registry by op type; `install` registers one function
for "ATen" there. It handles exactly these forms (exactly these arguments, inputs and outputs):

- ``cumsum`` (``dim``): the gradient is the reverse cumsum of the output's gradient (flip, cumsum, flip);
- ``cumprod`` (``dim``): torch's own ``cumprod_backward(grad, input, output, dim)``, exact with zeros;
- ``cummax`` / ``cummin`` (``dim``; outputs values, indices): torch's ``cummaxmin_backward(grad, input,
  indices, dim)``, each gradient sent to the index that won (the indices output has no gradient);
- ``flip`` (``dims``): flip the gradient the same way;
- ``roll`` (``shifts``, ``dims``): roll the gradient back;
- ``index_fill`` (``dim``, ``value``; inputs: tensor, index): the filled entries get no gradient.

For any other ATen op it raises the very exception Caffe2 raised before (same type and message).
``logcumsumexp`` has no such form: torch 1.10.2's gradient of it is not an ATen operator (no
``logcumsumexp_backward``), so `lower` refuses its gradient op (`REFUSALS`).
"""
from caffe2.python import core

#: ATen operator -> (its argument names, its number of inputs, of outputs) for the forms differentiated here.
_FORMS = {"cumsum": ({"dim"}, 1, 1), "cumprod": ({"dim"}, 1, 1), "cummax": ({"dim"}, 1, 2),
          "cummin": ({"dim"}, 1, 2), "flip": ({"dims"}, 1, 1), "roll": ({"shifts", "dims"}, 1, 1),
          "index_fill": ({"dim", "value"}, 2, 1)}
#: Scans other than cumsum whose lowered ATen form has a gradient here (`lower` lowers their gradient ops).
ATEN_GRADIENT_SCANS = frozenset(["cumprod", "cummax", "cummin"])
#: scan -> why its gradient (op) cannot be lowered to target "aten".
REFUSALS = {"logcumsumexp": "torch 1.10.2 has no ATen operator for its gradient (logcumsumexp_backward is not "
                            "one), so Caffe2's ATen op cannot compute it; keep the Python op's gradient (lower "
                            "only an inference net)"}


def emitted_form(op):
    """(operator, {argument: value}) when ``op`` is an ATen form this module differentiates, else None."""
    if op.type != "ATen":
        return None
    args = {arg.name: arg for arg in op.arg}
    operator = args["operator"].s.decode() if "operator" in args else None
    if operator not in _FORMS:
        return None
    names, inputs, outputs = _FORMS[operator]
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


def _gradient_ops(operator, values, grad_out, grad_in, op, device):
    def aten(inputs, output, **args):
        return core.CreateOperator("ATen", inputs, [output], **dict(args, **device))
    index = op.input[1] if len(op.input) > 1 else None
    if operator == "cumprod":
        return [aten([grad_out, op.input[0], op.output[0]], grad_in, operator="cumprod_backward", dim=values["dim"])]
    if operator in ("cummax", "cummin"):
        return [aten([grad_out, op.input[0], op.output[1]], grad_in, operator="cummaxmin_backward",
                     dim=values["dim"])]
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
    grad_out = g_output[0]  # cummax/cummin: their indices output has no gradient
    no_index = [None] * (len(op.input) - 1)
    if grad_out is None:
        return [], [None] + no_index
    if isinstance(grad_out, core.GradientSlice):
        raise Exception("Exception when creating gradient for [ATen]: the gradient of output {} is sparse "
                        "(expected dense); put EnsureDense in front.\nOp: \n{}".format(op.output[0], str(op)))
    operator, values = form
    grad_in = op.input[0] + "_grad"
    device = {"device_option": op.device_option} if op.HasField("device_option") else {}
    return _gradient_ops(operator, values, grad_out, grad_in, op, device), [grad_in] + no_index


def install() -> None:
    """Register `aten_gradient` for "ATen" in Caffe2's Python gradient registry (idempotent)."""
    core.GradientRegistry.RegisterGradient("ATen")(aten_gradient)
