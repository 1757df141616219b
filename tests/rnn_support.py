"""One-state RecurrentNetwork nets for the tests, built by Caffe2's own ``recurrent.recurrent_net``."""
from caffe2.python import recurrent
from caffe2.python.model_helper import ModelHelper


def recurrent_netdef(name, cell, forward_only=True):
    """The NetDef of a RecurrentNetwork computing h_t = cell(step_net, x_t, h_{t-1}) over the external inputs
    ``<name>_x`` (T, N, D) and ``<name>_h0`` (1, N, D); its step nets are NetDef arguments."""
    model = ModelHelper(name=name)
    x, h0 = model.net.AddExternalInputs(name + "_x", name + "_h0")
    step = ModelHelper(name=name + "_step", param_model=model)
    x_t, h_prev = step.net.AddExternalInput("x_t", "h_prev")
    h_t = cell(step.net, x_t, h_prev)
    step.net.AddExternalOutput(h_t)
    recurrent.recurrent_net(net=model.net, cell_net=step.net, inputs=[(x_t, x)], initial_cell_inputs=[(h_prev, h0)],
                            links={h_prev: h_t}, scope=name, forward_only=forward_only)
    return model.net.Proto()


def cumsum_cell(net, x_t, h_prev):
    """h_t = x_t + cumsum(h_{t-1}) over the last axis, with PyCumSum."""
    return net.Add([x_t, net.PyCumSum(h_prev, axis=-1)])
