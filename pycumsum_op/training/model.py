"""The ordinal EMD model (pycumsum_op.examples) trained data-parallel by Caffe2's ``data_parallel_model``.

`DataParallelEMD` builds the model once per CPU device of this process with
``data_parallel_model.Parallelize(..., cpu_device=True)``; the gradients are all-reduced across
the devices, and across processes (Gloo) when a ``rendezvous`` is given, so every replica takes
the SGD step of the whole global batch. Each device scales its loss by
1 / (devices x processes), so the summed gradient is the gradient of the mean loss over the
global batch: the same step as `Caffe2OrdinalEMD` on that batch in one process.

>>> from pycumsum_op.examples import Caffe2OrdinalEMD, init_params, make_ordinal_data
>>> data = make_ordinal_data(samples=32, features=4, classes=3, seed=0)
>>> params = init_params(features=4, hidden=8, classes=3, seed=0)
>>> parallel, single = DataParallelEMD(params, 0.5, devices=[0, 1]), Caffe2OrdinalEMD(params, 0.5)
>>> for _ in range(3):
...     _ = parallel.step(data.features, data.one_hot), single.step(data.features, data.one_hot)
>>> max_parameter_difference(parallel.params(), single.params()) < 1e-6
True
>>> max_parameter_difference(*parallel.device_params().values())
0.0
"""
import contextlib
import io
from typing import Dict, List, Optional, Sequence

import numpy as np
from caffe2.python import core, model_helper, workspace
from caffe2.python.modeling.initializers import Initializer

from .._runtime import require_optional
from ..examples.ordinal_emd import PARAMETERS, add_ordinal_emd_loss, add_sgd_update
from .rendezvous import TrainingSetupError
from .run_directory import max_parameter_difference

require_optional("networkx", "pycumsum_op.training")  # data_parallel_model imports memonger, which needs it
with contextlib.redirect_stdout(io.StringIO()):  # its import prints "Ignoring @/caffe2/caffe2/contrib/gloo:gloo_ops
    from caffe2.python import data_parallel_model  # as it is not a valid file": the wheel has Gloo's ops built in

DEFAULT_TIMEOUT_SECONDS = 30


class DataParallelEMD:
    """The ordinal EMD model on ``devices`` (CPU device ids) of this process, synchronous SGD.

    ``rendezvous``: None for one process, else the dict of
    `pycumsum_op.training.file_store_rendezvous` (Gloo). ``timeout_seconds`` bounds every Gloo
    operation (rendezvous, all-reduce, broadcast, barrier): a peer that vanishes makes `step`
    raise instead of waiting for ever. Every rank must be built with the same ``params``;
    ``data_parallel_model`` broadcasts rank 0's anyway.
    """

    def __init__(self, params: Dict[str, np.ndarray], learning_rate: float, devices: Sequence[int] = (0,),
                 rendezvous: Optional[dict] = None, timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS):
        self.devices = list(devices)
        self._initial, self._learning_rate = params, learning_rate
        self.model = model_helper.ModelHelper(name="ordinal_emd_data_parallel")
        data_parallel_model.Parallelize(
            self.model, input_builder_fun=lambda model: None, forward_pass_builder_fun=self._forward,
            param_update_builder_fun=self._update, devices=self.devices, cpu_device=True, rendezvous=rendezvous,
            barrier_net_timeout_sec=timeout_seconds)
        for op in self.model.param_init_net.Proto().op:  # the all-reduce/broadcast worlds: 30 s in Caffe2
            if op.type == "CreateCommonWorld":
                for arg in op.arg:
                    if arg.name == "timeout_ms":
                        arg.i = int(timeout_seconds * 1000)
        (classes, _), (_, features) = params["fc2_w"].shape, params["fc1_w"].shape  # placeholders: nets need inputs
        self._feed(np.zeros((len(self.devices), features), np.float32),
                   np.zeros((len(self.devices), classes), np.float32))
        data_parallel_model.RunInitNet(self.model)  # runs the init nets (rendezvous, broadcast), creates the nets

    def _blob(self, device: int, name: str) -> str:
        return "cpu_{}/{}".format(device, name)

    def _forward(self, model, loss_scale: float) -> List[core.BlobReference]:
        blobs = {name: model.create_param(name, self._initial[name].shape,
                                          Initializer("GivenTensorFill", values=self._initial[name]))
                 for name in PARAMETERS}
        loss = add_ordinal_emd_loss(model.net, core.ScopedBlobReference("features"),
                                    core.ScopedBlobReference("one_hot"), blobs)
        return [model.net.Scale(loss, "scaled_loss", scale=loss_scale)]

    def _update(self, model) -> None:
        one = model.param_init_net.ConstantFill([], "one", shape=[1], value=1.0)
        neg_lr = model.param_init_net.ConstantFill([], "neg_lr", shape=[1], value=-self._learning_rate)
        for param in model.GetParams():
            add_sgd_update(model.net, param, model.param_to_grad[param], one, neg_lr)

    def _feed(self, features: np.ndarray, one_hot: np.ndarray) -> None:
        if len(features) % len(self.devices):
            raise TrainingSetupError("a batch of {} rows cannot be split evenly over {} devices {}".format(
                len(features), len(self.devices), self.devices))
        rows = len(features) // len(self.devices)
        for index, device in enumerate(self.devices):
            part = slice(index * rows, (index + 1) * rows)
            workspace.FeedBlob(self._blob(device, "features"), np.ascontiguousarray(features[part]))
            workspace.FeedBlob(self._blob(device, "one_hot"), np.ascontiguousarray(one_hot[part]))

    def step(self, features: np.ndarray, one_hot: np.ndarray) -> float:
        """One synchronous SGD step on this process's rows (split evenly over its devices); returns the
        mean loss over these rows before the update."""
        self._feed(features, one_hot)
        data_parallel_model.RunNet(self.model, 1)
        return float(np.mean([workspace.FetchBlob(self._blob(device, "loss")) for device in self.devices]))

    def device_params(self) -> Dict[int, Dict[str, np.ndarray]]:
        """Every device's copy of the parameters (they are equal after each step)."""
        return {device: {name: workspace.FetchBlob(self._blob(device, name)) for name in PARAMETERS}
                for device in self.devices}

    def params(self) -> Dict[str, np.ndarray]:
        """The parameters (the first device's copy)."""
        return self.device_params()[self.devices[0]]
