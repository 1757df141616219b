"""Data-parallel training with PyCumSum: Caffe2's ``data_parallel_model`` over several CPU devices of one
process and over processes and machines with Gloo (file-store rendezvous), plus a supervising launcher."""
from .model import DataParallelEMD
from .rendezvous import TrainingSetupError, file_store_rendezvous
from .run_directory import max_parameter_difference

__all__ = ["DataParallelEMD", "TrainingSetupError", "file_store_rendezvous", "max_parameter_difference"]
