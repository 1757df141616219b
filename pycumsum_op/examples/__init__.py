"""Small models that use PyCumSum, shared by the demo and the tests."""
from .ordinal_emd import (Caffe2OrdinalEMD, Evaluation, OrdinalData, StepResult, TorchOrdinalEMD, init_params,
                          make_ordinal_data)

__all__ = ["Caffe2OrdinalEMD", "TorchOrdinalEMD", "Evaluation", "OrdinalData", "StepResult", "init_params",
           "make_ordinal_data"]
