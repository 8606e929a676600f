"""The unlabeled corpus as pre-training data: node matrices and edges, nothing else.

``load_corpus(dir)`` reads ``<dir>/index.csv`` (rows with ``status == ok``; an index without a
``status`` column counts every row) and ``<dir>/graphs/<key>.npz``; a directory without
``index.csv`` is read as a plain directory of ``.npz`` graphs (``<dir>/graphs/*.npz`` or
``<dir>/*.npz``). Each graph becomes a PyG ``Data`` with only ``x`` (float32 node matrix, the
layout :func:`perfcast.features.encode.node_matrix` computes — the ``x`` of
:func:`perfcast.features.records.graph_data`) and ``edge_index`` (int64, the graph's directed
data-flow edges), to keep a large corpus in RAM: ``x`` is stored as float16 (≈ 0.35 KB per node of 177
features, + edges), so ≈ 0.2 GB per 1,000 graphs of 500 nodes; training casts to float32.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.predictors.encoder import import_pyg_quietly

#: Node-feature standard deviations are floored at this value before standardising: a one-hot
#: column of an operator seen on 1 node in 10⁵ has std ≈ 0.003 and would become ≈ 300 on those
#: nodes; the floor caps it at ≈ 100.
STD_FLOOR = 1e-2


def corpus_files(corpus_dir: str | os.PathLike, limit: int | None = None) -> list[Path]:
    """The ``.npz`` graph files of a corpus directory (index order; see module doc)."""
    root = Path(corpus_dir)
    if not root.is_dir():
        raise PerfcastError(f"corpus directory not found: {root} (build one with perfcast corpus)")
    index = root / "index.csv"
    if index.exists():
        try:
            with open(index, newline="") as f:
                rows = list(csv.DictReader(f))
        except (OSError, csv.Error, UnicodeDecodeError) as exc:
            raise PerfcastError(f"{index}: unreadable corpus index ({exc})") from None
        if rows and "key" not in rows[0]:
            raise PerfcastError(f"{index}: not a corpus index (no 'key' column)")
        keys = [r["key"] for r in rows if r.get("status", "ok") == "ok"]
        files = list(dict.fromkeys(root / "graphs" / f"{k}.npz" for k in keys))
        missing = [p for p in files if not p.exists()]
        if missing:
            raise PerfcastError(f"{root}: {len(missing)} graph file(s) of index.csv are missing "
                                f"(e.g. {missing[0].name}); rebuild with perfcast corpus")
    else:
        files = sorted((root / "graphs").glob("*.npz")) or sorted(root.glob("*.npz"))
    if limit is not None:
        files = files[:max(0, int(limit))]
    if not files:
        raise PerfcastError(f"{root}: the corpus has no graphs (build one with perfcast corpus "
                            f"--out {root})")
    return files


def _read(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    from perfcast.features.encode import node_matrix
    from perfcast.graph import ModelGraph

    g = ModelGraph.load(path)
    ei = np.array([[e.src for e in g.edges], [e.dst for e in g.edges]], dtype=np.int64)
    return node_matrix(g), ei.reshape(2, -1), int(g.meta.batch_size or 1)


def load_corpus(corpus_dir: str | os.PathLike, limit: int | None = None,
                progress: Callable[[int, int], None] | None = None, workers: int = 1) -> list:
    """PyG ``Data`` (``x``, ``edge_index``, ``batch_size`` — the graph's batch) of every ok
    graph of ``corpus_dir`` (at most ``limit``), read by ``workers`` processes. Graphs without
    an edge are skipped (nothing to reconstruct); ``progress(i, n)`` is called as files are
    read."""
    import torch

    import_pyg_quietly()
    from torch_geometric.data import Data

    files = corpus_files(corpus_dir, limit)
    n = len(files)
    out = []
    if progress:
        progress(0, n)

    def add(i: int, item: tuple[np.ndarray, np.ndarray, int]) -> None:
        x, ei, batch = item
        if ei.shape[1] > 0:
            # float16 halves the RAM of a large corpus; node features are logs and one-hots
            # (|x| ≤ 32 on our corpus: relative error ≤ 5e-4); training standardises in float32
            out.append(Data(x=torch.from_numpy(x.astype(np.float16)),
                            edge_index=torch.from_numpy(ei), batch_size=batch))
        if progress:
            progress(i, n)

    if workers > 1 and n > 1:
        import multiprocessing as mp

        # not ``with Pool``: its exit *terminates* the workers, and a worker killed while it
        # holds the task queue's lock leaves another blocked on it for ever (seen in the test
        # suite); after the last result the workers are idle, so close and join them
        pool = mp.get_context("fork").Pool(workers)
        try:
            for i, item in enumerate(pool.imap(_read, files, chunksize=8), 1):
                add(i, item)
            pool.close()
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()
    else:
        for i, p in enumerate(files, 1):
            add(i, _read(p))
    if not out:
        raise PerfcastError(f"{corpus_dir}: no graph of the corpus has an edge")
    return out


def node_stats(graphs: list, floor: float = STD_FLOOR) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and std (float32) of the node features over all nodes of ``graphs``
    (float64 accumulation), std floored at ``floor``."""
    s = s2 = None
    n = 0
    for d in graphs:
        x = d.x.double()
        s = x.sum(0) if s is None else s + x.sum(0)
        s2 = (x * x).sum(0) if s2 is None else s2 + (x * x).sum(0)
        n += x.shape[0]
    if s is None or n == 0:
        raise PerfcastError("no nodes to compute node statistics from")
    mean = (s / n).numpy()
    std = np.sqrt(np.maximum((s2 / n).numpy() - mean * mean, 0.0))
    return mean.astype(np.float32), np.maximum(std, floor).astype(np.float32)
