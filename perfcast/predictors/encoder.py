"""The pre-trained graph encoder as ``trappm`` and ``gnnllm`` use it to answer: its architecture,
its checkpoint read frozen, and the encoder that ships with perfcast.

An encoder directory holds ``encoder.json`` (``format``, ``method``, ``params`` — the
architecture's ``hidden``, ``layers``, ``dropout``, ``final_act`` — ``in_dim``, ``graph_layout``
(:data:`perfcast.features.encode.GRAPH_LAYOUT_VERSION`), ``node_mean`` / ``node_std``, …) and
``encoder.safetensors`` (the encoder's ``state_dict``). :func:`load_encoder` returns the frozen
:class:`PretrainedEncoder` whose ``embed(x, edge_index, batch, num_graphs)`` gives sum-pooled
graph embeddings. The shipped encoder is ``shipped_encoders/corpus-gae-c128`` beside this module
(``trappm``'s default ``encoder="shipped"``); the shipped GNN+LLM stage-2 checkpoint is
``shipped_encoders/gnnllm-stage2`` (:mod:`perfcast.predictors.gnnllm`).

Writing checkpoints, the pretext tasks and the corpus are research code (:mod:`perfcast.pretrain`,
``perfcast pretrain``), which imports this module, never the other way round. Nothing here
imports torch at module level; :mod:`perfcast.predictors.encoder_net` holds the torch module.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.paths import package_data

FORMAT = "perfcast-encoder/1"
META_FILE = "encoder.json"
WEIGHTS_FILE = "encoder.safetensors"
#: Hyper-parameters that fix the encoder's architecture.
ARCH_KEYS = ("hidden", "layers", "dropout", "final_act")
#: Convolution of each pre-training method's encoder (GraphSAGE for TraPPM's GAE, GIN for
#: GraphMAE).
METHOD_CONV = {"gae": "sage", "graphmae": "gin"}
#: Default dropout per method (TraPPM: 0.5; GraphMAE's feature dropout: 0.2).
DEFAULT_DROPOUT = {"gae": 0.5, "graphmae": 0.2}

#: The encoder that ships with perfcast (``trappm``'s default ``encoder="shipped"``), relative to
#: the perfcast package; written by ``benchmarks/trappm_pretrain.sh``.
SHIPPED_ENCODER = ("predictors", "shipped_encoders", "corpus-gae-c128")


def shipped_encoder_dir() -> Path:
    """Directory of the shipped pre-trained encoder (``encoder.json`` + ``encoder.safetensors``)."""
    d = package_data(*SHIPPED_ENCODER)
    if not (d / META_FILE).exists():
        raise PerfcastError(f"the shipped encoder is missing ({d}); reinstall perfcast or give "
                            f"trappm an encoder directory (perfcast pretrain --out DIR)")
    return d


def import_pyg_quietly():
    """:func:`perfcast.features.pyg.import_pyg` without torch_geometric's import-time
    ``torch.jit.script`` deprecation warnings."""
    import warnings

    from perfcast.features.pyg import import_pyg

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=FutureWarning)
        import_pyg()
        import torch_geometric.nn  # noqa: F401  (where the warnings come from)


def graph_layout() -> str:
    from perfcast.features.encode import GRAPH_LAYOUT_VERSION

    return GRAPH_LAYOUT_VERSION


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """``encoder.json`` of an encoder directory, checked for format and graph layout."""
    path = Path(path)
    mpath = path / META_FILE
    if not mpath.exists():
        raise PerfcastError(f"{path}: not a pre-trained encoder (no {META_FILE}; "
                            f"make one with perfcast pretrain)")
    try:
        meta = json.loads(mpath.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PerfcastError(f"{mpath}: unreadable encoder metadata ({exc})") from None
    if meta.get("format") != FORMAT:
        raise PerfcastError(f"{path}: encoder format {meta.get('format')!r}, this perfcast "
                            f"reads {FORMAT!r} — retrain it (perfcast pretrain)")
    if meta.get("graph_layout") != graph_layout():
        raise PerfcastError(f"{path}: encoder was pre-trained on node-feature layout "
                            f"{meta.get('graph_layout')!r}, this perfcast computes "
                            f"{graph_layout()!r} — retrain it (perfcast pretrain)")
    return meta


def read_tensors(path: Path):
    """``(tensors, metadata)`` of a safetensors file of a checkpoint."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_file

    if not path.exists():
        raise PerfcastError(f"{path} is missing; re-run perfcast pretrain (--no-resume)")
    try:
        with safe_open(str(path), "pt") as f:
            md = f.metadata() or {}
        return load_file(str(path)), md
    except (SafetensorError, OSError) as exc:
        raise PerfcastError(f"{path}: corrupt checkpoint file ({exc})") from None


class PretrainedEncoder:
    """A frozen encoder (eval mode) with its node standardisation and metadata.

    ``embed(x, edge_index, batch, num_graphs)`` → ``[num_graphs, dim]`` sum-pooled node
    embeddings of a collated disjoint union: ``x`` the *raw* node matrices (standardised here
    with the corpus statistics), ``edge_index`` the message-passing edges — the data-flow edges
    in both directions, as in pre-training (:func:`message_edges`). :meth:`embed_numpy` gives
    one graph's embedding in numpy (:mod:`perfcast.predictors.numpy_gnn`), what a saved
    ``trappm`` answers with: loaded from its weights (:meth:`from_tensors`) the encoder holds
    numpy arrays and builds its torch ``module`` only when asked for.
    """

    def __init__(self, module, node_mean: np.ndarray, node_std: np.ndarray,
                 meta: dict[str, Any], weights: dict[str, np.ndarray] | None = None) -> None:
        self._module = None
        self._weights = weights
        if module is not None:
            self.module = module
        self.node_mean = np.asarray(node_mean, np.float32)
        self.node_std = np.asarray(node_std, np.float32)
        self.meta = meta

    @property
    def module(self):
        """The frozen torch module (built from the numpy weights on first use)."""
        if self._module is None:
            import torch

            module = build_encoder(self.meta)
            try:
                module.load_state_dict({k: torch.from_numpy(np.array(v))
                                        for k, v in (self._weights or {}).items()})
            except RuntimeError as exc:
                raise PerfcastError(f"encoder weights do not match its architecture ({exc}); "
                                    f"retrain it") from None
            self.module = module
        return self._module

    @module.setter
    def module(self, module) -> None:
        self._module = module.eval()
        for p in self._module.parameters():
            p.requires_grad_(False)
        self._weights = None

    def numpy_weights(self) -> dict[str, np.ndarray]:
        """The encoder's ``state_dict`` as numpy arrays."""
        if self._module is not None:
            return {k: v.detach().cpu().numpy() for k, v in self._module.state_dict().items()}
        return dict(self._weights or {})

    def embed_numpy(self, x, edge_index) -> np.ndarray:
        """``[dim]`` sum-pooled embedding of one graph in numpy: ``x`` its raw node matrix,
        ``edge_index`` its message-passing edges (both directions) — :meth:`embed` of that
        graph alone."""
        from perfcast.predictors.numpy_gnn import encoder_nodes

        p = self.meta["params"]
        layers = int(p["layers"])
        xs = (np.asarray(x, np.float32) - self.node_mean) / self.node_std
        z = encoder_nodes(xs.astype(np.float32), np.asarray(edge_index, np.int64), self._np_sd(),
                          METHOD_CONV[self.meta["method"]], layers,
                          layers if bool(p["final_act"]) else layers - 1)
        return z.sum(0, dtype=np.float32)

    def _np_sd(self) -> dict[str, np.ndarray]:
        if self._module is not None:
            return self.numpy_weights()
        if not hasattr(self, "_sd32"):
            self._sd32 = {k: np.asarray(v, np.float32) for k, v in (self._weights or {}).items()}
        return self._sd32

    @property
    def method(self) -> str:
        return self.meta["method"]

    @property
    def dim(self) -> int:
        return int(self.meta["params"]["hidden"])

    @property
    def in_dim(self) -> int:
        return int(self.meta["in_dim"])

    def embed(self, x, edge_index, batch, num_graphs: int):
        import torch
        from torch_geometric.utils import scatter

        mean, std = torch.from_numpy(self.node_mean), torch.from_numpy(self.node_std)
        with torch.no_grad():
            z = self.module((x.float() - mean) / std, edge_index)
            return scatter(z, batch, dim=0, dim_size=num_graphs, reduce="sum")

    def embed_graphs(self, graphs: list, chunk: int = 64):
        """``[len(graphs), dim]`` embeddings of PyG graphs (``x``, directed ``edge_index``)."""
        import torch

        out = []
        for b in range(0, len(graphs), chunk):
            part = graphs[b:b + chunk]
            x, ei, batch = collate([d.x for d in part], [message_edges(d.edge_index) for d in part])
            out.append(self.embed(x, ei, batch, len(part)))
        return torch.cat(out) if out else torch.zeros(0, self.dim)

    def tensors(self) -> dict[str, Any]:
        """Weights and node statistics (to embed the encoder in a predictor's file)."""
        t = {f"encoder.{k}": v for k, v in self.numpy_weights().items()}
        t.update({"encoder_node_mean": self.node_mean, "encoder_node_std": self.node_std})
        return t

    @classmethod
    def from_tensors(cls, tensors: dict[str, Any], meta: dict[str, Any]) -> PretrainedEncoder:
        """Inverse of :meth:`tensors` (``meta`` as in ``encoder.json``, at least ``method``,
        ``params``, ``in_dim``): the weights kept as numpy arrays (torch tensors or numpy
        arrays given), checked against the architecture; no torch module is built."""
        from perfcast.predictors.numpy_gnn import check_weights

        if meta.get("method") not in METHOD_CONV:
            raise PerfcastError(f"unknown encoder method {meta.get('method')!r}")
        sd = {k[len("encoder."):]: _np(v) for k, v in tensors.items()
              if k.startswith("encoder.")}
        try:
            check_weights("encoder", sd, encoder_shapes(meta))
        except PerfcastError as exc:
            raise PerfcastError(f"{exc}; retrain it") from None
        return cls(None, _np(tensors["encoder_node_mean"]), _np(tensors["encoder_node_std"]),
                   meta, weights=sd)

    def __repr__(self) -> str:
        return (f"PretrainedEncoder(method={self.method!r}, dim={self.dim}, "
                f"epoch={self.meta.get('epoch')})")


def _np(v) -> np.ndarray:
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def encoder_shapes(meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The ``state_dict`` shapes of :class:`~perfcast.predictors.encoder_net.Encoder` for
    ``meta`` (what :meth:`PretrainedEncoder.from_tensors` checks a checkpoint against)."""
    p = meta["params"]
    layers, hidden, in_dim = int(p["layers"]), int(p["hidden"]), int(meta["in_dim"])
    dims = [in_dim] + [2 * hidden if (i == 0 and layers > 1) else hidden for i in range(layers)]
    out: dict[str, tuple[int, ...]] = {}
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        c = f"convs.{i}"
        if METHOD_CONV[meta["method"]] == "sage":
            out.update({f"{c}.lin_l.weight": (b, a), f"{c}.lin_l.bias": (b,),
                        f"{c}.lin_r.weight": (b, a)})
        else:
            out.update({f"{c}.eps": (1,), f"{c}.nn.0.weight": (b, a), f"{c}.nn.0.bias": (b,),
                        f"{c}.nn.2.weight": (b, b), f"{c}.nn.2.bias": (b,)})
    n_norm = layers if bool(p["final_act"]) else layers - 1
    for i, b in enumerate(dims[1:1 + n_norm]):
        out.update({f"norms.{i}.{k}": (b,) for k in ("weight", "bias", "running_mean",
                                                    "running_var")})
        out[f"norms.{i}.num_batches_tracked"] = ()
    return out


def build_encoder(meta: dict[str, Any]):
    """An (untrained) encoder module of the architecture ``meta`` describes."""
    from perfcast.predictors.encoder_net import Encoder

    p = meta["params"]
    if meta.get("method") not in METHOD_CONV:
        raise PerfcastError(f"unknown encoder method {meta.get('method')!r}")
    return Encoder(int(meta["in_dim"]), int(p["hidden"]), int(p["layers"]),
                   METHOD_CONV[meta["method"]], float(p["dropout"]), bool(p["final_act"]))


def random_encoder(method: str, in_dim: int, hidden: int, layers: int, node_mean, node_std,
                   seed: int = 0, final_act: bool = True) -> PretrainedEncoder:
    """A randomly initialised (seeded) frozen encoder of ``method``'s architecture — the
    "random encoder" ablation."""
    import torch

    if method not in DEFAULT_DROPOUT:
        raise PerfcastError(f"unknown encoder method {method!r} (use gae or graphmae)")
    meta = {"format": FORMAT, "method": method, "random": True, "in_dim": int(in_dim),
            "graph_layout": graph_layout(), "epoch": 0, "seed": int(seed),
            "params": {"hidden": int(hidden), "layers": int(layers),
                       "dropout": DEFAULT_DROPOUT[method], "final_act": bool(final_act)}}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        module = build_encoder(meta)
    return PretrainedEncoder(module, node_mean, node_std, meta)


def load_encoder(path: str | os.PathLike) -> PretrainedEncoder:
    """The encoder of a ``perfcast pretrain`` output directory (``encoder.json`` +
    ``encoder.safetensors``)."""
    path = Path(path)
    meta = read_meta(path)
    weights, _ = read_tensors(path / WEIGHTS_FILE)
    tensors = {f"encoder.{k}": v for k, v in weights.items()}
    tensors["encoder_node_mean"] = np.asarray(meta["node_mean"], np.float32)
    tensors["encoder_node_std"] = np.asarray(meta["node_std"], np.float32)
    return PretrainedEncoder.from_tensors(tensors, meta)


def message_edges(edge_index):
    """Directed data-flow edges → message-passing edges (both directions)."""
    import torch

    return torch.cat([edge_index, edge_index.flip(0)], dim=1) if edge_index.numel() else edge_index


def collate(xs: list, eis: list):
    """Disjoint union ``(x, edge_index, batch)`` of per-graph node matrices and edge lists
    (edges stay grouped by graph, in order)."""
    import torch

    sizes = [int(x.shape[0]) for x in xs]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    ei = torch.cat([e + o for e, o in zip(eis, offsets)], dim=1)
    batch = torch.repeat_interleave(torch.arange(len(xs)), torch.as_tensor(sizes))
    return torch.cat(xs, dim=0), ei, batch


__all__ = ["ARCH_KEYS", "DEFAULT_DROPOUT", "FORMAT", "META_FILE", "METHOD_CONV",
           "PretrainedEncoder", "SHIPPED_ENCODER", "WEIGHTS_FILE", "build_encoder", "collate",
           "graph_layout", "import_pyg_quietly", "load_encoder", "message_edges", "random_encoder",
           "read_meta", "read_tensors", "shipped_encoder_dir"]
