"""Data-parallel training with PyCumSum: Caffe2's ``data_parallel_model`` over several CPU devices of one
process and over processes and machines with Gloo (file-store rendezvous), plus a supervising launcher
(`launch`, behind ``pycumsum-op train``)."""
from .launcher import launch
from .model import DataParallelEMD
from .rendezvous import TrainingSetupError, file_store_rendezvous
from .run_directory import RunConfig, max_parameter_difference

__all__ = ["DataParallelEMD", "RunConfig", "TrainingSetupError", "file_store_rendezvous", "launch",
           "max_parameter_difference"]
