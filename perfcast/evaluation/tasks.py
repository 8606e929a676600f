"""Evaluation tasks: named record selections over the public datasets (``load_all()``) and this
machine's CPU measurements (``load_local_cpu()``), with their targets and the numbers the papers
published for comparable settings.

A task's records become a :class:`~perfcast.features.records.FeatureSet` through
:meth:`Task.load`, which counts every record it drops and why (:class:`TaskData`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.features.records import FeatureSet


@dataclass(frozen=True)
class Published:
    """A published result: ``mape`` (%) (and RMSE as printed) of ``method`` on ``targets``.

    ``ours`` names our registered predictor that implements the method (None: no
    counterpart); ``protocol`` is the closest of our splits and ``their_split`` how the paper
    actually split (the papers split by record / configuration, ours by model). Published
    numbers come from other datasets, devices and stacks — a reference scale, not a
    like-for-like comparison."""

    paper: str
    method: str
    targets: tuple[str, ...]
    mape: float
    rmse: str
    protocol: str
    setting: str
    cite: str
    ours: str | None = None
    their_split: str = ""


_TRAPPM_SET = "A100 40 GB training, 7,536 timm models of 11 families (TraPPM dataset)"
_TRAPPM_T4 = "TraPPM (ext.) §V-F, Table IV"
_TRAPPM_SPLIT = ("per family 70/30 % of the labeled graphs, Monte Carlo over seeds 1337–1341, "
                 "mean of the per-family results (§V-D)")
_DNNPERF_SET = "TensorFlow 1.13 GPU training, HPO + NAS configurations (DNNPerf dataset)"
_DIPPM_SET = ("A100 inference, 10,508 graphs; one MAPE over latency, energy and memory jointly "
              "(DIPPM dataset)")


def _trappm(target: str) -> tuple[Published, ...]:
    rows = {"memory_mb": [("TraPPM", 4.92, "910.34 MB", "trappm"), ("NNLQP", 8.29, "1688.18 MB", "nnlqp"),
                          ("MLP", 85.01, "8045.68 MB", "mlp"), ("GBoost", 16.10, "2971.52 MB", "xgboost")],
            "time_ms": [("TraPPM", 9.51, "23.23 ms", "trappm"), ("NNLQP", 14.47, "37.02 ms", "nnlqp"),
                        ("MLP", 134.07, "188.36 ms", "mlp"), ("GBoost", 16.98, "54.54 ms", "xgboost")]}
    return tuple(Published("TraPPM", m, (target,), v, r, "family-mc", _TRAPPM_SET,
                           _TRAPPM_T4 + (" (NNLQP as reimplemented by TraPPM)" if m == "NNLQP" else ""),
                           ours, _TRAPPM_SPLIT) for m, v, r, ours in rows[target])


def _dnnperf(target: str) -> tuple[Published, ...]:
    seen = {"time_ms": [("DNNPerf", 7.4, "58.5 ms", None), ("MLP", 18.0, "106.2 ms", "mlp"),
                        ("GBDT", 31.0, "122.6 ms", "xgboost")],
            "memory_mb": [("DNNPerf", 13.7, "1.8 GB", None), ("MLP", 21.5, "2.3 GB", "mlp"),
                          ("GBDT", 15.6, "2.2 GB", "xgboost")]}
    unseen = {"time_ms": [("DNNPerf", 7.7, "55.1 ms", None), ("MLP", 18.6, "99.1 ms", "mlp"),
                          ("GBDT", 34.5, "131.2 ms", "xgboost")],
              "memory_mb": [("DNNPerf", 13.3, "1.9 GB", None), ("MLP", 23.1, "2.6 GB", "mlp"),
                            ("GBDT", 13.5, "2.3 GB", "xgboost")]}
    out = [Published("DNNPerf", m, (target,), v, r, "random", _DNNPERF_SET,
                     "DNNPerf §V-A, Table V (overall)", ours,
                     "random 70:10:20 of the configurations (models seen in training; §IV-A)")
           for m, v, r, ours in seen[target]]
    out += [Published("DNNPerf", m, (target,), v, r, "unseen-family", _DNNPERF_SET,
                      "DNNPerf §V-B (RQ2), Table VII", ours,
                      "5 held-out models (AlexNet, VGG, OverFeat, ResNet-V2, GRU) never trained on")
            for m, v, r, ours in unseen[target]]
    return tuple(out)


_ALL3 = ("time_ms", "memory_mb", "energy_j")
_DIPPM_SPLIT = "random 70/15/15 % of the graphs (§4.3, Table 3)"
DIPPM: tuple[Published, ...] = (
    Published("DIPPM", "DIPPM (GraphSAGE, 500 epochs)", _ALL3, 1.9, "-", "random", _DIPPM_SET,
              "DIPPM §4.3 (1.89 % in §5)", "dippm", _DIPPM_SPLIT),
    Published("DIPPM", "GraphSAGE (10 epochs)", _ALL3, 16.0, "-", "random", _DIPPM_SET,
              "DIPPM §4.3, Table 4", "dippm", _DIPPM_SPLIT),
    Published("DIPPM", "GCN (10 epochs)", _ALL3, 17.5, "-", "random", _DIPPM_SET,
              "DIPPM §4.3, Table 4", "dippm-gcn", _DIPPM_SPLIT),
    Published("DIPPM", "GAT (10 epochs)", _ALL3, 36.7, "-", "random", _DIPPM_SET,
              "DIPPM §4.3, Table 4", "dippm-gat", _DIPPM_SPLIT),
    Published("DIPPM", "GIN (10 epochs)", _ALL3, 38.2, "-", "random", _DIPPM_SET,
              "DIPPM §4.3, Table 4", "dippm-gin", _DIPPM_SPLIT),
    Published("DIPPM", "MLP (10 epochs)", _ALL3, 36.6, "-", "random", _DIPPM_SET,
              "DIPPM §4.3, Table 4", "mlp", _DIPPM_SPLIT),
)


@dataclass
class TaskData:
    """A task's feature set and the bookkeeping of how it was selected."""

    fs: FeatureSet
    #: ordered ``reason → records dropped`` (every record of the task's sources is either in
    #: ``fs`` or counted here)
    drops: dict[str, int]
    #: ``source records`` and other counts worth reporting (``suspect kept`` ...)
    info: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A named selection of records and the targets to predict."""

    name: str
    title: str
    loader: str  # "all" (load_all) | "local_cpu" (load_local_cpu)
    sources: tuple[str, ...]  # a record is in the task when its ``source`` contains one of these
    targets: tuple[str, ...]
    description: str = ""
    memsim: bool = False  # add the tensor-memory simulation as a static feature
    drop_censored: bool = True
    #: drop records whose simulated tensor peak exceeds the device's memory although the
    #: recorded value is below the censoring threshold (unflagged out-of-memory runs)
    drop_impossible: bool = False
    published: tuple[Published, ...] = ()
    #: predictors evaluated when none are given
    default_predictors: tuple[str, ...] = ("dippm", "nnlqp", "mlp", "xgboost", "roofline")
    #: keep GPU records only (registry devices of kind gpu)
    gpu_only: bool = False
    #: at most this many models per (source, family), chosen by a hash of the name — a
    #: deterministic subsample of the large timm files (None: every model)
    max_models_per_family: int | None = None
    #: build the records' kernel plans (predictors that price kernels, e.g. crossdevice)
    plans: bool = False

    def frame(self, data_dir: str | os.PathLike | None = None,
              df: pd.DataFrame | None = None) -> pd.DataFrame:
        """The task's records (dataset schema), before any drop; from ``df`` when given (the
        frame of the task's loader), else loaded."""
        if df is None:
            if self.loader == "local_cpu":
                from perfcast.datasets import load_local_cpu

                df = load_local_cpu()
            else:
                from perfcast.datasets import load_all

                df = load_all(data_dir)
        src = df["source"].astype(str)
        keep = np.zeros(len(df), dtype=bool)
        for s in self.sources:
            keep |= src.str.contains(s, regex=False).to_numpy()
        out = df[keep].reset_index(drop=True)
        if self.gpu_only:
            out = out[out["device"].astype(str).map(_is_gpu)].reset_index(drop=True)
        if self.max_models_per_family:
            out = _cap_models(out, int(self.max_models_per_family))
        if len(out) == 0:
            raise PerfcastError(f"task {self.name}: no record from {', '.join(self.sources)} "
                                f"(is the data directory complete? see PERFCAST_DATA)")
        return out

    def load(self, *, data_dir: str | os.PathLike | None = None, build_missing: bool = True,
             workers: int = 2, progress: Callable[[str, int, int], None] | None = None,
             memsim_seed: str | os.PathLike | None = None) -> TaskData:
        """Select, drop (counted) and featurize the task's records. ``memsim_seed``: a
        memory-validation CSV (``benchmarks/validate_memory.py`` output, same simulator) whose
        simulations seed the cache before a memsim task simulates what is missing (≈ 1.6 s per
        training record otherwise)."""
        from perfcast.features.records import record_workload
        from perfcast.labeled.frames import feature_set

        df = self.frame(data_dir)
        drops: dict[str, int] = {}
        info = {"source records": len(df)}
        if "suspect" in df.columns:
            info["suspect records kept"] = int(df["suspect"].fillna(False).astype(bool).sum())

        def drop(mask, reason):
            nonlocal df
            mask = np.asarray(mask, dtype=bool)
            drops[reason] = drops.get(reason, 0) + int(mask.sum())
            df = df[~mask].reset_index(drop=True)

        if self.drop_censored and "censored" in df.columns:
            drop(df["censored"].fillna(False).astype(bool), "censored (OOM / saturated reading)")
        if "num_gpus" in df.columns:
            drop(pd.to_numeric(df["num_gpus"], errors="coerce").fillna(1).to_numpy() != 1,
                 "data-parallel (num_gpus > 1)")
        lab = np.zeros(len(df), dtype=bool)
        for t in self.targets:
            if t in df.columns:
                v = pd.to_numeric(df[t], errors="coerce").to_numpy(dtype=float)
                lab |= np.isfinite(v) & (v > 0)
        drop(~lab, f"no label ({', '.join(self.targets)})")
        if self.memsim or self.drop_impossible:
            # label-validity drops come before the graph drop, so their counts do not depend on
            # which graphs happen to be built
            from perfcast.memory.cache import MemsimCache

            cache = MemsimCache()
            if memsim_seed is not None:
                cache.import_csv(memsim_seed)
            recs = df.to_dict("records")
            sim = np.empty(len(recs))
            for i, r in enumerate(recs):
                if progress:
                    progress("memsim", i, len(recs))
                w = record_workload(r)
                v = None if w is None else cache.get(w)
                sim[i] = np.nan if v is None else v
            drop(~np.isfinite(sim), "no memory simulation (simulation failed)")
            if self.drop_impossible:
                sim = sim[np.isfinite(sim)]
                cap = np.array([device_memory_mib(str(d)) or np.inf for d in df["device"]])
                mem = pd.to_numeric(df["memory_mb"], errors="coerce").to_numpy(dtype=float)
                drop(_impossible(sim, cap, mem),
                     "impossible (simulated tensor peak > device memory, recorded below it: "
                     "unflagged OOM runs)")
        fs = feature_set(df, build_missing=build_missing, workers=workers, memsim=self.memsim,
                         plans=self.plans,
                         progress=progress)
        if progress:
            progress("features", len(df), len(df))
        drops["no graph (not built / failed / unsupported precision)"] = int(
            fs.rows.attrs.get("dropped", 0))
        return TaskData(fs=fs, drops=drops, info=info)


def simulated_mb(fs: FeatureSet) -> np.ndarray:
    """The simulated tensor peak (MiB) per record (NaN where the set has no simulation)."""
    s = np.expm1(fs.static[:, fs.static_names.index("log1p_memsim_mb")].astype(np.float64))
    has = fs.static[:, fs.static_names.index("has_memsim")] > 0
    return np.where(has, s, np.nan)


def device_memory_mib(device: str) -> float | None:
    """Device memory in MiB (GPU "40 GB" = 40 GiB = 40,960 MiB), None when unknown."""
    from perfcast.devices import get_device

    try:
        return get_device(device).memory_mb
    except PerfcastError:
        return None


def impossible_mask(fs: FeatureSet) -> np.ndarray:
    """Records that cannot have run: their simulated tensor peak alone exceeds the device's
    memory, yet the recorded peak is below it (not flagged censored)."""
    cap = np.array([device_memory_mib(str(d)) or np.inf for d in fs.rows["device"]], dtype=float)
    return _impossible(simulated_mb(fs), cap, fs.target("memory_mb"))


def _impossible(sim: np.ndarray, cap: np.ndarray, mem: np.ndarray) -> np.ndarray:
    return np.isfinite(sim) & (sim > cap) & ~(mem >= cap)


_TIMM = "timm-benchmarks"
TASKS: dict[str, Task] = {t.name: t for t in (
    Task("a", "RTX 3090 training step time (timm, AMP)", "all",
         ("train-amp-nchw-pt112-cu113-rtx3090",), ("time_ms",),
         f"{_TIMM}/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv: timm training step (fwd + "
         "bwd + optimizer), AMP, PyTorch 1.12 / CUDA 11.3, RTX 3090",
         published=_trappm("time_ms") + _dnnperf("time_ms")),
    Task("b", "RTX 4090 inference (timm, AMP)", "all",
         ("benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv",), ("time_ms",),
         f"{_TIMM}/benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv: inference latency per batch, "
         "AMP, PyTorch 2.4 / CUDA 12.4, RTX 4090", published=DIPPM),
    Task("b-pt291", "RTX 4090 inference (timm, AMP, PyTorch 2.9)", "all",
         ("benchmark-infer-amp-nchw-pt291-cu128-4090.csv",), ("time_ms",),
         f"{_TIMM}/benchmark-infer-amp-nchw-pt291-cu128-4090.csv: inference latency per batch, "
         "AMP, PyTorch 2.9.1 / CUDA 12.8, RTX 4090", published=DIPPM),
    Task("rtx3090-infer", "RTX 3090 inference (timm, AMP)", "all",
         ("benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",), ("time_ms",),
         f"{_TIMM}/benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv: inference latency per batch, "
         "AMP, PyTorch 2.4 / CUDA 12.4, RTX 3090", published=DIPPM),
    Task("c-i9", "Desktop CPU inference (timm, fp32, i9-10940X)", "all",
         ("benchmark-infer-fp32-nchw-pt240-cpu-i9_10940x-dynamo.csv",), ("time_ms",),
         f"{_TIMM}/benchmark-infer-fp32-nchw-pt240-cpu-i9_10940x-dynamo.csv: fp32 inference "
         "latency, torch.compile (dynamo), PyTorch 2.4, Intel i9-10940X", published=DIPPM),
    Task("c-i7", "Laptop CPU inference (timm, fp32, i7-12700H)", "all",
         ("benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv",), ("time_ms",),
         f"{_TIMM}/benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv: fp32 inference "
         "latency, torch.compile (dynamo), PyTorch 2.4, Intel i7-12700H", published=DIPPM),
    Task("d", "This machine's CPU (infer + train, time and memory)", "local_cpu",
         ("measurements.db",), ("time_ms", "memory_mb"),
         "datasets/cpu/measurements.db: perfcast collect on this machine's CPU, inference and "
         "training steps, fp32, time per batch and peak memory",
         published=DIPPM + _trappm("time_ms") + _trappm("memory_mb") + _dnnperf("time_ms")
         + _dnnperf("memory_mb")),
    Task("e", "A100 training memory (GPUMemNet)", "all",
         ("gpumemnet-timm-train-memory-a100.csv",), ("memory_mb",),
         "gpumemnet-timm-train-memory-a100.csv: peak nvidia-smi memory of a timm training step "
         "(fp32, SGD-momentum) on an A100 40 GB; the tensor-memory simulation is a static feature",
         memsim=True, drop_impossible=True,
         published=_trappm("memory_mb") + _dnnperf("memory_mb"),
         default_predictors=("dippm", "nnlqp", "mlp", "xgboost", "memsim")),
    Task("e-nosim", "A100 training memory (GPUMemNet), without the simulation feature", "all",
         ("gpumemnet-timm-train-memory-a100.csv",), ("memory_mb",),
         "task e's records (same drops) with the tensor-memory simulation left out of the static "
         "features: the ablation of the simulation as a feature",
         memsim=False, drop_impossible=True,
         published=_trappm("memory_mb") + _dnnperf("memory_mb"),
         default_predictors=("mlp", "xgboost")),
    Task("gpu", "Every single-GPU whole-model time label (crossdevice)", "all",
         ("benchmark-train-amp-nchw-pt112-cu113-rtx3090", "benchmark-infer-amp-nchw-pt240",
          "pytorch-gpu-benchmark-torchvision", "neusight/labels.csv"), ("time_ms",),
         "timm (RTX 3090 train/infer AMP, RTX 4090 infer AMP), the torchvision benchmark "
         "(TITAN Xp, TITAN RTX, RTX 2080 Ti) and NeuSight's transformers (V100, T4, P4, P100, "
         "L4, A100 PCIe 40/80 GB, MI100/210/250); single-GPU rows, at most 3 models per "
         "(file, family); the device-conditioned predictor's data — evaluate it with "
         "--split unseen-device",
         gpu_only=True, max_models_per_family=3, plans=True,
         default_predictors=("crossdevice", "roofline")),
)}


def _is_gpu(key: str) -> bool:
    from perfcast.devices import get_device

    try:
        return get_device(key).is_gpu
    except PerfcastError:
        return False


def _cap_models(df: pd.DataFrame, n: int) -> pd.DataFrame:
    """At most ``n`` models per (source, family), the first by SHA-1 of the model name."""
    import hashlib

    first = df.drop_duplicates("model")
    keep: set = set()
    for _key, g in first.groupby([first["source"].astype(str), first["family"].astype(str)]):
        keep |= set(sorted(g["model"].astype(str),
                           key=lambda m: hashlib.sha1(m.encode()).hexdigest())[:n])
    return df[df["model"].astype(str).isin(keep)].reset_index(drop=True)


def get_task(name: str | Task) -> Task:
    """A task by name."""
    if isinstance(name, Task):
        return name
    try:
        return TASKS[str(name)]
    except KeyError:
        raise unknown_choice("task", name, TASKS) from None


def list_tasks() -> list[Task]:
    return list(TASKS.values())
