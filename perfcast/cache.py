"""On-disk graph cache.

Graphs are keyed by :meth:`perfcast.workload.Workload.key` (model spec, batch size, input shape,
sequence length, mode, precision, optimizer, perfcast graph format, torch/timm/transformers/onnx
versions and — for files — the file's size and modification time). Location:
:func:`perfcast.paths.cache_dir`. Entries are written atomically (see ``ModelGraph.save``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.frontends import build_graph
from perfcast.graph import ModelGraph
from perfcast.paths import cache_dir
from perfcast.workload import Workload


def cache_path(workload: Workload) -> Path:
    """Where the graph of ``workload`` is (or would be) cached."""
    return cache_dir() / f"{workload.key()}.npz"


#: Graph building (torch.export, dynamo) is not thread-safe: threads of one process (``perfcast
#: serve``, the Gradio page) build one graph at a time; cached graphs load concurrently.
_BUILD_LOCK = threading.RLock()

#: Graphs kept in memory (:func:`keep_warm`): cache file → ((mtime_ns, size), graph), most
#: recently used last. Off (0) unless a long-running process asks for it.
_WARM: OrderedDict = OrderedDict()
_WARM_MAX = [0]
_WARM_LOCK = threading.Lock()


def keep_warm(graphs: int) -> None:
    """Keep the ``graphs`` most recently used cached graphs in memory (``perfcast serve``
    does): a request for one of them skips reading its file while the file is unchanged
    (same modification time and size). The graphs are shared — callers treat them as read-only
    (every perfcast caller does). ``0`` turns it off."""
    with _WARM_LOCK:
        _WARM_MAX[0] = max(0, int(graphs))
        while len(_WARM) > _WARM_MAX[0]:
            _WARM.popitem(last=False)


def get_graph(workload: Workload, use_cache: bool = True) -> ModelGraph:
    """The graph of ``workload``, from the cache when present (and stored when built). In-process
    ``nn.Module`` workloads are never cached. Thread-safe (builds are serialised)."""
    workload.validate()
    if not workload.model.cacheable:
        with _BUILD_LOCK:
            return build_graph(workload)
    path = cache_path(workload)
    graph = _load(path) if use_cache else None
    if graph is not None:
        return graph
    with _BUILD_LOCK:
        graph = _load(path) if use_cache else None  # another thread may have built it
        if graph is None:
            graph = _build_and_store(workload, path, use_cache)
    return graph


def _load(path: Path) -> ModelGraph | None:
    """The cached graph at ``path``, ``None`` when absent or unreadable (then removed)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    if _WARM_MAX[0]:
        with _WARM_LOCK:
            hit = _WARM.get(path)
            if hit is not None and hit[0] == stamp:
                _WARM.move_to_end(path)
                return hit[1]
    try:
        graph = ModelGraph.load(path)
    except FileNotFoundError:
        return None
    except PerfcastError as exc:  # stale or damaged entry: remove it, rebuild, say so
        path.unlink(missing_ok=True)
        logging.getLogger("perfcast").warning(
            "graph cache entry %s was unreadable (%s): removed and rebuilt", path.name,
            str(exc).split(" (", 1)[-1].rstrip(")")[:120])
        return None
    if _WARM_MAX[0]:
        with _WARM_LOCK:
            _WARM[path] = (stamp, graph)
            _WARM.move_to_end(path)
            while len(_WARM) > _WARM_MAX[0]:
                _WARM.popitem(last=False)
    return graph


def _build_and_store(workload: Workload, path: Path, use_cache: bool) -> ModelGraph:
    graph = build_graph(workload)
    if use_cache:
        try:
            graph.save(path)
        except OSError:
            pass  # a read-only cache must not stop the user
    return graph


__all__ = ["cache_dir", "cache_path", "get_graph", "keep_warm"]
