"""Simulated tensor peaks kept across processes, and a simulation running beside other work.

:class:`MemsimCache` — a CSV (``memsim.csv`` in the graph store, :func:`perfcast.paths.
graph_store_dir`) of :func:`~perfcast.memory.simulate_memory` peaks keyed by workload (model,
mode, batch, input size, sequence length, optimizer when training, precision); a failed
simulation is kept as an empty value so it is not retried. :class:`SimulationJob` — the same
simulation in a forked child (a cold ``perfcast predict`` overlaps it with graph extraction).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.workload import Workload

#: Columns of ``memsim.csv`` (files written before ``seq_len`` had its own column kept text
#: models' length as ``input_size = "seq=N"``; they are read as such and rewritten).
MEMSIM_FIELDS = ("model", "mode", "batch_size", "input_size", "seq_len", "optimizer",
                 "precision", "simulated_mb")


def memsim_key(w: Workload) -> tuple:
    """The cache key of a workload's simulation (batch ``None`` = 1)."""
    precision = w.precision or "fp32"
    if precision == "bf16" and w.mode == "train":
        # bf16 training is autocast with fp32 master weights (before: the model cast, the
        # rows of which are ``bf16-pure`` now): its own key, so no old row answers it
        precision = "bf16-autocast"
    return (w.spec, w.mode, int(w.batch_size or 1), w.input_size_text or "",
            "" if w.seq_len is None else str(int(w.seq_len)), w.run_optimizer or "",
            precision)


def _row_key(r: dict) -> tuple:
    inp, seq = r.get("input_size") or "", r.get("seq_len") or ""
    if inp.startswith("seq="):  # the format before the seq_len column
        inp, seq = "", inp[4:]
    return (r["model"], r["mode"], int(r["batch_size"]), inp, seq, r.get("optimizer") or "",
            r.get("precision") or "fp32")


class MemsimCache:
    """Simulated tensor peaks (MiB) by workload (see the module docstring). Seed it from a
    memory-validation CSV (``benchmarks/validate_memory.py``, same simulator) with
    :meth:`import_csv`; missing entries are simulated (≈ 1.6 s each for a timm training step)."""

    #: Parsed files shared by the instances of a process (path → entries): reading the CSV
    #: costs ~10 ms, paid once instead of on every ``perfcast.predict`` call.
    _loaded: dict[Path, dict[tuple, float | None]] = {}

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        from perfcast.paths import graph_store_dir

        self.path = Path(path or graph_store_dir() / "memsim.csv").resolve()
        self._d: dict[tuple, float | None] | None = None

    def _load(self) -> dict:
        if self._d is None:
            if self.path not in self._loaded or not self.path.exists():
                d: dict[tuple, float | None] = {}
                old_format = False
                if self.path.exists():
                    with open(self.path, newline="") as f:
                        reader = csv.DictReader(f)
                        old_format = "seq_len" not in (reader.fieldnames or [])
                        for r in reader:
                            v = r.get("simulated_mb")
                            d[_row_key(r)] = float(v) if v not in (None, "") else None
                MemsimCache._loaded[self.path] = d
                if old_format:
                    self._rewrite(d)
            self._d = MemsimCache._loaded[self.path]
        return self._d

    def _rewrite(self, d: dict) -> None:
        """Write every entry in the current format (atomic replace; a read-only cache stays)."""
        from perfcast.paths import write_file_atomically

        def write(tmp):
            with open(tmp, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(MEMSIM_FIELDS)
                for k, v in d.items():
                    w.writerow([*k, "" if v is None else repr(float(v))])

        try:
            write_file_atomically(self.path, write)
        except OSError:
            pass

    def import_csv(self, path: str | os.PathLike) -> int:
        """Add the rows of a memory-validation CSV (failed simulations as empty values, so they
        are not retried); returns rows added."""
        import pandas as pd

        d = self._load()
        n = 0
        for r in pd.read_csv(path).to_dict("records"):
            model = str(r["model"])
            if ":" not in model:  # bare timm names, as the validation wrote them
                model = f"timm:{model}"
            opt = r.get("optimizer") if isinstance(r.get("optimizer"), str) else None
            try:
                w = Workload.of(model, batch_size=int(r["batch_size"]),
                                input_size=str(r["input_size"]).replace("x", ","),
                                mode=str(r["mode"]), precision=str(r.get("precision") or "fp32"),
                                optimizer=opt if r["mode"] == "train" else None)
            except PerfcastError:
                continue
            if memsim_key(w) not in d:
                ok = r.get("status") == "ok" and pd.notna(r.get("simulated_mb"))
                self._append(w, float(r["simulated_mb"]) if ok else None)
                n += 1
        return n

    def _append(self, w: Workload, value: float | None) -> None:
        d = self._load()
        k = memsim_key(w)
        d[k] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        with open(self.path, "a", newline="") as f:
            out = csv.writer(f)
            if new:
                out.writerow(MEMSIM_FIELDS)
            # full precision: a cached answer is the answer the simulation gave (bit for bit)
            out.writerow([*k, "" if value is None else repr(float(value))])

    @staticmethod
    def simulate(w: Workload) -> float:
        """Simulated tensor peak (MiB) of a workload; raises PerfcastError when it cannot run."""
        from perfcast.memory.simulate import simulate_memory

        return float(simulate_memory(w).tensor_peak_mb)

    def contains(self, w: Workload) -> bool:
        """Whether the cache has an entry (a value or a recorded failure) for ``w``."""
        return memsim_key(w) in self._load()

    def put(self, w: Workload, value: float | None) -> None:
        """Store a simulated peak (MiB; ``None`` = the simulation failed); never raises OSError."""
        try:
            self._append(w, value)
        except OSError:
            pass  # a read-only cache must not stop a prediction

    def get(self, w: Workload, compute: bool = True, strict: bool = False) -> float | None:
        """Cached value; simulated (and stored) when missing and ``compute``. A failed simulation
        is stored as ``None`` — with ``strict`` its error is raised instead (and not stored)."""
        d = self._load()
        k = memsim_key(w)
        if k in d:
            return d[k]
        if not compute:
            return None
        try:
            value = self.simulate(w)
        except PerfcastError:
            if strict:
                raise
            value = None
        self.put(w, value)
        return value


class SimulationJob:
    """A tensor-memory simulation running in a forked child process while the caller does other
    work (a cold ``perfcast predict`` overlaps it with graph extraction: two cores, ≈ 1 s less).

    Start with :meth:`start` (``None`` where ``fork`` is unavailable); :meth:`result` waits and
    returns the peak (MiB) or raises :class:`PerfcastError`; :meth:`cancel` stops it. The child
    runs FakeTensor work only, on one thread, with SIGINT ignored (Ctrl-C is the parent's to
    handle; the daemon child is terminated when the parent exits).
    """

    #: Set once a forked child could not run autograd (the parent had started autograd's
    #: worker threads: torch refuses autograd after such a fork); later jobs run inline.
    _fork_unsafe = False

    def __init__(self, workload: Workload, process, conn) -> None:
        self.workload, self._process, self._conn = workload, process, conn

    @classmethod
    def start(cls, workload: Workload) -> SimulationJob | None:
        import multiprocessing as mp

        if "fork" not in mp.get_all_start_methods() or SimulationJob._fork_unsafe:
            return None
        ctx = mp.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_simulation_child, args=(workload, send), daemon=True,
                           name="perfcast-simulation")
        try:
            proc.start()
        except OSError:
            return None
        send.close()
        return cls(workload, proc, recv)

    def result(self) -> float:
        try:
            status, payload = self._conn.recv()
        except (EOFError, OSError):
            status, payload = "died", None
        finally:
            self._conn.close()
            self._process.join(timeout=5)
        if status == "ok":
            return float(payload)
        if status == "error":
            raise PerfcastError(payload)
        if status == "bad-fork":
            SimulationJob._fork_unsafe = True
        # the child died (e.g. killed by the OOM killer) or could not use autograd after the
        # fork: simulate here instead
        return MemsimCache.simulate(self.workload)

    def cancel(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(timeout=5)
        self._conn.close()


def simulation_details(w: Workload, *, use_cache: bool = True) -> dict:
    """The whole :class:`~perfcast.memory.simulate.MemoryEstimate` of ``w`` as a dict, with its
    memory timeline (``timeline``) — the parameters / gradients / optimizer state / activations
    breakdown and the live-bytes curve that ``perfcast report`` and ``perfcast ui`` draw. Kept
    as one JSON file per workload in ``memsim_details/`` of the graph store (``use_cache=False``:
    neither read nor written); the peak also goes to :class:`MemsimCache`. Raises
    :class:`PerfcastError` when the simulation cannot run."""
    import hashlib
    import json

    from perfcast.memory.simulate import simulate_memory
    from perfcast.paths import graph_store_dir, write_file_atomically

    w = w.replace(batch_size=w.batch_size or 1)
    path = None
    if use_cache:
        digest = hashlib.sha1(repr(memsim_key(w)).encode()).hexdigest()[:20]
        path = graph_store_dir() / "memsim_details" / f"{digest}.json"
        try:
            d = json.loads(path.read_text())
            if d.get("key") == list(memsim_key(w)):
                return d["estimate"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    est = simulate_memory(w, timeline=True).to_dict()
    if path is not None:
        try:
            peaks = MemsimCache()
            if not peaks.contains(w):
                peaks.put(w, est["tensor_peak_mb"])
            write_file_atomically(path, json.dumps({"key": list(memsim_key(w)), "estimate": est}))
        except OSError:
            pass  # a read-only cache must not stop the work
    return est


#: torch's message when autograd runs in a child forked after the parent used autograd threads.
_BAD_FORK = "autograd's threading in combination with fork"


def _simulation_child(workload: Workload, conn) -> None:
    """Body of a :class:`SimulationJob` child: send ("ok", MiB) or ("error", message)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import torch

        torch.set_num_threads(1)  # the parent may have used OpenMP before forking
        msg = ("ok", MemsimCache.simulate(workload))
    except PerfcastError as exc:
        msg = ("bad-fork", None) if _BAD_FORK in str(exc) else ("error", str(exc))
    except BaseException as exc:  # noqa: BLE001 — reported to the parent, never printed here
        msg = ("bad-fork", None) if _BAD_FORK in str(exc) else \
            ("error", f"{type(exc).__name__}: {exc}")
    try:
        conn.send(msg)
    except (OSError, EOFError):
        pass
    finally:
        conn.close()


__all__ = ["MEMSIM_FIELDS", "MemsimCache", "SimulationJob", "memsim_key", "simulation_details"]
