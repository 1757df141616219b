"""The node forms Caffe2's stock ONNX backend is proven right on: after `pycumsum_op.onnx.install`, the stock
``caffe2.python.onnx.backend.prepare`` hands a node that `forms.check_node` refuses to Caffe2's stock converter when,
and only when, it fits one of these forms (else it is refused as before, in one line). pycumsum_op's own
`prepare` never reads this table.

Measured, not assumed: tests/onnx_stock_forms.py runs onnx's node tests through Caffe2's own backend
(`tests/onnx_node_suite.py --stock`; outcomes in tests/data/onnx_node_stock.txt) and writes this table. A form is
an op, the opsets of one ONNX definition of it and the names of the attributes the node carries; it accepts
exactly the attribute values and the element types of the inputs (in order, None for an input left out; output
0's for a node without inputs) that node tests the stock backend passes give it. A form that a node test the
stock backend gets wrong holds (Slice, Softmax/LogSoftmax axes, Shape start/end, pools with ceil_mode or
auto_pad, IsNaN, TopK largest=0, Scatter without axis, Range with a negative delta, Cast to STRING, If), or that
carries a subgraph or a tensor attribute, is left out.

>>> from onnx import TensorProto, helper
>>> types = {"x": TensorProto.FLOAT}.get
>>> stock_form(helper.make_node("Acos", ["x"], ["y"]), 9, types) is not None
True
>>> stock_form(helper.make_node("Acos", ["x"], ["y"]), 9, {"x": TensorProto.DOUBLE}.get) is None
True
>>> stock_form(helper.make_node("Elu", ["x"], ["y"], alpha=0.5), 9, types) is None  # alpha 0.5: untested
True
>>> stock_form(helper.make_node("Shape", ["x"], ["y"], end=1), 15, types) is None  # wrong on the stock backend
True
>>> stock_form(helper.make_node("Mean", ["x", "z"], ["y"]), 9, types) is None  # z: a type the graph does not state
True
"""
from typing import Dict, FrozenSet, NamedTuple, Optional, Tuple

from onnx import TensorProto, helper

from .forms import _comparable


class StockForm(NamedTuple):
    """One form the stock backend is proven right on."""
    #: the model opsets (of the default domain) of the op's definition, first and last
    opsets: Tuple[int, int]
    #: the attributes the node carries (all of them) -> the values node tests cover
    attributes: Dict[str, FrozenSet]
    #: the element types of the node's inputs, in order (None: input left out), as node tests cover them
    signatures: FrozenSet[Tuple[Optional[int], ...]]


_F = TensorProto
#: ONNX op -> its stock forms, written by tests/onnx_stock_forms.py from onnx 1.10.2's node tests.
STOCK_FORMS: Dict[str, Tuple[StockForm, ...]] = {
    'Abs': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Acos': (
        StockForm((7, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Add': (
        StockForm((7, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'And': (
        StockForm((7, 15), {},
                  frozenset([(_F.BOOL, _F.BOOL)])),
    ),
    'ArgMax': (
        StockForm((1, 10), {'axis': frozenset([1]),
                   'keepdims': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 10), {'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((11, 11), {'axis': frozenset([-1]),
                   'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'ArgMin': (
        StockForm((1, 10), {'axis': frozenset([1]),
                   'keepdims': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 10), {'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((11, 11), {'axis': frozenset([-1]),
                   'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Asin': (
        StockForm((7, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Atan': (
        StockForm((7, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'AveragePool': (
        StockForm((7, 9), {'count_include_pad': frozenset([1]),
                   'kernel_shape': frozenset([(3, 3), (5, 5)]),
                   'pads': frozenset([(2, 2, 2, 2)])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((7, 9), {'kernel_shape': frozenset([(2, 2), (2, 2, 2), (2,)])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((7, 9), {'kernel_shape': frozenset([(3, 3), (5, 5)]),
                   'pads': frozenset([(2, 2, 2, 2)])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((7, 9), {'kernel_shape': frozenset([(2, 2), (5, 5)]),
                   'strides': frozenset([(2, 2), (3, 3)])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'BatchNormalization': (
        StockForm((14, 14), {},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT, _F.FLOAT, _F.FLOAT)])),
        StockForm((14, 14), {'epsilon': frozenset([0.009999999776482582])},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT, _F.FLOAT, _F.FLOAT)])),
    ),
    'Cast': (
        StockForm((13, 15), {'to': frozenset([1, 11])},
                  frozenset([(_F.FLOAT,), (_F.DOUBLE,)])),
    ),
    'Ceil': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Concat': (
        StockForm((4, 10), {'axis': frozenset([0, 1, 2])},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
        StockForm((11, 12), {'axis': frozenset([-1, -2, -3])},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Conv': (
        StockForm((1, 10), {'kernel_shape': frozenset([(3, 3)]),
                   'pads': frozenset([(0, 0, 0, 0), (1, 1, 1, 1)])},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
        StockForm((1, 10), {'kernel_shape': frozenset([(3, 3)]),
                   'pads': frozenset([(0, 0, 0, 0), (1, 0, 1, 0), (1, 1, 1, 1)]),
                   'strides': frozenset([(2, 2)])},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'ConvTranspose': (
        StockForm((1, 10), {'kernel_shape': frozenset([(3, 3)]),
                   'output_padding': frozenset([(1, 1)]),
                   'output_shape': frozenset([(10, 8)]),
                   'strides': frozenset([(3, 2)])},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Cos': (
        StockForm((7, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Cosh': (
        StockForm((9, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Div': (
        StockForm((7, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Dropout': (
        StockForm((10, 11), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((10, 11), {'ratio': frozenset([0.20000000298023224])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Elu': (
        StockForm((6, 15), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((6, 15), {'alpha': frozenset([1.0, 2.0])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Equal': (
        StockForm((7, 10), {},
                  frozenset([(_F.INT32, _F.INT32)])),
        StockForm((11, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Erf': (
        StockForm((9, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Exp': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Expand': (
        StockForm((8, 12), {},
                  frozenset([(_F.FLOAT, _F.INT64)])),
    ),
    'Flatten': (
        StockForm((9, 10), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((9, 10), {'axis': frozenset([0, 1, 2, 3])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Floor': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Gather': (
        StockForm((1, 10), {'axis': frozenset([0, 1])},
                  frozenset([(_F.FLOAT, _F.INT64)])),
        StockForm((11, 12), {'axis': frozenset([0])},
                  frozenset([(_F.FLOAT, _F.INT64)])),
        StockForm((13, 15), {'axis': frozenset([1])},
                  frozenset([(_F.FLOAT, _F.INT64)])),
    ),
    'Gemm': (
        StockForm((11, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
        StockForm((11, 12), {'alpha': frozenset([0.5])},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
        StockForm((11, 12), {'alpha': frozenset([0.25]),
                   'beta': frozenset([0.3499999940395355]),
                   'transA': frozenset([1]),
                   'transB': frozenset([1])},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
        StockForm((11, 12), {'beta': frozenset([0.5])},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
        StockForm((11, 12), {'transA': frozenset([1])},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
        StockForm((11, 12), {'transB': frozenset([1])},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
    ),
    'GlobalAveragePool': (
        StockForm((1, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'GlobalMaxPool': (
        StockForm((1, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Greater': (
        StockForm((9, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'HardSigmoid': (
        StockForm((6, 15), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((6, 15), {'alpha': frozenset([0.1666666716337204, 0.5]),
                   'beta': frozenset([0.5, 0.6000000238418579])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Identity': (
        StockForm((1, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'InstanceNormalization': (
        StockForm((6, 15), {},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
        StockForm((6, 15), {'epsilon': frozenset([0.009999999776482582])},
                  frozenset([(_F.FLOAT, _F.FLOAT, _F.FLOAT)])),
    ),
    'LRN': (
        StockForm((1, 12), {'alpha': frozenset([0.00019999999494757503]),
                   'beta': frozenset([0.5]),
                   'bias': frozenset([2.0]),
                   'size': frozenset([3])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 12), {'size': frozenset([3])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'LeakyRelu': (
        StockForm((6, 15), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((6, 15), {'alpha': frozenset([0.10000000149011612])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Less': (
        StockForm((9, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Log': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'MatMul': (
        StockForm((9, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Max': (
        StockForm((8, 11), {},
                  frozenset([(_F.FLOAT, _F.FLOAT), (_F.FLOAT, _F.FLOAT, _F.FLOAT), (_F.FLOAT,)])),
        StockForm((12, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'MaxPool': (
        StockForm((8, 9), {'kernel_shape': frozenset([(2, 2), (2, 2, 2), (2,)])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((8, 9), {'kernel_shape': frozenset([(3, 3), (5, 5)]),
                   'pads': frozenset([(2, 2, 2, 2)])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((8, 9), {'kernel_shape': frozenset([(2, 2), (5, 5)]),
                   'strides': frozenset([(2, 2), (3, 3)])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Mean': (
        StockForm((8, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT), (_F.FLOAT, _F.FLOAT, _F.FLOAT), (_F.FLOAT,)])),
    ),
    'Min': (
        StockForm((8, 11), {},
                  frozenset([(_F.FLOAT, _F.FLOAT), (_F.FLOAT, _F.FLOAT, _F.FLOAT), (_F.FLOAT,)])),
        StockForm((12, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Mul': (
        StockForm((7, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
        StockForm((14, 15), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Neg': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'NonZero': (
        StockForm((9, 12), {},
                  frozenset([(_F.BOOL,)])),
    ),
    'Not': (
        StockForm((1, 15), {},
                  frozenset([(_F.BOOL,)])),
    ),
    'Or': (
        StockForm((7, 15), {},
                  frozenset([(_F.BOOL, _F.BOOL)])),
    ),
    'Pow': (
        StockForm((12, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Reciprocal': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'ReduceL1': (
        StockForm((1, 10), {'axes': frozenset([(2,)]),
                   'keepdims': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 10), {'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((11, 12), {'axes': frozenset([(-1,)]),
                   'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'ReduceL2': (
        StockForm((1, 10), {'axes': frozenset([(2,)]),
                   'keepdims': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 10), {'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((11, 12), {'axes': frozenset([(-1,)]),
                   'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'ReduceMax': (
        StockForm((1, 10), {'axes': frozenset([(1,)]),
                   'keepdims': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 10), {'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((11, 11), {'axes': frozenset([(-2,)]),
                   'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'ReduceMean': (
        StockForm((1, 10), {'axes': frozenset([(1,)]),
                   'keepdims': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 10), {'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((11, 12), {'axes': frozenset([(-2,)]),
                   'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'ReduceMin': (
        StockForm((1, 10), {'axes': frozenset([(1,)]),
                   'keepdims': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 10), {'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
        StockForm((11, 11), {'axes': frozenset([(-2,)]),
                   'keepdims': frozenset([1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Relu': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Reshape': (
        StockForm((5, 12), {},
                  frozenset([(_F.FLOAT, _F.INT64)])),
    ),
    'Scatter': (
        StockForm((9, 10), {'axis': frozenset([1])},
                  frozenset([(_F.FLOAT, _F.INT64, _F.FLOAT)])),
    ),
    'Selu': (
        StockForm((6, 15), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((6, 15), {'alpha': frozenset([2.0]),
                   'gamma': frozenset([3.0])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Shape': (
        StockForm((15, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Sigmoid': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Sign': (
        StockForm((9, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Sin': (
        StockForm((7, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Sinh': (
        StockForm((9, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Size': (
        StockForm((1, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Softplus': (
        StockForm((1, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Softsign': (
        StockForm((1, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Split': (
        StockForm((13, 15), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((13, 15), {'axis': frozenset([0, 1])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Sqrt': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Sub': (
        StockForm((7, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Sum': (
        StockForm((8, 12), {},
                  frozenset([(_F.FLOAT, _F.FLOAT), (_F.FLOAT, _F.FLOAT, _F.FLOAT), (_F.FLOAT,)])),
    ),
    'Tan': (
        StockForm((7, 15), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Tanh': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT,)])),
    ),
    'ThresholdedRelu': (
        StockForm((10, 15), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((10, 15), {'alpha': frozenset([2.0])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Tile': (
        StockForm((6, 12), {},
                  frozenset([(_F.FLOAT, _F.INT64)])),
    ),
    'TopK': (
        StockForm((11, 15), {'axis': frozenset([-1, 1])},
                  frozenset([(_F.FLOAT, _F.INT64)])),
    ),
    'Transpose': (
        StockForm((1, 12), {},
                  frozenset([(_F.FLOAT,)])),
        StockForm((1, 12), {'perm': frozenset([(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Unsqueeze': (
        StockForm((11, 12), {'axes': frozenset([(3,)])},
                  frozenset([(_F.FLOAT,)])),
    ),
    'Upsample': (
        StockForm((9, 9), {'mode': frozenset(['nearest'])},
                  frozenset([(_F.FLOAT, _F.FLOAT)])),
    ),
    'Where': (
        StockForm((9, 15), {},
                  frozenset([(_F.BOOL, _F.FLOAT, _F.FLOAT), (_F.BOOL, _F.INT64, _F.INT64)])),
    ),
    'Xor': (
        StockForm((7, 15), {},
                  frozenset([(_F.BOOL, _F.BOOL)])),
    ),
}


def stock_form(node, opset: Optional[int], elem_type=lambda name: None) -> Optional[StockForm]:
    """The `StockForm` ONNX ``node`` fits in a model of ``opset`` (``elem_type(name)``: a blob's ONNX element type,
    None when the graph does not state it), else None."""
    if node.domain not in ("", "ai.onnx") or opset is None:
        return None
    signature = tuple(elem_type(blob) if blob else None for blob in (list(node.input) or list(node.output[:1])))
    if any(blob and found is None for blob, found in zip(list(node.input) or list(node.output[:1]), signature)):
        return None  # a blob of a type the graph does not state
    names = {attr.name for attr in node.attribute}
    for form in STOCK_FORMS.get(node.op_type, ()):
        if (form.opsets[0] <= opset <= form.opsets[1] and names == set(form.attributes)
                and len(names) == len(node.attribute) and signature in form.signatures
                and all(_comparable(helper.get_attribute_value(attr)) in form.attributes[attr.name]
                        for attr in node.attribute)):
            return form
    return None
