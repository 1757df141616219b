"""Brew helpers: ``brew.cumsum(model, blob_in, blob_out, axis=...)``, and ``brew.cumprod``, ``brew.cummax``,
``brew.cummin``, ``brew.logcumsumexp`` the same way (each takes its net function's keywords).

brew hands a helper the keywords of every ``brew.arg_scope`` that lists it, unfiltered
(``brew.arg_scope([brew.cumsum, brew.fc], order="NCHW")`` passes ``order``), and, to a
helper that takes ``**kwargs``, the model's own ``arg_scope``. A helper ignores
exactly those scope keywords; any other unknown keyword (a typo) still fails loudly.

>>> from caffe2.python import brew, model_helper
>>> import pycumsum_op
>>> model = model_helper.ModelHelper(name="doc_brew")
>>> brew.cummax(model, "doc_bx", ["doc_bmax", "doc_bidx"], axis=0)
(BlobReference("doc_bmax"), BlobReference("doc_bidx"))
"""
import inspect

from caffe2.python import brew
from caffe2.python.helpers.arg_scope import get_current_scope

from ..kernels import SCAN_KERNELS
from .net_ops import SCAN_FUNCTIONS


def _check_scope_keywords(model, helper_name: str, op_name: str, keywords) -> None:
    """Refuse keywords that neither the model's arg_scope nor an active brew.arg_scope supplied."""
    from_scopes = set(model.arg_scope) | set(get_current_scope().get(helper_name, {}))
    unknown = sorted(set(keywords) - from_scopes)
    if unknown:
        raise TypeError("{} (brew.{}): unexpected keyword argument(s) {}".format(
            op_name, helper_name, ", ".join(unknown)))


def _brew_helper(scan: str):
    """The brew helper of scan ``scan``: its net function on ``model.net``, scope keywords ignored."""
    net_function, op_name = SCAN_FUNCTIONS[scan], SCAN_KERNELS[scan].op_name
    own = frozenset(list(inspect.signature(net_function).parameters)[3:])  # after net, blob_in, blob_out

    def helper(model, blob_in, blob_out, *args, **keywords):
        _check_scope_keywords(model, scan, op_name, [name for name in keywords if name not in own])
        return net_function(model.net, blob_in, blob_out, *args, **{k: v for k, v in keywords.items() if k in own})

    helper.__name__ = helper.__qualname__ = scan
    helper.__doc__ = "brew helper: {}(model.net, blob_in, blob_out, ...) with arguments {}.\n\n{}".format(
        scan, ", ".join(sorted(own)), net_function.__doc__)
    return helper


cumsum = _brew_helper("cumsum")
cumprod = _brew_helper("cumprod")
cummax = _brew_helper("cummax")
cummin = _brew_helper("cummin")
logcumsumexp = _brew_helper("logcumsumexp")


def install():
    """Register the helpers with brew (once per process)."""
    for helper in (cumsum, cumprod, cummax, cummin, logcumsumexp):
        if not brew.has_helper(helper):
            brew.Register(helper)
