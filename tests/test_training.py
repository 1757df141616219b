"""A few SGD steps of a small net using PyCumSum, step by step against a PyTorch twin.

The model is the demo's ordinal classifier (FC -> tanh -> FC -> softmax -> PyCumSum, EMD loss),
trained in Caffe2 with gradients from AddGradientOperators through PyCumSum's gradient, and in
torch with autograd from the same start: losses and parameter gradients must agree at every step.
"""
import numpy as np
import pytest
import torch

from pycumsum_op.examples import Caffe2OrdinalEMD, TorchOrdinalEMD, init_params, make_ordinal_data
from pycumsum_op.examples.ordinal_emd import PARAMETERS

pytestmark = [pytest.mark.usefixtures("clean_workspace"), pytest.mark.slow]  # each test trains the model
STEPS, BATCH, LEARNING_RATE = 25, 32, 1.0


@pytest.fixture
def trained():
    """Both models after STEPS minibatch steps, with each step's results."""
    data = make_ordinal_data(samples=128, features=5, classes=4, seed=7)
    params = init_params(features=5, hidden=12, classes=4, seed=7)
    model, twin = Caffe2OrdinalEMD(params, LEARNING_RATE), TorchOrdinalEMD(params, LEARNING_RATE)
    before = model.evaluate(data.features, data.one_hot)
    steps = []
    for step in range(STEPS):
        rows = slice((step * BATCH) % 128, (step * BATCH) % 128 + BATCH)
        steps.append((model.step(data.features[rows], data.one_hot[rows]),
                      twin.step(data.features[rows], data.one_hot[rows])))
    return model, twin, data, before, steps


def test_the_training_net_differentiates_through_pycumsum(trained):
    model = trained[0]
    ops = model.training_net.Proto().op
    assert [op.name for op in ops if op.type == "Python"] == ["PyCumSum", "PyCumSum"]
    assert any(op.type == "PythonGradient" for op in ops)


def test_every_step_has_the_losses_and_gradients_of_the_torch_twin(trained):
    for ours, theirs in trained[4]:
        assert ours.loss == pytest.approx(theirs.loss, rel=1e-5, abs=1e-7)
        for name in PARAMETERS:
            np.testing.assert_allclose(ours.gradients[name], theirs.gradients[name], rtol=1e-4, atol=1e-6,
                                       err_msg=name)


def test_the_parameters_end_where_the_twin_s_do_and_the_loss_went_down(trained):
    model, twin, data, before, _ = trained
    for name, value in model.params().items():
        np.testing.assert_allclose(value, twin.params[name].detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    after = model.evaluate(data.features, data.one_hot)
    with torch.no_grad():
        twin_loss = float(twin.loss(torch.from_numpy(data.features), torch.from_numpy(data.one_hot)))
    assert after.loss == pytest.approx(twin_loss, rel=1e-5)
    assert after.loss < 0.8 * before.loss
