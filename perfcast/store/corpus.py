"""Unlabeled graph corpus: many model graphs, no measurements (TraPPM's pre-training data).

A corpus directory holds ``graphs/<key>.npz`` (one :class:`~perfcast.graph.ModelGraph` each,
written atomically) and ``index.csv`` (one line per graph, appended as each finishes). Building
is resumable: a graph whose file exists is not rebuilt. Work is spread over worker processes,
one task per model × input size; a model's inference graphs at several batch sizes come from one
symbolic-batch trace (:func:`~perfcast.frontends.build_graphs`).

Sweeps are timm families (timm module names, e.g. ``resnet``, ``efficientnet``,
``vision_transformer``) × variants × input sizes × batch sizes × modes.
"""

from __future__ import annotations

import csv
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.workload import Workload

INDEX_FIELDS = ["key", "model", "family", "batch_size", "input_size", "mode", "precision",
                "nodes", "edges", "macs", "params", "seconds", "status", "reason"]


@dataclass(frozen=True)
class CorpusItem:
    """One graph of a corpus: a workload and the family it is counted in."""

    workload: Workload
    family: str

    @classmethod
    def of(cls, model: str, family: str, batch_size: int, input_size, mode: str = "infer",
           precision: str = "fp32") -> CorpusItem:
        """``input_size``: a square side in pixels (``224``) or a per-sample shape."""
        return cls(Workload.of(model, batch_size=batch_size, input_size=input_size, mode=mode,
                               precision=precision), family)

    def key(self) -> str:
        return self.workload.key()


def timm_families() -> dict[str, list[str]]:
    """timm module name → its model names (current names only, no pretrained tags)."""
    import timm

    fams: dict[str, list[str]] = {}
    for mod in timm.list_modules():
        names = timm.list_models(module=mod)
        if names:
            fams[mod] = sorted(names)
    return fams


def plan(families: Iterable[str] | None, variants_per_family: int | None,
         input_sizes: list[int], batch_sizes: list[int], modes: list[str],
         include_test_models: bool = False) -> list[CorpusItem]:
    """Expand a sweep into corpus items (deterministic order)."""
    all_fams = timm_families()
    wanted = list(families) if families else sorted(all_fams)
    unknown = [f for f in wanted if f not in all_fams]
    if unknown:
        raise PerfcastError(f"unknown timm families: {', '.join(unknown)} "
                            f"(timm.list_modules() lists them)")
    items = []
    for fam in wanted:
        names = [n for n in all_fams[fam] if include_test_models or not n.startswith("test_")]
        if variants_per_family:
            step = max(1, len(names) // variants_per_family)
            names = names[::step][:variants_per_family]
        for name in names:
            for size in input_sizes:
                for b in batch_sizes:
                    for mode in modes:
                        items.append(CorpusItem.of(f"timm:{name}", fam, b, size, mode))
    return items


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def _worker_init() -> None:
    """Workers die quietly on the pool's SIGTERM (the CLI's handler is for the parent only) and
    trace with one torch thread each, as a Ray task of one CPU does (``OMP_NUM_THREADS=1``):
    forked workers inherit torch's default of one thread per core, and ``workers`` of them
    oversubscribe the cores (BENCHMARKS.md, "Beyond one machine")."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and terminates us
    import torch

    torch.set_num_threads(1)


def _row(item: CorpusItem, key: str) -> dict:
    w = item.workload
    return {"key": key, "model": w.spec, "family": item.family, "batch_size": w.batch_size,
            "input_size": w.input_size_text or (f"seq={w.seq_len}" if w.seq_len else ""),
            "mode": w.mode, "precision": w.precision}


def _failure(exc: BaseException, timeout: int) -> dict:
    if isinstance(exc, _Timeout):
        return {"status": "timeout", "reason": f"no graph within {timeout} s"}
    msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return {"status": "failed", "reason": f"{type(exc).__name__}: {msg}"}


def _ok(row: dict, g) -> dict:
    row.update(status="ok", nodes=g.num_nodes, edges=g.num_edges, macs=g.macs, params=g.params)
    return row


def _build_group(args: tuple[list[CorpusItem], str, int]) -> list[dict]:
    """Graphs of one model at one input size. Inference graphs at ≥ 2 batch sizes come from one
    symbolic-batch trace (identical graphs, several times faster); if the model specialises on
    the batch, or for the rest, each graph is traced alone."""
    items, out_dir, timeout = args
    from perfcast.frontends import build_graph, build_graphs

    signal.signal(signal.SIGALRM, _alarm)
    rows: list[dict] = []
    single = list(items)
    multi = [it for it in items if it.workload.mode == "infer"
             and (it.workload.batch_size or 1) >= 2 and it.workload.model.kind == "timm"]
    if len(multi) >= 2:
        t = time.perf_counter()
        signal.alarm(timeout)
        try:
            graphs = build_graphs(multi[0].workload, [it.workload.batch_size for it in multi])
            share = round((time.perf_counter() - t) / len(multi), 3)
            for it in multi:
                key = it.key()
                rows.append({**_ok(_row(it, key),
                                   _save(graphs[it.workload.batch_size], out_dir, key)),
                             "seconds": share})
            single = [it for it in items if it not in multi]
        except Exception:  # noqa: BLE001 - _Timeout included: fall back to one trace each
            pass
        finally:
            signal.alarm(0)
    for it in single:
        key = it.key()
        row = _row(it, key)
        t = time.perf_counter()
        signal.alarm(timeout)
        try:
            _ok(row, _save(build_graph(it.workload), out_dir, key))
        except Exception as exc:  # noqa: BLE001 - every failure is recorded in the index
            row.update(_failure(exc, timeout))
        finally:
            signal.alarm(0)
        row["seconds"] = round(time.perf_counter() - t, 3)
        rows.append(row)
    return rows


def _save(g, out_dir: str, key: str):
    g.save(Path(out_dir) / "graphs" / f"{key}.npz")
    return g


def _drop_partial_line(index: Path) -> None:
    """A run killed while appending can leave half a line at the end of ``index.csv``: cut it
    (its graph is rebuilt), so that the next append starts on a line of its own."""
    if not index.exists():
        return
    with open(index, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def _drop_failed_lines(index: Path) -> int:
    """Take the ``failed`` / ``timeout`` lines out of ``index.csv`` (one atomic rewrite, only
    when there are any): their items are built again. Returns how many were taken out."""
    import io

    from perfcast.paths import write_file_atomically

    with open(index, newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or INDEX_FIELDS
        rows = list(reader)
    keep = [r for r in rows if r.get("status") not in ("failed", "timeout")]
    if len(keep) == len(rows):
        return 0
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fields, extrasaction="ignore")
    w.writeheader()
    w.writerows(keep)
    write_file_atomically(index, buf.getvalue())
    return len(rows) - len(keep)


#: Ray memory request of a graph task (bytes): a heuristic, not a measurement — tracing runs
#: on the meta device (no weights), so it grows with the graph, which grows with the model's
#: size class; a training graph (backward and optimizer nodes) about half again.
TRACE_MEMORY_BASE = 1536 * 2**20
#: Ray retries of a graph task whose worker died (system failures only)
GRAPH_TASK_RETRIES = 2
#: graph tasks a Ray worker runs before it is replaced by a fresh one
RAY_TASKS_PER_WORKER = 100
_LARGE = ("large", "huge", "giant", "gigantic", "xlarge", "xxlarge", "_l_", "_h_", "_g_", "_e_")


def trace_memory_bytes(items: list[CorpusItem]) -> int:
    """The Ray ``memory`` request of the task building ``items`` (one model × input size):
    :data:`TRACE_MEMORY_BASE`, doubled for a large model (``large``, ``huge``, ``giant`` … in
    its name), × 1.5 when a training graph is among them."""
    name = items[0].workload.spec.lower() + "_"
    mem = TRACE_MEMORY_BASE * (2 if any(t in name for t in _LARGE) else 1)
    if any(it.workload.mode == "train" for it in items):
        mem = mem * 3 // 2
    return int(mem)


def _build_group_task(items: list[CorpusItem], timeout: int) -> tuple[list[dict],
                                                                      dict[str, bytes]]:
    """A Ray task: :func:`_build_group` in a scratch folder of the node that runs it; returns
    the rows and each graph file's bytes (the driver writes them: no shared file system is
    needed between the nodes and the corpus)."""
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="perfcast-corpus-")
    try:
        (Path(tmp) / "graphs").mkdir()
        rows = _build_group((items, tmp, timeout))
        blobs = {r["key"]: (Path(tmp) / "graphs" / f"{r['key']}.npz").read_bytes()
                 for r in rows if r.get("status") == "ok"}
        return rows, blobs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ray_groups(ray, groups: list[list[CorpusItem]], out: Path, timeout_s: int):
    """Each group's rows as its Ray task finishes (its graphs written to ``out`` first); a
    failed task is a ``failed`` row per item, with the reason."""
    from perfcast.distributed import as_completed, failure_reason
    from perfcast.paths import write_file_atomically

    # a fresh worker now and then (tracing leaks a little), but seldom: a new Ray worker
    # imports torch and timm again (4-5 s here, BENCHMARKS.md) where a forked pool worker has
    # them already — every 25 tasks cost ~10 % of a corpus build, every 100 ~2 %
    task = ray.remote(max_calls=RAY_TASKS_PER_WORKER)(_build_group_task)
    # a request no node can grant would wait for ever: at most the largest node's memory
    most = max((float(n.get("Resources", {}).get("memory", 0)) for n in ray.nodes()
                if n.get("Alive")), default=0.0)
    # a worker that died (e.g. killed by Ray's memory monitor when other processes filled the
    # machine) is retried twice: building a graph again is harmless (the driver writes each
    # result once); a graph that fails in Python is a failed row of _build_group, not retried
    refs = {task.options(num_cpus=1, max_retries=GRAPH_TASK_RETRIES,
                         memory=min(trace_memory_bytes(g), int(most)) if most else
                         trace_memory_bytes(g)).remote(g, timeout_s): g for g in groups}
    for ref, result, exc in as_completed(ray, refs):
        if exc is not None:
            reason = failure_reason(exc)
            yield [{**_row(it, it.key()), "status": "failed", "reason": reason, "seconds": None}
                   for it in refs[ref]]
            continue
        rows, blobs = result
        for key, blob in blobs.items():
            write_file_atomically(out / "graphs" / f"{key}.npz", blob)
        yield rows


def build_corpus(items: list[CorpusItem], out_dir: str | os.PathLike, workers: int = 2,
                 timeout_s: int = 300, limit: int | None = None,
                 progress: Callable[[int, int, dict | None], None] | None = None,
                 ray_address: str | None = None, retry_failed: bool = False) -> dict[str, int]:
    """Build every item's graph not yet in ``out_dir`` (at most ``limit`` new ones).

    Returns counts by status; ``skipped`` counts items already in the index. ``retry_failed``:
    the items whose index line is ``failed`` or ``timeout`` are built again — their lines are
    taken out of the index first (rewritten atomically), so each key keeps one line. ``ray_address``
    (:mod:`perfcast.distributed`; ``local`` starts a cluster of ``workers`` CPUs): each task is
    a Ray CPU task (1 CPU, ``memory`` = :func:`trace_memory_bytes`) instead of a pool process;
    its graphs and rows are written here as it finishes, exactly as with the pool.
    """
    out = Path(out_dir)
    (out / "graphs").mkdir(parents=True, exist_ok=True)
    index = out / "index.csv"
    done: set[str] = set()
    _drop_partial_line(index)
    if index.exists():
        if retry_failed:
            _drop_failed_lines(index)
        with open(index, newline="") as f:
            done = {r["key"] for r in csv.DictReader(f)}
    todo = [it for it in dict.fromkeys(items) if it.key() not in done]
    counts = {"skipped": len(items) - len(todo), "ok": 0, "failed": 0, "timeout": 0}
    if limit is not None:
        todo = todo[:limit]
    new_file = not index.exists()
    with open(index, "a", newline="") as f:
        w = csv.DictWriter(f, INDEX_FIELDS, extrasaction="ignore")
        if new_file:
            w.writeheader()
        if progress:
            progress(0, len(todo), None)
        if not todo:
            return counts
        groups: dict[tuple, list[CorpusItem]] = {}
        for it in todo:  # one task per model × input size × mode (see _build_group)
            wl = it.workload
            groups.setdefault((wl.spec, wl.input_size, wl.seq_len, wl.mode, wl.precision),
                              []).append(it)
        written = 0

        def record(rows: list[dict]) -> None:
            """A finished group's index lines, on disk before the next (resumable)."""
            nonlocal written
            for row in rows:
                written += 1
                w.writerow(row)
                counts[row["status"]] = counts.get(row["status"], 0) + 1
                if progress:
                    progress(written, len(todo), row)
            f.flush()
            os.fsync(f.fileno())

        if ray_address is not None:
            from perfcast.distributed import cluster

            with cluster(ray_address, num_cpus=max(1, workers)) as ray:
                for rows in _ray_groups(ray, list(groups.values()), out, timeout_s):
                    record(rows)
            return counts
        ctx = mp.get_context("fork")
        # close + join after the last result (``with Pool`` would terminate idle workers, and a
        # worker killed while it holds the task queue's lock can block another for ever)
        pool = ctx.Pool(max(1, workers), initializer=_worker_init, maxtasksperchild=25)
        try:
            for rows in pool.imap_unordered(
                    _build_group, [(g, str(out), timeout_s) for g in groups.values()]):
                record(rows)
            pool.close()
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()
    return counts
