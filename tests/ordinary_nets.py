"""Twenty ordinary Caffe2 nets, built as their users build them (brew, model_helper, rnn_cell): FC / Softmax /
LSTM / GRU / embedding / convolution models, and near misses of the cumsum idioms (a full, an identity, a
scaled triangular constant; Slice + Expand + Add without a loop). Each returns (model, loss blob name)."""
import numpy as np
from caffe2.python import brew, gru_cell, model_helper, rnn_cell
from caffe2.python.modeling import initializers

import pycumsum_op  # noqa: F401  (brew.cumsum)

C = 6


def _model(name):
    return model_helper.ModelHelper(name=name)


def _constant(model, name, values):
    model.param_init_net.GivenTensorFill([], name, values=np.asarray(values, np.float32).ravel().tolist(),
                                         shape=list(np.shape(values)))
    model.net.AddExternalInput(name)
    return name


def _classifier(model, x, hidden, activation):
    h = getattr(brew, activation)(model, brew.fc(model, x, "h", dim_in=4, dim_out=hidden), "a")
    return brew.fc(model, h, "logits", dim_in=hidden, dim_out=3)


def mlp_softmax():
    model = _model("mlp_softmax")
    softmax = brew.softmax(model, _classifier(model, "x", 8, "relu"), "softmax")
    model.net.AveragedLoss(model.net.LabelCrossEntropy([softmax, "label"], "xent"), "loss")
    return model, "loss"


def mlp_softmax_with_loss():
    model = _model("mlp_softmax_with_loss")
    model.net.SoftmaxWithLoss([_classifier(model, "x", 8, "tanh"), "label"], ["p", "loss"])
    return model, "loss"


def sigmoid_regression():
    model = _model("sigmoid_regression")
    y = model.net.Sigmoid(brew.fc(model, "x", "h", dim_in=4, dim_out=C), "y")
    model.net.AveragedLoss(model.net.SquaredL2Distance([y, "target"], "d"), "loss")
    return model, "loss"


def conv_pool_fc():
    model = _model("conv_pool_fc")
    conv = brew.conv(model, "image", "conv", dim_in=1, dim_out=2, kernel=3)
    pooled = brew.max_pool(model, brew.relu(model, conv, "r"), "pool", kernel=2, stride=2)
    model.net.AveragedLoss(brew.fc(model, pooled, "out", dim_in=8, dim_out=2), "loss")
    return model, "loss"


def _sequence(model):
    model.net.AddExternalInput("seq", "lengths", "h0", "c0")
    return "seq", "lengths"


def _lstm(cell, name):
    def build():
        model = _model(name)
        seq, lengths = _sequence(model)
        out, _, _, _ = cell(model, seq, lengths, ("h0", "c0"), 3, 4, scope=name)
        model.net.AveragedLoss(out, "loss")
        return model, "loss"
    build.__name__ = name
    return build


lstm = _lstm(rnn_cell.LSTM, "lstm")
milstm = _lstm(rnn_cell.MILSTM, "milstm")


def gru():
    model = _model("gru")
    seq, lengths = _sequence(model)
    out, _ = gru_cell.GRU(model, seq, lengths, ("h0",), 3, 4, scope="gru")
    model.net.AveragedLoss(out, "loss")
    return model, "loss"


def _table(model):
    return model.create_param("table", shape=[10, C], initializer=initializers.Initializer("XavierFill"))


def embedding_bag():
    model = _model("embedding_bag")
    pooled = model.net.SparseLengthsSum([_table(model), "idx", "lengths"], "pooled")
    model.net.AveragedLoss(brew.fc(model, pooled, "out", dim_in=C, dim_out=1), "loss")
    return model, "loss"


def embedding_mean():
    model = _model("embedding_mean")
    pooled = model.net.SparseLengthsMean([_table(model), "idx", "lengths"], "pooled")
    model.net.AveragedLoss(brew.relu(model, pooled, "r"), "loss")
    return model, "loss"


def embedding_gather():
    model = _model("embedding_gather")
    rows = model.net.Gather([_table(model), "idx"], "rows")
    model.net.AveragedLoss(brew.fc(model, rows, "out", dim_in=C, dim_out=2), "loss")
    return model, "loss"


def two_tower_dot():
    model = _model("two_tower_dot")
    a = brew.fc(model, "x", "a", dim_in=4, dim_out=C)
    b = brew.fc(model, "z", "b", dim_in=4, dim_out=C)
    model.net.AveragedLoss(model.net.BatchMatMul([a, b], "scores", trans_b=1), "loss")
    return model, "loss"


def layer_norm_mlp():
    model = _model("layer_norm_mlp")
    normed, _, _ = brew.layer_norm(model, brew.fc(model, "x", "h", dim_in=4, dim_out=C), "ln", dim_in=C)
    model.net.AveragedLoss(brew.fc(model, normed, "out", dim_in=C, dim_out=1), "loss")
    return model, "loss"


def dropout_mlp():
    model = _model("dropout_mlp")
    dropped = brew.dropout(model, brew.fc(model, "x", "h", dim_in=4, dim_out=C), "drop", ratio=0.5, is_test=0)
    model.net.AveragedLoss(dropped, "loss")
    return model, "loss"


def matmul_random_constant():
    model = _model("matmul_random_constant")
    weights = _constant(model, "w_random", np.random.RandomState(0).randn(C, C))
    model.net.AveragedLoss(model.net.MatMul(["x", weights], "y"), "loss")
    return model, "loss"


def matmul_all_ones():
    """A C×C constant of ones: a row sum broadcast, not a cumulative sum."""
    model = _model("matmul_all_ones")
    model.net.AveragedLoss(model.net.MatMul(["x", _constant(model, "ones", np.ones((C, C)))], "y"), "loss")
    return model, "loss"


def fc_identity():
    model = _model("fc_identity")
    weights = _constant(model, "eye", np.eye(C))
    bias = _constant(model, "zero_bias", np.zeros(C))
    model.net.AveragedLoss(model.net.FC(["x", weights, bias], "y"), "loss")
    return model, "loss"


def matmul_scaled_triangle():
    """2·triu(ones): a scaled cumulative sum, not PyCumSum's; FC with a triangle and a bias is not one either."""
    model = _model("matmul_scaled_triangle")
    scaled = model.net.MatMul(["x", _constant(model, "triu2", 2 * np.triu(np.ones((C, C))))], "y")
    biased = model.net.FC(["x", _constant(model, "triu_t", np.triu(np.ones((C, C))).T),
                           _constant(model, "bias", np.ones(C))], "z")
    model.net.AveragedLoss(model.net.Add([scaled, biased], "s"), "loss")
    return model, "loss"


def slice_expand_add():
    """Slice + Expand (with its shape) + Add, and a Concat of other blobs: no loop."""
    model = _model("slice_expand_add")
    model.net.AddExternalInput("x", "shape")
    first = model.net.Slice("x", "first", starts=[0, 0], ends=[-1, 1])
    added = model.net.Add(["x", model.net.Expand([first, "shape"], "expanded")], "added")
    joined, _ = model.net.Concat([added, "x"], ["joined", "split"], axis=1)
    model.net.AveragedLoss(joined, "loss")
    return model, "loss"


def transposes():
    model = _model("transposes")
    model.net.AveragedLoss(model.net.Transpose(brew.relu(model, model.net.Transpose("x", "xt"), "r"), "y"), "loss")
    return model, "loss"


def brew_cumsum_cdf():
    """An ordinal head: softmax then brew.cumsum, as the package's own users write it."""
    model = _model("brew_cumsum_cdf")
    probabilities = brew.softmax(model, brew.fc(model, "x", "logits", dim_in=4, dim_out=C), "p")
    model.net.AveragedLoss(brew.cumsum(model, probabilities, "cdf", axis=1), "loss")
    return model, "loss"


ORDINARY_NETS = (mlp_softmax, mlp_softmax_with_loss, sigmoid_regression, conv_pool_fc, lstm, milstm, gru,
                 embedding_bag, embedding_mean, embedding_gather, two_tower_dot, layer_norm_mlp, dropout_mlp,
                 matmul_random_constant, matmul_all_ones, fc_identity, matmul_scaled_triangle, slice_expand_add,
                 transposes, brew_cumsum_cdf)
