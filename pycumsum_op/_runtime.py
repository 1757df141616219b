"""Finds the Caffe2 runtime, or says in one message which torch builds ship it; finds an optional
package (`require_optional`), or says in one line which extra installs it.

Also knows whether this process is the ``pycumsum-op`` command, which imports the
package before Caffe2 so that ``--help`` and ``--version`` work without it.
"""
import importlib
import os
import sys

CAFFE2_HELP = (
    "pycumsum_op needs the Caffe2 runtime (caffe2.python), which PyTorch wheels ship up to "
    "torch 1.10.2, for CPython 3.6-3.9; newer torch wheels have no Caffe2. In a Python 3.9 "
    "environment run: pip install 'torch==1.10.2' 'numpy<1.24' 'protobuf<4' "
    "(or pip install 'pycumsum_op[caffe2]')."
)
#: The console script's name (setup metadata: ``[project.scripts]``).
COMMAND = "pycumsum-op"
#: Caffe2's log level for the command line: 3 (FATAL) hides the start-up notes Caffe2 prints at
#: ERROR level ("CPU feature avx is present ... not compiled with it"); errors still raise.
_QUIET_LOG_LEVEL = 3
_caffe2_initialised = False

#: Each optional package -> the extra of setup.cfg that installs it: what the commands' and the imports'
#: refusals name (`require_optional`) and what the tests hold the docs' install commands to.
EXTRAS = {"onnx": "onnx", "onnxruntime": "onnx", "networkx": "train", "numba": "fast"}


class MissingDependency(ImportError):
    """An optional package that a feature needs does not import: one line naming it and its extra."""


def install_command(extra: str) -> str:
    """The one spelling of an extra's install command: ``pip install 'pycumsum_op[onnx]'``."""
    return "pip install 'pycumsum_op[{}]'".format(extra)


def require_optional(package: str, what: str):
    """Import and return the optional ``package`` (an `EXTRAS` key) that ``what`` needs, else raise
    `MissingDependency`: ``<what> needs <package> (<why>): pip install 'pycumsum_op[<extra>]'``."""
    try:
        return importlib.import_module(package)
    except ImportError as error:
        raise MissingDependency("{} needs {} ({}): {}".format(
            what, package, error, install_command(EXTRAS[package]))) from None


#: MKL's variable naming the code path it runs ("5": AVX2). MKL 2020.0, which torch's wheels up to 1.10 link for
#: Caffe2's and torch's GEMMs (FC, MatMul, Conv's im2col product), reads it and otherwise runs its generic path on
#: x86 CPUs that are not Intel's, even where they have AVX2 and FMA.
MKL_CODE_PATH = "MKL_DEBUG_CPU_TYPE"


def choose_mkl_code_path(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Set ``MKL_DEBUG_CPU_TYPE=5`` for this process when the CPU (``cpuinfo``: Linux's /proc/cpuinfo) is an x86 CPU
    not made by Intel that has AVX2 and FMA, and the variable is not set already (any value, the empty one included,
    is the user's choice and is kept); True when it was set. MKL reads it on its first call, so this runs before
    Caffe2 is imported. Whatever cannot be read leaves MKL's own choice."""
    if MKL_CODE_PATH in os.environ:
        return False
    try:
        with open(cpuinfo, "rb") as handle:
            head = handle.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return False
    fields = {}
    for line in head.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.split())
    vendor, flags = fields.get("vendor_id", []), set(fields.get("flags", []))
    if vendor in ([], ["GenuineIntel"]) or not {"avx2", "fma"} <= flags:
        return False
    os.environ[MKL_CODE_PATH] = "5"
    return True


def require_caffe2() -> None:
    """Import caffe2.python.core, raising one ImportError that says what to install.

    Caffe2's Python sources without their compiled extension call ``sys.exit(1)``
    on import; that is turned into the same ImportError.
    """
    try:
        from caffe2.python import core  # noqa: F401
    except ImportError as error:
        raise ImportError("{} (import failed with: {})".format(CAFFE2_HELP, error)) from None
    except SystemExit:
        raise ImportError("{} (caffe2.python is present but its compiled extension "
                          "caffe2_pybind11_state could not be loaded)".format(CAFFE2_HELP)) from None


def started_as_command() -> bool:
    """True in the ``pycumsum-op`` console script (``pycumsum-op``, ``pycumsum-op.exe``,
    ``pycumsum-op-script.py``), where `pycumsum_op.cli` loads Caffe2 only for a command that runs."""
    argv = getattr(sys, "argv", None) or [""]
    name = os.path.basename(argv[0])
    return name == COMMAND or name.startswith(COMMAND + ".") or name.startswith(COMMAND + "-script")


def init_caffe2_quietly() -> None:
    """Caffe2's GlobalInit, once per process, before a command's first Caffe2 call.

    Without it Caffe2 prints "GlobalInit should be run before any other API calls" (twice, when the
    first net runs: any net, on every torch); with it, the CPU-feature notes, which the log level hides.
    A library cannot do this for its caller's process (the log level would hide the caller's Caffe2
    errors too): README.md tells users the same call.
    """
    global _caffe2_initialised
    if not _caffe2_initialised:
        from caffe2.python import workspace
        workspace.GlobalInit([COMMAND, "--caffe2_log_level={}".format(_QUIET_LOG_LEVEL)])
        _caffe2_initialised = True
