"""ONNX Einsum of one or two operands (pycumsum_op/onnx/ops/matmul.py) against onnxruntime with its graph
optimizations off: random equations (each letter a batch, contracted, free or summed letter, letters permuted, the
output written or implicit), dims of 0-3, static and symbolic, NaN and the infinities; every empty dim in a child
process (Caffe2's BatchMatMul dies of SIGFPE on some empty operands); the portable target without an ATen op; the
size cap before BatchMatMul allocates; the refusals; XLNet's and Funnel's exports end to end.

onnxruntime's Einsum is no oracle where an operand is empty: it ends its process on some (MKL's gemm refuses a
leading dimension of 0) and returns uninitialised memory for others ('ij,ij->i' of (2, 0) operands), so there
Einsum's definition computed term by term (`definition`: numpy's einsum sums some operands first, and so gives NaN
for a sum over no terms against an infinity) is. onnxruntime runs no upper-case letter (it refuses or crashes):
equations of them are checked against its result for the equation spelled in lower case.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from pycumsum_op.onnx.run_checks import RunRefused
from onnx_forms_support import EDGE_FLOATS, edge_arrays, in_child, node_model, outcome
from onnx_support import onnxruntime_outputs

#: summed in another order than onnxruntime's, values whose sums overflow would differ by order, not by translation
ORDERLESS_FLOATS = tuple(value for value in EDGE_FLOATS if abs(value) != 3e38)
#: where a letter of two operands may be: (in the first, in the second, in the output)
PLACES = [(True, False, False), (False, True, False), (True, True, False), (True, False, True), (False, True, True),
          (True, True, True)]


@st.composite
def equations(draw, letters="abcdefghijklmnopqrstuvwxyz"):
    """(equation, terms): one or two operands of 0-4 letters each, every place of a letter drawn, the letters and
    each term's order permuted, the output written (in any order) or left implicit."""
    operands = draw(st.sampled_from([1, 2, 2, 2]))
    chosen = draw(st.permutations(letters))[:draw(st.integers(0, 6))]
    places = [p for p in PLACES if operands == 2 or not p[1]]
    where = {letter: draw(st.sampled_from(places)) for letter in chosen}
    terms = ["".join(draw(st.permutations([letter for letter in chosen if where[letter][k]]))) for k in
             range(operands)]
    if any(len(term) > 4 for term in terms):
        terms = [term[:4] for term in terms]
    written = "".join(terms)
    out = "".join(draw(st.permutations([letter for letter in chosen if where[letter][2] and letter in written])))
    implicit = draw(st.booleans())
    return ",".join(terms) + ("" if implicit else "->" + out), terms


@st.composite
def einsum_cases(draw, letters="abcdefghijklmnopqrstuvwxyz"):
    """(equation, feeds): an equation and edge-valued operands, one dim (0-3) per letter."""
    equation, terms = draw(equations(letters))
    dims = {letter: draw(st.integers(0, 3)) for letter in "".join(terms)}
    feeds = {"x{}".format(k): draw(edge_arrays(np.float32, tuple(dims[letter] for letter in term), ORDERLESS_FLOATS))
             for k, term in enumerate(terms)}
    return equation, feeds


def definition(equation, feeds):
    """ONNX's Einsum as it defines it: each output entry the sum, over every value of the other letters, of the
    operands' product, in float64 (the operands broadcast to all letters, multiplied, the others summed). An empty sum
    is 0 whatever the other operand holds: numpy's einsum sums some operands first and gives 0 x inf = NaN there."""
    inputs, arrow, out = equation.partition("->")
    terms = inputs.split(",")
    written = "".join(terms)
    if not arrow:
        out = "".join(sorted(letter for letter in set(written) if written.count(letter) == 1))
    letters = sorted(set(written))
    product = np.ones((1,) * len(letters))
    for term, value in zip(terms, feeds.values()):
        moved = np.transpose(value.astype(np.float64), [term.index(letter) for letter in letters if letter in term])
        product = product * moved.reshape([value.shape[term.index(letter)] if letter in term else 1
                                           for letter in letters])
    sizes = {letter: value.shape[term.index(letter)] for term, value in zip(terms, feeds.values()) for letter in term}
    product = np.broadcast_to(product, [sizes[letter] for letter in letters])
    summed = product.sum(axis=tuple(axis for axis, letter in enumerate(letters) if letter not in out))
    kept = [letter for letter in letters if letter in out]
    return np.transpose(summed, [kept.index(letter) for letter in out]).astype(np.float32)


def expected(model, equation, feeds):
    """onnxruntime's outputs of ``model``, or ONNX's definition (`definition`) where onnxruntime is no oracle: an
    empty operand, or an equation its Einsum fails (its DataCopy check on 'abdc->cb' of dims (2, 2, 2, 2))."""
    from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException
    if all(value.size for value in feeds.values()):
        try:
            return onnxruntime_outputs(model, feeds)
        except RuntimeException:
            pass
    return [definition(equation, feeds)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=einsum_cases(), dynamic=st.booleans(), opset=st.sampled_from([12, 13, 15]))
def test_random_equations_match(case, dynamic, opset):
    equation, feeds = case
    model = node_model("Einsum", feeds, {}, {"equation": equation}, opset=opset, dynamic=dynamic)
    assert outcome(model, feeds, expected(model, equation, feeds)) == ("match", None), equation


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=einsum_cases("abcdeABCDE"), dynamic=st.booleans())
def test_upper_case_letters_match(case, dynamic):
    """onnxruntime's Einsum of the equation spelled in lower case, the alphabetical order kept (upper case first, as
    an implicit output orders them), else the definition (`expected`)."""
    equation, feeds = case
    model = node_model("Einsum", feeds, {}, {"equation": equation}, opset=13, dynamic=dynamic)
    lower = equation.translate(str.maketrans("ABCDEabcde", "abcdefghij"))
    want = expected(node_model("Einsum", feeds, {}, {"equation": lower}, opset=13), equation, feeds)
    assert outcome(model, feeds, want) == ("match", None), equation


#: every group the translation makes (batch, free of either operand, contracted, summed), each alone and together
EMPTY_EQUATIONS = ["bij,bjk->bik", "ij,jk->ki", "i,j->ij", "ij,ij->", "ab,cd->", "ij,k->k", "bhij,bhkj->bhik",
                   "ibnd,jbnd->bnij", "bnij,jbnd->ibnd", "ibh,hnd->ibnd", "abc,cd->db", "ijk->ki", "ij->"]


def test_every_empty_dim_in_a_child_process():
    """Each letter's dim 0 in turn (the others 2), static and symbolic dims, to numpy's einsum: the process lives and
    every result matches."""
    code = """if True:
        import json, warnings
        import numpy as np
        from onnx_forms_support import node_model, outcome
        from test_onnx_einsum import definition
        for equation in {equations!r}:
            terms = equation.split("->")[0].split(",")
            for empty in sorted(set("".join(terms))):
                feeds = {{"x{{}}".format(k): np.ones(tuple(0 if letter == empty else 2 for letter in term), np.float32)
                         for k, term in enumerate(terms)}}
                want = definition(equation, feeds)
                for dynamic in (False, True):
                    model = node_model("Einsum", feeds, {{}}, {{"equation": equation}}, dynamic=dynamic)
                    print(json.dumps([equation, empty, dynamic, list(outcome(model, feeds, [want]))]), flush=True)
    """.format(equations=EMPTY_EQUATIONS)
    returncode, lines, stderr = in_child(code)
    assert returncode == 0, (returncode, lines[-1:], stderr[-2000:])
    count = sum(2 * len(set(equation.split("->")[0].replace(",", ""))) for equation in EMPTY_EQUATIONS)
    assert len(lines) == count
    assert [line for line in lines if line[3] != ["match", None]] == []


@pytest.mark.parametrize("equation", ["bind,bjnd->bnij", "ibh,hnd->ibnd", "i,d->id", "ijbn->bnij", "ij,ij->"])
def test_portable_target_runs_no_aten_op(equation):
    terms = equation.split("->")[0].split(",")
    shapes = {"b": 2, "i": 3, "j": 4, "n": 2, "d": 3, "h": 5}
    feeds = {"x{}".format(k): np.random.RandomState(k).randn(*(shapes[letter] for letter in term)).astype(np.float32)
             for k, term in enumerate(terms)}
    for dynamic in (False, True):
        model = node_model("Einsum", feeds, {}, {"equation": equation}, dynamic=dynamic)
        init_net, predict_net = pycumsum_op.onnx.to_caffe2(model, lower="portable")
        assert [op.type for net in (init_net, predict_net) for op in net.op if op.type == "ATen"] == []
        assert outcome(model, feeds, lower="portable") == ("match", None)


def test_the_product_is_capped_before_it_is_allocated(monkeypatch):
    """1024 floats: a 30 x 30 outer product runs, a 40 x 40 one, or an empty operand of an axis past the cap, stops
    the net in one line (no 64-bit count of dims wraps first)."""
    monkeypatch.setenv("PYCUMSUM_OP_MAX_TENSOR_BYTES", "4096")
    model = node_model("Einsum", {"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)}, {},
                       {"equation": "i,j->ij"}, dynamic=True)
    rep = pycumsum_op.onnx.prepare(model)
    np.testing.assert_array_equal(rep.run({"a": np.ones(30, np.float32), "b": np.ones(30, np.float32)})[0],
                                  np.ones((30, 30), np.float32))
    with pytest.raises(RunRefused, match=r"^ONNX Einsum node 'out0' \(opset 13\): the product of 'a' and 'b' .*"
                                         r"more than 1024 elements of 4 bytes"):
        rep.run({"a": np.ones(40, np.float32), "b": np.ones(40, np.float32)})
    model = node_model("Einsum", {"a": np.ones((2, 2), np.float32), "b": np.ones((2, 2), np.float32)}, {},
                       {"equation": "ij,jk->ik"}, dynamic=True)
    with pytest.raises(RunRefused, match=r"^ONNX Einsum node 'out0' \(opset 13\): the product of 'a' and 'b'"):
        pycumsum_op.onnx.prepare(model).run({"a": np.ones((0, 2 ** 40), np.float32),
                                             "b": np.ones((2 ** 40, 0), np.float32)})


def test_a_letter_of_two_dims_is_refused():
    """onnxruntime broadcasts a dim of 1 against the other operand's; one dim per letter is translated: refused at
    import where the model states both, else when the net runs."""
    feeds = {"a": np.ones((2, 1), np.float32), "b": np.ones((3, 4), np.float32)}
    with pytest.raises(FormRefused, match=r"^ONNX Einsum node 'out0' \(opset 13\): letter 'j' has dim 1 in input 0 "
                                          r"'a' and 3 in input 1 'b'; one dim per letter is translated$"):
        pycumsum_op.onnx.prepare(node_model("Einsum", feeds, {}, {"equation": "ij,jk->ik"}))
    rep = pycumsum_op.onnx.prepare(node_model("Einsum", feeds, {}, {"equation": "ij,jk->ik"}, dynamic=True))
    with pytest.raises(RunRefused, match=r"^ONNX Einsum node 'out0' \(opset 13\): the letters j of equation "
                                         r"'ij,jk->ik' have other dims in input 0 'a' than in input 1 'b'"):
        rep.run(feeds)


@pytest.mark.parametrize("equation, why", [
    ("ii->i", "only one or two operands, each letter at most once"), ("ij,jj->i", "only one or two operands"),
    ("...ij,...jk->...ik", "only one or two operands"), ("bij,bjk,bkl->bil", "only one or two operands"),
    ("ij,jk->iz", "only one or two operands"), ("ij,jk->ii", "only one or two operands")])
def test_other_equations_are_refused_in_one_line(equation, why):
    terms = equation.split("->")[0].split(",")
    feeds = {"x{}".format(n): np.ones((2,) * len(term.replace("...", "x")), np.float32) for n, term in
             enumerate(terms)}
    graph = helper.make_graph([helper.make_node("Einsum", list(feeds), ["y"], equation=equation)], "einsum",
                              [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, value.shape)
                               for name, value in feeds.items()],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out_dims(equation, feeds))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(FormRefused, match=r"^ONNX Einsum node 'y' \(opset 13\): equation {!r}: {}".format(
            equation, why).replace(".", r"\.")):
        pycumsum_op.onnx.prepare(model)


def out_dims(equation, feeds):
    """numpy's output dims of ``equation``, or one symbolic dim per output letter where numpy refuses it."""
    try:
        return np.einsum(equation, *feeds.values()).shape
    except ValueError:
        return ["o{}".format(n) for n in range(len(equation.partition("->")[2]))]


def test_an_input_of_another_rank_is_refused():
    feeds = {"a": np.ones((2, 2, 2), np.float32), "b": np.ones((2, 2), np.float32)}
    with pytest.raises(FormRefused, match=r"^ONNX Einsum node 'out0' \(opset 13\): equation 'ij,jk->ik' needs input "
                                          r"0 'a' of rank 2; the model states 3$"):
        pycumsum_op.onnx.prepare(node_model("Einsum", feeds, {}, {"equation": "ij,jk->ik"}, out_rank=2))


#: (model, opset, dynamic axes): XLNet's every Einsum ('ibh,hnd->ibnd', 'ibnd,jbnd->bnij', 'bnij,jbnd->ibnd',
#: 'ibnd,hnd->ibh', 'i,d->id', 'ijbn->bnij') and Funnel's ('bind,bjnd->bnij', 'bind,snd->bnis', 'binh,tnh->bnit',
#: 'bnij,bjnd->bind', 'td,dnh->tnh'); Funnel static only: with dynamic axes torch 1.10.2 writes a Concat onnxruntime
#: fails (its upsampling), and its encoder alone an AveragePool of ceil_mode the import refuses on unstated dims
MODELS = [("xlnet", 12, False), ("xlnet", 13, True), ("xlnet", 14, False), ("xlnet", 14, True), ("funnel", 12, False),
          ("funnel", 13, False), ("funnel", 14, False)]


@pytest.mark.slow  # a torch.onnx.export of a transformer each
@pytest.mark.parametrize("name, opset, dynamic", MODELS,
                         ids=["{}-{}-{}".format(n, o, "dynamic" if d else "static") for n, o, d in MODELS])
def test_transformers_einsum_models_match_onnxruntime(name, opset, dynamic):
    import onnx_model_sweep
    import transformer_models
    pytest.importorskip("transformers", reason="transformers==4.26.1 (requirements-dev.txt)")
    module, example = transformer_models.build_einsum(name)
    model = transformer_models.export(module, example, opset, dynamic)
    assert "Einsum" in [node.op_type for node in model.graph.node]
    feeds = {"input_ids": example[0].numpy(), "attention_mask": example[1].numpy()}
    want, oracle = onnx_model_sweep.oracle(model, feeds)
    assert oracle == "onnxruntime"
    assert onnx_model_sweep.outcome(model, feeds, "prepare", want) == "match"
    if not dynamic:  # the portable target: Caffe2's operators only (no ATen op: `onnx_model_sweep.run_path`)
        assert onnx_model_sweep.outcome(model, feeds, "portable", want) == "match"

