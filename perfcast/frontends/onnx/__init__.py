"""ONNX frontend: turn an ``.onnx`` file into a :class:`~perfcast.graph.ModelGraph`.

``graph_from_onnx(path, batch_size=...)`` reads the model *without* its external-data bytes
(initializer shapes and dtypes live in the ``TensorProto`` header, so a multi-GB model costs a
few MB of RAM), binds the symbolic batch dimension, runs ONNX shape inference, and emits one
:class:`~perfcast.graph.Node` per ONNX node with canonical op (:mod:`perfcast.ops`), shapes,
dtypes, parameter counts and the FLOPs/MACs of :func:`perfcast.flops.cost`.

Conventions:

* Graph inputs and initializers are not nodes; every ONNX node is (``Constant`` included).
* Op types outside :data:`ONNX_OP_MAP` / :data:`MS_OP_MAP` become ``other`` and their
  domain-qualified name (the node's ``target``) is listed in ``meta.unmapped_ops``.
* Control flow (``If``/``Loop``/``Scan``) is *not* expanded: the outer node stands for its
  whole subgraph (op ``other``, zero FLOPs). Outer-scope tensors its body reads become edges
  into it, and initializers read or defined by its body count as its parameters.
* Model-local functions are inlined first, so their bodies are costed like ordinary nodes.
* Parameters are floating-point initializers only (int64 shape tensors, quantized uint8
  weights and ``Constant`` nodes are not parameters).
* A shape with any unresolved dimension is unknown: stored as ``()`` on nodes and ``-1`` per
  unresolved dim in ``meta.input_shapes``. Ops whose output shape is unknown cost 0 and get
  ``attrs["shape_unknown"] = True``.

Modules: :mod:`.load` (model, opset, batch binding, shape inference), :mod:`.ops` (op-type
mapping, attribute helpers), :mod:`.tensors` (dtypes, tensor context), :mod:`.cost` (per-node
op resolution and FLOPs/MACs) and :mod:`.build` (:func:`graph_from_onnx`).
"""

from perfcast.frontends.onnx.build import graph_from_onnx
from perfcast.frontends.onnx.ops import MS_OP_MAP, ONNX_OP_MAP, map_op_type

__all__ = ["graph_from_onnx", "ONNX_OP_MAP", "MS_OP_MAP", "map_op_type"]
