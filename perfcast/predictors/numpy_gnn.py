"""The forward passes of perfcast's graph networks in numpy: what a fitted GNN answers with.

The networks train in torch / PyTorch Geometric (:mod:`perfcast.predictors.gnn`,
:mod:`perfcast.predictors.encoder_net`, :mod:`perfcast.predictors.dnnperf`); once fitted, their
``state_dict`` (``weights.safetensors``, read as numpy arrays) is all an answer needs, and these
functions compute the same outputs without importing torch. The layers follow the installed
PyG 2.x sources exactly (messages flow along ``edge_index[0] → edge_index[1]``,
``flow="source_to_target"``):

* ``SAGEConv(aggr="mean")`` — ``lin_l(mean_{j→i} x_j) + lin_r(x_i)`` (no neighbour: the mean
  is 0; ``lin_r`` has no bias);
* ``GCNConv`` — self-loops replaced by one loop per node (weight 1), symmetric normalisation
  ``d_j^{-½} d_i^{-½}`` with ``d`` the in-degree including the loop (``deg⁻½ = 0`` where
  ``deg = 0``), ``Σ_{j→i} norm · (x W)_j + b``;
* ``GATConv(heads=1)`` — ``h = x W``, self-loops replaced by one per node,
  ``α_ji = softmax_i(LeakyReLU_0.2(a_src·h_j + a_dst·h_i))`` (PyG's softmax: minus the
  group's maximum, ``exp``, ÷ (Σ + 1e-16)), ``Σ_{j→i} α_ji h_j + b``;
* ``GINConv(nn, eps)`` — ``nn((1 + ε) x_i + Σ_{j→i} x_j)`` with ``nn`` Linear → ReLU → Linear;
* ``BatchNorm1d`` in eval mode (running statistics, ε = 1e-5) — ``x·α + β`` with
  ``α = γ / √(var + ε)``, ``β = b − mean·α``, as PyTorch's CPU kernel computes it;
* ``torch_geometric.utils.scatter`` sum / mean pooling and ``softmax`` over groups.

All arithmetic is float32, as the torch networks run; the summation order of a scatter differs
from PyTorch's, so an answer agrees with the torch forward to float32 rounding (tested
≤ 1e-5 relative on every shipped model, ``tests/test_numpy_gnn.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from perfcast.errors import PerfcastError

F32 = np.float32


def _w(sd: Mapping[str, np.ndarray], key: str) -> np.ndarray:
    try:
        return np.asarray(sd[key], dtype=F32)
    except KeyError:
        raise PerfcastError(f"saved weights do not match the architecture (no {key!r}); "
                            f"retrain the predictor") from None


def check_weights(name: str, sd: Mapping[str, np.ndarray],
                  expected: Mapping[str, tuple[int, ...]]) -> None:
    """The one-line error of a saved predictor whose weights do not match the architecture its
    config describes (names and shapes; what ``load_state_dict`` would refuse)."""
    missing = sorted(set(expected) - set(sd))
    extra = sorted(set(sd) - set(expected))
    wrong = sorted(k for k in set(expected) & set(sd)
                   if tuple(np.shape(sd[k])) != tuple(expected[k]))
    if missing or extra or wrong:
        what = "; ".join(p for p in (
            f"missing {missing[:3]}" if missing else "", f"unexpected {extra[:3]}" if extra else "",
            "shape of " + ", ".join(f"{k} {tuple(np.shape(sd[k]))} ≠ {tuple(expected[k])}"
                                    for k in wrong[:3]) if wrong else "") if p)
        raise PerfcastError(f"{name}: saved weights do not match the architecture ({what})")


def linear(x: np.ndarray, sd: Mapping[str, np.ndarray], prefix: str,
           bias: bool = True) -> np.ndarray:
    """``torch.nn.Linear`` / PyG ``Linear``: ``x Wᵀ + b`` (``prefix.weight``, ``prefix.bias``)."""
    out = x @ _w(sd, f"{prefix}.weight").T
    if bias:
        out = out + _w(sd, f"{prefix}.bias")
    return out.astype(F32, copy=False)


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, F32(0.0))


def leaky_relu(x: np.ndarray, slope: float) -> np.ndarray:
    return np.where(x >= 0, x, x * F32(slope)).astype(F32, copy=False)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (F32(1.0) / (F32(1.0) + np.exp(-x))).astype(F32, copy=False)


def scatter_sum(src: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    """``scatter(src, index, dim=0, dim_size=size, reduce="sum")``."""
    out = np.zeros((size, *src.shape[1:]), dtype=src.dtype)
    if len(index):
        np.add.at(out, index, src)
    return out


def scatter_mean(src: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    """``scatter(..., reduce="mean")``: the sum ÷ the count (1 where a group is empty)."""
    s = scatter_sum(src, index, size)
    cnt = np.bincount(index, minlength=size).astype(src.dtype)
    return (s / np.maximum(cnt, 1)[:, None]).astype(src.dtype, copy=False)


def scatter_max(src: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    """``scatter(..., reduce="max")`` (an empty group: 0)."""
    out = np.full((size, *src.shape[1:]), -np.inf, dtype=src.dtype)
    if len(index):
        np.maximum.at(out, index, src)
    return np.where(np.isneginf(out), 0, out).astype(src.dtype, copy=False)


def group_softmax(src: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    """``torch_geometric.utils.softmax(src, index, num_nodes=size)``: per group of ``index``
    (and per column), ``exp(src − max) ÷ (Σ exp(src − max) + 1e-16)``."""
    out = np.exp(src - scatter_max(src, index, size)[index])
    total = scatter_sum(out, index, size) + F32(1e-16)
    return (out / total[index]).astype(F32, copy=False)


def _replace_self_loops(ei: np.ndarray, n: int) -> np.ndarray:
    """PyG's ``remove_self_loops`` + ``add_self_loops`` (one loop per node, appended)."""
    keep = ei[0] != ei[1]
    loops = np.arange(n, dtype=ei.dtype)
    return np.concatenate([ei[:, keep], np.stack([loops, loops])], axis=1)


def sage_conv(x, ei, sd, prefix):
    """``SAGEConv(aggr="mean")`` (module docstring)."""
    src, dst = ei[0], ei[1]
    agg = scatter_mean(x[src], dst, x.shape[0])
    return (linear(agg, sd, f"{prefix}.lin_l") +
            linear(x, sd, f"{prefix}.lin_r", bias=False)).astype(F32, copy=False)


def gcn_conv(x, ei, sd, prefix):
    """``GCNConv`` (module docstring)."""
    n = x.shape[0]
    ei = _replace_self_loops(ei, n)
    row, col = ei[0], ei[1]
    deg = np.bincount(col, minlength=n).astype(F32)
    with np.errstate(divide="ignore"):
        dinv = np.where(deg > 0, deg ** F32(-0.5), F32(0.0)).astype(F32)
    norm = dinv[row] * dinv[col]
    h = linear(x, sd, f"{prefix}.lin", bias=False)
    out = scatter_sum(norm[:, None] * h[row], col, n)
    return (out + _w(sd, f"{prefix}.bias")).astype(F32, copy=False)


def gat_conv(x, ei, sd, prefix, negative_slope: float = 0.2):
    """``GATConv(heads=1)`` (module docstring)."""
    n = x.shape[0]
    h = linear(x, sd, f"{prefix}.lin", bias=False)
    a_src = (h * _w(sd, f"{prefix}.att_src").reshape(1, -1)).sum(-1)
    a_dst = (h * _w(sd, f"{prefix}.att_dst").reshape(1, -1)).sum(-1)
    ei = _replace_self_loops(ei, n)
    j, i = ei[0], ei[1]
    alpha = leaky_relu(a_src[j] + a_dst[i], negative_slope)
    alpha = group_softmax(alpha[:, None], i, n)[:, 0]
    out = scatter_sum(alpha[:, None] * h[j], i, n)
    return (out + _w(sd, f"{prefix}.bias")).astype(F32, copy=False)


def gin_conv(x, ei, sd, prefix):
    """``GINConv`` with ``nn = Sequential(Linear, ReLU, Linear)`` (module docstring)."""
    src, dst = ei[0], ei[1]
    eps = float(_w(sd, f"{prefix}.eps").reshape(-1)[0]) if f"{prefix}.eps" in sd else 0.0
    out = scatter_sum(x[src], dst, x.shape[0]) + F32(1.0 + eps) * x
    h = relu(linear(out.astype(F32, copy=False), sd, f"{prefix}.nn.0"))
    return linear(h, sd, f"{prefix}.nn.2")


CONVS = {"sage": sage_conv, "gcn": gcn_conv, "gat": gat_conv, "gin": gin_conv}


def batch_norm(x, sd, prefix, eps: float = 1e-5):
    """``BatchNorm1d`` in eval mode (module docstring)."""
    alpha = _w(sd, f"{prefix}.weight") / np.sqrt(_w(sd, f"{prefix}.running_var") + F32(eps))
    beta = _w(sd, f"{prefix}.bias") - _w(sd, f"{prefix}.running_mean") * alpha
    return (x * alpha + beta).astype(F32, copy=False)


def message_edges(edge_index: np.ndarray) -> np.ndarray:
    """Directed data-flow edges → both directions (what the GNNs pass messages along)."""
    ei = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    return np.concatenate([ei, ei[::-1]], axis=1) if ei.shape[1] else ei


# -- the networks --------------------------------------------------------------------------
def gnn_embed(x: np.ndarray, ei: np.ndarray, sd, conv: str, layers: int, pool: str,
              pool_scale: float) -> np.ndarray:
    """``GNNNet.embed`` of :func:`perfcast.predictors.gnn._make_net` for one graph: ``layers``
    convolutions, each followed by ReLU, then mean pooling or sum pooling × ``pool_scale``
    (``[hidden]``)."""
    fn = CONVS[conv]
    for i in range(layers):
        x = relu(fn(x, ei, sd, f"convs.{i}"))
    if pool == "sum":
        return (x.sum(0, dtype=F32) * F32(pool_scale)).astype(F32)
    return (x.sum(0, dtype=F32) / F32(max(1, x.shape[0]))).astype(F32)


def gnn_head(g: np.ndarray, static: np.ndarray, sd, fc_layers: int) -> np.ndarray:
    """``GNNNet.head``: ``[g ‖ static]`` → (Linear → ReLU) × ``fc_layers`` → Linear."""
    h = np.concatenate([g, static], axis=1).astype(F32, copy=False)
    for i in range(fc_layers):
        h = relu(linear(h, sd, f"fcs.{i}"))
    return linear(h, sd, "out")


def encoder_nodes(x: np.ndarray, ei: np.ndarray, sd, conv: str, layers: int,
                  norms: int) -> np.ndarray:
    """:class:`perfcast.predictors.encoder_net.Encoder` in eval mode: each convolution, then
    (for the first ``norms``) BatchNorm → ReLU (``[nodes, hidden]``)."""
    fn = sage_conv if conv == "sage" else gin_conv
    for i in range(layers):
        x = fn(x, ei, sd, f"convs.{i}")
        if i < norms:
            x = relu(batch_norm(x, sd, f"norms.{i}"))
    return x


def anee(x: np.ndarray, ei: np.ndarray, ea: np.ndarray, sd, *, rounds: int, attention: bool,
         readout: str, pool_scale: float, batchnorm: bool, mlp_layers: int) -> float:
    """DNNPerf's ANEE (:func:`perfcast.predictors.dnnperf.network._make_anee`) for one graph: the
    standardised prediction."""
    h = linear(x, sd, "F")
    e = ea.astype(F32, copy=False)
    s, d = ei[0], ei[1]
    n = h.shape[0]
    for _ in range(rounds):
        hb = leaky_relu(linear(h, sd, "W_u", bias=False), 0.01)
        if attention:
            score = linear(np.concatenate([hb[s], hb[d]], axis=1), sd, "a", bias=False)
            e = sigmoid(score * linear(e, sd, "W_e", bias=False))
            msg = group_softmax(linear(e, sd, "W_m", bias=False), d, n) * hb[s]
        else:
            msg = hb[s]
        h = leaky_relu(scatter_sum(msg.astype(F32, copy=False), d, n), 0.01)
    g = h.sum(0, dtype=F32)[None, :]
    if readout == "mean":
        g = g / F32(max(1, n))
    elif not batchnorm:
        g = g * F32(pool_scale)
    if batchnorm:
        g = batch_norm(g.astype(F32), sd, "bn")
    for i in range(mlp_layers):
        g = relu(linear(g.astype(F32, copy=False), sd, f"mlp.{i}"))
    return float(linear(g, sd, "out")[0, 0])


__all__ = ["CONVS", "anee", "batch_norm", "check_weights", "encoder_nodes", "gat_conv",
           "gcn_conv", "gin_conv", "gnn_embed", "gnn_head", "group_softmax", "linear",
           "message_edges", "sage_conv", "scatter_mean", "scatter_sum"]
