"""The gradients of the scans' ATen forms, as ATen ops: each `AtenForm.backward` is one of these emitters.

The ATen gradient maker (`pycumsum_op.lowering.aten_gradient`) calls an emitter as ``backward(step, x, outputs,
grad, dim)``: ``step(name, inputs, operator_type="ATen", **args)`` appends one op writing a blob named after the
gradient (``name`` None: the gradient itself) and returns that blob; ``step.reversed_scan(name, blob, operator,
dim, last=False)`` appends flip -> scan -> flip. ``x`` is the forward op's input, ``outputs`` its outputs,
``grad`` the gradient of the first output; the emitter writes the input's gradient. A new scan lowers its
gradient by naming an emitter (one of these or its own) in its `AtenForm`: nothing else changes.
"""
from ..torch_versions import has


def cumsum_backward(step, x, outputs, grad, dim):
    """The sum from each element to the end of its lane."""
    step.reversed_scan("rcumsum", grad, "cumsum", dim, last=True)


def cumprod_backward(step, x, outputs, grad, dim):
    """torch's ``cumprod_backward`` (exact with zeros in a lane); from torch 1.9 it takes the forward's output."""
    if has("aten cumprod_backward(grad, input, output)"):
        step(None, [grad, x, outputs[0]], operator="cumprod_backward", dim=dim)
    else:
        step(None, [grad, x], operator="cumprod_backward", dim=dim)


def cummaxmin_backward(step, x, outputs, grad, dim):
    """torch's ``cummaxmin_backward`` by its definition (an ATen operator only from torch 1.8): zeros, and each
    gradient added at its winner's index."""
    zeros = step("zeros", [grad, step("all", [outputs[1]], operator="ge", other=0.0)], operator="masked_fill",
                 value=0.0)
    step(None, [zeros, outputs[1], grad], operator="scatter_add", dim=dim)


def logcumsumexp_backward(step, x, outputs, grad, dim):
    """grad_x = sum_{i >= j} grad[i] exp(x[j] - y[i]), in log space for grad > 0 and grad < 0 apart (as torch),
    0 where x = -inf (torch: NaN inside an all -inf prefix) and, where x = +inf, each +inf element's share 1/m of
    every later grad[i] (m: the +inf elements up to i; torch: NaN), as PyLogCumSumExp's kernel."""
    y = outputs[0]
    log_grad = step("log", [step("abs", [grad], operator="abs")], operator="log")
    parts = []
    for sign, compare in (("pos", "gt"), ("neg", "lt")):  # log|grad| where grad has this sign, else -inf
        other_sign = step(sign + "_other", [step(sign + "_sign", [grad], operator=compare, other=0.0)],
                          operator="logical_not")
        masked = step(sign + "_masked", [log_grad, other_sign], operator="masked_fill", value=float("-inf"))
        shifted = step(sign + "_minus_y", [masked, y], operator="sub")
        summed = step.reversed_scan(sign + "_sum", shifted, "logcumsumexp", dim)
        parts.append(step(sign + "_exp", [step(sign + "_plus_x", [summed, x], operator="add")], operator="exp"))
    finite = step("finite", parts, operator="sub")
    neg_inf = step("neg_inf", [x], operator="eq", other=float("-inf"))  # isneginf: an ATen operator from 1.7
    finite = step("zeroed", [finite, neg_inf], operator="masked_fill", value=0.0)
    infinite = step("pos_inf", [x], operator="eq", other=float("inf"))
    counts = step("inf_counts", [step("inf_count", [infinite], operator="cumsum", dim=dim), grad], operator="type_as")
    shares = step("shares", [grad, step("at_least_one", [counts], operator="clamp_min", min=1.0)], operator="div")
    step(None, [infinite, step.reversed_scan("share_sum", shares, "cumsum", dim), finite], operator="where")
