"""Data-parallel training with PyCumSum: Caffe2's ``data_parallel_model`` over several CPU devices of one
process and over processes and machines with Gloo (file-store rendezvous), plus a supervising launcher."""
from .model import DataParallelEMD, max_parameter_difference
from .rendezvous import TrainingSetupError, file_store_rendezvous

__all__ = ["DataParallelEMD", "TrainingSetupError", "file_store_rendezvous", "max_parameter_difference"]
