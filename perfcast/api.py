"""Python API. ``perfcast.load_graph`` mirrors ``perfcast inspect``."""

from __future__ import annotations

from typing import Any

from perfcast.errors import PerfcastError
from perfcast.graph import ModelGraph


def load_graph(model: Any, *, batch_size: int | None = None,
               input_size: tuple[int, ...] | str | None = None, seq_len: int | None = None,
               mode: str = "infer", precision: str = "fp32", optimizer: str = "sgd-momentum",
               example_inputs: tuple | None = None, use_cache: bool = True) -> ModelGraph:
    """Computation graph of ``model``: a spec string (see README) or an ``nn.Module``.

    For an ``nn.Module`` give ``example_inputs`` (meta tensors are best: nothing is computed) or
    an ``input_size`` (per sample, e.g. ``(3, 224, 224)``); module graphs are not cached.
    """
    from perfcast.frontends import GraphRequest, parse_input_size

    if isinstance(input_size, str):
        input_size = parse_input_size(input_size)
    if isinstance(model, str):
        from perfcast.cache import get_graph

        req = GraphRequest(spec=model, batch_size=batch_size,
                           input_size=tuple(input_size) if input_size else None, seq_len=seq_len,
                           mode=mode, precision=precision, optimizer=optimizer)
        return get_graph(req, use_cache=use_cache)

    import torch
    from torch import nn

    from perfcast.frontends.torch_frontend import graph_from_module

    if not isinstance(model, nn.Module):
        raise PerfcastError(f"model must be a spec string or a torch.nn.Module, "
                            f"not {type(model).__name__}")
    GraphRequest(spec="module", batch_size=batch_size,
                 input_size=tuple(input_size) if input_size else None, mode=mode,
                 precision=precision, optimizer=optimizer).validate()
    if example_inputs is None:
        if input_size is None:
            raise PerfcastError("give example_inputs or input_size for an nn.Module")
        example_inputs = (torch.empty((batch_size or 1, *input_size), device="meta"),)
    first = example_inputs[0] if example_inputs else None
    bs = batch_size or (int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 1)
    return graph_from_module(model, tuple(example_inputs), model_id=type(model).__name__,
                             batch_size=bs, mode=mode, precision=precision, optimizer=optimizer)
