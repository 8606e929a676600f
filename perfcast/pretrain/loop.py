"""The pre-training loop: minibatches of whole graphs, a checkpoint after every epoch, resume.

Determinism: epoch ``e`` seeds torch, Python's ``random`` (PyG's negative sampling draws from
it) and the graph shuffle from ``(seed, e)``, so a run resumed after epoch ``k`` gives the same
weights as an uninterrupted one (same threads). Python's ``random`` state is restored afterwards.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.pretrain import checkpoint as ckpt


@dataclass
class PretrainResult:
    out: str
    method: str
    epochs: int  # completed epochs (over all runs)
    epochs_run: int  # epochs this call trained
    final_loss: float | None
    seconds: float  # training time over all runs
    seconds_run: float
    graphs: int
    nodes: int
    encoder_mb: float  # size of encoder.safetensors
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _collate(graphs: list, ids: list[int], mean, std):
    """Standardised ``x``, message-passing edges (both directions), positive (directed) edges
    and the batch vector of graphs ``ids``."""
    import torch

    from perfcast.pretrain.checkpoint import collate, message_edges

    part = [graphs[i] for i in ids]
    x, mp, batch = collate([d.x for d in part], [message_edges(d.edge_index) for d in part])
    offsets = np.concatenate([[0], np.cumsum([int(d.x.shape[0]) for d in part])[:-1]]).tolist()
    pos = torch.cat([d.edge_index + o for d, o in zip(part, offsets)], dim=1)
    return (x.float() - mean) / std, mp, pos, batch


def pretrain(corpus, out: str | os.PathLike, *, method: str = "gae", hidden: int = 128,
             layers: int = 4, dropout: float | None = None, final_act: bool = True,
             mask_rate: float = 0.5, gamma: float = 2.0, epochs: int = 10, batch_size: int = 32,
             lr: float = 5e-4, seed: int = 0, limit: int | None = None, resume: bool = True,
             n_threads: int | None = None, workers: int = 1,
             progress: Callable[[int, int, dict], None] | None = None) -> PretrainResult:
    """Pre-train an encoder on an unlabeled corpus and checkpoint it in ``out``.

    ``corpus``: a corpus directory (:func:`~perfcast.pretrain.dataset.load_corpus`; ``limit``
    and ``workers`` apply) or an already loaded list of PyG ``Data``. ``method``: ``gae``
    (TraPPM) or ``graphmae``. ``hidden``: the embedding width c (paper 512; 128 by default for
    2 CPU cores); ``layers``, ``dropout`` (default 0.5 for gae, 0.2 for graphmae),
    ``final_act`` — see :mod:`perfcast.pretrain.models`. Adam(lr, betas (0.9, 0.999), eps 1e-8)
    on minibatches of ``batch_size`` whole graphs. ``epochs`` is the total: with ``resume`` and
    a checkpoint of the same architecture in ``out``, training continues from its last
    completed epoch (node statistics and the optimiser state are the checkpoint's);
    ``resume=False`` starts over. ``n_threads``: torch threads during the run (default:
    torch's). ``progress(done, total, info)`` counts graphs read (``info`` empty) while loading
    a corpus directory, then minibatches of the whole run (``info``: ``epoch``, ``epochs``,
    ``loss`` — running mean of the epoch).
    """
    import torch

    from perfcast.pretrain.dataset import load_corpus, node_stats
    from perfcast.pretrain.models import DEFAULT_DROPOUT, METHODS, build, gae_loss

    if method not in METHODS:
        raise PerfcastError(f"unknown pre-training method {method!r} (use {' or '.join(METHODS)})")
    for name, v in (("hidden", hidden), ("layers", layers), ("batch_size", batch_size)):
        if int(v) < 1:
            raise PerfcastError(f"{name} must be ≥ 1, got {v!r}")
    if int(epochs) < 0:
        raise PerfcastError(f"epochs must be ≥ 0, got {epochs!r}")
    if not (0.0 < float(mask_rate) < 1.0):
        raise PerfcastError(f"mask_rate must be in (0, 1), got {mask_rate!r}")
    if n_threads is not None and int(n_threads) < 1:
        raise PerfcastError(f"n_threads must be ≥ 1, got {n_threads!r}")
    if limit is not None and int(limit) < 1:
        raise PerfcastError(f"limit must be ≥ 1, got {limit!r}")
    if not (float(lr) > 0):
        raise PerfcastError(f"lr must be positive, got {lr!r}")
    dropout = DEFAULT_DROPOUT[method] if dropout is None else float(dropout)
    params = {"hidden": int(hidden), "layers": int(layers), "dropout": dropout,
              "final_act": bool(final_act), "lr": float(lr), "betas": [0.9, 0.999], "eps": 1e-8,
              "batch_size": int(batch_size), "seed": int(seed), "epochs": int(epochs)}
    if method == "graphmae":
        params.update(mask_rate=float(mask_rate), gamma=float(gamma))
    out = Path(out)

    prev = None
    if resume and (out / ckpt.META_FILE).exists():
        prev = ckpt.read_meta(out)
        if prev.get("method") != method:
            raise PerfcastError(f"{out} holds a {prev.get('method')!r} checkpoint, not {method!r}:"
                                f" use another --out or --no-resume")
        keys = ckpt.ARCH_KEYS + (("mask_rate", "gamma") if method == "graphmae" else ())
        old = prev["params"]
        diff = [f"{k}={old.get(k)!r}" for k in keys if old.get(k) != params[k]]
        if diff:
            raise PerfcastError(f"{out}: checkpoint was trained with {', '.join(diff)}; pass the "
                                f"same or --no-resume")

    if isinstance(corpus, (str, os.PathLike)):
        corpus_name = str(corpus)
        graphs = load_corpus(corpus, limit=limit, workers=workers,
                             progress=(lambda i, n: progress(i, n, {})) if progress else None)
    else:
        corpus_name = "<in memory>"
        graphs = [d for d in corpus if d.edge_index.numel()][:limit]
        if not graphs:
            raise PerfcastError("pre-training corpus has no graph with edges")
    in_dim = int(graphs[0].x.shape[1])
    n_nodes = int(sum(int(d.x.shape[0]) for d in graphs))
    if prev is not None and int(prev["in_dim"]) != in_dim:
        raise PerfcastError(f"{out}: checkpoint has {prev['in_dim']} node features, the corpus "
                            f"{in_dim}; --no-resume")

    old_threads = torch.get_num_threads()
    py_state = random.getstate()
    if n_threads:
        torch.set_num_threads(int(n_threads))
    try:
        torch.manual_seed(int(seed))
        model = build(method, in_dim, int(hidden), int(layers), dropout, bool(final_act),
                      float(mask_rate), float(gamma))
        opt = torch.optim.Adam(model.parameters(), lr=float(lr), betas=(0.9, 0.999), eps=1e-8)
        if prev is not None and int(prev.get("epoch", 0)) > 0:
            weights, opt_state, pretext = ckpt.read_checkpoint(out, prev)
            try:
                model.encoder.load_state_dict(weights)
                if pretext:
                    model.load_state_dict({**{f"encoder.{k}": v for k, v in weights.items()},
                                           **pretext})
                opt.load_state_dict(opt_state)
            except (RuntimeError, ValueError, KeyError) as exc:
                raise PerfcastError(f"{out}: checkpoint does not match the model ({exc}); "
                                    f"--no-resume") from None
            for g in opt.param_groups:
                g["lr"] = float(lr)
            mean = np.asarray(prev["node_mean"], np.float32)
            std = np.asarray(prev["node_std"], np.float32)
            history = list(prev.get("history", []))
            done = int(prev["epoch"])
            total_s = float(prev.get("seconds", 0.0))
        else:
            mean, std = node_stats(graphs)
            history, done, total_s = [], 0, 0.0
        tmean, tstd = torch.from_numpy(mean), torch.from_numpy(std)
        meta = {"format": ckpt.FORMAT, "method": method, "params": params, "in_dim": in_dim,
                "graph_layout": ckpt.graph_layout(), "feature_layout": _feature_layout(),
                "node_mean": mean.tolist(), "node_std": std.tolist(),
                "corpus": {"dir": corpus_name, "graphs": len(graphs), "nodes": n_nodes},
                "versions": _versions()}
        bs = int(batch_size)
        steps = (len(graphs) + bs - 1) // bs
        todo = max(0, int(epochs) - done)
        run_s = 0.0
        for ep in range(done, done + todo):
            t0 = time.perf_counter()
            torch.manual_seed(int(seed) * 1_000_003 + ep)
            random.seed(int(seed) * 1_000_003 + ep)
            perm = np.random.default_rng([int(seed), ep]).permutation(len(graphs))
            model.train()
            tot, cnt = 0.0, 0
            for s in range(steps):
                ids = perm[s * bs:(s + 1) * bs].tolist()
                x, mp, pos, batch = _collate(graphs, ids, tmean, tstd)
                if method == "gae":
                    loss = gae_loss(model, x, mp, pos, batch)
                else:
                    loss = model.loss(x, mp)
                opt.zero_grad()
                loss.backward()
                opt.step()
                lv = float(loss.detach())
                if not np.isfinite(lv):
                    raise PerfcastError(f"pre-training diverged at epoch {ep + 1} (loss {lv}); "
                                        f"lower --lr")
                tot += lv * len(ids)
                cnt += len(ids)
                if progress:
                    progress((ep - done) * steps + s + 1, todo * steps,
                             {"epoch": ep + 1, "epochs": int(epochs), "loss": tot / cnt})
            sec = time.perf_counter() - t0
            run_s += sec
            total_s += sec
            history.append({"epoch": ep + 1, "loss": tot / max(cnt, 1), "seconds": round(sec, 3),
                            "graphs": len(graphs)})
            meta.update(epoch=ep + 1, history=history, seconds=round(total_s, 3))
            model.eval()
            pretext = {k: v for k, v in model.state_dict().items() if not k.startswith("encoder.")}
            ckpt.write_checkpoint(out, meta, model.encoder, opt, pretext)
    finally:
        if n_threads:
            torch.set_num_threads(old_threads)
        random.setstate(py_state)
    wfile = out / ckpt.WEIGHTS_FILE
    return PretrainResult(
        out=str(out), method=method, epochs=len(history), epochs_run=todo,
        final_loss=history[-1]["loss"] if history else None, seconds=round(total_s, 3),
        seconds_run=round(run_s, 3), graphs=len(graphs), nodes=n_nodes,
        encoder_mb=round(wfile.stat().st_size / 2**20, 3) if wfile.exists() else 0.0,
        history=history)


def _feature_layout() -> str:
    from perfcast.features.records import FEATURE_LAYOUT_VERSION

    return FEATURE_LAYOUT_VERSION


def _versions() -> dict[str, str]:
    import torch

    from perfcast._version import __version__

    out = {"perfcast": __version__, "torch": torch.__version__}
    try:
        import torch_geometric

        out["torch_geometric"] = torch_geometric.__version__
    except ImportError:  # pragma: no cover
        pass
    return out
