"""Feature sets from dataset frames: graphs from the graph store (built when missing) and the
tensor-memory simulation from a persistent cache."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.predictors.features import FeatureSet, build_feature_set
from perfcast.predictors.graphs import attach_items, ensure_graphs, graph_store_dir, load_graph_for

MEMSIM_FIELDS = ("model", "mode", "batch_size", "input_size", "optimizer", "precision",
                 "simulated_mb")


def _mkey(rec) -> tuple:
    opt = rec.get("optimizer")
    opt = opt if isinstance(opt, str) and opt else "sgd-momentum"
    inp = rec.get("input_size")
    inp = str(inp) if isinstance(inp, str) else ""
    seq = rec.get("seq_len")
    if not inp and seq is not None and not pd.isna(seq) and str(seq) != "":
        inp = f"seq={int(float(seq))}"  # text models: the sequence length takes the shape's slot
    return (str(rec["model"]), str(rec["mode"]), int(rec["batch_size"]),
            inp, opt if rec["mode"] == "train" else "",
            str(rec.get("precision") or "fp32"))


class MemsimCache:
    """Simulated tensor peaks (MiB) keyed by record config; a CSV in the graph store
    (``memsim.csv``). Seed it from ``reports/memory_validation.csv`` (same simulator) with
    :meth:`import_csv`; missing entries are simulated (≈1.6 s each for timm training steps)."""

    #: Parsed cache files shared by the instances of a process (path → entries): reading the
    #: CSV costs ~10 ms, paid once instead of on every ``perfcast.predict`` call.
    _loaded: dict[Path, dict[tuple, float | None]] = {}

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path or graph_store_dir() / "memsim.csv").resolve()
        self._d: dict[tuple, float | None] | None = None

    def _load(self) -> dict:
        if self._d is None:
            if self.path not in self._loaded or not self.path.exists():
                d: dict[tuple, float | None] = {}
                if self.path.exists():
                    with open(self.path, newline="") as f:
                        for r in csv.DictReader(f):
                            v = r.get("simulated_mb")
                            d[_mkey(r)] = float(v) if v not in (None, "") else None
                MemsimCache._loaded[self.path] = d
            self._d = MemsimCache._loaded[self.path]
        return self._d

    def import_csv(self, path: str | os.PathLike) -> int:
        """Add the rows of a memory-validation CSV (failed simulations as empty values, so they
        are not retried); returns rows added."""
        d = self._load()
        df = pd.read_csv(path)
        n = 0
        for r in df.to_dict("records"):
            r["optimizer"] = r.get("optimizer") if isinstance(r.get("optimizer"), str) else ""
            if ":" not in str(r["model"]):  # bare timm names, as the validation wrote them
                r["model"] = f"timm:{r['model']}"
            r["input_size"] = str(r["input_size"]).replace("x", ",")
            k = _mkey(r)
            if k not in d:
                ok = r.get("status") == "ok" and pd.notna(r.get("simulated_mb"))
                self._append(r, float(r["simulated_mb"]) if ok else None)
                n += 1
        return n

    def _append(self, rec, value: float | None) -> None:
        d = self._load()
        d[_mkey(rec)] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        with open(self.path, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(MEMSIM_FIELDS)
            w.writerow([*_mkey(rec), "" if value is None else f"{value:.6f}"])

    @staticmethod
    def simulate(rec) -> float:
        """Simulated tensor peak (MiB) of a record; raises PerfcastError when it cannot run."""
        return MemsimCache._simulate(rec)[0]

    @staticmethod
    def _simulate(rec) -> tuple[float, list[int]]:
        """(tensor peak MiB, per-sample input shape the simulation used)."""
        from perfcast.frontends import parse_input_size
        from perfcast.memory.simulate import simulate_memory

        k = _mkey(rec)
        seq = int(k[3][4:]) if k[3].startswith("seq=") else None
        shape = None if seq is not None else parse_input_size(k[3] or None)
        est = simulate_memory(k[0], batch_size=k[2], input_size=shape,
                              seq_len=seq, mode=k[1], precision=k[5],
                              optimizer=k[4] or "sgd-momentum")
        return float(est.tensor_peak_mb), list(est.input_shape[1:])

    def contains(self, rec) -> bool:
        """Whether the cache has an entry (a value or a recorded failure) for ``rec``."""
        return _mkey(rec) in self._load()

    def put(self, rec, value: float | None) -> None:
        """Store a simulated peak (MiB; ``None`` = the simulation failed); never raises OSError."""
        try:
            self._append(rec, value)
        except OSError:
            pass  # a read-only cache must not stop a prediction

    def get(self, rec, compute: bool = True, strict: bool = False) -> float | None:
        """Cached value; simulated (and stored) when missing and ``compute``. A failed simulation
        is stored as ``None`` — with ``strict`` its error is raised instead (and not stored)."""
        d = self._load()
        k = _mkey(rec)
        if k in d:
            return d[k]
        if not compute:
            return None
        try:
            value = self.simulate(rec)
        except PerfcastError:
            if strict:
                raise
            value = None
        self.put(rec, value)
        return value


class SimulationJob:
    """A tensor-memory simulation running in a forked child process while the caller does other
    work (a cold ``perfcast predict`` overlaps it with graph extraction: two cores, ≈ 1 s less).

    Start with :meth:`start` (``None`` where ``fork`` is unavailable); :meth:`result` waits and
    returns ``(peak MiB, input shape)`` or raises :class:`PerfcastError`; :meth:`cancel` stops it.
    The child runs FakeTensor work only, on one thread, with SIGINT ignored (Ctrl-C is the
    parent's to handle; the daemon child is terminated when the parent exits).
    """

    def __init__(self, rec, process, conn) -> None:
        self.rec, self._process, self._conn = rec, process, conn

    @classmethod
    def start(cls, rec) -> SimulationJob | None:
        import multiprocessing as mp

        if "fork" not in mp.get_all_start_methods():
            return None
        ctx = mp.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_simulation_child, args=(dict(rec), send), daemon=True,
                           name="perfcast-simulation")
        try:
            proc.start()
        except OSError:
            return None
        send.close()
        return cls(rec, proc, recv)

    def result(self) -> tuple[float, list[int]]:
        try:
            status, *payload = self._conn.recv()
        except (EOFError, OSError):
            status, payload = "died", []
        finally:
            self._conn.close()
            self._process.join(timeout=5)
        if status == "ok":
            return float(payload[0]), list(payload[1])
        if status == "error":
            raise PerfcastError(payload[0])
        # the child died (e.g. killed by the OOM killer): simulate here instead
        return MemsimCache._simulate(self.rec)

    def cancel(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(timeout=5)
        self._conn.close()


def _simulation_child(rec, conn) -> None:
    """Body of a :class:`SimulationJob` child: send ("ok", MiB, shape) or ("error", message)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import torch

        torch.set_num_threads(1)  # the parent may have used OpenMP before forking
        msg = ("ok", *MemsimCache._simulate(rec))
    except PerfcastError as exc:
        msg = ("error", str(exc))
    except BaseException as exc:  # noqa: BLE001 — reported to the parent, never printed here
        msg = ("error", f"{type(exc).__name__}: {exc}")
    try:
        conn.send(msg)
    except (OSError, EOFError):
        pass
    finally:
        conn.close()


def feature_set(df: pd.DataFrame, *, build_missing: bool = True, workers: int = 2,
                memsim: bool = False, memsim_compute: bool = True,
                progress: Callable[[str, int, int], None] | None = None) -> FeatureSet:
    """Feature set of ``df``'s records (see :func:`build_feature_set`). Graphs come from the
    graph store; missing ones are built first (resumable) when ``build_missing``. With
    ``memsim`` every record gets its tensor-memory simulation (cached)."""
    df = attach_items(df)
    if build_missing:
        items = [i for i in df["graph_item"] if i is not None]
        ensure_graphs(items, workers=workers,
                      progress=(lambda i, n, _r: progress("graphs", i, n)) if progress else None)
    cache = MemsimCache() if memsim else None
    by_key: dict[str, object] = {}

    def graph_of(rec):
        key = rec.get("graph_key")
        if not key:
            return None
        if key not in by_key:
            try:
                by_key[key] = load_graph_for(key)
            except PerfcastError:
                by_key[key] = None
        return by_key[key]

    memsim_of = (lambda r: cache.get(r, compute=memsim_compute)) if cache else None
    return build_feature_set(df.drop(columns=["graph_item"]), graph_of, memsim_of,
        progress=(lambda i, n: progress("features", i, n)) if progress else None)
