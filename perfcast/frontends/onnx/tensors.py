"""ONNX tensor metadata: element types, shapes/dtypes of values and the graph-wide tensor context.

:class:`_Ctx` holds what is known about the main graph's tensors (shapes, initializers, constant
values) and is shared by the loading, costing and building steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from onnx import TensorProto, ValueInfoProto, external_data_helper, numpy_helper

from perfcast.graph import Shape

# ---------------------------------------------------------------------------------- dtypes

#: ONNX element type -> (torch-style dtype name, bits per element).
_DTYPES: dict[int, tuple[str, int]] = {
    TensorProto.FLOAT: ("float32", 32), TensorProto.UINT8: ("uint8", 8),
    TensorProto.INT8: ("int8", 8), TensorProto.UINT16: ("uint16", 16),
    TensorProto.INT16: ("int16", 16), TensorProto.INT32: ("int32", 32),
    TensorProto.INT64: ("int64", 64), TensorProto.STRING: ("string", 0),
    TensorProto.BOOL: ("bool", 8), TensorProto.FLOAT16: ("float16", 16),
    TensorProto.DOUBLE: ("float64", 64), TensorProto.UINT32: ("uint32", 32),
    TensorProto.UINT64: ("uint64", 64), TensorProto.COMPLEX64: ("complex64", 64),
    TensorProto.COMPLEX128: ("complex128", 128), TensorProto.BFLOAT16: ("bfloat16", 16),
    TensorProto.FLOAT8E4M3FN: ("float8_e4m3fn", 8),
    TensorProto.FLOAT8E4M3FNUZ: ("float8_e4m3fnuz", 8),
    TensorProto.FLOAT8E5M2: ("float8_e5m2", 8),
    TensorProto.FLOAT8E5M2FNUZ: ("float8_e5m2fnuz", 8),
    TensorProto.UINT4: ("uint4", 4), TensorProto.INT4: ("int4", 4),
    TensorProto.FLOAT4E2M1: ("float4_e2m1fn", 4),
}
for _name, _dtype in (("FLOAT8E8M0", ("float8_e8m0fnu", 8)), ("UINT2", ("uint2", 2)),
                      ("INT2", ("int2", 2)), ("FLOAT6E2M3", ("float6_e2m3fn", 6)),
                      ("FLOAT6E3M2", ("float6_e3m2fn", 6))):
    if hasattr(TensorProto, _name):  # newer element types; absent in older onnx releases
        _DTYPES[getattr(TensorProto, _name)] = _dtype

#: dtype names whose initializers count as (learnable) parameters.
FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64", "float8_e4m3fn",
                          "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                          "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"})


_BITS = {name: bits for name, bits in _DTYPES.values()}


def _dtype_name(elem_type: int) -> str:
    return _DTYPES.get(elem_type, ("", 0))[0]


def _nbytes(shape: Shape | None, dtype: str, elem_type: int | None = None) -> int:
    """Bytes of a tensor (0 if its shape or dtype is unknown); sub-byte types are packed."""
    if shape is None:
        return 0
    bits = _DTYPES[elem_type][1] if elem_type in _DTYPES else _BITS.get(dtype, 0)
    return (math.prod(shape) * bits + 7) // 8


# ---------------------------------------------------------------------------------- tensors


@dataclass
class _Tensor:
    shape: Shape | None  # None: unknown
    dtype: str  # torch-style name, "" if unknown
    elem_type: int = 0

    @property
    def nbytes(self) -> int:
        return _nbytes(self.shape, self.dtype, self.elem_type)


_UNKNOWN = _Tensor(None, "")


def _vi_tensor(vi: ValueInfoProto) -> _Tensor:
    """Shape/dtype of a value_info (non-tensor types and symbolic dims -> unknown shape)."""
    if not vi.type.HasField("tensor_type"):
        return _UNKNOWN
    tt = vi.type.tensor_type
    shape: Shape | None = None
    if tt.HasField("shape"):
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            shape = tuple(int(d.dim_value) for d in tt.shape.dim)
    return _Tensor(shape, _dtype_name(tt.elem_type), tt.elem_type)


def _init_tensor(t: TensorProto) -> _Tensor:
    return _Tensor(tuple(int(d) for d in t.dims), _dtype_name(t.data_type), t.data_type)


@dataclass
class _Ctx:
    """Everything known about the main graph's tensors."""

    tensors: dict[str, _Tensor] = field(default_factory=dict)
    initializers: dict[str, TensorProto] = field(default_factory=dict)
    constants: dict[str, TensorProto] = field(default_factory=dict)  # Constant-node outputs
    derived: set[str] = field(default_factory=set)  # computed from constants only (e.g. QDQ)
    base_dir: str = ""
    opset: int = 0

    def get(self, name: str) -> _Tensor:
        return self.tensors.get(name, _UNKNOWN) if name else _UNKNOWN

    def is_const(self, name: str) -> bool:
        return bool(name) and (name in self.initializers or name in self.constants
                               or name in self.derived)

    def value(self, name: str, max_numel: int = 64) -> list[float] | None:
        """Values of a small constant tensor (reads at most ``max_numel`` external elements)."""
        t = self.initializers.get(name)
        if t is None:
            t = self.constants.get(name)
        if t is None or math.prod(t.dims) > max_numel:
            return None
        try:
            if t.data_location == TensorProto.EXTERNAL:
                info = {e.key: e.value for e in t.external_data}
                if int(info.get("length", "-1")) not in range(0, 16 * max_numel + 1):
                    return None  # never read an unbounded slice of a data file
                t2 = TensorProto()
                t2.CopyFrom(t)
                external_data_helper.load_external_data_for_tensor(t2, self.base_dir)
                t = t2
            return [float(v) for v in numpy_helper.to_array(t).reshape(-1).tolist()]
        except Exception:  # unreadable small constant: treat as unknown
            return None

