"""On-disk graph cache.

Graphs are keyed by (model spec, batch size, input shape, sequence length, mode, precision,
optimizer, perfcast graph format, torch/timm/transformers/onnx versions and — for files — the
file's size and modification time). Location: ``$PERFCAST_CACHE_DIR`` or
``~/.cache/perfcast/graphs``. Entries are written atomically (see ``ModelGraph.save``).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.frontends import GraphRequest, build_graph, split_spec
from perfcast.graph import GRAPH_FORMAT_VERSION, ModelGraph


def cache_dir() -> Path:
    root = os.environ.get("PERFCAST_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "perfcast" / "graphs"


@lru_cache(maxsize=1)
def _versions() -> tuple[str, ...]:
    out = []
    for pkg in ("torch", "timm", "transformers", "onnx", "perfcast"):
        try:
            out.append(f"{pkg}={metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            out.append(f"{pkg}=none")
    return tuple(out)


def cache_key(req: GraphRequest) -> str:
    """Stable hex key of a graph request (cheap: imports no framework)."""
    kind, rest = split_spec(req.spec)
    file_id = None
    if kind == "onnx" or (kind == "hf" and Path(rest).exists()):
        p = Path(rest)
        if p.is_dir():
            p = p / "config.json"
        if p.exists():
            st = p.stat()
            file_id = [str(p.resolve()), st.st_size, st.st_mtime_ns]
    doc = {"spec": req.spec.strip(), "kind": kind, "batch": req.batch_size,
           "input": list(req.input_size) if req.input_size else None, "seq": req.seq_len,
           "mode": req.mode, "precision": req.precision,
           "optimizer": req.optimizer if req.mode == "train" else None,
           "format": GRAPH_FORMAT_VERSION, "versions": _versions(), "file": file_id}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]


def cache_path(req: GraphRequest) -> Path:
    """Where the graph of ``req`` is (or would be) cached."""
    return cache_dir() / f"{cache_key(req)}.npz"


def get_graph(req: GraphRequest, use_cache: bool = True) -> ModelGraph:
    """Return the graph for ``req``, from the cache when present (and store it when built)."""
    req.validate()
    path = cache_path(req)
    if use_cache and path.exists():
        try:
            return ModelGraph.load(path)
        except PerfcastError:
            path.unlink(missing_ok=True)  # stale or corrupt entry: rebuild
    graph = build_graph(req)
    if use_cache:
        try:
            graph.save(path)
        except OSError:
            pass  # a read-only cache must not stop the user
    return graph
