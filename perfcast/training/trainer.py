"""Training entry points behind ``perfcast train``: the shipped default recipe, training on any
labeled data, and fine-tuning a saved predictor on a user's own measurements."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.paths import package_data
from perfcast.workload import TRANSFER_RECIPES  # perfcast train --init-from (fine_tune)


def hold_out_models(fs, n_held: int, seed: int):
    """``(train, valid)``: every record of ``n_held`` randomly chosen models goes to ``valid``
    (the early-stopping part)."""
    import numpy as np

    models = fs.rows["model"].astype(str).unique()
    held = set(np.random.default_rng(seed).choice(models, n_held, replace=False))
    m = fs.rows["model"].astype(str).isin(held).to_numpy()
    return fs.subset(np.flatnonzero(~m)), fs.subset(np.flatnonzero(m))


def fit_frame(df: pd.DataFrame, predictor: str, *, params: dict[str, Any] | None = None,
              targets: list[str] | None = None, memsim: bool = False, workers: int = 2,
              valid_fraction: float = 0.1, seed: int = 0,
              progress: Callable[[str, int, int], None] | None = None):
    """Fit predictor ``predictor`` on all records of ``df`` (a validation part of
    ``valid_fraction`` of the models, for early stopping, when there are ≥ 10 models)."""
    from perfcast.labeled.frames import feature_set
    from perfcast.predictors import create_predictor

    fs = feature_set(df, workers=workers, memsim=memsim, progress=progress)
    if len(fs) == 0:
        raise PerfcastError("no usable record (no graph could be built for any model)")
    pred = create_predictor(predictor, **(params or {}))
    train, valid = fs, None
    n_models = fs.rows["model"].nunique()
    if pred.learns and valid_fraction > 0 and n_models >= 10:
        train, valid = hold_out_models(fs, max(1, int(round(valid_fraction * n_models))), seed)
    cb = (lambda i, n: progress("epochs", i, n)) if progress else None
    pred.fit(train, valid, targets=targets, progress=cb)
    return pred, fs


#: ``auto`` compares the recipes on held-out models only with at least this many models.
AUTO_MIN_MODELS = 8


def adapt_predictor(pred, fs, transfer: str = "auto", *, targets: list[str] | None = None,
                    epochs: int | None = None, seed: int = 0,
                    progress: Callable[[str, int, int], None] | None = None):
    """Adapt a fitted predictor to the labeled records ``fs`` with a transfer recipe (see
    :func:`fine_tune`) → ``(predictor, recipe used, held-out MAPE per recipe tried)``; the
    time it took lands in ``trained_on["fine_tune_seconds"]``."""
    import copy

    from perfcast.evaluation.metrics import mape

    if transfer not in TRANSFER_RECIPES:
        raise unknown_choice("transfer recipe", transfer, TRANSFER_RECIPES)
    targets = targets or [t for t in pred.targets_ if t in fs.labeled_targets()]

    def adapt(p, recipe: str, records):
        if recipe == "recalibrate":
            return p.recalibrate(records, targets=targets)
        if recipe == "scratch":  # same kind and hyper-parameters, new weights
            from perfcast.predictors import create_predictor

            params = {k: v for k, v in p.get_params().items() if k != "warm_start"}
            if epochs is not None and "epochs" in p.default_params():
                params["epochs"] = epochs
            cb = (lambda i, n: progress("epochs", i, n)) if progress else None
            return create_predictor(p.name, **params).fit(records, targets=targets, progress=cb)
        params = {"warm_start": True}
        if epochs is not None and "epochs" in p.default_params():
            params["epochs"] = epochs
        p.set_params(**params)
        cb = (lambda i, n: progress("epochs", i, n)) if progress else None
        p.fit(records, targets=targets, progress=cb)
        p.set_params(warm_start=False)
        return p

    recipe, scores = transfer, {}
    if transfer == "finetune" and "warm_start" not in pred.known_params():
        recipe = "recalibrate"  # no warm start (e.g. crossdevice): adapt its output instead
    if transfer in ("finetune", "scratch") and not pred.learns:
        raise PerfcastError(f"{pred.name} does not learn; use --transfer recalibrate")
    if transfer == "auto":
        n_models = fs.rows["model"].nunique()
        if not pred.learns:
            recipe = "recalibrate"
        elif n_models < AUTO_MIN_MODELS:
            recipe = "finetune" if "warm_start" in pred.known_params() else "recalibrate"
        else:
            fit_part, held = hold_out_models(fs, max(2, round(0.25 * n_models)), seed)
            for r in ("recalibrate", "finetune", "scratch"):
                if r == "finetune" and "warm_start" not in pred.known_params():
                    continue
                # scratch leaves the source untouched; the others adapt a copy of it
                src_copy = pred if r == "scratch" else copy.deepcopy(pred)
                yhat = adapt(src_copy, r, fit_part).predict(held)
                scores[r] = float(np.mean([mape(held.target(t), yhat[:, j])
                                           for j, t in enumerate(pred.targets_) if t in targets]))
            recipe = min(scores, key=scores.get)
    t0 = time.perf_counter()
    pred = adapt(pred, recipe, fs)
    pred.trained_on_["fine_tune_seconds"] = round(time.perf_counter() - t0, 2)
    return pred, recipe, scores


def fine_tune(init_from: str, data: str | os.PathLike, out: str | os.PathLike, *,
              device: str | None = None, epochs: int | None = None, workers: int = 2,
              transfer: str = "auto", seed: int = 0,
              progress: Callable[[str, int, int], None] | None = None):
    """Adapt a saved (or shipped) predictor to a user's measurements (e.g. another device) and
    save it to ``out``. ``init_from``: a directory or a shipped model id (``perfcast train
    --list``).

    ``transfer``: ``finetune`` continues training every weight on the records (``warm_start``);
    ``recalibrate`` keeps the model and maps its log prediction to the records
    (:meth:`~perfcast.predictors.base.Predictor.recalibrate`; the only choice for a predictor
    that does not learn); ``scratch`` trains a new predictor of the same kind and
    hyper-parameters on the records alone; ``auto`` (default) holds out a quarter of the
    records' models, scores the three on them and keeps the best (MAPE), refitted on every
    record — with fewer than :data:`AUTO_MIN_MODELS` models it fine-tunes. No recipe wins
    everywhere (benchmarks/trappm_transfer.py → reports/trappm/transfer.md): recalibration is
    best with few records between similar devices, fine-tuning with more, and between a GPU
    and a CPU a model trained from scratch overtakes both from ~64 records. The choice and the
    held-out scores land in ``trained_on["transfer"]``."""
    from perfcast.labeled.frames import feature_set
    from perfcast.predictors import load_predictor
    from perfcast.shipped import entry_path, manifest

    if transfer not in TRANSFER_RECIPES:
        raise unknown_choice("transfer recipe", transfer, TRANSFER_RECIPES)
    src = Path(init_from)
    if not src.exists():
        ids = {e["id"]: e for e in manifest()}
        if init_from not in ids:
            raise PerfcastError(f"--init-from {init_from!r}: no such directory and no shipped "
                                f"model of that id (shipped: {', '.join(sorted(ids)) or 'none'})")
        e = ids[init_from]
        src = entry_path(e)
    pred = load_predictor(src)
    from perfcast.datasets import load_labeled

    df = load_labeled(data)
    if device:  # a registry key or a spec file (then its key): the records of that device
        from perfcast.devices import get_device

        key = get_device(device).key
        df = df[df["device"].astype(str).isin({device, key})].assign(device=key)
    from perfcast.store.db import display_url

    shown = display_url(data)  # a store URL's password masked
    if len(df) == 0:
        raise PerfcastError(f"{shown}: no labeled record"
                            f"{' for device ' + device if device else ''}")
    fs = feature_set(df, workers=workers, memsim=bool(pred.trained_on_.get("memsim")),
                     plans=pred.uses_plans, progress=progress)
    targets = [t for t in pred.targets_ if t in fs.labeled_targets()]
    if not targets:
        raise PerfcastError(f"{shown}: no labels for the predictor's targets "
                            f"({', '.join(pred.targets_)})")

    pred, recipe, scores = adapt_predictor(pred, fs, transfer, targets=targets, epochs=epochs,
                                           seed=seed, progress=progress)
    pred.trained_on_["fine_tuned_from"] = str(init_from)
    pred.trained_on_["transfer"] = {"recipe": recipe, "asked": transfer, "records": len(fs),
                                    **({"held_out_mape": scores} if scores else {})}
    pred.save(out)
    return pred, fs


def write_manifest(entries: list[dict[str, Any]], root: Path) -> Path:
    from perfcast.features.records import FEATURE_LAYOUT_VERSION
    from perfcast.paths import write_file_atomically

    return write_file_atomically(root / "manifest.json", json.dumps(
        {"feature_layout": FEATURE_LAYOUT_VERSION, "models": entries}, indent=1))


RECIPES_DIR = package_data("training", "recipes")


def load_recipe(name: str) -> dict[str, Any]:
    """A training recipe: ``perfcast/training/recipes/<name>.json`` (package data) or a JSON file
    path."""
    p = Path(name)
    if not p.exists():
        p = RECIPES_DIR / f"{name}.json"
    if not p.exists():
        known = sorted(x.stem for x in RECIPES_DIR.glob("*.json"))
        raise unknown_choice("recipe", name, known)
    try:
        recipe = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PerfcastError(f"{p}: not valid JSON ({exc})") from None
    _check_recipe(recipe, p)
    return recipe


def _check_recipe(recipe: Any, path: Path) -> None:
    """A recipe is ``{"entries": [{"id", "predictor", "task" or "sources" + "targets"}, …]}``
    (see ``recipes/default.json``): anything else is a one-line error naming what is wrong."""
    where = f"{path}: not a training recipe"
    entries = recipe.get("entries") if isinstance(recipe, dict) else None
    if not isinstance(entries, list) or not entries:
        raise PerfcastError(f"{where} — it needs a non-empty \"entries\" list (see "
                            f"{RECIPES_DIR / 'default.json'})")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise PerfcastError(f"{where} — entries[{i}] is not an object")
        need = ["id", "predictor"] + ([] if e.get("task") else ["sources", "targets"])
        missing = [k for k in need if not e.get(k)]
        if missing:
            raise PerfcastError(f"{where} — entries[{i}] lacks {', '.join(missing)}")
        if not e.get("task") and not (isinstance(e["sources"], list)
                                      and isinstance(e["targets"], list)):
            raise PerfcastError(f"{where} — entries[{i}]: sources and targets are lists")


def _entry_task(e: dict[str, Any]):
    from perfcast.evaluation.tasks import Task

    if e.get("task"):  # a named evaluation task's records (same selection, same drops)
        from perfcast.evaluation.tasks import get_task

        return get_task(e["task"])
    return Task(name=e["id"], title=e["id"], loader=e.get("loader", "all"),
                sources=tuple(e["sources"]), targets=tuple(e["targets"]),
                memsim=bool(e.get("memsim")), drop_impossible=bool(e.get("drop_impossible")),
                plans=bool(e.get("plans")))


def default_recipe_dir(name: str) -> Path:
    """Where :func:`train_recipe` writes when no ``out_dir`` is given:
    ``data_home()/models/<recipe>`` (use it with ``PERFCAST_SHIPPED_DIR``)."""
    from perfcast.paths import data_home

    return data_home() / "models" / Path(name).stem


def train_recipe(name: str = "default", *, out_dir: str | os.PathLike | None = None,
                 workers: int = 2, only: list[str] | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 memsim_seed: str | os.PathLike | None = None) -> dict[str, Any]:
    """Train every entry of a recipe on all its (visible) records and write the models plus
    ``manifest.json`` to ``out_dir`` (default: :func:`default_recipe_dir` — never into the
    installed package; rebuilding the shipped models is ``out_dir="perfcast/shipped"``
    from a checkout). An entry with ``split_by`` trains one model per value combination (e.g.
    device × mode × precision). ``memsim_seed``: see :meth:`perfcast.evaluation.tasks.Task.load`."""
    import numpy as np

    from perfcast.predictors import create_predictor
    from perfcast import shipped
    from perfcast.shipped import manifest

    recipe = load_recipe(name)
    root = Path(out_dir) if out_dir else default_recipe_dir(name)
    t_all = time.perf_counter()
    old = {e["id"]: e for e in manifest(root)} if only else {}
    entries: list[dict[str, Any]] = []
    for rank, e in enumerate(recipe["entries"]):
        if only and e["id"] not in only:
            continue
        data = _entry_task(e).load(workers=workers, progress=progress, memsim_seed=memsim_seed)
        fs = data.fs
        groups: list[tuple[str, np.ndarray]] = [(e["id"], np.arange(len(fs)))]
        if e.get("split_by"):
            keys = fs.rows[e["split_by"]].astype(str).agg("-".join, axis=1).to_numpy()
            groups = [(f"{e['id']}-{k}", np.flatnonzero(keys == k)) for k in sorted(set(keys))]
        for gid, idx in groups:
            sub = fs.subset(idx)
            if len(sub) < int(e.get("min_records", 10)):
                continue
            t0 = time.perf_counter()
            pred = create_predictor(e["predictor"], **e.get("params", {}))
            train, valid = sub, None
            n_models = sub.rows["model"].nunique()
            if pred.learns and n_models >= 20 and e.get("early_stopping", True):
                train, valid = hold_out_models(sub, max(1, n_models // 10), int(e.get("seed", 0)))
            cb = (lambda i, n, g=gid: progress(f"fit {g}", i, n)) if progress else None
            pred.fit(train, valid, targets=list(e["targets"]), progress=cb)
            pred.trained_on_["early_stopping_records"] = int(len(valid)) if valid is not None else 0
            pred.trained_on_["drops"] = data.drops
            pred.save(root / gid)
            secs = round(time.perf_counter() - t0, 1)
            combos = sub.rows[["device", "mode", "precision"]].astype(str).drop_duplicates()
            if e.get("any_gpu"):  # one entry answering every GPU (device-conditioned)
                combos = pd.DataFrame([{"device": shipped.ANY_GPU, "mode": shipped.ANY,
                                        "precision": shipped.ANY}])
            for dev, mode, prec in combos.itertuples(index=False, name=None):
                entries.append({"id": gid if len(combos) == 1 else f"{gid}:{dev}-{mode}-{prec}",
                                "device": dev, "mode": mode, "precision": prec,
                                "targets": list(pred.targets_), "predictor": pred.name,
                                "path": gid, "memsim": bool(e.get("memsim")), "rank": rank,
                                "fit_seconds": secs, "trained_on": {
                                    "records": int(len(sub)),
                                    "models": int(sub.rows["model"].nunique()),
                                    "families": int(sub.rows["family"].nunique()),
                                    "sources": sorted(map(str, sub.rows["source"].unique())),
                                    "devices": sorted(map(str, sub.rows["device"].unique()))}})
    if only:  # keep the entries not retrained
        kept = [x for x in old.values() if x["path"] not in {y["path"] for y in entries}]
        entries = kept + entries
    entries.sort(key=lambda x: (x.get("rank", 0), x["id"]))  # first match wins in find()
    write_manifest(entries, root)
    return {"out": root, "models": entries, "seconds": round(time.perf_counter() - t_all, 1)}


def write_supports(name: str = "default", *, out_dir: str | os.PathLike | None = None,
                   workers: int = 2, only: list[str] | None = None,
                   progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Record the support (:class:`~perfcast.predictors.support.Support`: the batches and model
    sizes a model was fitted on) of every model of a recipe already trained into ``out_dir``,
    from the same records :func:`train_recipe` fits it on, without refitting: each model's
    ``config.json`` gets its ``support`` (what :func:`train_recipe` writes itself since
    supports exist). Records are selected as for training, without the tensor-memory
    simulation (a support needs batches and graph sizes only)."""
    import dataclasses

    from perfcast.predictors.base import CONFIG_FILE
    from perfcast.predictors.support import Support

    recipe = load_recipe(name)
    root = Path(out_dir) if out_dir else default_recipe_dir(name)
    done: dict[str, Any] = {}
    for e in recipe["entries"]:
        if only and e["id"] not in only:
            continue
        task = dataclasses.replace(_entry_task(e), memsim=False, drop_impossible=False,
                                   plans=False)
        fs = task.load(workers=workers, progress=progress).fs
        groups: list[tuple[str, Any]] = [(e["id"], None)]
        if e.get("split_by"):
            keys = fs.rows[e["split_by"]].astype(str).agg("-".join, axis=1).to_numpy()
            groups = [(f"{e['id']}-{k}", keys == k) for k in sorted(set(keys))]
        for gid, mask in groups:
            cfg = root / gid / CONFIG_FILE
            if not cfg.exists():
                continue
            sub = fs if mask is None else fs.subset(np.flatnonzero(mask))
            sup = Support.of_feature_sets(sub)
            doc = json.loads(cfg.read_text())
            if sup is None:
                doc.pop("support", None)
            else:
                doc["support"] = sup.to_json()
            tmp = cfg.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(doc, indent=1))
            os.replace(tmp, cfg)
            done[gid] = None if sup is None else sup.describe()
    return {"out": root, "supports": done}
