"""The doctor on the other cumsum idioms: triangular MatMul / FC / BatchMatMul, ops of type CumSum and ToDense,
dense conversions after SparseLengthsSum, the Slice + Expand + Add + Concat loop; and twenty ordinary nets.

Oracles: Caffe2 (AddGradientOperators, CreateNet), torch (the product with the same triangular constant,
torch.cumsum, torch.autograd).
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (PyCumSum)
from doctor_support import (add_weighted_loss, gradient_ops_work, run_with_gradients, torch_scan,
                            torch_value_and_gradient)
from ordinary_nets import ORDINARY_NETS
from pycumsum_op.doctor import diagnose, fix, repair
from pycumsum_op.doctor.findings import (NOT_A_CUMSUM, SLOW_CUMSUM, SPARSE_GRADIENT, UNREGISTERED_OPERATOR)
from pycumsum_op.doctor.fix import STRATEGIES, UnfixableError
from pycumsum_op.doctor.patterns import MAX_FILL_ELEMENTS, CumsumIdiom, SPARSE_LENGTHS
from pycumsum_op.doctor.proof import replacement_error
from pycumsum_op.idioms import add_sparse_lengths_cumsum

pytestmark = pytest.mark.usefixtures("clean_workspace")
N, C = 3, 6


def triangle(lower, strict):
    ones = np.ones((C, C), np.float32)
    return np.tril(ones, -1 if strict else 0) if lower else np.triu(ones, 1 if strict else 0)


def random_pair(shape, seed):
    rng = np.random.RandomState(seed)
    return rng.randn(*shape).astype(np.float32), rng.randn(*shape).astype(np.float32)


# --- triangular products --------------------------------------------------------------------------

PRODUCTS = [("MatMul", "right"), ("MatMul", "left"), ("BatchMatMul", "right"), ("BatchMatMul", "left"),
            ("FC", "right")]


def product_net(op_type, side, matrix, constants):
    """x -> op with the constant -> y -> loss; the constant in an init net or fed to the workspace (as
    torch-style code does with triu(ones(C, C)))."""
    net, init = core.Net("product"), core.Net("product_init") if constants == "init_net" else None
    stored = matrix.T if op_type == "FC" else matrix  # FC computes x @ W.T
    if init is not None:
        init.GivenTensorFill([], "tri", values=stored.ravel().tolist(), shape=list(stored.shape))
        init.ConstantFill([], "zero_b", shape=[C], value=0.0)
    else:
        workspace.FeedBlob("tri", stored)
        workspace.FeedBlob("zero_b", np.zeros(C, np.float32))
    net.AddExternalInput("x", "tri", "zero_b")
    inputs = {"FC": ["x", "tri", "zero_b"]}.get(op_type, ["x", "tri"] if side == "right" else ["tri", "x"])
    getattr(net, op_type)(inputs, "y")
    add_weighted_loss(net, "y")
    return net, init


@pytest.mark.parametrize("op_type, side", PRODUCTS)
@pytest.mark.parametrize("lower, strict", [(False, False), (False, True), (True, False), (True, True)])
def test_a_triangular_product_is_found_and_replaced_by_an_equal_pycumsum(op_type, side, lower, strict):
    matrix = triangle(lower, strict)
    net, init = product_net(op_type, side, matrix, "init_net" if lower else "workspace")
    assert gradient_ops_work(net.Proto(), ["loss"])  # it works: the finding is about its cost
    (finding,) = diagnose(net, ["loss"], init)
    assert (finding.kind, finding.op_index, finding.op_type, finding.fixable) == (SLOW_CUMSUM, 0, op_type, True)
    text = " ".join(str(finding).split())
    assert "6x6 triangular constant 'tri'" in text and "36 multiply-adds forward" in text and "PyCumSum" in text
    assert fix(net, ["loss"], init) == net.Proto()  # the default strategy leaves what works
    fixed, (site,) = repair(net, ["loss"], init, strategy="pycumsum")
    assert [op.type for op in fixed.op] == ["Python", "Mul", "SumElements"] and diagnose(fixed, ["loss"]) == []
    assert site.proof.startswith("equal to the replaced ops on a random input")
    shape = (N, C) if side == "right" else (C, N)
    x, w = random_pair(shape, seed=int(lower) + 2 * int(strict))
    values, gradients = run_with_gradients(fixed, {"x": x, "w": w}, wrt=["x"], fetch=["y"],
                                           init_net=None if init is None else init.Proto())
    constant = torch.from_numpy(matrix)
    y_ref, dx_ref = torch_value_and_gradient(
        (lambda t: t @ constant) if side == "right" else (lambda t: constant @ t), x, w)
    np.testing.assert_allclose(values["y"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-5, atol=1e-5)
    # and it is the cumulative sum the finding names
    dim = 1 if side == "right" else 0
    np.testing.assert_allclose(values["y"], torch_scan(finding.idiom.exclusive, finding.idiom.reverse, dim)(
        torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_lowered_strategy_replaces_a_triangular_product_without_python_ops():
    net, init = product_net("MatMul", "right", triangle(False, False), "init_net")
    fixed = fix(net, ["loss"], init, strategy="lowered")
    assert "Python" not in [op.type for op in fixed.op] and gradient_ops_work(fixed, ["loss"])
    x, w = random_pair((N, C), seed=5)
    values, _ = run_with_gradients(fixed, {"x": x, "w": w}, wrt=["x"], fetch=["y"], init_net=init.Proto())
    np.testing.assert_allclose(values["y"], np.cumsum(x, 1), rtol=1e-5, atol=1e-5)


# --- ops of type CumSum ---------------------------------------------------------------------------

def cumsum_op_net(axis_form, exclusive=0, reverse=0):
    """An op of type CumSum, as an ONNX-minded user (or converter) writes it; returns (net, init net)."""
    net, init = core.Net("cumsum_op"), core.Net("cumsum_op_init")
    inputs, arguments = ["x"], {"exclusive": exclusive, "reverse": reverse}
    if axis_form == "axes":
        arguments["axes"] = [1]
    elif axis_form == "axis":
        arguments["axis"] = 1
    else:
        inputs.append("axis")
        if axis_form == "constant_input":
            init.GivenTensorInt64Fill([], "axis", values=[1], shape=[])
    net.AddExternalInput(*inputs)
    net.Proto().op.extend([core.CreateOperator("CumSum", inputs, ["y"], **arguments)])
    add_weighted_loss(net, "y")
    return net, init


@pytest.mark.parametrize("axis_form, exclusive, reverse", [("axes", 0, 0), ("axis", 1, 0), ("constant_input", 0, 1),
                                                           ("runtime_input", 1, 1)])
def test_a_cumsum_op_is_replaced_by_its_pycumsum_under_every_strategy(axis_form, exclusive, reverse):
    net, init = cumsum_op_net(axis_form, exclusive, reverse)
    with pytest.raises(RuntimeError, match="Cannot create operator of type 'CumSum'"):
        workspace.CreateNet(net)
    (finding,) = diagnose(net, ["loss"], init)  # its gradient (a Copy's, in the walk) is fine: one finding
    assert (finding.kind, finding.op_index, finding.op_type, finding.fixable) == (UNREGISTERED_OPERATOR, 0, "CumSum",
                                                                                    True)
    assert "Caffe2 has no CumSum operator" in str(finding)
    for strategy in STRATEGIES:
        fixed, (site,) = repair(net, ["loss"], init, strategy=strategy)
        assert site.proof.startswith("equal to ONNX's CumSum on a random input")
        assert "CumSum" not in [op.type for op in fixed.op] and diagnose(fixed, ["loss"], init) == []
    x, w = random_pair((N, C), seed=exclusive + 2 * reverse)
    feeds = {"x": x, "w": w, "axis": np.array(1, np.int64)} if axis_form == "runtime_input" else {"x": x, "w": w}
    values, gradients = run_with_gradients(fix(net, ["loss"], init), feeds, wrt=["x"], fetch=["y"],
                                           init_net=init.Proto())
    y_ref, dx_ref = torch_value_and_gradient(torch_scan(bool(exclusive), bool(reverse)), x, w)
    np.testing.assert_allclose(values["y"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-5, atol=1e-5)


def test_a_cumsum_op_over_two_axes_is_reported_and_not_fixed():
    net = core.Net("cumsum_two_axes")
    net.AddExternalInput("x")
    net.Proto().op.extend([core.CreateOperator("CumSum", ["x"], ["y"], axes=[0, 1])])
    net.SumElements("y", "loss")
    (finding,) = diagnose(net, ["loss"])
    assert finding.kind == UNREGISTERED_OPERATOR and finding.idiom is None and not finding.fixable
    assert "give it one axis" in str(finding)
    with pytest.raises(UnfixableError, match="op #0 CumSum: Caffe2 has no CumSum operator"):
        fix(net, ["loss"])


# --- the SparseLengthsSum idiom with a dense conversion in the wrong place -------------------------

def misplaced_net(conversion):
    """The seed idiom with answer 1's dense conversion between SparseLengthsSum and the last Transpose."""
    net = core.Net("misplaced")
    add_sparse_lengths_cumsum(net, "x", C, blob_out="y")
    ops = net.Proto().op
    last = ops[2]
    converted = core.CreateOperator(conversion, [last.input[0]], ["x_cumsum_dense"])
    last.input[0] = "x_cumsum_dense"
    ops.insert(2, converted)
    add_weighted_loss(net, "y")
    return net


@pytest.mark.parametrize("conversion", ["ToDense", "EnsureDense"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_dense_conversion_after_sparse_lengths_sum_is_named_and_the_net_fixed(conversion, strategy):
    net = misplaced_net(conversion)
    findings = diagnose(net, ["loss"])
    gradient = findings[0]
    assert (gradient.kind, gradient.op_index, gradient.source_type) == (SPARSE_GRADIENT, 0, "SparseLengthsSum")
    assert gradient.idiom.form == SPARSE_LENGTHS and gradient.idiom.misplaced == (2,)
    assert gradient.idiom.op_types == ("Transpose", "SparseLengthsSum", conversion, "Transpose")
    assert "The dense conversion op #2 after SparseLengthsSum cannot cure the gradient" in " ".join(
        str(gradient).split())
    assert [f.kind for f in findings[1:]] == ([UNREGISTERED_OPERATOR] if conversion == "ToDense" else [])
    fixed = fix(net, ["loss"], strategy=strategy)
    types = [op.type for op in fixed.op]
    assert "ToDense" not in types and gradient_ops_work(fixed, ["loss"])
    if strategy == "pycumsum":
        assert types == ["Python", "Mul", "SumElements"]
    x, w = random_pair((N, C), seed=11)
    values, gradients = run_with_gradients(fixed, {"x": x, "w": w}, wrt=["x"], fetch=["y"])
    y_ref, dx_ref = torch_value_and_gradient(torch_scan(exclusive=True), x, w)
    np.testing.assert_allclose(values["y"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-5, atol=1e-5)


# --- the Slice + Expand + Add + Concat loop -------------------------------------------------------

def loop_net(with_shape_input):
    """Answer 3's loop as its net would be saved (Expand without its shape input, or with it)."""
    net = core.Net("loop")
    prediction = net.AddExternalInput("prediction")
    current_sum = pred_cdist = prediction
    for i in range(1, C):
        prev_sum = net.Slice(current_sum, starts=[0, 0], ends=[N, i])
        expanded = net.NextScopedBlob("expanded")
        inputs = [prev_sum, net.AddExternalInput("shape_{}".format(i))] if with_shape_input else [prev_sum]
        net.Proto().op.extend([core.CreateOperator("Expand", inputs, [expanded], dims=[N, C - i], axes=[1])])
        current_sum = net.Add([current_sum, expanded])
        pred_cdist = net.Concat([pred_cdist, current_sum], axis=1)
    net.SumElements(pred_cdist, "loss")
    return net, str(pred_cdist)


@pytest.mark.parametrize("with_shape_input", [False, True])
def test_the_slice_expand_concat_loop_is_not_a_cumulative_sum_and_is_not_fixed(with_shape_input):
    net, output = loop_net(with_shape_input)
    findings = diagnose(net, ["loss"])
    loops = [finding for finding in findings if finding.kind == NOT_A_CUMSUM]
    assert len(loops) == 1 and not loops[0].fixable
    loop = loops[0].loop
    assert (loop.blob_in, loop.blob_out, loop.iterations, loop.axis) == ("prediction", output, C - 1, 1)
    assert loop.ops == tuple(range(4 * (C - 1)))
    text = " ".join(str(loops[0]).split())
    assert "not a cumulative sum of 'prediction'" in text
    assert "net.PyCumSum('prediction', {!r}, axis=1)".format(output) in text
    assert ("did not pass schema checking" in text) == (not with_shape_input)
    with pytest.raises(UnfixableError, match="not a cumulative sum"):
        fix(net, ["loss"], strategy="pycumsum")
    if not with_shape_input:  # Caffe2 agrees: it refuses the net
        workspace.FeedBlob("prediction", np.ones((N, C), np.float32))
        with pytest.raises(RuntimeError, match="did not pass schema checking"):
            workspace.CreateNet(net)


# --- the proof before writing ---------------------------------------------------------------------

def test_the_proof_tells_a_wrong_replacement_from_a_right_one():
    net = core.Net("proof")
    add_sparse_lengths_cumsum(net, "x", C, blob_out="y")
    net.SumElements("y", "loss")
    (finding,) = diagnose(net, ["loss"])
    idiom = finding.idiom
    right, wrong = core.Net("right"), core.Net("wrong")
    right.PyCumSum("x", "y", axis=-1, exclusive=True)
    wrong.PyCumSum("x", "y", axis=-1)  # inclusive: off by one column
    assert replacement_error(net.Proto(), idiom, list(right.Proto().op)) < 1e-6
    assert replacement_error(net.Proto(), idiom, list(wrong.Proto().op)) > 0.1
    assert isinstance(idiom, CumsumIdiom) and workspace.HasBlob("x_cumsum_indices")  # the user's blobs stay


# --- ordinary nets: no findings, nothing changed --------------------------------------------------

@pytest.mark.parametrize("build", ORDINARY_NETS, ids=[build.__name__ for build in ORDINARY_NETS])
def test_ordinary_nets_have_no_findings_and_come_back_unchanged(build):
    model, loss = build()
    netdef, init = model.net.Proto(), model.param_init_net.Proto()
    assert gradient_ops_work(netdef, [loss])  # Caffe2 agrees they are healthy
    assert diagnose(netdef, [loss], init) == []
    for strategy in STRATEGIES:
        assert fix(netdef, [loss], init, strategy=strategy) == netdef


def _fill_net(name, fill_shape):
    net, init = core.Net(name), core.Net(name + "_init")
    init.GivenTensorFill([], "tri", values=triangle(False, False).T.ravel().tolist(), shape=[C, C])
    init.ConstantFill([], "b", shape=fill_shape, value=0.0)
    net.AddExternalInput("x", "tri", "b")
    net.FC(["x", "tri", "b"], "loss")
    return net, init


def test_a_constant_fill_too_large_to_look_at_is_not_expanded():
    """ConstantFill's shape is a few bytes of the net; the doctor does not allocate what it says: a fill within
    the net's budget but past MAX_FILL_ELEMENTS is not looked at, one past the budget or with a negative size is
    refused by verification, naming the op, before the doctor reads it."""
    net, init = _fill_net("large_fill", [1, MAX_FILL_ELEMENTS + 1])
    assert diagnose(net, ["loss"], init) == []
    for shape, message in (([1 << 40, 1 << 40], "PYCUMSUM_OP_MAX_TENSOR_BYTES"), ([-1], "negative dimension")):
        net, init = _fill_net("bad_fill", shape)
        with pytest.raises(ValueError, match=r"op 1 \(ConstantFill\).*" + message):
            diagnose(net, ["loss"], init)


def test_an_idiom_whose_own_ops_cannot_run_is_refused_not_written():
    """int64 LENGTHS: the constants are the idiom's, but Caffe2's SparseLengthsSum refuses to run them, so no
    replacement can be checked against it: fix says so instead of writing an unchecked net."""
    net, init = core.Net("cannot_run"), core.Net("cannot_run_init")
    add_sparse_lengths_cumsum(net, "x", C, blob_out="y", init_net=init)
    lengths_fill = [op for op in init.Proto().op if op.output[0] == "x_cumsum_lengths"][0]
    lengths_fill.type = "GivenTensorInt64Fill"
    net.SumElements("y", "loss")
    (finding,) = diagnose(net, ["loss"], init)
    assert finding.idiom is not None
    with pytest.raises(UnfixableError, match=r"ops #0, #1, #2 \(Transpose -> SparseLengthsSum -> Transpose\): could "
                                             r"not run it against net.PyCumSum\('x', 'y', axis=-1, exclusive=True\)"):
        fix(net, ["loss"], init, strategy="pycumsum")
    assert "EnsureDense" in [op.type for op in fix(net, ["loss"], init).op]  # the other cure needs no run
