"""Finds the Caffe2 runtime, or says in one message which torch builds ship it."""

CAFFE2_HELP = (
    "pycumsum_op needs the Caffe2 runtime (caffe2.python), which PyTorch wheels ship up to "
    "torch 1.10.2, for CPython 3.6-3.9; newer torch wheels have no Caffe2. In a Python 3.9 "
    "environment run: pip install 'torch==1.10.2' 'numpy<1.24' 'protobuf<4' "
    "(or pip install 'pycumsum_op[caffe2]')."
)


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
