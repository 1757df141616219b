"""`Scan`: everything the package knows about one scan op, and the registry that holds one per name.

A scan op is declared once, in the spirit of ``torch.autograd.Function``: its forward and backward
kernels together with what the backward reads (``saves``, by name), its outputs, arguments and dtype
rule, and how each converter can express it (`AtenForm`, `PortableForm`, an ONNX operator) or why it
cannot (`Refused`). The Caffe2 binding (``net.PyCumSum``, the function API, brew helpers, the pickled
builders, so also `verify_net` / `load_net`), the lowering targets, ONNX export and the docs' tables
(checked by the tests) read these entries. `register` adds one (at import for the built-in family, or
at run time), `unregister` takes it away again, and `scan` is the one lookup.

>>> scan("cumsum").op_name, scan("cummax").outputs, scan("cumprod").saves
('PyCumSum', ('values', 'indices'), ('input', 'y'))
>>> scan("cumsun", "add_scan_op")
Traceback (most recent call last):
...
pycumsum_op.kernels.spec.ScanArgumentError: add_scan_op: unknown scan='cumsun'; known scans: 'cummax', 'cummin', 'cumprod', 'cumsum', 'logcumsumexp'
"""
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Tuple, Union

from ..kernels.spec import DtypeRule, ScanArgumentError, ScanKernel, short_repr

#: The optional arguments a scan may take besides axis (``Scan.arguments``).
ALL_ARGUMENTS = frozenset(["exclusive", "reverse", "dtype"])
#: What a backward may read besides the incoming gradient: the input's values (``saves`` names them
#: "input", and then the forward may not run in place) or forward outputs, by their names in ``outputs``.
INPUT = "input"
#: The converter targets a scan declares a form (or a refusal) for.
CONVERTERS = ("aten", "portable", "onnx")


class Refused(NamedTuple):
    """A target that cannot express a scan, and why (the reason ends up in the converter's error)."""
    reason: str


class AtenForm(NamedTuple):
    """A scan as Caffe2's ``ATen`` operator (torch's C++ kernel, ``(self, dim)`` overload, the scan's outputs)."""
    operator: str
    #: the `pycumsum_op.torch_versions` capability the operator needs (None: every torch with Caffe2)
    needs: Optional[str]
    #: the operator's gradient as ATen ops: an emitter ``backward(step, x, outputs, grad, dim)`` (`aten_backward`,
    #: named as torch's derivatives), which the ATen gradient maker (`pycumsum_op.lowering.aten_gradient`) calls
    backward: Callable
    #: the capability that gradient form needs (None: every torch with Caffe2)
    backward_needs: Optional[str] = None


class PortableForm(NamedTuple):
    """A scan from operators every Caffe2 build has: a log-depth (Hillis–Steele) scan of ``combine``."""
    #: the elementwise Caffe2 operator that combines two partial results ("Add")
    combine: str
    #: the scan is a sum: long last axes in blocks, float32 summed in float64 (as torch), -0.0 summed as +0.0
    blocked: bool = False


class Scan(NamedTuple):
    """One scan op: its kernels, its Caffe2 face and its converter forms (see the module doc)."""
    name: str        # registry key and the function API's name ("cumsum"; brew.<name>)
    op_name: str     # the net method and the Caffe2 op's name ("PyCumSum")
    #: forward(x, spec, out=None) -> y (a tuple of arrays when several outputs); a scan without a ``kernel`` also
    #: takes ``checked``, the `CheckedScan` its ``dtypes`` made: forward(x, spec, out, checked) (the Caffe2 op runs a
    #: scan with a kernel by its route, `kernels.route.route`, and not by this function)
    forward: Callable
    #: backward(grad_y, x, spec, out=None, checked=None, **saved) -> grad_x; ``checked`` is ``dtypes.check(spec,
    #: grad_y)``; ``saved`` maps the output names in ``saves`` to the forward's outputs (x is passed for its shape and
    #: dtype in any case)
    backward: Callable
    #: the function API's docstring (the net method, brew helper and docs say the same)
    doc: str
    #: output names; outputs after the first are int64 indices; only the first output has a gradient
    outputs: Tuple[str, ...] = ("y",)
    #: what backward reads, by name: `INPUT` (x's values: no in-place runs) and/or names in ``outputs``
    saves: Tuple[str, ...] = ()
    #: the optional arguments (of `ALL_ARGUMENTS`) the op takes
    arguments: FrozenSet[str] = ALL_ARGUMENTS
    #: accepted input dtypes and the result dtype (`DtypeRule`), the one rule kernels and lowering apply; every
    #: entry states its own
    dtypes: Optional[DtypeRule] = None
    #: its kernel's facts (`kernels.spec.ScanKernel`, declared in its kernel module): the identity an exclusive
    #: scan starts with, the accelerator's loop, the compute dtypes, the runner of its routes and their one call, which
    #: `kernels.route.route` reads; None: no exclusive form, and no route (the op calls ``forward``; `explain` says so)
    kernel: Optional[ScanKernel] = None
    #: the gradient is the same scan of the output's gradient, run in the other direction (cumsum):
    #: lowering writes a gradient op as that scan
    self_adjoint: bool = False
    #: the converter forms, or why a target cannot express the scan
    aten: Union[AtenForm, Refused] = Refused("no ATen operator computes it")
    portable: Union[PortableForm, Refused] = Refused("no form from Caffe2's portable operators is declared")
    #: the ONNX operator it exports as and imports from (only "CumSum" is written), or why none
    onnx: Union[str, Refused] = Refused("no ONNX operator computes it")

    @property
    def identity(self) -> Optional[float]:
        """The value an exclusive scan starts with (0, 1, -inf), its kernel's; None when it has no exclusive form."""
        return None if self.kernel is None else self.kernel.identity

    @property
    def reads_input(self) -> bool:
        """The backward reads the input's values: the forward must not overwrite it (no in-place runs)."""
        return INPUT in self.saves

    @property
    def saved_outputs(self) -> Tuple[str, ...]:
        """The forward outputs the backward takes (keyword arguments of ``backward``), by name."""
        return tuple(name for name in self.saves if name != INPUT)

    def check(self, spec, x):
        """The `CheckedScan` of this scan over ``x``: checked against ``dtypes`` (the one rule)."""
        return self.dtypes.check(spec, x)

    def result_dtype(self, spec, dtype):
        """The output's dtype for an input of ``dtype`` (None when unknown): ``dtypes``' rule."""
        return self.dtypes.result_dtype(spec, dtype)

    def form(self, target: str):
        """This scan's form for converter ``target`` (one of `CONVERTERS`), or its `Refused`."""
        return getattr(self, target)


def _check_entry(entry: Scan) -> None:
    """An entry must be consistent before any layer reads it."""
    problems = []
    if not entry.name.isidentifier() or not entry.op_name.isidentifier():
        problems.append("name and op_name must be identifiers")
    if not entry.outputs or len(set(entry.outputs)) != len(entry.outputs) or INPUT in entry.outputs:
        problems.append("outputs must be distinct names (not {!r})".format(INPUT))
    unknown = set(entry.saves) - {INPUT} - set(entry.outputs)
    if unknown:
        problems.append("saves names {} (neither {!r} nor an output)".format(sorted(unknown), INPUT))
    if not entry.arguments <= ALL_ARGUMENTS:
        problems.append("arguments {} are not among {}".format(sorted(entry.arguments - ALL_ARGUMENTS),
                                                              sorted(ALL_ARGUMENTS)))
    if entry.kernel is not None and not isinstance(entry.kernel, ScanKernel):
        problems.append("kernel must be the ScanKernel its kernel module declares")
    elif entry.kernel is not None and entry.kernel.run is None:
        problems.append("a scan's kernel states the runner of its routes (ScanKernel.run)")
    elif ("exclusive" in entry.arguments) != (entry.identity is not None):
        problems.append("an exclusive scan needs an identity, and an identity means exclusive is taken")
    if not isinstance(entry.dtypes, DtypeRule):
        problems.append("dtypes must state the scan's DtypeRule")
    if entry.self_adjoint and len(entry.outputs) != 1:
        problems.append("a self-adjoint scan has one output")
    if isinstance(entry.aten, AtenForm) and not callable(entry.aten.backward):
        problems.append("aten.backward must be a gradient emitter (see scans.aten_backward)")
    for target in CONVERTERS:
        form = entry.form(target)
        expected = {"aten": AtenForm, "portable": PortableForm, "onnx": str}[target]
        if not isinstance(form, (expected, Refused)):
            problems.append("{} must be a {} or Refused".format(target, expected.__name__))
    if problems:
        raise ScanArgumentError("register: scan {!r}: {}".format(entry.name, "; ".join(problems)))


#: scan name -> its `Scan`.
SCANS: Dict[str, Scan] = {}
#: Called with (entry, registered: bool) after each `register` / `unregister` (the binding installs
#: and removes ``net.<op_name>`` and the brew helper this way).
_LISTENERS: List[Callable] = []


def register(entry: Scan) -> Scan:
    """Add ``entry`` to the registry; `ScanArgumentError` if it is inconsistent or its name or op name is taken
    (here, or by a listener: a Caffe2 ``Net`` attribute, a brew helper), and then nothing is registered."""
    _check_entry(entry)
    taken = [known.name for known in SCANS.values() if entry.name == known.name or entry.op_name == known.op_name]
    if taken:
        raise ScanArgumentError("register: scan {!r} ({}) clashes with the registered scan {!r}".format(
            entry.name, entry.op_name, taken[0]))
    SCANS[entry.name] = entry
    told = []
    try:
        for listener in list(_LISTENERS):
            listener(entry, True)
            told.append(listener)
    except Exception:
        del SCANS[entry.name]
        for listener in reversed(told):
            listener(entry, False)
        raise
    return entry


def unregister(name: str) -> Scan:
    """Remove scan ``name`` (nets holding it then neither load nor run); returns its entry."""
    entry = scan(name, "unregister")
    del SCANS[name]
    for listener in list(_LISTENERS):
        listener(entry, False)
    return entry


def listen(listener: Callable) -> None:
    """Call ``listener(entry, registered)`` for every registered scan now, and on every change after."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)
        for entry in list(SCANS.values()):
            listener(entry, True)


def scan(name, caller: str = "scan") -> Scan:
    """The registered scan called ``name``; `ScanArgumentError` (naming ``caller``) for any other value."""
    if isinstance(name, str) and name in SCANS:
        return SCANS[name]
    raise ScanArgumentError("{}: unknown scan={}; known scans: {}".format(
        caller, short_repr(name), ", ".join(repr(known) for known in sorted(SCANS))))
