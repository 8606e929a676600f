"""Pre-training objectives (torch modules) around the encoder.

:class:`Encoder` — TraPPM §IV-B, in :mod:`perfcast.predictors.encoder_net` where the
predictors that answer with a pre-trained encoder read it: ``layers`` graph convolutions
(default 4), the first to ``2·hidden`` channels, the others to ``hidden`` (TraPPM's c, 512 in
the paper); each followed by BatchNorm → ReLU → Dropout (0.5 in TraPPM). ``conv="sage"``
(GraphSAGE, mean aggregation) is TraPPM's GAE encoder, ``conv="gin"`` (GIN, MLP Linear → ReLU →
Linear) GraphMAE's. ``final_act=False`` drops the block after the last convolution (the paper
keeps it; then every ``σ(zᵢ·zⱼ) ≥ 0.5`` because ``Z ≥ 0`` and the negative-edge BCE cannot go
below log 2 — consistent with the paper's final loss of 0.93).

``"gae"``: ``torch_geometric.nn.GAE`` with this encoder, the inner-product decoder ``σ(ZZᵀ)``
and ``GAE.recon_loss`` (BCE with ε = 1e-15 on positive edges and as many negatively sampled
non-edges; see :func:`gae_loss` for which edges).

``"graphmae"``: :class:`GraphMAE` (Hou et al. 2022, thesis ch. 7.4.3): a fraction ``mask_rate``
of the nodes get their features replaced by a learnable mask token, the GIN encoder embeds the
graph, a bias-free linear map and a re-mask (masked nodes' codes set to 0) feed a one-layer GIN
decoder that reconstructs the node features; loss = scaled cosine error
``mean over masked nodes of (1 − cos(x, x̂))^γ`` (γ = 2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from perfcast.predictors.encoder import DEFAULT_DROPOUT, METHOD_CONV, import_pyg_quietly
from perfcast.predictors.encoder_net import Encoder, gin as _gin
from perfcast.workload import PRETRAIN_METHODS as METHODS

import_pyg_quietly()
from torch_geometric.nn import GAE  # noqa: E402
from torch_geometric.utils import batched_negative_sampling  # noqa: E402

class GraphMAE(nn.Module):
    """Masked graph autoencoder around an :class:`Encoder` (module doc)."""

    def __init__(self, encoder: Encoder, in_dim: int, mask_rate: float = 0.5,
                 gamma: float = 2.0) -> None:
        super().__init__()
        self.encoder = encoder
        self.mask_token = nn.Parameter(torch.zeros(1, in_dim))
        self.enc2dec = nn.Linear(encoder.out_dim, encoder.out_dim, bias=False)
        self.decoder = _gin(encoder.out_dim, in_dim, encoder.out_dim)
        self.mask_rate = float(mask_rate)
        self.gamma = float(gamma)

    def loss(self, x, edge_index):
        n = x.shape[0]
        k = max(1, int(round(self.mask_rate * n)))
        mask = torch.randperm(n)[:k]
        xm = x.clone()
        xm[mask] = self.mask_token.to(x.dtype)
        h = self.enc2dec(self.encoder(xm, edge_index))
        h = h.clone()
        h[mask] = 0.0  # re-mask: the decoder must rebuild masked nodes from their neighbours
        rec = self.decoder(h, edge_index)
        return sce_loss(rec[mask], x[mask], self.gamma)


def sce_loss(pred, target, gamma: float = 2.0):
    """Scaled cosine error ``mean((1 − cos(pred, target))^γ)`` (GraphMAE)."""
    cos = (F.normalize(pred, dim=-1) * F.normalize(target, dim=-1)).sum(-1)
    return (1.0 - cos).pow(gamma).mean()


def build(method: str, in_dim: int, hidden: int, layers: int, dropout: float, final_act: bool,
          mask_rate: float = 0.5, gamma: float = 2.0) -> nn.Module:
    """The pre-training model of ``method``; its encoder is ``model.encoder``."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    enc = Encoder(in_dim, hidden, layers, METHOD_CONV[method], dropout, final_act)
    if method == "gae":
        return GAE(enc)  # inner-product decoder, recon_loss
    return GraphMAE(enc, in_dim, mask_rate, gamma)


def gae_loss(model: GAE, x, mp_edges, pos_edges, batch):
    """``GAE.recon_loss`` of one collated minibatch. Messages pass along ``mp_edges`` (the
    data-flow edges in both directions); positives are the original *directed* edges (each
    connected pair once; the decoder ``σ(zᵢ·zⱼ)`` is symmetric anyway); negatives are sampled
    per graph (``batched_negative_sampling``: pairs of nodes of the same graph, never a
    cross-graph pair) among pairs joined by no edge in either direction — as many as positives."""
    z = model.encode(x, mp_edges)
    neg = batched_negative_sampling(mp_edges, batch, num_neg_samples=0.5)
    return model.recon_loss(z, pos_edges, neg)


__all__ = ["DEFAULT_DROPOUT", "METHODS", "METHOD_CONV", "Encoder", "GraphMAE", "build",
           "gae_loss", "sce_loss"]
