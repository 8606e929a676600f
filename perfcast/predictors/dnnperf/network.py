"""DNNPerf's Attention-based Node-Edge Encoder (ANEE, §III-D) as a torch network, to train it
(:func:`_make_anee`); answers are computed in numpy (:func:`perfcast.predictors.numpy_gnn.anee`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _make_anee(node_dim: int, edge_dim: int, hidden: int, rounds: int, mlp: tuple[int, ...],
               attention: bool, readout: str, pool_scale: float = 1.0, norm: str = "scale"):
    """The ANEE network (§III-D): ``rounds`` rounds with parameters shared across rounds; F = a
    linear map of the normalised node vector to ``hidden`` ("raw feature encoding and vector
    shape alignment")::

        h̄ᵢᵤ   = LeakyReLU_0.01(W_u · hᵢ₋₁ᵤ)
        eᵢₗ   = σ( aᵀ(h̄ᵢₛ ‖ h̄ᵢ_d) · W_e · eᵢ₋₁ₗ )                    l = (s → d)
        hᵢᵤ   = LeakyReLU_0.01( Σ_{l'=(u'→u)} softmax(W_m · eᵢₗ') ⊙ h̄ᵢᵤ' )

    The softmax: the paper's sentence ("comparable across different features … normalizes them
    across all choices") admits two readings. Over the ``hidden`` features of one edge alone,
    the coefficients sum to 1 per edge and every round divides the node vectors by ≈ ``hidden``
    (nothing was learned). So each feature's coefficients are normalised over the node's
    incoming edges (GAT's normalisation, one coefficient per feature): a per-feature weighted
    mean of the neighbours. ``attention=False`` (ablation) drops the edge update and the
    softmax weighting: ``hᵢᵤ = LeakyReLU(Σ h̄ᵢᵤ')``.

    Readout: the sum (or with ``readout="mean"`` the mean) of the node vectors — Batch
    Normalization with ``norm="batchnorm"``, else times ``pool_scale`` — → MLP ``mlp`` (ReLU)
    → 1."""
    import torch
    from torch import nn
    import torch.nn.functional as F
    from perfcast.features.pyg import import_pyg

    import_pyg()
    from torch_geometric.utils import softmax as pyg_softmax

    class ANEE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.F = nn.Linear(node_dim, hidden)
            self.W_u = nn.Linear(hidden, hidden, bias=False)
            self.a = nn.Linear(2 * hidden, 1, bias=False)
            self.W_e = nn.Linear(edge_dim, edge_dim, bias=False)
            self.W_m = nn.Linear(edge_dim, hidden, bias=False)
            dims = (hidden, *mlp)
            self.mlp = nn.ModuleList(nn.Linear(i, o) for i, o in zip(dims, dims[1:]))
            self.out = nn.Linear(dims[-1], 1)
            # DNNPerf's PyTorch setting (§V-C): Batch Normalization of the readout before the MLP
            self.bn = nn.BatchNorm1d(hidden) if norm == "batchnorm" else None
            # He initialisation for the (leaky) ReLU layers: with torch's default uniform init
            # each round shrank the node vectors
            for lin in (self.F, self.W_u, *self.mlp):
                nn.init.kaiming_normal_(lin.weight, a=0.01, nonlinearity="leaky_relu")

        def forward(self, x, ei, ea, batch, num_graphs: int):
            h = self.F(x)
            e = ea
            s, d = ei[0], ei[1]
            for _ in range(rounds):
                hb = F.leaky_relu(self.W_u(h), 0.01)
                if attention:
                    score = self.a(torch.cat([hb[s], hb[d]], dim=1))      # [E, 1]
                    e = torch.sigmoid(score * self.W_e(e))                # [E, edge_dim]
                    # per-feature coefficients, normalised over u's incoming edges (above)
                    msg = pyg_softmax(self.W_m(e), d, num_nodes=hb.shape[0]) * hb[s]
                else:
                    msg = hb[s]
                agg = torch.zeros_like(hb).index_add_(0, d, msg)
                h = F.leaky_relu(agg, 0.01)
            g = torch.zeros(num_graphs, h.shape[1], dtype=h.dtype).index_add_(0, batch, h)
            if readout == "mean":
                cnt = torch.bincount(batch, minlength=num_graphs).clamp(min=1).unsqueeze(1)
                g = g / cnt
            elif self.bn is None:  # the sum, times a constant: O(1) inputs for the MLP
                g = g * pool_scale
            if self.bn is not None:
                g = self.bn(g)
            for lin in self.mlp:
                g = torch.relu(lin(g))
            return self.out(g).squeeze(1)

    return ANEE()


def _anee_shapes(arch: dict[str, Any], j: int) -> dict[str, tuple[int, ...]]:
    """The ``state_dict`` shapes of :func:`_make_anee`'s network ``j`` for ``arch``."""
    nd, ed, h = int(arch["node_dim"]), int(arch["edge_dim"]), int(arch["hidden"])
    out: dict[str, tuple[int, ...]] = {"F.weight": (h, nd), "F.bias": (h,), "W_u.weight": (h, h),
                                       "a.weight": (1, 2 * h), "W_e.weight": (ed, ed),
                                       "W_m.weight": (h, ed)}
    dims = (h, *[int(v) for v in arch["mlp"]])
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        out.update({f"mlp.{i}.weight": (b, a), f"mlp.{i}.bias": (b,)})
    out.update({"out.weight": (1, dims[-1]), "out.bias": (1,)})
    if arch.get("readout_norm", "scale") == "batchnorm":
        out.update({f"bn.{k}": (h,) for k in ("weight", "bias", "running_mean", "running_var")})
        out["bn.num_batches_tracked"] = ()
    return out


def _forward(net, graphs):
    """Predictions of a list of normalised ``(x, edge_index, edge_attr)`` graphs (one union)."""
    import torch

    sizes = [g[0].shape[0] for g in graphs]
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    x = torch.cat([g[0] for g in graphs])
    ei = torch.cat([g[1] + int(o) for g, o in zip(graphs, offs)], dim=1)
    ea = torch.cat([g[2] for g in graphs])
    batch = torch.repeat_interleave(torch.arange(len(graphs)), torch.as_tensor(sizes))
    return net(x, ei, ea, batch, len(graphs))
