"""pycumsum_op.doctor: diagnose() against Caffe2's own AddGradientOperators, fix() against torch.

Oracles: Caffe2 itself decides whether a net is sick (AddGradientOperators raises) or
healthy; torch.cumsum / torch.autograd give the numbers a fixed net must compute.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from doctor_support import add_weighted_loss, gradient_ops_work, run_with_gradients, torch_value_and_gradient
from pycumsum_op.doctor import Repair, diagnose, fix, repair
from pycumsum_op.doctor.findings import (GRADIENT_ERROR, MIXED_GRADIENTS, SPARSE_GRADIENT,
                                         TWO_CHARACTER_GRADIENT_NAME)
from pycumsum_op.doctor.fix import STRATEGIES, UnfixableError
from pycumsum_op.idioms import add_sparse_lengths_cumsum, sparse_lengths_cumsum_constants

pytestmark = pytest.mark.usefixtures("clean_workspace")
ROWS, COLUMNS = 5, 7


def snapshot(netdef) -> bytes:
    return netdef.SerializeToString()


def random_pair(shape, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(*shape).astype(np.float32), rng.randn(*shape).astype(np.float32)


def idiom_net(exclusive=True, constants="workspace", columns=COLUMNS):
    """x (N, C) -> the cumsum idiom -> y -> loss = sum(w * y); returns (net, init_net or None)."""
    net = core.Net("idiom")
    init = None if constants == "workspace" else core.Net("idiom_init")
    add_sparse_lengths_cumsum(net, "x", columns, blob_out="y", exclusive=exclusive, init_net=init)
    if constants == "init_net_int64":  # INDICES may be int64 (LENGTHS must stay int32)
        indices_fill = [op for op in init.Proto().op if op.output[0] == "x_cumsum_indices"][0]
        indices_fill.type = "GivenTensorInt64Fill"
    add_weighted_loss(net, "y")
    return net, init


def torch_cumsum(exclusive):
    def function(x):
        inclusive = torch.cumsum(x, 1)
        if not exclusive:
            return inclusive
        return torch.cat([torch.zeros_like(inclusive[:, :1]), inclusive[:, :-1]], 1)
    return function


# --- diagnose ----------------------------------------------------------------------------------

def test_the_seed_idiom_is_diagnosed_where_caffe2_fails():
    net, _ = idiom_net()
    with pytest.raises(Exception) as caffe2_error:
        core.Net(net.Proto()).AddGradientOperators(["loss"])
    findings = diagnose(net, ["loss"])
    assert len(findings) == 1
    finding = findings[0]
    assert (finding.kind, finding.op_index, finding.op_type, finding.blob) == (
        SPARSE_GRADIENT, 0, "Transpose", "x_cumsum_T")
    assert (finding.source_index, finding.source_type, finding.source_input) == (1, "SparseLengthsSum", "x_cumsum_T")
    assert finding.caffe2_error == "Gradient of output x_cumsum_T is sparse (expected dense)"
    assert finding.caffe2_error in str(caffe2_error.value)
    assert finding.fixable
    text = str(finding)
    for part in ("op #0 Transpose", "'x_cumsum_T'", "op #1 SparseLengthsSum", "EnsureDense", "sparse (expected dense)"):
        assert part in text
    # the constants came from the workspace: the idiom is recognised, exclusive, and said to be off by one
    assert finding.idiom is not None and finding.idiom.exclusive and finding.idiom.columns == COLUMNS
    assert "EXCLUSIVE" in text and "PyCumSum('x', 'y', axis=-1, exclusive=True)" in text


def test_diagnose_does_not_change_the_net():
    net, init = idiom_net(constants="init_net_int32")
    before = snapshot(net.Proto())
    diagnose(net, ["loss"], init)
    assert snapshot(net.Proto()) == before


def gather_net():
    """x -> Relu -> Gather(rows idx) -> loss: Gather gives the Relu output a sparse gradient."""
    net = core.Net("gather")
    net.AddExternalInput("x", "idx")
    gathered = net.Gather([net.Relu("x", "xr"), "idx"], "g")
    add_weighted_loss(net, gathered)
    return net


def mixed_net():
    """xr feeds Gather (sparse gradient) and Sigmoid (dense gradient): Caffe2 cannot add them up."""
    net = core.Net("mixed")
    net.AddExternalInput("x", "idx")
    xr = net.Relu("x", "xr")
    total = net.Sum([net.Gather([xr, "idx"], "g"), net.Sigmoid(xr, "s")], "total")
    add_weighted_loss(net, total)
    return net


def test_gather_is_diagnosed():
    findings = diagnose(gather_net(), ["loss"])
    assert [(f.kind, f.op_index, f.op_type, f.blob, f.source_index, f.source_type, f.source_input, f.idiom)
            for f in findings] == [(SPARSE_GRADIENT, 0, "Relu", "xr", 1, "Gather", "xr", None)]
    assert "op #1 Gather" in str(findings[0])


def test_mixed_sparse_and_dense_gradients_are_diagnosed():
    with pytest.raises(Exception, match="mix of sparse and dense"):
        mixed_net().AddGradientOperators(["loss"])
    findings = diagnose(mixed_net(), ["loss"])
    assert [(f.kind, f.op_index, f.op_type, f.blob, f.source_type, f.source_input) for f in findings] == [
        (MIXED_GRADIENTS, 0, "Relu", "xr", "Gather", "xr")]
    assert "cannot add" in str(findings[0])


def test_a_two_character_gradient_name_is_diagnosed_and_not_fixable():
    net = core.Net("two_chars")
    net.AddExternalInput("x", "gy")
    net.Sigmoid(net.Relu("x", "h"), "y")
    with pytest.raises(Exception, match="is sparse"):
        core.Net(net.Proto()).AddGradientOperators({"y": "gy"})
    findings = diagnose(net, {"y": "gy"})
    assert [(f.kind, f.op_index, f.op_type, f.blob, f.loss, f.loss_gradient) for f in findings] == [
        (TWO_CHARACTER_GRADIENT_NAME, 1, "Sigmoid", "y", "y", "gy")]
    assert not findings[0].fixable
    assert "two-character" in str(findings[0]) and "'gy_grad'" in str(findings[0])
    with pytest.raises(UnfixableError, match="two-character"):
        fix(net, {"y": "gy"})
    # the cure the finding gives: a longer name
    net.AddExternalInput("gy_grad")
    assert diagnose(net, {"y": "gy_grad"}) == [] and gradient_ops_work(net.Proto(), {"y": "gy_grad"})


def test_every_idiom_is_found_in_one_pass():
    net = core.Net("two_idioms")
    a = add_sparse_lengths_cumsum(net, "xa", 3, exclusive=True)
    b = add_sparse_lengths_cumsum(net, "xb", 4, exclusive=False)
    net.Sum([net.SumElements(a, "la"), net.SumElements(b, "lb")], "loss")
    findings = diagnose(net, ["loss"])
    assert sorted((f.blob, f.idiom.exclusive, f.idiom.columns) for f in findings) == [
        ("xa_cumsum_T", True, 3), ("xb_cumsum_T", False, 4)]
    assert [op.type for op in fix(net, ["loss"], strategy="pycumsum").op].count("Python") == 2


def test_an_op_without_gradient_is_reported_not_raised():
    net = core.Net("floor")
    net.AddExternalInput("x")
    net.SumElements(net.Floor(net.Relu("x", "xr"), "f"), "loss")
    findings = diagnose(net, ["loss"])
    assert [(f.kind, f.op_index, f.op_type) for f in findings] == [(GRADIENT_ERROR, 1, "Floor")]
    assert "Floor" in findings[0].caffe2_error and not findings[0].fixable
    with pytest.raises(UnfixableError, match="Floor"):
        fix(net, ["loss"])


def test_bad_arguments_are_refused():
    net, _ = idiom_net()
    with pytest.raises(ValueError, match="'no_such_blob'"):
        diagnose(net, ["no_such_blob"])
    with pytest.raises(TypeError):
        diagnose("not a net", ["loss"])
    with pytest.raises(TypeError, match=r"a dict \{loss: gradient\}, got int"):
        diagnose(net, 42)
    with pytest.raises(ValueError, match="strategy"):
        fix(net, ["loss"], strategy="magic")


# --- healthy nets: no findings, nothing changed ---------------------------------------------------

def healthy_fc():
    net = core.Net("fc")
    net.AddExternalInput("x", "fc_w", "fc_b")
    net.AveragedLoss(net.Relu(net.FC(["x", "fc_w", "fc_b"], "h"), "r"), "loss")
    return net


def healthy_pycumsum():
    net = core.Net("pycumsum")
    net.AddExternalInput("x")
    add_weighted_loss(net, net.PyCumSum("x", "y", axis=1))
    return net


def healthy_embedding():
    """Gather / SparseLengthsSum on a parameter: a sparse gradient is what the parameter wants."""
    net = core.Net("embedding")
    net.AddExternalInput("table", "idx", "lengths")
    total = net.Sum([net.SparseLengthsSum(["table", "idx", "lengths"], "pooled"),
                     net.Gather(["table", "idx"], "rows")], "total")
    net.AveragedLoss(total, "loss")
    return net


def healthy_ensure_dense_idiom():
    net = core.Net("fixed_idiom")
    add_sparse_lengths_cumsum(net, "x", COLUMNS, blob_out="y", ensure_dense=True)
    add_weighted_loss(net, "y")
    return net


@pytest.mark.parametrize("build", [healthy_fc, healthy_pycumsum, healthy_embedding, healthy_ensure_dense_idiom])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_healthy_nets_have_no_findings_and_come_back_unchanged(build, strategy):
    netdef = build().Proto()
    assert gradient_ops_work(netdef, ["loss"])  # Caffe2 agrees the net is healthy
    assert diagnose(netdef, ["loss"]) == []
    fixed = fix(netdef, ["loss"], strategy=strategy)
    assert fixed == netdef and fixed is not netdef


@pytest.mark.parametrize("build", [lambda: idiom_net()[0], gather_net, mixed_net])
def test_sick_nets_are_the_ones_caffe2_refuses(build):
    assert not gradient_ops_work(build().Proto(), ["loss"])
    assert diagnose(build(), ["loss"]) != []


# --- fix: the cumsum idiom, both strategies, numbers against torch ------------------------------

def assert_untouched_outside(fixed, original, kept_ops):
    """External blobs equal; ``kept_ops`` (ops downstream of the fix) equal and in order at the end."""
    assert list(fixed.external_input) == list(original.external_input)
    assert list(fixed.external_output) == list(original.external_output)
    assert fixed.name == original.name
    assert list(fixed.op)[-len(kept_ops):] == kept_ops


@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("constants", ["workspace", "init_net_int32", "init_net_int64"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_fixing_the_idiom_matches_torch(exclusive, constants, strategy):
    net, init = idiom_net(exclusive, constants)
    original = net.Proto()
    before = snapshot(original)
    fixed = fix(net, ["loss"], init, strategy=strategy)
    assert snapshot(original) == before, "fix must not change its input"
    assert gradient_ops_work(fixed, ["loss"]) and diagnose(fixed, ["loss"], init) == []
    assert_untouched_outside(fixed, original, list(original.op)[3:])
    types = [op.type for op in fixed.op]
    if strategy == "lowered":  # ATen cumsum (roll + index_fill of the first index when exclusive); no Python op
        first_index = {"Shape", "Slice", "GivenTensorInt64Fill", "GT", "Cast", "Squeeze", "Range"}
        assert types[-2:] == ["Mul", "SumElements"] and set(types[:-2]) <= {"ATen"} | first_index
        assert fixed.op[0].input[0] == "x" and fixed.op[-3].output[0] == "y"
    elif strategy == "pycumsum":
        assert types == ["Python", "Mul", "SumElements"]
        assert (fixed.op[0].name, list(fixed.op[0].input), list(fixed.op[0].output)) == ("PyCumSum", ["x"], ["y"])
    else:
        assert types == ["Transpose", "EnsureDense", "SparseLengthsSum", "Transpose", "Mul", "SumElements"]
        assert list(fixed.op[2].input)[0] == fixed.op[1].output[0]
    x, w = random_pair((ROWS, COLUMNS), seed=int(exclusive))
    values, gradients = run_with_gradients(fixed, {"x": x, "w": w}, wrt=["x"], fetch=["y"],
                                           init_net=None if init is None else init.Proto())
    y_ref, dx_ref = torch_value_and_gradient(torch_cumsum(exclusive), x, w)
    np.testing.assert_allclose(values["y"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-5, atol=1e-5)


def permuted_idiom(name, columns, exclusive, axes):
    """(init net, net, output): the idiom with Transpose(axes=axes) on both sides, constants in the init net."""
    indices, lengths = sparse_lengths_cumsum_constants(columns, exclusive=exclusive)
    init = core.Net(name + "_init")
    init.GivenTensorIntFill([], "idx", values=indices.tolist(), shape=[len(indices)])
    init.GivenTensorIntFill([], "len", values=lengths.tolist(), shape=[len(lengths)])
    net = core.Net(name)
    net.AddExternalInput("x", "idx", "len")
    summed = net.SparseLengthsSum([net.Transpose("x", "xt", axes=axes), "idx", "len"], "s")
    return init, net, net.Transpose(summed, "y", axes=axes)


def test_pycumsum_fix_of_a_three_d_idiom_with_explicit_axes_matches_torch():
    """Transpose(axes=[1,0,2]) brings axis 1 to the front; the same permutation undoes it."""
    init, net, y = permuted_idiom("idiom3d", 4, exclusive=False, axes=[1, 0, 2])
    add_weighted_loss(net, y)
    (finding,) = diagnose(net, ["loss"], init)
    assert (finding.idiom.axis, finding.idiom.exclusive) == (1, False)
    fixed = fix(net, ["loss"], init, strategy="pycumsum")
    assert [op.type for op in fixed.op] == ["Python", "Mul", "SumElements"]
    x, w = random_pair((2, 4, 3), seed=3)
    values, gradients = run_with_gradients(fixed, {"x": x, "w": w}, wrt=["x"], fetch=["y"])
    y_ref, dx_ref = torch_value_and_gradient(lambda t: torch.cumsum(t, 1), x, w)
    np.testing.assert_allclose(values["y"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-5, atol=1e-5)


def test_transposes_that_do_not_undo_each_other_are_not_the_idiom():
    init, net, y = permuted_idiom("not_inverse", 3, exclusive=True, axes=[1, 2, 0])
    net.SumElements(y, "loss")
    (finding,) = diagnose(net, ["loss"], init)
    assert finding.idiom is None
    assert "EnsureDense" in [op.type for op in fix(net, ["loss"], init, strategy="pycumsum").op]


def test_pycumsum_strategy_falls_back_to_ensure_dense_when_the_idiom_is_not_whole():
    """The SparseLengthsSum output is also read elsewhere, so the three ops cannot go."""
    net = core.Net("shared_sls")
    add_sparse_lengths_cumsum(net, "x", COLUMNS, blob_out="y")
    net.Sum([net.SumElements("y", "y_total"), net.SumElements("x_cumsum_sls", "sls_total")], "loss")
    assert diagnose(net, ["loss"])[0].idiom is None
    fixed = fix(net, ["loss"], strategy="pycumsum")
    assert fixed == fix(net, ["loss"], strategy="ensure_dense")
    assert "SparseLengthsSum" in [op.type for op in fixed.op] and gradient_ops_work(fixed, ["loss"])


def test_non_triangular_constants_are_not_the_idiom():
    net = core.Net("not_triangular")
    workspace.FeedBlob("nt_idx", np.array([2, 0, 1, 1], np.int32))
    workspace.FeedBlob("nt_len", np.array([1, 3], np.int32))
    net.AddExternalInput("x", "nt_idx", "nt_len")
    summed = net.SparseLengthsSum([net.Transpose("x", "xt"), "nt_idx", "nt_len"], "s")
    net.SumElements(net.Transpose(summed, "y"), "loss")
    (finding,) = diagnose(net, ["loss"])
    assert finding.source_type == "SparseLengthsSum" and finding.idiom is None


# --- fix: Gather and mixed gradients, numbers against torch -------------------------------------

@pytest.mark.parametrize("strategy", ["ensure_dense", "pycumsum"])
def test_fixing_a_gather_net_matches_torch(strategy):
    original = gather_net().Proto()
    fixed = fix(original, ["loss"], strategy=strategy)
    assert [op.type for op in fixed.op] == ["Relu", "EnsureDense", "Gather", "Mul", "SumElements"]
    assert_untouched_outside(fixed, original, list(original.op)[2:])
    assert list(fixed.op[0].output) == ["xr"] and list(fixed.op[2].input) == [fixed.op[1].output[0], "idx"]
    idx = np.array([3, 0, 3, 1], np.int32)  # a repeated row: its gradients must add up
    x = np.random.RandomState(4).randn(5, 3).astype(np.float32)
    w = np.random.RandomState(5).randn(4, 3).astype(np.float32)
    _, gradients = run_with_gradients(fixed, {"x": x, "w": w, "idx": idx}, wrt=["x"], fetch=[])
    _, dx_ref = torch_value_and_gradient(lambda t: torch.relu(t)[torch.from_numpy(idx).long()], x, w)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-6, atol=1e-6)


def test_fixing_mixed_gradients_matches_torch():
    original = mixed_net().Proto()
    fixed = fix(original, ["loss"])
    assert [op.type for op in fixed.op].count("EnsureDense") == 1 and gradient_ops_work(fixed, ["loss"])
    idx = np.array([0, 2, 2], np.int32)
    x = np.random.RandomState(6).randn(3, 2).astype(np.float32)
    w = np.random.RandomState(7).randn(3, 2).astype(np.float32)
    _, gradients = run_with_gradients(fixed, {"x": x, "w": w, "idx": idx}, wrt=["x"], fetch=[])

    def model(t):
        relu = torch.relu(t)
        return relu[torch.from_numpy(idx).long()] + torch.sigmoid(relu)
    _, dx_ref = torch_value_and_gradient(model, x, w)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-6, atol=1e-6)



# --- repair: what was applied where ------------------------------------------------------------

def test_repair_reports_each_site_and_returns_what_fix_returns():
    net, init = idiom_net(constants="init_net")
    for strategy in ("ensure_dense", "pycumsum"):
        fixed, repairs = repair(net, ["loss"], init, strategy=strategy)
        assert fixed == fix(net, ["loss"], init, strategy=strategy) and gradient_ops_work(fixed, ["loss"])
        (site,) = repairs
        if strategy == "ensure_dense":
            assert site == Repair("SparseLengthsSum", "x_cumsum_sls", "EnsureDense on its input 'x_cumsum_T'")
        else:
            assert site._replace(proof="") == Repair("Transpose, SparseLengthsSum, Transpose", "y",
                                                     "one PyCumSum('x', 'y', axis=-1, exclusive=True)")
            assert site.proof.startswith("equal to the replaced ops on a random input (relative difference ")
    assert repair(net, ["loss"], init).repairs != repair(net, ["loss"], init, strategy="pycumsum").repairs


def test_two_idioms_give_two_repairs():
    net = core.Net("two_idioms")
    add_sparse_lengths_cumsum(net, "a", COLUMNS, blob_out="ya", prefix="a")
    add_sparse_lengths_cumsum(net, "b", COLUMNS, blob_out="yb", prefix="b", exclusive=False)
    net.Sum([net.SumElements("ya", "ta"), net.SumElements("yb", "tb")], "loss")
    fixed, repairs = repair(net, ["loss"], strategy="pycumsum")
    assert [site.output for site in repairs] == ["ya", "yb"] and gradient_ops_work(fixed, ["loss"])
    assert [site.applied.endswith("exclusive=True)") for site in repairs] == [True, False]


def test_the_idiom_without_its_constants_is_named_in_the_finding_and_the_repair():
    """Constants in an init net that is not passed: the shape is the idiom's, the values are unknown."""
    net, init = idiom_net(constants="init_net")
    (finding,) = diagnose(net, ["loss"])
    assert finding.idiom is None
    assert finding.unknown_constants == ("x_cumsum_indices", "x_cumsum_lengths")
    assert "the values of 'x_cumsum_indices' and 'x_cumsum_lengths' are not in the net" in " ".join(
        str(finding).split())
    fixed, (site,) = repair(net, ["loss"], strategy="pycumsum")
    assert "EnsureDense" in [op.type for op in fixed.op] and gradient_ops_work(fixed, ["loss"])
    assert site.note == ("not PyCumSum: the cumsum idiom's constants 'x_cumsum_indices' and 'x_cumsum_lengths' "
                         "are unknown; pass its init net")
    assert diagnose(net, ["loss"], init)[0].unknown_constants == ()  # with the init net: matched
    shared = core.Net("shared_sls_constants")  # not the idiom at all: nothing to say about constants
    add_sparse_lengths_cumsum(shared, "x", COLUMNS, blob_out="y")
    shared.Sum([shared.SumElements("y", "y_total"), shared.SumElements("x_cumsum_sls", "sls_total")], "loss")
    assert diagnose(shared, ["loss"])[0].unknown_constants == ()
    assert repair(shared, ["loss"], strategy="pycumsum").repairs[0].note.endswith("not the Transpose -> "
                                                                                  "SparseLengthsSum -> Transpose "
                                                                                  "cumsum idiom")
