"""The GNN+LLM recipe (thesis ch. 7.4.3): stage 1 and stage 2, ending in the shipped checkpoint.

    perfcast train --recipe gnnllm --out perfcast/predictors/shipped_encoders/gnnllm-stage2

1. **GNN pre-training** — GraphMAE (:func:`perfcast.pretrain.pretrain`, ``method="graphmae"``:
   GIN encoder 4 layers / width 128, 50 % of the nodes masked by a learnable token, GIN decoder,
   scaled cosine error) on the graphs of a corpus directory (any directory
   :func:`perfcast.pretrain.dataset.corpus_files` reads: ``index.csv`` + ``graphs/*.npz`` or a
   plain directory of ``.npz``). Default: the unlabeled 20k-graph corpus
   (:func:`perfcast.paths.corpus_dir`, built by ``benchmarks/build_trappm_corpus.sh``; the thesis
   pre-trained on 20,000 graphs), :data:`STAGE1_EPOCHS` epochs.
2. **Graph-text adaptation** — the thesis' "Summarise the graph" task on summaries generated
   from a seeded sample of :data:`STAGE2_GRAPHS` of the same graphs
   (:func:`perfcast.features.describe.summary`: nodes, edges, batch, GFLOPs, parameters, MACs,
   per-layer-type statistics). The GIN is frozen; the projection and
   the LoRA adapters train. The thesis' LM is a decoder trained by next-word cross-entropy;
   ours is an encoder (all-MiniLM-L6-v2, see :mod:`perfcast.predictors.gnnllm`), so the loss is
   **masked-token cross-entropy**: input ``[CLS] <graph> G </graph> summarise the graph [SEP]
   summary [SEP]``, a fraction of the summary's tokens replaced by ``[MASK]`` — every
   number-bearing word piece with probability :data:`P_NUMBER` (0.5), other words with
   :data:`P_WORD` (0.1), so the facts the graph token must carry (counts, FLOPs, parameters)
   are what is mostly asked — and the logits at the masked positions are BERT's MLM head
   shape: ``LayerNorm(GELU(W h + b)) @ Eᵀ + bias`` with ``E`` the LM's (frozen) word-embedding
   matrix, tied as in BERT (the packaged weights hold no MLM head: ``W``, ``b``, the
   LayerNorm and ``bias`` train here from scratch and are dropped afterwards).
3. **Performance fine-tuning** is ``GNNLLM.fit`` (:mod:`perfcast.predictors.gnnllm`), started
   from the checkpoint this module writes (``init="stage2"``).

The checkpoint (``gnnllm.json`` + ``gnnllm.safetensors``: GIN + node statistics + projection +
LoRA adapters, a few MB) is written with :func:`perfcast.paths.write_dir_atomically`: a
Ctrl-C leaves the previous one (stage 1 checkpoints every epoch in ``work`` and resumes).
Wall times of both stages are recorded in ``gnnllm.json`` (``stage1.seconds``,
``stage2.seconds``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError

COMMAND = ("perfcast train --recipe gnnllm --out "
           "perfcast/predictors/shipped_encoders/gnnllm-stage2")
STAGE2_PROMPT = "summarise the graph"
P_NUMBER = 0.5
P_WORD = 0.1
#: Summary length in stage 2 (the 6 most expensive operator types; ≤ 256 tokens in all).
STAGE2_LAYERS = 6
STAGE2_MAX_TOKENS = 256
_NUMERIC = re.compile(r"^(##)?[0-9.]+$")


def default_corpus() -> Path:
    """The unlabeled corpus (:func:`perfcast.paths.corpus_dir`)."""
    from perfcast.paths import corpus_dir

    return corpus_dir()


def torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def load_graphs(corpus: str | os.PathLike, limit: int | None = None,
                progress: Callable[[int, int], None] | None = None, workers: int = 1) -> list:
    """PyG ``Data`` (``x``, ``edge_index``, ``batch_size``) of a corpus directory's graphs with
    at least one edge (:func:`perfcast.pretrain.dataset.load_corpus`; one-line error naming how
    to build the default corpus when it is missing)."""
    from perfcast.pretrain.dataset import load_corpus

    root = Path(corpus)
    if not root.is_dir():
        raise PerfcastError(f"no graph corpus at {root}: build it with `nice -n 19 bash "
                            f"benchmarks/build_trappm_corpus.sh {root}` (≈ 2.5 h on 2 cores) or "
                            f"pass --corpus DIR (a perfcast corpus or a directory of graph .npz)")
    return load_corpus(root, limit, progress, workers=workers)


def stage1(graphs: list, work: Path, *, epochs: int = 10, seed: int = 0,
           progress: Callable[[int, int], None] | None = None):
    """GraphMAE pre-training of the GIN (resumable in ``work``); the frozen encoder."""
    from perfcast.pretrain import load_encoder, pretrain

    res = pretrain(graphs, work, method="graphmae", hidden=128, layers=4, epochs=int(epochs),
                   batch_size=32, lr=5e-4, seed=int(seed),
                   progress=(lambda i, n, info: progress(i, n)) if progress else None)
    return load_encoder(work), res


def _mask(ids: list[int], rng: np.random.Generator, tok) -> tuple[list[int], list[int]]:
    """``(masked ids, labels)`` (label −100 = not asked) of a summary's token ids."""
    pieces = tok.convert_ids_to_tokens(ids)
    out, lab = [], []
    for i, p in zip(ids, pieces):
        prob = P_NUMBER if _NUMERIC.match(p) else P_WORD
        if rng.random() < prob:
            out.append(tok.mask_token_id)
            lab.append(i)
        else:
            out.append(i)
            lab.append(-100)
    if all(v == -100 for v in lab) and ids:  # at least one question per summary
        j = int(rng.integers(len(ids)))
        out[j], lab[j] = tok.mask_token_id, ids[j]
    return out, lab


def stage2(graphs: list, encoder, out: str | os.PathLike, *, lora_rank: int = 8,
           epochs: int = 1, batch_size: int = 8, lr: float = 5e-4, seed: int = 0,
           stage1_info: dict[str, Any] | None = None,
           progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Graph-text adaptation (module doc) from the frozen stage-1 ``encoder``
    (:class:`~perfcast.pretrain.checkpoint.PretrainedEncoder`); writes the checkpoint to
    ``out`` and returns its metadata."""
    import torch
    from torch import nn

    from perfcast.features.describe import summary
    from perfcast.paths import write_dir_atomically
    from perfcast.predictors import gnnllm as G
    from perfcast.predictors import minilm as M
    from perfcast.pretrain.checkpoint import collate, message_edges

    t0 = time.perf_counter()
    torch.manual_seed(int(seed))
    rng = np.random.default_rng(int(seed))
    tok = G.tokenizer()
    gin_meta = {k: encoder.meta[k] for k in ("format", "method", "params", "in_dim",
                                             "graph_layout") if k in encoder.meta}
    gin_meta["random"] = bool(encoder.meta.get("random", False))
    net = G.build_net(gin_meta, int(lora_rank), 0, encoder.node_mean, encoder.node_std)
    net.gin.load_state_dict(encoder.module.state_dict())
    for q in net.gin.parameters():
        q.requires_grad_(False)
    emb = net.word_embeddings()
    mlm = nn.Sequential(nn.Linear(G.LM_DIM, G.LM_DIM), nn.GELU(), nn.LayerNorm(G.LM_DIM, eps=1e-12))
    mlm_bias = nn.Parameter(torch.zeros(emb.weight.shape[0]))
    params = list(net.proj.parameters()) + [q for q in net.lm.parameters() if q.requires_grad] \
        + list(mlm.parameters()) + [mlm_bias]
    opt = torch.optim.Adam(params, lr=float(lr))
    pre, post = G.graph_prefix_ids()
    gpos = len(pre)
    q = tok.encode(STAGE2_PROMPT, add_special_tokens=False)
    head = pre + [tok.pad_token_id] + post + q + [tok.sep_token_id]
    room = STAGE2_MAX_TOKENS - len(head) - 1
    answers = [tok.encode(summary(d, getattr(d, "batch_size", None), STAGE2_LAYERS),
                          add_special_tokens=False)[:room] for d in graphs]
    eis = [message_edges(d.edge_index.long()) for d in graphs]
    bs = int(batch_size)
    steps = (len(graphs) + bs - 1) // bs
    history = []
    done = 0
    for ep in range(int(epochs)):
        net.train()
        net.gin.eval()  # frozen: BatchNorm statistics and dropout of stage 1 as they are
        perm = rng.permutation(len(graphs))
        tot = cnt = 0.0
        for s in range(steps):
            ids_ = perm[s * bs:(s + 1) * bs].tolist()
            seqs, labels = [], []
            for i in ids_:
                m, lab = _mask(answers[i], rng, tok)
                seqs.append(head + m + [tok.sep_token_id])
                labels.append([-100] * len(head) + lab + [-100])
            ids, attn = G.pad(seqs)
            lab_t = torch.full(ids.shape, -100, dtype=torch.long)
            for j, lab in enumerate(labels):
                lab_t[j, :len(lab)] = torch.as_tensor(lab)
            tt = torch.zeros_like(ids)
            tt[:, len(head):] = 1  # the answer is BERT's second segment
            x, ei, batch = collate([graphs[i].x.float() for i in ids_], [eis[i] for i in ids_])
            gtok = net.graph_tokens(x, ei, batch, len(ids_))
            hidden = net.encode(ids, attn, gtok, gpos, token_type=tt)
            sel = lab_t != -100
            logits = mlm(hidden[sel]) @ emb.weight.T + mlm_bias
            loss = nn.functional.cross_entropy(logits, lab_t[sel])
            opt.zero_grad()
            loss.backward()
            opt.step()
            n_q = int(sel.sum())
            tot += float(loss.detach()) * n_q
            cnt += n_q
            done += 1
            if progress:
                progress(done, steps * int(epochs))
        history.append({"epoch": ep + 1, "loss": tot / max(cnt, 1), "masked_tokens": int(cnt)})
    seconds = time.perf_counter() - t0
    net.eval()
    tensors = {k: v.contiguous() for k, v in G.trainable_state(net).items()}
    meta = {"format": G.STAGE2_FORMAT, "lm": {k: v for k, v in G.lm_info().items() if k != "dir"},
            "gin": gin_meta, "lora_rank": int(lora_rank), "lora_targets": list(M.LORA_TARGETS),
            "stage1": stage1_info or {},
            "stage2": {"graphs": len(graphs), "epochs": int(epochs), "batch_size": bs,
                       "lr": float(lr), "seed": int(seed), "steps": done,
                       "prompt": STAGE2_PROMPT, "max_tokens": STAGE2_MAX_TOKENS,
                       "summary_layers": STAGE2_LAYERS,
                       "masking": {"number_pieces": P_NUMBER, "other_pieces": P_WORD},
                       "history": history, "seconds": round(seconds, 1),
                       "torch_threads": torch_threads()},
            "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}

    def fill(tmp: Path) -> None:
        from safetensors.torch import save_file

        save_file(tensors, str(tmp / G.STAGE2_WEIGHTS), metadata={"format": G.STAGE2_FORMAT})
        (tmp / G.STAGE2_META).write_text(json.dumps(meta, indent=1))
        for f in tmp.iterdir():  # package data: readable by everyone
            f.chmod(0o644)
        tmp.chmod(0o755)

    write_dir_atomically(out, fill)
    return meta


#: Stage-2 graphs: a seeded sample of the corpus (the thesis' 20,000 prompts would take ≈ 95 min
#: of the 2 h budget here — 0.29 s per summary on one core).
STAGE2_GRAPHS = 6000
#: Stage-1 epochs over the whole corpus (the thesis ran up to 500 on its 20,000 graphs).
STAGE1_EPOCHS = 10


def train_gnnllm(out: str | os.PathLike | None = None, *, corpus: str | os.PathLike | None = None,
                 work: str | os.PathLike | None = None, stage1_epochs: int = STAGE1_EPOCHS,
                 stage2_epochs: int = 1, stage2_graphs: int | None = STAGE2_GRAPHS,
                 limit: int | None = None, pretrained_gin: bool = True, seed: int = 0,
                 resume: bool = True, workers: int = 2,
                 progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Stages 1 and 2 (module doc) → the stage-2 checkpoint in ``out`` (default
    ``<data home>/models/gnnllm-stage2``). ``corpus``: default :func:`default_corpus` (the
    20k-graph corpus); stage 1 reads all of it (``limit``: its first graphs), stage 2 a seeded
    sample of ``stage2_graphs`` of them (``None``: all). ``work``: stage 1's resumable
    checkpoint (default: per corpus, in the cache). ``pretrained_gin=False``: stage 2 on a
    random frozen GIN (the "LLM_PRE + GNN" ablation of Table 7.5; stage 1 is skipped)."""
    import hashlib

    from perfcast.paths import cache_dir, data_home

    for name, v in (("stage1_epochs", stage1_epochs), ("stage2_epochs", stage2_epochs)):
        if int(v) < 0:
            raise PerfcastError(f"{name} must be ≥ 0, got {v!r}")
    if stage2_graphs is not None and int(stage2_graphs) < 1:
        raise PerfcastError(f"stage2_graphs must be ≥ 1, got {stage2_graphs!r}")
    corpus = Path(corpus) if corpus else default_corpus()
    out = Path(out) if out else data_home() / "models" / "gnnllm-stage2"
    if work is None:
        tag = hashlib.sha1(f"{corpus.resolve()}|{limit}".encode()).hexdigest()[:10]
        work = cache_dir().parent / "gnnllm" / f"stage1-{tag}"
    work = Path(work)
    prog = progress or (lambda *a: None)
    t0 = time.perf_counter()
    graphs = load_graphs(corpus, limit, lambda i, n: prog("loading graphs", i, n), workers)
    load_s = time.perf_counter() - t0
    if pretrained_gin:
        if not resume and work.exists():
            import shutil

            shutil.rmtree(work)
        t1 = time.perf_counter()
        enc, res = stage1(graphs, work, epochs=stage1_epochs, seed=seed,
                          progress=lambda i, n: prog("stage 1: GraphMAE pre-training", i, n))
        info = {"corpus": str(corpus), "graphs": len(graphs), "epochs": res.epochs,
                "final_loss": res.final_loss, "seconds": res.seconds,
                "seconds_this_run": round(time.perf_counter() - t1, 1), "method": "graphmae",
                "torch_threads": torch_threads()}
    else:
        from perfcast.pretrain import node_stats, random_encoder

        mean, std = node_stats(graphs)
        enc = random_encoder("graphmae", int(graphs[0].x.shape[1]), 128, 4, mean, std, seed=seed)
        info = {"corpus": str(corpus), "graphs": len(graphs), "random": True, "seconds": 0.0}
    info["load_seconds"] = round(load_s, 1)
    s2 = graphs
    if stage2_graphs is not None and int(stage2_graphs) < len(graphs):
        pick = np.sort(np.random.default_rng(seed).choice(len(graphs), int(stage2_graphs),
                                                          replace=False))
        s2 = [graphs[i] for i in pick.tolist()]
    meta = stage2(s2, enc, out, epochs=stage2_epochs, seed=seed, stage1_info=info,
                  progress=lambda i, n: prog("stage 2: graph-text adaptation", i, n))
    return {"path": str(out), "graphs": len(graphs), "stage2_graphs": len(s2),
            "load_seconds": round(load_s, 1), "stage1_seconds": info["seconds"],
            "stage2_seconds": meta["stage2"]["seconds"],
            "seconds": round(time.perf_counter() - t0, 1), "meta": meta}
