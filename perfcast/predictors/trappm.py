"""TraPPM (Panner Selvam & Brorsson): a frozen pre-trained graph encoder beside a supervised GNN.

Architecture (TraPPM §IV-C)::

    graph ─ frozen encoder (perfcast pretrain: GAE or GraphMAE) ─ sum pool ─ standardise ─┐
    graph ─ SAGEConv → ReLU → dropout 0.05 (× 2) ─ sum pool (× 1/mean node count) ────────┤ ⊕
    static vector (standardised) ─────────────────────────────────────────────────────────┘
      ─ Linear → ReLU → dropout 0.05 (× 2) ─ Linear → one output per target

The supervised part is :class:`~perfcast.predictors.gnn.NNLQP`'s network (it *is* a
:class:`~perfcast.predictors.gnn.GNNRegressor`: same minibatching of whole graphs, node and
target standardisation, masked multi-target loss, early stopping, ``warm_start``); the frozen
embeddings enter its head beside the static vector. The encoder never trains here, so each
graph is embedded once per fit or prediction (not once per epoch) and the embeddings are
standardised per dimension with training-record statistics — an affine map the first FC layer
could learn, but it gives that layer O(1) inputs (the paper's randomly initialised encoder
started at an MSE of 5·10¹² — raw sums over thousands of nodes).

``encoder``: ``"shipped"`` (default: the encoder pre-trained on perfcast's corpus that ships
with the package, :func:`~perfcast.predictors.encoder.shipped_encoder_dir`), a directory
written by ``perfcast pretrain`` (``encoder.json`` + ``encoder.safetensors``), or ``"random"``
(or ``None``) — a **randomly initialised** frozen encoder of the same
architecture (``encoder_method``, ``encoder_hidden``, ``encoder_layers``; seeded by ``seed``,
node standardisation from the training graphs): TraPPM's "random encoder" ablation (§V-I). With
a directory, the architecture and the node standardisation come from the encoder and the
``encoder_*`` hyper-parameters are ignored. A saved ``trappm`` holds the encoder's weights and
statistics in its own ``weights.safetensors`` (``encoder.*``) and its metadata in
``config.json`` (``state.encoder``), so it loads without the encoder directory. On
``warm_start`` the fitted encoder is kept (``encoder`` is ignored).

Deviations from the paper, for 2 CPU cores: supervised width 64 (paper 512), encoder width
from the pre-training (default 128, paper 512), ≤ 40 epochs with early stopping (paper 100);
messages pass along edges both ways. Loss ``mse`` as the paper (``huber`` available); targets in
log space as for every learned predictor here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.predictors import register_predictor
from perfcast.predictors.base import FeatureScaler
from perfcast.features.records import FeatureSet, as_numpy
from perfcast.predictors.gnn import GNNRegressor, _Graphs, _make_net, _node_stats


@register_predictor
class TraPPM(GNNRegressor):
    """TraPPM (module doc). Hyper-parameters: those of :class:`GNNRegressor` with NNLQP's
    defaults (2 SAGEConv, sum pool, 2 FC, MSE, Adam 1e-3) plus ``encoder`` (``shipped``, a
    pre-trained encoder directory, or ``random`` = random frozen encoder) and, for the random encoder only,
    ``encoder_method`` (gae | graphmae), ``encoder_hidden``, ``encoder_layers``."""

    name = "trappm"
    _defaults = {"conv_layers": 2, "fc_layers": 2, "pool": "sum", "loss": "mse", "lr": 1e-3,
                 "encoder": "shipped", "encoder_method": "gae", "encoder_hidden": 128,
                 "encoder_layers": 4}

    # -- fitting -----------------------------------------------------------------------------
    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        p = self._check_params()
        self._emb_cache: dict[int, tuple[Any, Any]] = {}
        try:
            if self._warm is None:
                self.encoder_ = self._make_encoder(train, p)
                self.emb_scaler_ = FeatureScaler.fit(self._record_embeddings(train))
            self.trained_on_["encoder"] = self._encoder_info()
            super()._fit(train, valid, progress)
        finally:
            self._emb_cache = None

    def _make_encoder(self, train: FeatureSet, p: dict[str, Any]):
        from perfcast.predictors.encoder import load_encoder, random_encoder

        in_dim = int(train.graphs[0].x.shape[1])
        source = p["encoder"]
        if source not in (None, "", "random"):
            if source == "shipped":
                from perfcast.predictors.encoder import shipped_encoder_dir

                source = shipped_encoder_dir()
            enc = load_encoder(source)
            enc.meta = {**_trim(enc.meta), "source": str(p["encoder"])}
        else:
            for k in ("encoder_hidden", "encoder_layers"):
                if int(p[k]) < 1:
                    raise PerfcastError(f"{self.name}: {k} must be ≥ 1, got {p[k]!r}")
            mean, std = _node_stats(train, train.graph_index)
            enc = random_encoder(str(p["encoder_method"]), in_dim, int(p["encoder_hidden"]),
                                 int(p["encoder_layers"]), mean, std, seed=int(p["seed"]))
        if enc.in_dim != in_dim:
            raise PerfcastError(f"{self.name}: the encoder takes {enc.in_dim} node features, the "
                                f"graphs have {in_dim}")
        return enc

    def _encoder_info(self) -> dict[str, Any]:
        m = self.encoder_.meta
        return {"method": m["method"], "hidden": int(m["params"]["hidden"]),
                "random": bool(m.get("random", False)), "epoch": m.get("epoch"),
                **({"source": m["source"]} if "source" in m else {})}

    # -- frozen embeddings -------------------------------------------------------------------
    def _record_embeddings(self, fs: FeatureSet, chunk: int = 64) -> np.ndarray:
        """``[len(fs), dim]`` raw (unstandardised) sum-pooled encoder embeddings per record;
        each graph is embedded once (cached across the train / valid sets of a fit)."""
        import torch

        from perfcast.predictors.encoder import message_edges

        cache = getattr(self, "_emb_cache", None)
        cache = {} if cache is None else cache
        uniq, inv = np.unique(np.asarray(fs.graph_index), return_inverse=True)
        todo = [g for g in uniq.tolist() if id(fs.graphs[g]) not in cache]
        graphs = _Graphs(np.zeros(1, np.float32), np.ones(1, np.float32), undirected=False)
        for b in range(0, len(todo), chunk):
            ids = todo[b:b + chunk]
            for g in ids:  # raw x; message-passing edges in both directions, as in pre-training
                graphs.x[g] = torch.as_tensor(fs.graphs[g].x).float()
                graphs.ei[g] = message_edges(torch.as_tensor(fs.graphs[g].edge_index).long())
            x, ei, batch = graphs.collate(ids)
            emb = self.encoder_.embed(x, ei, batch, len(ids))
            for j, g in enumerate(ids):
                cache[id(fs.graphs[g])] = (fs.graphs[g], emb[j])  # keep the Data: ids stay unique
        if not len(uniq):
            return np.zeros((0, self.encoder_.dim), np.float32)
        per_graph = torch.stack([cache[id(fs.graphs[g])][1] for g in uniq.tolist()])
        return per_graph[torch.from_numpy(inv.reshape(-1))].numpy()

    def _tensors(self, fs: FeatureSet, targets: list[str] | None, share=None) -> dict[str, Any]:
        """:meth:`GNNRegressor._tensors` with the standardised frozen embeddings prepended to
        each record's static vector (what the head sees: SAGE embedding ⊕ this)."""
        import torch

        out = super()._tensors(fs, targets, share)
        emb = torch.from_numpy(self.emb_scaler_.transform(self._record_embeddings(fs)))
        out["static"] = torch.cat([emb, out["static"]], dim=1)
        return out

    def _numpy_static(self, data: FeatureSet) -> np.ndarray:
        """The head's extra inputs in numpy: the standardised frozen-encoder embedding of each
        record's graph (:meth:`~perfcast.predictors.encoder.PretrainedEncoder.embed_numpy`)
        before its standardised static vector — what :meth:`_tensors` gives the torch
        network."""
        from perfcast.predictors.base import numpy_threads
        from perfcast.predictors.numpy_gnn import message_edges

        uniq, inv = np.unique(np.asarray(data.graph_index), return_inverse=True)
        if not len(uniq):
            emb = np.zeros((0, self.encoder_.dim), np.float32)
        else:
            with numpy_threads():
                per = [self.encoder_.embed_numpy(
                    as_numpy(data.graphs[g].x), message_edges(as_numpy(data.graphs[g].edge_index)))
                    for g in uniq.tolist()]
            per = np.stack(per)
            emb = per[inv.reshape(-1)]
        return np.concatenate([self.emb_scaler_.transform(emb),
                               self.static_scaler_.transform(data.static)], axis=1)

    def _head_in_extra(self) -> int:
        return int(self.encoder_.dim)

    def _build(self, dropout: float = 0.0):
        a = self.arch_
        return _make_net(a["in_dim"], a["static_dim"] + self.encoder_.dim, a["out_dim"], a["conv"],
                         int(a["hidden"]), int(a["conv_layers"]), int(a["fc_hidden"]),
                         int(a["fc_layers"]), dropout, a["pool"], float(a.get("pool_scale", 1.0)))

    # -- persistence -------------------------------------------------------------------------
    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        tensors, state = super()._state()
        tensors.update(self.encoder_.tensors())
        tensors.update({"emb_mean": self.emb_scaler_.mean, "emb_std": self.emb_scaler_.std})
        return tensors, {**state, "encoder": self.encoder_.meta}

    def _set_state(self, tensors: dict[str, Any], state: dict[str, Any]) -> None:
        from perfcast.predictors.encoder import PretrainedEncoder

        need = ("emb_mean", "emb_std", "encoder_node_mean", "encoder_node_std")
        missing = [k for k in need if k not in tensors]
        missing += [] if "encoder" in state else ["encoder"]
        if missing:
            raise PerfcastError(f"{self.name}: saved predictor is incomplete (missing {missing}); "
                                f"retrain it")
        self.encoder_ = PretrainedEncoder.from_tensors(tensors, dict(state["encoder"]))
        self.emb_scaler_ = FeatureScaler(as_numpy(tensors["emb_mean"]),
                                         as_numpy(tensors["emb_std"]))
        super()._set_state(tensors, state)


def _trim(meta: dict[str, Any]) -> dict[str, Any]:
    """The part of ``encoder.json`` a saved predictor keeps (no statistics, short history)."""
    keep = ("format", "method", "params", "in_dim", "graph_layout", "epoch", "corpus", "seconds")
    out = {k: meta[k] for k in keep if k in meta}
    hist = meta.get("history") or []
    if hist:
        out["final_loss"] = hist[-1].get("loss")
    return out
