"""Brew helpers: ``brew.cumsum(model, blob_in, blob_out, axis=...)``, and ``brew.cumprod``, ``brew.cummax``,
``brew.cummin``, ``brew.logcumsumexp`` the same way (each takes its net function's keywords): one per
registered scan, named as the scan.

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

from ..kernels import ScanArgumentError
from ..scans import listen
from .net_ops import scan_function


def _check_scope_keywords(model, helper_name: str, op_name: str, keywords) -> None:
    """Refuse keywords that neither the model's arg_scope nor an active brew.arg_scope supplied."""
    from_scopes = set(model.arg_scope) | set(get_current_scope().get(helper_name, {}))
    unknown = sorted(set(keywords) - from_scopes)
    if unknown:
        raise TypeError("{} (brew.{}): unexpected keyword argument(s) {}".format(
            op_name, helper_name, ", ".join(unknown)))


def brew_helper(entry):
    """The brew helper of registered scan ``entry``: its net function on ``model.net``, scope keywords ignored."""
    scan, op_name, net_function = entry.name, entry.op_name, scan_function(entry.name)
    own = frozenset(list(inspect.signature(net_function).parameters)[3:])  # after net, blob_in, blob_out

    def helper(model, blob_in, blob_out, *args, **keywords):
        _check_scope_keywords(model, scan, op_name, [name for name in keywords if name not in own])
        return net_function(model.net, blob_in, blob_out, *args, **{k: v for k, v in keywords.items() if k in own})

    helper.__name__ = helper.__qualname__ = scan
    helper.__doc__ = "brew helper: {}(model.net, blob_in, blob_out, ...) with arguments {}.\n\n{}".format(
        scan, ", ".join(sorted(own)), net_function.__doc__)
    return helper


#: scan name -> the helper registered with brew for it (brew's other helpers are never touched).
_HELPERS = {}


def _install_helper(entry, registered: bool) -> None:
    """Register the helper of a scan added to the registry with brew; take it away with the scan."""
    if registered and entry.name not in _HELPERS:
        if brew.has_helper(entry.name):
            raise ScanArgumentError("register: scan {!r}: brew already has a helper {!r}; choose another "
                                    "name".format(entry.name, entry.name))
        _HELPERS[entry.name] = brew_helper(entry)
        brew.Register(_HELPERS[entry.name])
    elif not registered and entry.name in _HELPERS:
        del brew._registry[entry.name]  # brew has no unregistering call; its registry is this dict
        del _HELPERS[entry.name]


def install():
    """Register the helpers of every registered scan with brew, now and for scans registered later."""
    listen(_install_helper)
