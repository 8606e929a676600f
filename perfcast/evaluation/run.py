"""The evaluation runner: fit every predictor on every fold, predict the test part, score.

    from perfcast.evaluation import evaluate
    res = evaluate("a", "unseen-family", ["xgboost", ("dippm", {"epochs": 40})],
                   out_dir="reports/eval")
    res.metrics          # long table: predictor, target, metric, mean, std, seeds
    res.out_dir          # reports/eval/a/unseen-family/ (see perfcast.evaluation.report)

Scores are computed per *replicate* = per seed: for ``random`` and ``family-mc`` a seed is one
split; for ``unseen-family`` a seed is one K-fold partition whose K test parts together cover
every record once, so its predictions are pooled before scoring. Reported numbers are the mean
± std over seeds. Scalers and every other statistic are fitted inside the predictors on their
training part only; the test part of a fold is never shown to ``fit``.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.evaluation.metrics import METRICS, regression_metrics
from perfcast.evaluation.splits import (
    DEFAULT_SEEDS,
    SPLITS,
    Fold,
    check_disjoint,
    make_splits,
    model_groups,
)
from perfcast.evaluation.tasks import Task, TaskData, get_task
from perfcast.features.records import FeatureSet

PredictorSpec = str | tuple[str, dict[str, Any]]
Progress = Callable[[str, int, int], None]

#: Record metadata copied into predictions.csv.
PRED_COLUMNS = ("model", "family", "device", "mode", "precision", "batch_size", "input_size")


@dataclass
class EvalResult:
    """Everything an evaluation produced (the report is written from this)."""

    task_name: str
    task: Task | None
    split: str
    seeds: list[int]
    predictors: list[tuple[str, dict[str, Any]]]
    targets: list[str]
    data: TaskData
    groups: np.ndarray
    folds: list[Fold]
    predictions: pd.DataFrame  # one row per test record × target × predictor × fold
    fold_metrics: pd.DataFrame  # per predictor × target × seed (pooled folds of the seed)
    metrics: pd.DataFrame  # long: predictor, target, metric, mean, std, seeds
    per_family: pd.DataFrame  # long: predictor, target, family, metric, mean, std, seeds
    fits: pd.DataFrame  # per predictor × fold: fit_s, predict_s, epochs, sizes
    histories: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    command: str = ""
    wall_s: float = 0.0
    out_dir: Path | None = None
    k: int = 5

    def overall(self) -> list[dict[str, Any]]:
        """Per predictor × target: every metric's mean and std (the ``--json`` output)."""
        out = []
        for (p, t), g in self.metrics.groupby(["predictor", "target"], sort=False):
            d: dict[str, Any] = {"predictor": p, "target": t}
            for r in g.itertuples():
                d[r.metric] = _num(r.mean)
                if r.metric not in ("n", "n_missing"):
                    d[f"{r.metric}_std"] = _num(r.std)
            d["seeds"] = int(g["seeds"].max())
            out.append(d)
        return out


def _num(x) -> float | None:
    x = float(x)
    return None if not np.isfinite(x) else round(x, 6)


def parse_predictors(predictors: Sequence[PredictorSpec]) -> list[tuple[str, dict[str, Any]]]:
    """Normalize ``["xgboost", ("dippm", {"epochs": 40})]``; duplicate names are an error."""
    out: list[tuple[str, dict[str, Any]]] = []
    for p in predictors:
        name, params = (p, {}) if isinstance(p, str) else (p[0], dict(p[1] or {}))
        if any(n == name for n, _ in out):
            raise PerfcastError(f"predictor {name!r} given twice")
        out.append((str(name), params))
    if not out:
        raise PerfcastError("no predictor to evaluate")
    return out


def check_predictors(specs: list[tuple[str, dict[str, Any]]], targets: Sequence[str],
                     explicit: bool = True) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """Unknown predictor / hyper-parameter → :class:`PerfcastError` (before any data is
    loaded). Predictors that cannot learn any of ``targets`` are an error when ``explicit``,
    else skipped (returned in the second value with the reason)."""
    from perfcast.predictors import create_predictor

    keep, skipped = [], {}
    for name, params in specs:
        pred = create_predictor(name, **params)
        unknown = set(pred.get_params()) - set(pred.known_params())
        if unknown:
            raise PerfcastError(f"{name}: unknown hyper-parameter(s) {', '.join(sorted(unknown))} "
                                f"(known: {', '.join(sorted(pred.known_params())) or 'none'})")
        sup = pred.supported_targets
        if sup is not None and not set(sup) & set(targets):
            msg = f"predicts {', '.join(sup)} only; the task's targets are {', '.join(targets)}"
            if explicit:
                raise PerfcastError(f"{name}: {msg}")
            skipped[name] = msg
            continue
        keep.append((name, params))
    return keep, skipped


def _default_command(task_name: str, split: str, specs, seeds, out_root, build_missing: bool,
                     k: int, memsim_seed=None) -> str:
    args = ["perfcast", "evaluate", "--task", task_name, "--split", split,
            "--predictors", ",".join(n for n, _ in specs),
            "--seeds", ",".join(str(s) for s in seeds)]
    if out_root is not None:
        args += ["--out", str(out_root)]
    if split == "unseen-family" and k != 5:
        args += ["--folds", str(k)]
    for n, params in specs:
        for key, v in params.items():
            args += ["--param", f"{n}.{key}={_param_text(v)}"]
    if not build_missing:
        args.append("--no-build")
    if memsim_seed is not None:
        args += ["--memsim-seed", str(memsim_seed)]
    return shlex.join(args)


def _param_text(v) -> str:
    import json

    return v if isinstance(v, str) else json.dumps(v)


def evaluate(task: str | Task | FeatureSet, split: str, predictors: Sequence[PredictorSpec] | None = None,
             seeds: Sequence[int] | None = None, out_dir: str | os.PathLike | None = None,
             progress: Progress | None = None, *, build_missing: bool = True, workers: int = 2,
             data_dir: str | os.PathLike | None = None, k: int = 5, valid_frac: float = 0.15,
             targets: Sequence[str] | None = None, task_name: str | None = None,
             command: str | None = None, plots: bool = True,
             strict: bool | None = None,
             memsim_seed: str | os.PathLike | None = None,
             ray_address: str | None = None) -> EvalResult:
    """Evaluate ``predictors`` on ``task`` (a name of :data:`~perfcast.evaluation.tasks.TASKS`, a
    :class:`Task`, or a ready :class:`FeatureSet`) under ``split`` and write the report to
    ``out_dir/<task>/<split>/`` (``out_dir=None``: no files). ``progress(stage, i, n)`` gets
    ``graphs`` / ``features`` (data), ``fits`` (one per predictor × fold) and ``epochs``.
    ``strict`` (default: ``predictors`` was given): a predictor that cannot learn any of the
    task's targets is an error, else it is skipped (and listed in the summary).
    ``memsim_seed``: see :meth:`~perfcast.evaluation.tasks.Task.load`.
    ``ray_address`` (:mod:`perfcast.distributed`; ``local`` starts a cluster of ``workers``
    CPUs): the fits (predictor × fold) run as Ray tasks of one CPU each, the feature set put in
    the object store once; results are taken in the serial order, so the report is the same
    (up to floating-point differences of one thread per fit)."""
    t_start = time.perf_counter()
    if split not in SPLITS:
        raise unknown_choice("split", split, SPLITS)
    seeds = [int(s) for s in seeds] if seeds else list(DEFAULT_SEEDS[split])
    if len(set(seeds)) != len(seeds):
        raise PerfcastError(f"duplicate seeds in {seeds}")
    if k < 2:
        raise PerfcastError(f"need at least 2 folds, got {k}")
    if isinstance(task, FeatureSet):
        task_obj, name = None, task_name or "custom"
        task_targets = list(targets) if targets else task.labeled_targets()
    else:
        task_obj = get_task(task)
        name = task_name or task_obj.name
        task_targets = list(targets) if targets else list(task_obj.targets)
        bad = [t for t in task_targets if t not in task_obj.targets]
        if bad:
            raise PerfcastError(f"task {task_obj.name} has no target {', '.join(bad)} "
                                f"(its targets: {', '.join(task_obj.targets)})")
    explicit = (predictors is not None) if strict is None else bool(strict)
    if predictors is None:
        predictors = list(task_obj.default_predictors) if task_obj else ["xgboost"]
    specs, skipped = check_predictors(parse_predictors(predictors), task_targets, explicit)
    if not specs:
        raise PerfcastError("no predictor can learn the task's targets: "
                            + "; ".join(f"{n} {m}" for n, m in skipped.items()))
    if command is None:
        command = (_default_command(name, split, specs, seeds, out_dir, build_missing, k,
                                    memsim_seed)
                   if task_obj is not None else
                   "perfcast.evaluation.evaluate(<FeatureSet>, ...) from Python (no CLI equivalent)")

    # -- data ---------------------------------------------------------------------------------
    if task_obj is None:
        data = TaskData(fs=task, drops={"no graph (not built / failed / unsupported precision)":
                                        int(task.rows.attrs.get("dropped", 0))},
                        info={"source records": len(task) + int(task.rows.attrs.get("dropped", 0))})
    else:
        data = task_obj.load(data_dir=data_dir, build_missing=build_missing, workers=workers,
                             progress=progress, memsim_seed=memsim_seed)
    fs = data.fs
    task_targets = [t for t in task_targets if t in fs.target_names]
    if len(fs) == 0:
        raise PerfcastError(f"task {name}: no usable record left (drops: "
                            + ", ".join(f"{r} {n}" for r, n in data.drops.items() if n) + ")")
    groups = model_groups(fs.rows, fs.summaries, fs.graph_index)
    folds = make_splits(split, groups, fs.families(), seeds, k=k, valid_frac=valid_frac,
                        devices=fs.rows["device"].astype(str).to_numpy())

    # -- fits -----------------------------------------------------------------------------------
    pred_frames, fit_rows = [], []
    histories: dict[tuple[str, str], list[dict]] = {}
    failures: dict[str, str] = {}
    total = len(specs) * len(folds)
    done = 0
    meta = fs.rows.reindex(columns=list(PRED_COLUMNS))
    for fold in folds:
        check_disjoint(fold.train, fold.valid, fold.test, groups)
    fitted = (_fits_on_ray(ray_address, specs, fs, folds, task_targets, progress, workers)
              if ray_address is not None else None)
    for pname, params in specs:
        for fold in folds:
            if progress and fitted is None:
                progress(f"fits {pname} {fold.name}", done, total)
            try:
                if fitted is not None:
                    rec = fitted[(pname, fold.name)]
                    if isinstance(rec, BaseException):
                        raise rec
                else:
                    rec = _fit_predict(pname, params, fs, fold, task_targets, progress)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - one failing predictor must not sink the run
                if os.environ.get("PERFCAST_DEBUG"):
                    raise
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                failures[pname] = f"{fold.name}: {type(exc).__name__}: {first}"
                done += len(folds) - folds.index(fold)
                break
            done += 1
            pred, yhat, fit_s, pred_s = rec
            histories[(pname, fold.name)] = list(getattr(pred, "history_", []) or [])
            fit_rows.append({"predictor": pname, "fold": fold.name, "seed": fold.seed,
                             "train_records": len(fold.train), "valid_records": len(fold.valid),
                             "test_records": len(fold.test),
                             "train_models": len(np.unique(groups[fold.train])),
                             "valid_models": len(np.unique(groups[fold.valid])),
                             "test_models": len(np.unique(groups[fold.test])),
                             "fit_s": fit_s, "predict_s": pred_s,
                             "epochs": sum(1 for e in histories[(pname, fold.name)]
                                           if isinstance(e, dict) and "epoch" in e)})
            for j, t in enumerate(pred.targets_):
                if t not in task_targets:
                    continue
                df = meta.iloc[fold.test].reset_index(drop=True)
                df.insert(0, "record", fold.test)
                df["target"] = t
                df["actual"] = fs.target(t)[fold.test]
                df["predicted"] = yhat[:, j]
                df["predictor"] = pname
                df["fold"] = fold.name
                df["seed"] = fold.seed
                pred_frames.append(df)
        else:
            continue
        # the predictor failed: drop its partial results
        pred_frames = [f for f in pred_frames if f["predictor"].iloc[0] != pname]
        fit_rows = [r for r in fit_rows if r["predictor"] != pname]
    if progress:
        progress("fits done", total, total)
    if not pred_frames:
        raise PerfcastError("every predictor failed: " + "; ".join(f"{n}: {m}" for n, m in failures.items()))
    predictions = pd.concat(pred_frames, ignore_index=True)
    fold_metrics, metrics, per_family = score(predictions)
    res = EvalResult(task_name=name, task=task_obj, split=split, seeds=seeds, predictors=specs,
                     targets=task_targets, data=data, groups=groups, folds=folds,
                     predictions=predictions, fold_metrics=fold_metrics, metrics=metrics,
                     per_family=per_family, fits=pd.DataFrame(fit_rows), histories=histories,
                     failures=failures, skipped=skipped, command=command, k=k)
    res.wall_s = time.perf_counter() - t_start
    if out_dir is not None:
        from perfcast.evaluation.report import write_report

        res.out_dir = write_report(res, Path(out_dir) / name / split, plots=plots)
    return res


def _fit_task(pname: str, params: dict, fs: FeatureSet, fold: Fold, targets: list[str]):
    """A Ray task: :func:`_fit_predict` without progress, returning what the report needs of
    the fitted predictor (its targets and history), not the predictor itself."""
    from types import SimpleNamespace

    pred, yhat, fit_s, pred_s = _fit_predict(pname, params, fs, fold, targets, None)
    return (SimpleNamespace(targets_=list(pred.targets_),
                            history_=list(getattr(pred, "history_", []) or [])),
            yhat, fit_s, pred_s)


def _fits_on_ray(address: str, specs, fs: FeatureSet, folds: list[Fold], targets: list[str],
                 progress: Progress | None, workers: int) -> dict[tuple[str, str], Any]:
    """Every (predictor, fold) fit as a Ray task → its result or its exception (a failed task
    is the predictor's failure on that fold, as in the serial loop)."""
    from perfcast.distributed import as_completed, cluster

    total = len(specs) * len(folds)
    out: dict[tuple[str, str], Any] = {}
    with cluster(address, num_cpus=max(1, workers)) as ray:
        fs_ref = ray.put(fs)  # once, shared by every task
        task = ray.remote(_fit_task)
        refs = {task.options(num_cpus=1, max_retries=0).remote(pname, params, fs_ref, fold,
                                                               targets): (pname, fold.name)
                for pname, params in specs for fold in folds}
        if progress:
            progress("fits on ray", 0, total)
        for i, (ref, result, exc) in enumerate(as_completed(ray, refs)):
            cause = getattr(exc, "cause", None) if exc is not None else None
            out[refs[ref]] = (cause if isinstance(cause, Exception) else exc) if exc else result
            if progress:
                progress(f"fits {refs[ref][0]} {refs[ref][1]}", i + 1, total)
    return out


def _fit_predict(pname: str, params: dict, fs: FeatureSet, fold: Fold, targets: list[str],
                 progress: Progress | None):
    from perfcast.predictors import create_predictor

    pred = create_predictor(pname, **params)
    train = fs.subset(fold.train)
    valid = fs.subset(fold.valid) if len(fold.valid) else None
    cb = (lambda i, n: progress(f"epochs {pname} {fold.name}", i, n)) if progress else None
    t0 = time.perf_counter()
    pred.fit(train, valid, targets=[t for t in targets
                                    if pred.supported_targets is None or t in pred.supported_targets],
             progress=cb)
    t1 = time.perf_counter()
    yhat = pred.predict(fs.subset(fold.test))
    t2 = time.perf_counter()
    if yhat.shape != (len(fold.test), len(pred.targets_)):
        raise PerfcastError(f"{pname}: predict returned shape {yhat.shape}, expected "
                            f"{(len(fold.test), len(pred.targets_))}")
    return pred, yhat, t1 - t0, t2 - t1


def score(predictions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(per_seed, metrics, per_family)`` of a predictions table: metrics per predictor ×
    target × seed on the seed's pooled test predictions, then mean ± std over seeds (long
    tables). ``mape_macro`` = the mean of the per-family MAPEs (how TraPPM's Table IV averages
    its per-family Tables II/III)."""
    rows, fam_rows = [], []
    for (p, t, s), g in predictions.groupby(["predictor", "target", "seed"], sort=False):
        m = regression_metrics(g["actual"].to_numpy(), g["predicted"].to_numpy())
        fam_mapes = []
        for f, gf in g.groupby("family", sort=True):
            mf = regression_metrics(gf["actual"].to_numpy(), gf["predicted"].to_numpy())
            if mf["n"]:
                fam_rows.append({"predictor": p, "target": t, "seed": s, "family": f, **mf})
                fam_mapes.append(mf["mape"])
        m["mape_macro"] = float(np.mean(fam_mapes)) if fam_mapes else float("nan")
        rows.append({"predictor": p, "target": t, "seed": s, **m})
    per_seed = pd.DataFrame(rows)
    names = ["n", "n_missing", *METRICS[:1], "mape_macro", *METRICS[1:]]
    metrics = _long(per_seed, ["predictor", "target"], names)
    per_family = _long(pd.DataFrame(fam_rows), ["predictor", "target", "family"],
                       ["n", *METRICS]) if fam_rows else pd.DataFrame(
        columns=["predictor", "target", "family", "metric", "mean", "std", "seeds"])
    return per_seed, metrics, per_family


def _long(df: pd.DataFrame, keys: list[str], names: list[str]) -> pd.DataFrame:
    out = []
    for kv, g in df.groupby(keys, sort=False):
        kv = kv if isinstance(kv, tuple) else (kv,)
        for mname in names:
            v = g[mname].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            out.append({**dict(zip(keys, kv)), "metric": mname,
                        "mean": float(v.mean()) if len(v) else float("nan"),
                        "std": float(v.std(ddof=1)) if len(v) > 1 else float("nan"),
                        "seeds": int(len(g))})
    return pd.DataFrame(out)
