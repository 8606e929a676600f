"""The graph encoder's torch module (TraPPM §IV-B), imported by
:func:`perfcast.predictors.encoder.build_encoder` when an encoder is built or loaded.

:class:`Encoder`: ``layers`` graph convolutions (default 4), the first to ``2·hidden`` channels,
the others to ``hidden`` (TraPPM's c, 512 in the paper); each followed by BatchNorm → ReLU →
Dropout (0.5 in TraPPM). ``conv="sage"`` (GraphSAGE, mean aggregation) is TraPPM's GAE encoder,
``conv="gin"`` (GIN, MLP Linear → ReLU → Linear) GraphMAE's. ``final_act=False`` drops the block
after the last convolution (the paper keeps it). The pre-training objectives around it are in
:mod:`perfcast.pretrain.models`.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from perfcast.predictors.encoder import import_pyg_quietly

import_pyg_quietly()
from torch_geometric.nn import GINConv, SAGEConv  # noqa: E402


def gin(i: int, o: int, h: int | None = None) -> GINConv:
    """A GIN convolution ``i → o`` whose MLP is Linear(i, h) → ReLU → Linear(h, o)."""
    h = o if h is None else h
    return GINConv(nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o)))


class Encoder(nn.Module):
    """Node encoder ``[N, in_dim] → [N, hidden]`` (module doc)."""

    def __init__(self, in_dim: int, hidden: int, layers: int = 4, conv: str = "sage",
                 dropout: float = 0.5, final_act: bool = True) -> None:
        super().__init__()
        if conv not in ("sage", "gin"):
            raise ValueError(f"unknown encoder conv {conv!r}")
        dims = [in_dim] + [2 * hidden if (i == 0 and layers > 1) else hidden for i in range(layers)]
        make = (lambda a, b: SAGEConv(a, b, aggr="mean")) if conv == "sage" else gin
        self.convs = nn.ModuleList(make(a, b) for a, b in zip(dims, dims[1:]))
        n_norm = layers if final_act else layers - 1
        self.norms = nn.ModuleList(nn.BatchNorm1d(b) for b in dims[1:1 + n_norm])
        self.dropout = float(dropout)
        self.out_dim = hidden

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.norms):
                x = F.dropout(F.relu(self.norms[i](x)), self.dropout, self.training)
        return x


__all__ = ["Encoder", "gin"]
