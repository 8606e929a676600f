"""``perfcast calibrate``: measure a few models on the user's own machine and adapt the shipped
model to it, in minutes.

1. **Machine profile** — the GEMM peak and streaming bandwidth at each thread count
   (:func:`perfcast.profiler.micro.measure_machine`, a few seconds).
2. **Measurements** — a small, well-spread set of models (:data:`CALIBRATION_SET`: convolutional,
   depthwise, attention and transformer models, inference and training, several batch sizes),
   measured with the profiler in isolated processes until the time budget is spent, cheapest
   first within each round so that a short budget still covers many families. Every
   measurement is written to a resumable store as it finishes (``calibration-<device>.db`` in
   :func:`perfcast.paths.user_models_dir`): Ctrl-C keeps them, a re-run continues.
3. **Before / after** — a third of the measured models are held out; the shipped model is
   scored on them as it is (*before*), then adapted on the rest with the transfer recipes of
   :func:`perfcast.training.trainer.adapt_predictor` and scored again (*after*).
4. **Save** — adapted on every measurement, saved as the user's model for the device
   (``<device>-calibrated/`` with a ``manifest.json`` entry in :func:`user_models_dir`), which
   ``perfcast predict`` then uses before the shipped one.

On a CUDA machine the same steps calibrate the local GPU (``--device`` its registry key):
measurements with ``torch.cuda`` events, the profile with the same two kernels on the GPU.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError

#: (spec, keyword arguments, batch sizes): measured round by round, a batch size per model per
#: round, so a short budget covers the spread of architectures before the spread of batches.
CALIBRATION_SET: list[tuple[str, dict[str, Any], list[int]]] = [
    ("timm:resnet18", {}, [1, 4, 8]),
    ("timm:mobilenetv3_large_100", {}, [1, 4, 16]),
    ("timm:vit_tiny_patch16_224", {}, [1, 4, 8]),
    ("timm:efficientnet_b0", {}, [1, 4, 8]),
    ("timm:convnext_atto", {}, [1, 4, 8]),
    ("hf:bert-base-uncased", {"seq_len": 128}, [1, 2, 4]),
    ("timm:regnetx_004", {}, [1, 4, 16]),
    ("timm:densenet121", {}, [1, 2, 4]),
    ("timm:resnet50", {}, [1, 2, 4]),
    ("hf:gpt2", {"seq_len": 256}, [1, 2]),
    ("timm:deit_small_patch16_224", {}, [1, 2, 4]),
    ("torchvision:squeezenet1_1", {}, [1, 4, 16]),
]
MIN_MODELS = 3
MANIFEST_MODES = ("infer", "train")


@dataclass
class CalibrationResult:
    """What ``perfcast calibrate`` did: ``measured`` configurations (``failed`` of them not ok),
    the models held out, MAPE before / after on them, the recipe kept, where it was saved."""

    device: str
    threads: int | None
    measured: int
    failed: int
    models: list[str]
    held_out: list[str]
    mape_before: float | None
    mape_after: float | None
    recipe: str
    scores: dict[str, float] = field(default_factory=dict)
    saved_to: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    stopped_by: str = "done"

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def calibration_configs(device: str, threads: int | None, models=None, batch_sizes=None,
                        modes=("infer", "train")):
    """The measurement plan, round-robin over models (one batch size per model per round)."""
    from perfcast.store.db import MeasureConfig

    plan = []
    if models:
        plan = [(m, {}, list(batch_sizes or [1, 2, 4])) for m in models]
    else:
        plan = [(m, kw, list(batch_sizes or b)) for m, kw, b in CALIBRATION_SET]
    rounds = max(len(b) for _, _, b in plan)
    out = []
    for r in range(rounds):
        for mode in modes:
            for spec, kw, batches in plan:
                if r < len(batches):
                    out.append(MeasureConfig.of(spec, batch_size=batches[r], mode=mode,
                                                precision="fp32", device=device, threads=threads,
                                                **kw))
    return out


def calibrate(device: str = "cpu", minutes: float = 10.0, *, threads: int | None = None,
              models: list[str] | None = None, batch_sizes: list[int] | None = None,
              input_size: str | None = None, transfer: str = "auto", seed: int = 0,
              max_seconds: float = 2.0, workers: int = 2,
              progress: Callable[[str, int, int, str], None] | None = None) -> CalibrationResult:
    """See the module docstring. ``minutes``: budget of the measurements (the fit after them
    takes seconds); ``models`` / ``batch_sizes`` / ``input_size`` replace the default set."""
    import numpy as np

    from perfcast.datasets.local import load_measurements
    from perfcast.devices import get_device
    from perfcast.labeled.frames import feature_set
    from perfcast.paths import user_models_dir
    from perfcast.profiler.collect import CollectSettings, collect
    from perfcast.profiler.micro import measure_machine
    from perfcast.store import MeasurementStore
    from perfcast import shipped
    from perfcast.training.trainer import adapt_predictor, hold_out_models

    if not minutes > 0:
        raise PerfcastError(f"--minutes must be positive, got {minutes}")
    dev = get_device(device)
    t0 = time.monotonic()
    cores = get_device("cpu").cores  # this machine's usable cores, as the registry detected
    if dev.is_gpu:
        threads = None
    elif threads is None:
        threads = int(cores or 1)
    elif threads < 1:
        raise PerfcastError(f"--threads must be ≥ 1, got {threads}")
    entry = shipped.find(dev.key, "infer", "fp32", "time_ms", root=shipped.shipped_dir())
    if entry is None and dev.is_gpu:
        entry = shipped.find_any_gpu("time_ms", root=shipped.shipped_dir())
    if entry is None:
        raise PerfcastError(f"no shipped time model for {dev.key} to calibrate")
    base = shipped.load_entry(entry, root=shipped.shipped_dir())

    if dev.is_gpu:  # before anything is written: no store is left behind by a refusal
        import torch

        if not torch.cuda.is_available():
            raise PerfcastError(f"{dev.key}: no CUDA device visible to PyTorch here; calibrate "
                                f"a GPU on the machine that has it")
    configs = calibration_configs(dev.key, threads, models, batch_sizes)
    if input_size:
        configs = [c.__class__.of(c.model, batch_size=c.batch_size, input_size=input_size,
                                  mode=c.mode, precision=c.precision, device=c.device,
                                  threads=c.threads) for c in configs]
    root = user_models_dir()
    root.mkdir(parents=True, exist_ok=True)
    db = root / f"calibration-{dev.key}.db"
    store = MeasurementStore(str(db))
    settings = CollectSettings(warmup=2, iters=10, cooldown_s=0.0, max_seconds=max_seconds,
                               timeout_s=max(60.0, minutes * 60),
                               torch_device="cuda" if dev.is_gpu else "cpu")
    # one calibration per store and machine: its collector lock is held from the machine
    # profile to the last configuration (two at once would time each other's contention)
    with store.collector_lock().acquire(
            retry="wait until that calibration finishes, then rerun") as lock:
        if progress:
            progress("machine", 0, 1, "measuring peak GFLOP/s and bandwidth")
        profile = measure_machine(list(range(1, int(cores or 1) + 1)) if not dev.is_gpu
                                  else None, device="cpu" if not dev.is_gpu else dev.key)
        profile.device = dev.key
        profile.save(root / f"machine-{dev.key}.json")
        deadline = t0 + minutes * 60.0
        stopped_by = "done"
        for i, cfg in enumerate(configs):
            if time.monotonic() >= deadline:
                stopped_by = "budget"
                break
            if progress:
                progress("measuring", i, len(configs),
                         f"{cfg.model} b{cfg.batch_size} {cfg.mode}")
            collect(store, [cfg], settings, lock=lock)  # one row per measurement (resumable)
    if progress:
        progress("measuring", len(configs), len(configs), "")

    wanted = {c.key() for c in configs}
    keys = store.done_keys()
    df = load_measurements(str(db))
    # the configurations asked for only (the store keeps earlier calibrations' rows too)
    asked = {(c.model, int(c.batch_size), c.mode, c.precision) for c in configs}
    mine = [(m, int(b), mo, pr) in asked for m, b, mo, pr in
            zip(df["model"], df["batch_size"], df["mode"], df["precision"])]
    df = df[np.asarray(mine, dtype=bool) & (df["device"] == dev.key).to_numpy()]
    if not dev.is_gpu:
        df = df[df["threads"] == threads]
    n_measured = len(wanted & set(keys))
    failed = n_measured - len(df)
    if df["model"].nunique() < MIN_MODELS:
        why = (f"{failed} of {n_measured} configuration(s) failed — check --models; "
               if failed > 0 else "")
        raise PerfcastError(f"only {df['model'].nunique()} model(s) measured within "
                            f"{minutes:g} min (need {MIN_MODELS}); {why}raise --minutes or "
                            f"re-run (measurements so far are kept in {db})")
    df = df.reset_index(drop=True)
    fs = feature_set(df, workers=workers, plans=base.uses_plans,
                     memsim=bool(base.trained_on_.get("memsim")),
                     progress=(lambda s, i, n: progress(s, i, n, "")) if progress else None)

    def on_machine(p):
        """The shipped model re-priced on this machine's measured peaks (kernelsum)."""
        p = copy.deepcopy(p)
        if hasattr(p, "machine_"):
            p.machine_ = profile
        return p

    from perfcast.evaluation.metrics import mape

    n_models = fs.rows["model"].nunique()
    fit_part, held = hold_out_models(fs, max(1, round(n_models / 3)), seed)
    y = held.target("time_ms")
    before = float(mape(y, base.predict(held)[:, base.targets_.index("time_ms")]))
    adapted, recipe, scores = adapt_predictor(on_machine(base), fit_part, transfer,
                                              targets=["time_ms"], seed=seed)
    after = float(mape(y, adapted.predict(held)[:, adapted.targets_.index("time_ms")]))
    final, _, _ = adapt_predictor(on_machine(base), fs, recipe, targets=["time_ms"],
                                           seed=seed)
    final.trained_on_["calibrated"] = {"device": dev.key, "threads": threads,
                                       "records": len(fs), "models": int(n_models),
                                       "from": entry["id"], "recipe": recipe,
                                       "held_out_mape_before": before,
                                       "held_out_mape_after": after}
    name = f"{dev.key}-calibrated"
    final.save(root / name)
    _write_user_manifest(root, dev.key, name, final, entry)
    return CalibrationResult(
        device=dev.key, threads=threads, measured=n_measured, failed=max(0, failed),
        models=sorted(fs.rows["model"].unique()),
        held_out=sorted(held.rows["model"].unique()), mape_before=before, mape_after=after,
        recipe=recipe, scores=scores, saved_to=str(root / name), machine=profile.to_dict(),
        seconds=round(time.monotonic() - t0, 1), stopped_by=stopped_by)


def _write_user_manifest(root: Path, device: str, name: str, pred, entry: dict) -> None:
    """Put ``name``'s entries (one per mode) first in the user's manifest, keeping the others
    (a damaged manifest is rewritten)."""
    from perfcast.shipped import manifest
    from perfcast.training.trainer import write_manifest

    try:
        models = [e for e in manifest(root) if e.get("path") != name]
    except PerfcastError:
        models = []
    for mode in MANIFEST_MODES:
        models.insert(0, {"id": f"{name}:{mode}", "device": device, "mode": mode,
                          "precision": "fp32", "targets": ["time_ms"], "predictor": pred.name,
                          "path": name, "memsim": False, "rank": -1,
                          "trained_on": {"calibrated": pred.trained_on_.get("calibrated"),
                                         "from": entry["id"]}})
    write_manifest(models, root)


__all__ = ["CALIBRATION_SET", "CalibrationResult", "calibrate", "calibration_configs"]
