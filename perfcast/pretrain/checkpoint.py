"""Encoder checkpoints: ``encoder.json`` + ``encoder.safetensors`` + ``optimizer.safetensors``.

* ``encoder.json`` — ``format``, ``method``, ``params`` (architecture and training
  hyper-parameters), ``in_dim``, ``graph_layout`` (the node-matrix layout,
  :data:`perfcast.features.encode.GRAPH_LAYOUT_VERSION`) and ``feature_layout`` (the
  predictors' layout at pre-training time, informative), ``node_mean`` / ``node_std`` (the
  corpus standardisation, applied inside :meth:`PretrainedEncoder.embed`), ``epoch`` (completed
  epochs), ``history`` (per epoch: ``loss``, ``seconds``, ``graphs``), ``corpus``
  (``dir``, ``graphs``, ``nodes``), ``seconds`` (total training time over all runs), versions.
* ``encoder.safetensors`` — the encoder's ``state_dict`` (weights and BatchNorm statistics),
  all that is needed downstream: read by :mod:`perfcast.predictors.encoder` (the runtime side:
  the encoder's architecture, :func:`~perfcast.predictors.encoder.load_encoder`, the shipped
  encoder), whose names this module re-exports for the pre-training code.
* ``optimizer.safetensors`` — what only resuming needs: Adam's state flattened
  (``optim.<param>.<key>``; ``param_groups`` as JSON in the file metadata) and the pretext-task
  weights that are not part of the encoder (GraphMAE's mask token, projection and decoder,
  ``pretext.*``).

Every file carries the epoch in its metadata and is written to a temporary file and renamed
into place, ``encoder.json`` last, with SIGINT/SIGTERM held back until the set is complete: an
interrupted run leaves the previous complete checkpoint; a mismatch (a hard kill between two
renames) is detected on resume. No pickle.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.predictors.encoder import (  # noqa: F401  (the pre-training code's names)
    ARCH_KEYS,
    FORMAT,
    META_FILE,
    WEIGHTS_FILE,
    PretrainedEncoder,
    build_encoder,
    collate,
    graph_layout,
    load_encoder,
    message_edges,
    random_encoder,
    read_meta,
    read_tensors,
)

OPTIM_FILE = "optimizer.safetensors"


@contextlib.contextmanager
def _signals_held():
    """Defer SIGINT / SIGTERM until the block is done (then raise KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if got:
            raise KeyboardInterrupt


def write_checkpoint(out: Path, meta: dict[str, Any], encoder, optimizer, pretext: dict) -> None:
    """Write the three files (module doc); ``pretext``: name → tensor of non-encoder weights."""
    from safetensors.torch import save_file

    from perfcast.paths import write_file_atomically

    out.mkdir(parents=True, exist_ok=True)
    epoch = str(meta["epoch"])
    weights = {k: v.detach().contiguous() for k, v in encoder.state_dict().items()}
    sd = optimizer.state_dict()
    opt = {f"optim.{i}.{k}": v.detach().contiguous() for i, st in sd["state"].items()
           for k, v in st.items()}
    opt.update({f"pretext.{k}": v.detach().contiguous() for k, v in pretext.items()})
    groups = json.dumps(sd["param_groups"])
    with _signals_held():
        write_file_atomically(out / OPTIM_FILE, lambda p: save_file(
            opt, p, metadata={"format": FORMAT, "epoch": epoch, "param_groups": groups}))
        write_file_atomically(out / WEIGHTS_FILE, lambda p: save_file(
            weights, p, metadata={"format": FORMAT, "epoch": epoch, "method": meta["method"],
                                  "graph_layout": meta["graph_layout"]}))
        write_file_atomically(out / META_FILE, json.dumps(meta, indent=1))


def read_checkpoint(path: Path, meta: dict[str, Any]):
    """``(encoder_state, optimizer_state_dict, pretext)`` of a checkpoint whose files agree on
    the epoch."""
    weights, wmd = read_tensors(path / WEIGHTS_FILE)
    opt, omd = read_tensors(path / OPTIM_FILE)
    epoch = str(meta["epoch"])
    if wmd.get("epoch") != epoch or omd.get("epoch") != epoch:
        raise PerfcastError(f"{path}: checkpoint files disagree (epochs {epoch}, "
                            f"{wmd.get('epoch')}, {omd.get('epoch')}): the run was killed while "
                            f"saving; restart with --no-resume")
    state: dict[int, dict[str, Any]] = {}
    pretext = {}
    for k, v in opt.items():
        if k.startswith("optim."):
            _, i, key = k.split(".", 2)
            state.setdefault(int(i), {})[key] = v
        elif k.startswith("pretext."):
            pretext[k[len("pretext."):]] = v
    return weights, {"state": state, "param_groups": json.loads(omd["param_groups"])}, pretext
