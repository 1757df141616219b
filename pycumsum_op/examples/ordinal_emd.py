"""An ordinal classifier trained with an Earth Mover's Distance loss through PyCumSum, and its PyTorch twin.

For K ordered classes (grades, ratings, ages...) the EMD-squared loss compares
cumulative distributions, so predicting a neighbouring class costs less than a
distant one:

    cdf    = cumsum(softmax(logits), axis=1)       # net.PyCumSum / torch.cumsum
    target = cumsum(one_hot(label), axis=1)
    loss   = mean over rows of 0.5 * sum_k (cdf_k - target_k)²

The model is FC → Tanh → FC → Softmax → PyCumSum. `Caffe2OrdinalEMD` trains it
with plain SGD in one Caffe2 net (forward, ``AddGradientOperators``, updates);
`TorchOrdinalEMD` is the same model in torch, starting from the same parameters.

>>> data = make_ordinal_data(samples=64, features=4, classes=3, seed=0)
>>> params = init_params(features=4, hidden=8, classes=3, seed=0)
>>> caffe2_model, torch_model = Caffe2OrdinalEMD(params, 0.5), TorchOrdinalEMD(params, 0.5)
>>> a, b = caffe2_model.step(data.features, data.one_hot), torch_model.step(data.features, data.one_hot)
>>> bool(abs(a.loss - b.loss) < 1e-6), a.max_gradient_difference(b) < 1e-4
(True, True)
"""
import itertools
from typing import Dict, NamedTuple

import numpy as np
import torch
from caffe2.python import core, workspace

from ..ops import add_scan_op

PARAMETERS = ("fc1_w", "fc1_b", "fc2_w", "fc2_b")
_net_ids = itertools.count()


class OrdinalData(NamedTuple):
    """Features (N, F) float32, labels (N,) int64 in 0..K-1, and their one-hot rows (N, K) float32."""
    features: np.ndarray
    labels: np.ndarray
    one_hot: np.ndarray


class StepResult(NamedTuple):
    """One SGD step: the loss before the update and the gradient of each parameter."""
    loss: float
    gradients: Dict[str, np.ndarray]

    def max_gradient_difference(self, other: "StepResult") -> float:
        """max |g - g'| over all parameters, relative to the largest |g'| (0 when identical)."""
        scale = max(float(np.abs(g).max()) for g in other.gradients.values()) or 1.0
        return max(float(np.abs(self.gradients[name] - other.gradients[name]).max())
                   for name in PARAMETERS) / scale


class Evaluation(NamedTuple):
    """The loss, and the mean distance |predicted class - true class| (0 = all right)."""
    loss: float
    class_error: float


def make_ordinal_data(samples: int, features: int, classes: int, seed: int) -> OrdinalData:
    """Ordered labels from a noisy linear score cut at its quantiles (balanced classes)."""
    rng = np.random.RandomState(seed)
    x = rng.randn(samples, features).astype(np.float32)
    score = x.dot(rng.randn(features)) + 0.3 * rng.randn(samples)
    cuts = np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1])
    labels = np.searchsorted(cuts, score).astype(np.int64)
    return OrdinalData(x, labels, np.eye(classes, dtype=np.float32)[labels])


def init_params(features: int, hidden: int, classes: int, seed: int) -> Dict[str, np.ndarray]:
    """Float32 FC weights (out, in) and biases, as Caffe2's FC and torch's F.linear take them."""
    rng = np.random.RandomState(seed + 1)
    return {
        "fc1_w": (rng.randn(hidden, features) / np.sqrt(features)).astype(np.float32),
        "fc1_b": np.zeros(hidden, np.float32),
        "fc2_w": (rng.randn(classes, hidden) / np.sqrt(hidden)).astype(np.float32),
        "fc2_b": np.zeros(classes, np.float32),
    }


def add_ordinal_emd_loss(net: core.Net, features, one_hot, params: Dict[str, object],
                         prefix: str = "") -> core.BlobReference:
    """Append FC → Tanh → FC → Softmax → PyCumSum and the EMD loss to ``net``; returns the loss blob.

    ``params`` maps each name in PARAMETERS to its blob; the blobs this adds are named
    ``prefix + "fc1"``, ... ``prefix + "loss"`` (inside the current NameScope).
    """
    p = prefix
    hidden = net.Tanh(net.FC([features, params["fc1_w"], params["fc1_b"]], p + "fc1"), p + "hidden")
    probabilities = net.Softmax(net.FC([hidden, params["fc2_w"], params["fc2_b"]], p + "logits"), p + "probs")
    cdf = add_scan_op(net, "cumsum", probabilities, p + "cdf", axis=1)
    target = net.StopGradient(add_scan_op(net, "cumsum", one_hot, p + "target_cdf", axis=1), p + "target_cdf")
    distance = net.SquaredL2Distance([cdf, target], p + "distance")
    return net.AveragedLoss(distance, p + "loss")


def add_sgd_update(net: core.Net, param, gradient, one, neg_lr) -> core.BlobReference:
    """``param -= lr * gradient`` in place (WeightedSum with the blobs ``one`` = [1] and ``neg_lr`` = [-lr])."""
    return net.WeightedSum([param, one, gradient, neg_lr], param)


class Caffe2OrdinalEMD:
    """The model in Caffe2: a training net (forward, gradients through PyCumSum, SGD updates), an evaluation net."""

    def __init__(self, params: Dict[str, np.ndarray], learning_rate: float):
        self.prefix = "ordinal_emd_{}_".format(next(_net_ids))
        self.blobs = {name: self.prefix + name for name in PARAMETERS}
        for name, value in params.items():
            workspace.FeedBlob(self.blobs[name], value.copy())
        workspace.FeedBlob(self.prefix + "one", np.ones(1, np.float32))
        workspace.FeedBlob(self.prefix + "neg_lr", np.array([-learning_rate], np.float32))
        self._created = set()
        self.training_net = self._build_training()
        self.evaluation_net = core.Net(self.prefix + "evaluate")
        self._forward(self.evaluation_net)

    def _forward(self, net: core.Net) -> core.BlobReference:
        """Append the model and its loss to ``net``; returns the loss blob."""
        p = self.prefix
        net.AddExternalInput(p + "features", p + "one_hot", *self.blobs.values())
        return add_ordinal_emd_loss(net, p + "features", p + "one_hot", self.blobs, prefix=p)

    def _build_training(self) -> core.Net:
        """Forward, AddGradientOperators, and one WeightedSum SGD update per parameter."""
        p = self.prefix
        net = core.Net(p + "train")
        net.AddExternalInput(p + "one", p + "neg_lr")
        gradients = net.AddGradientOperators([self._forward(net)])
        self.gradient_blobs = {name: str(gradients[blob]) for name, blob in self.blobs.items()}
        for name, blob in self.blobs.items():
            add_sgd_update(net, blob, self.gradient_blobs[name], p + "one", p + "neg_lr")
        return net

    def _run(self, net: core.Net, features: np.ndarray, one_hot: np.ndarray) -> None:
        workspace.FeedBlob(self.prefix + "features", features)
        workspace.FeedBlob(self.prefix + "one_hot", one_hot)
        if net.Proto().name not in self._created:  # Caffe2 creates a net only once its inputs exist
            workspace.CreateNet(net, overwrite=True)
            self._created.add(net.Proto().name)
        workspace.RunNet(net.Proto().name)

    def step(self, features: np.ndarray, one_hot: np.ndarray) -> StepResult:
        """One SGD step on the batch; returns the loss and gradients at the parameters before it."""
        self._run(self.training_net, features, one_hot)
        return StepResult(float(workspace.FetchBlob(self.prefix + "loss")),
                          {name: workspace.FetchBlob(blob) for name, blob in self.gradient_blobs.items()})

    def evaluate(self, features: np.ndarray, one_hot: np.ndarray) -> "Evaluation":
        """Loss and mean class error on the given rows at the current parameters (no update).

        The predicted class is the median of the predicted distribution: the number of
        classes whose CDF is below 1/2.
        """
        self._run(self.evaluation_net, features, one_hot)
        predicted = (workspace.FetchBlob(self.prefix + "cdf") < 0.5).sum(axis=1)
        return Evaluation(float(workspace.FetchBlob(self.prefix + "loss")),
                          float(np.abs(predicted - one_hot.argmax(axis=1)).mean()))

    def params(self) -> Dict[str, np.ndarray]:
        return {name: workspace.FetchBlob(blob) for name, blob in self.blobs.items()}


class TorchOrdinalEMD:
    """The same model and SGD in PyTorch: the oracle for Caffe2OrdinalEMD."""

    def __init__(self, params: Dict[str, np.ndarray], learning_rate: float):
        self.params = {name: torch.tensor(value, requires_grad=True) for name, value in params.items()}
        self.optimizer = torch.optim.SGD(list(self.params.values()), lr=learning_rate)

    def loss(self, features: torch.Tensor, one_hot: torch.Tensor) -> torch.Tensor:
        p = self.params
        hidden = torch.tanh(torch.nn.functional.linear(features, p["fc1_w"], p["fc1_b"]))
        logits = torch.nn.functional.linear(hidden, p["fc2_w"], p["fc2_b"])
        cdf = torch.cumsum(torch.softmax(logits, dim=1), dim=1)
        target = torch.cumsum(one_hot, dim=1)
        return (0.5 * ((cdf - target) ** 2).sum(dim=1)).mean()

    def step(self, features: np.ndarray, one_hot: np.ndarray) -> StepResult:
        """One SGD step on the batch; returns the loss and gradients at the parameters before it."""
        self.optimizer.zero_grad()
        loss = self.loss(torch.from_numpy(features), torch.from_numpy(one_hot))
        loss.backward()
        result = StepResult(float(loss), {name: p.grad.numpy().copy() for name, p in self.params.items()})
        self.optimizer.step()
        return result
