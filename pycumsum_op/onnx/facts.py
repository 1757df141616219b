"""What an ONNX graph says about each blob, indexed once: constants, element types, shapes.

A translation asks these questions of every node; answering them by scanning the graph each time made
an import quadratic in the number of nodes, so `GraphFacts` reads the graph (after ONNX shape inference)
once and answers each question by dictionary lookup.

- A *constant* is an initializer that is not a graph input (a caller cannot override it), or the
  output of a ``Constant`` node (its ``value`` tensor, or one of opset 12's ``value_int(s)`` /
  ``value_float(s)``). Constants are decoded on first use: a large weight is never turned into an
  array unless a node needs its value (a Slice's starts, an Unsqueeze's axes, ...).
- A blob made by Unsqueeze, Squeeze, Cast, Concat or Identity from constants is a constant too (torch's
  export without constant folding writes a Slice's axes as ``Unsqueeze(Constant)``).
- The type of a blob is its element type and its dims (None when the rank is unknown, a dim None when
  it is symbolic, e.g. a dynamic batch size).
"""
import itertools
from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx.mapping
import onnx.numpy_helper
from onnx import helper

from .ops import DECLARATIONS

Dims = Optional[List[Optional[int]]]

_CONSTANT_ATTRIBUTES = {
    "value_int": lambda attr: np.array(attr.i, np.int64),
    "value_ints": lambda attr: np.array(list(attr.ints), np.int64),
    "value_float": lambda attr: np.array(attr.f, np.float32),
    "value_floats": lambda attr: np.array(list(attr.floats), np.float32),
}


def _unsqueezed(values, attributes):
    data, axes = values[0], attributes.get("axes", values[1].tolist() if len(values) > 1 else None)
    rank = data.ndim + len(axes)
    for axis in sorted(axis + rank if axis < 0 else axis for axis in axes):
        data = np.expand_dims(data, axis)
    return data


_FOLDED = {
    "Unsqueeze": _unsqueezed,
    "Squeeze": lambda values, attributes: np.squeeze(values[0], axis=tuple(
        attributes.get("axes", values[1].tolist() if len(values) > 1 else range(values[0].ndim)))
        if attributes.get("axes") or len(values) > 1 else None),
    "Cast": lambda values, attributes: values[0].astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[attributes["to"]]),
    "Concat": lambda values, attributes: np.concatenate(values, axis=attributes["axis"]),
    "Identity": lambda values, attributes: values[0],
}


class GraphFacts:
    """The constants, types and value infos of one ONNX graph: ``graph`` (its nodes, initializers and declared
    values) with the value infos of ``inferred``, the graph as ONNX shape inference returned it, when given;
    ``torch_kernels``: what the import's target allows (`torch_kernels`); ``lower``: the lowering target scans are
    emitted in (None: their Caffe2 op, PyCumSum)."""

    def __init__(self, graph=None, inferred=None, torch_kernels=False, lower=None):
        self._constant_protos: Dict[str, object] = {}
        self._decoded: Dict[str, np.ndarray] = {}
        self._types: Dict[str, Tuple[Optional[int], Dims]] = {}
        self._value_infos: Dict[str, object] = {}
        self.graph_inputs = set()
        self._producers: Dict[str, object] = {}
        #: whether the translation may run torch's kernels through Caffe2's ATen operator (False for the portable
        #: target, builds without ATen: forms take Caffe2's operators, and one that has none is refused)
        self.torch_kernels = torch_kernels
        self.lower = lower
        #: the initializers' names (of graph inputs too: their values are defaults a caller may override)
        self.initialized = set()
        self._nodes = list(graph.node) if graph is not None else []
        self._ranks: Optional[Dict[str, Optional[int]]] = None
        self._derived_dims: Dict[str, List[Optional[int]]] = {}
        if graph is None:
            return
        self.graph_inputs = {info.name for info in graph.input}
        self.initialized = {tensor.name for tensor in graph.initializer}
        for tensor in graph.initializer:
            if tensor.name not in self.graph_inputs:
                self._constant_protos[tensor.name] = tensor
            self._types.setdefault(tensor.name, (tensor.data_type, list(tensor.dims)))
        for node in graph.node:
            self._producers.update((name, node) for name in node.output)
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
                for attr in node.attribute:
                    if attr.name == "value":
                        self._constant_protos[node.output[0]] = attr.t
                    elif attr.name in _CONSTANT_ATTRIBUTES:
                        self._constant_protos[node.output[0]] = attr
        typed = graph if inferred is None else inferred
        for info in itertools.chain(typed.input, typed.value_info, typed.output):
            if not info.type.HasField("tensor_type"):
                continue
            self._value_infos.setdefault(info.name, info)
            tensor_type = info.type.tensor_type
            dims = ([dim.dim_value if dim.HasField("dim_value") else None for dim in tensor_type.shape.dim]
                    if tensor_type.HasField("shape") else None)
            self._types.setdefault(info.name, (tensor_type.elem_type or None, dims))

    def producer(self, name: str):
        """The node that makes blob ``name``, or None (a graph input or initializer)."""
        return self._producers.get(name)

    def is_constant(self, name: str) -> bool:
        return self.constant(name) is not None if name not in self._constant_protos else True

    def constant(self, name: str) -> Optional[np.ndarray]:
        """The value of constant ``name`` as an array, or None when ``name`` is not a constant."""
        if name not in self._decoded:
            proto = self._constant_protos.get(name)
            if proto is None:
                folded = self._folded(name)
                if folded is not None:
                    self._decoded[name] = folded
                return folded
            if isinstance(proto, onnx.AttributeProto):
                self._decoded[name] = _CONSTANT_ATTRIBUTES[proto.name](proto)
            else:
                self._decoded[name] = onnx.numpy_helper.to_array(proto)
        return self._decoded[name]

    def _folded(self, name: str) -> Optional[np.ndarray]:
        """The value of ``name`` when it is made by a reshaping node of constants (what torch's export without
        constant folding leaves: ``Unsqueeze(Constant)`` for a Slice's axes, ...), else None."""
        node = self._producers.get(name)
        if node is None or node.op_type not in _FOLDED or len(node.output) != 1 or node.domain not in ("", "ai.onnx"):
            return None
        values = [self.constant(given) for given in node.input]
        if any(value is None for value in values):
            return None
        attributes = {attr.name: helper.get_attribute_value(attr) for attr in node.attribute}
        try:
            return np.asarray(_FOLDED[node.op_type](values, attributes))
        except (ValueError, TypeError, IndexError, KeyError, np.AxisError):
            return None  # an invalid node is refused where it is translated

    def elem_type(self, name: str) -> Optional[int]:
        return self._types.get(name, (None, None))[0]

    def dims(self, name: str) -> Dims:
        """The dims of ``name`` (None: rank unknown; an entry None: that dim is symbolic)."""
        return self._types.get(name, (None, None))[1]

    def rank(self, name: str) -> Optional[int]:
        """The rank of ``name``: inferred, else read off the op that makes it by its declaration's rank rule (ONNX
        infers no rank for a Slice with bounds known only at run time, nor for an Expand to a computed shape, nor
        then for anything computed from them); None when no rule applies."""
        dims = self.dims(name)
        if dims is not None:
            return len(dims)
        if self._ranks is None:
            self._ranks = self._derived_ranks()
        return self._ranks.get(name)

    def known_dims(self, name: str) -> Dims:
        """The dims of ``name`` as far as they are known: inferred, else derived with its rank where ONNX's inference
        gives none (the same pass, by its op's declared dims rule: elementwise, broadcasting and Unsqueeze ops: an
        attention mask's (B, 1, 1, S) made from a mask whose dims inference lost), a dim None where it is not known;
        None when the rank is not known either."""
        dims = self.dims(name)
        if dims is not None:
            return dims
        rank = self.rank(name)
        return None if rank is None else self._derived_dims.get(name, [None] * rank)

    def _derived_ranks(self) -> Dict[str, Optional[int]]:
        """The rank of every node output without inferred dims, in one pass over the nodes in graph order (ONNX
        graphs are sorted topologically: an input made later has no rank yet, which only makes fewer known): each
        rule reads its inputs' ranks once, so a deep model costs its number of nodes, not the number of paths
        through it."""
        ranks: Dict[str, Optional[int]] = {}

        def known(given: str) -> Optional[int]:
            if not given:  # an omitted input is named ""
                return None
            dims = self.dims(given)
            return len(dims) if dims is not None else ranks.get(given)

        def known_dims(given: str) -> Dims:
            rank = known(given)
            return None if rank is None else self.dims(given) or self._derived_dims.get(given, [None] * rank)

        for node in self._nodes:
            if not node.input or node.domain not in ("", "ai.onnx"):
                continue
            declaration = DECLARATIONS.get(node.op_type)
            rank = declaration.rank(node, known, self) if declaration is not None and declaration.rank else None
            ranks.update((output, rank) for output in node.output if output and self.dims(output) is None)
            dims = (declaration.dims(node, known_dims, self) if rank is not None and declaration.dims
                    and self.dims(node.output[0]) is None else None)
            if dims is not None and len(dims) == rank:
                self._derived_dims[node.output[0]] = dims
        return ranks

    def axes(self, node) -> Optional[List[int]]:
        """A node's axes, from its attribute or its constant second input; None when neither is known."""
        axes = next((list(attr.ints) for attr in node.attribute if attr.name == "axes"), None)
        if axes is None and len(node.input) > 1 and node.input[1] and self.constant(node.input[1]) is not None:
            axes = self.constant(node.input[1]).reshape(-1).tolist()
        return axes

    def value_infos(self, names) -> List[bytes]:
        """Serialized ValueInfoProtos of the ``names`` among the graph's inputs, outputs and value infos (what
        Caffe2's C++ converter is given by the stock backend)."""
        return [self._value_infos[name].SerializeToString() for name in names if name in self._value_infos]
