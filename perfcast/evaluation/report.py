"""The files an evaluation writes under ``reports/eval/<task>/<split>/``.

==============================  ==============================================================
``summary.md``                  the command that regenerates it, task / split, counts, drops,
                                the overall table with the papers' published numbers beside
                                ours, wall time per predictor fit
``metrics.csv``                 long: predictor, target, metric, mean, std, seeds (mean ± std
                                over seeds; metric ∈ n, n_missing, mape, mape_macro, rmse,
                                kendall, acc5, acc10)
``per_family.csv``              long: predictor, target, family, metric, mean, std, seeds
``per_family.md``               rows = families, columns = predictors' MAPE (as TraPPM Tables
                                II/III), one table per target
``seeds.csv``                   metrics per predictor × target × seed (pooled folds of a seed)
``fits.csv``                    per predictor × fold: sizes, fit / predict seconds, epochs
``folds.csv``                   per fold: train / validation / test records, models, families
``histories.csv``               per learned predictor × fold × epoch: train / validation loss
``predictions.csv``             test rows: record, model, family, batch_size, …, target,
                                actual, predicted, predictor, fold, seed
``run.json``                    the run's configuration and overall metrics (machine-readable)
``pred_vs_actual_<p>_<t>.png``  log-log predicted vs measured, y = x and the ±10 % band
``loss_<p>.png``                train / validation loss per epoch of a learned predictor
==============================  ==============================================================

The directory is written as a whole: every file goes to a temporary sibling directory that
replaces the report only when complete (an interrupted run leaves the previous report intact).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

UNITS = {"time_ms": "ms", "memory_mb": "MiB", "energy_j": "J"}
GROUPING_NOTE = (
    "All splits are **grouped by model**: every record of a model (all its batch sizes and input "
    "sizes) lands in the same part, so no model is both trained on and tested. Models with the "
    "same architecture (timm pretrained tags such as `resnet50.a1_in1k` / `resnet50.tv_in1k`) or "
    "identical graphs (same nodes, edges, MACs, parameters, activations and op-category counts "
    "at the same input — timm registers e.g. `deit_base_patch16_224` and `vit_base_patch16_224`, "
    "`legacy_senet154` and `senet154` under two names) form one group. The validation part "
    "(early stopping) is carved out of the training part only; scalers and every other "
    "statistic are fitted inside each predictor on its training part. Test records never intersect training or validation records (asserted per fold).")


def write_report(res, out: Path, plots: bool = True) -> Path:
    """Write ``res`` (an :class:`~perfcast.evaluation.run.EvalResult`) to ``out`` atomically."""
    from perfcast.paths import write_dir_atomically

    out = Path(out)
    res.out_dir = out
    return write_dir_atomically(out, lambda tmp: _write_all(res, tmp, plots))


def _write_all(res, d: Path, plots: bool) -> None:
    res.metrics.to_csv(d / "metrics.csv", index=False, float_format="%.6g")
    res.per_family.to_csv(d / "per_family.csv", index=False, float_format="%.6g")
    res.fold_metrics.to_csv(d / "seeds.csv", index=False, float_format="%.6g")
    res.fits.to_csv(d / "fits.csv", index=False, float_format="%.4g")
    fold_table(res).to_csv(d / "folds.csv", index=False)
    history_table(res).to_csv(d / "histories.csv", index=False, float_format="%.6g")
    res.predictions.to_csv(d / "predictions.csv", index=False, float_format="%.6g")
    (d / "per_family.md").write_text(per_family_markdown(res))
    (d / "run.json").write_text(json.dumps(run_json(res), indent=1))
    written = []
    if plots:
        written = write_plots(res, d)
    (d / "summary.md").write_text(summary_markdown(res, written))


# -- tables -------------------------------------------------------------------------------------

def history_table(res) -> pd.DataFrame:
    """One row per (predictor, fold, epoch) of the learned predictors: their loss columns."""
    rows = [{"predictor": p, "fold": f, **rec} for (p, f), hist in res.histories.items()
            for rec in hist or []]
    return pd.DataFrame(rows, columns=None if rows else ["predictor", "fold", "epoch"])


def fold_table(res) -> pd.DataFrame:
    fam = res.data.fs.families()
    rows = []
    for f in res.folds:
        r = {"fold": f.name, "seed": f.seed}
        for part in ("train", "valid", "test"):
            idx = getattr(f, part)
            r[f"{part}_records"] = len(idx)
            r[f"{part}_models"] = len(np.unique(res.groups[idx]))
            r[f"{part}_families"] = len(set(fam[idx].tolist()))
        if res.split == "unseen-family":
            r["test_family_names"] = " ".join(sorted(set(fam[f.test].tolist())))
        rows.append(r)
    return pd.DataFrame(rows)


def _metric(res, p: str, t: str, m: str) -> tuple[float, float]:
    g = res.metrics
    r = g[(g.predictor == p) & (g.target == t) & (g.metric == m)]
    if not len(r):
        return float("nan"), float("nan")
    return float(r["mean"].iloc[0]), float(r["std"].iloc[0])


def _fmt(x: float, digits: int = 2) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:,.{digits}f}"


def _pm(mean: float, std: float, digits: int = 2) -> str:
    s = _fmt(mean, digits)
    if s != "-" and std is not None and np.isfinite(std):
        s += f" ± {std:,.{digits}f}"
    return s


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def _targets_of(res, p: str) -> set[str]:
    return set(res.metrics[res.metrics.predictor == p]["target"])


def _predictor_names(res) -> list[str]:
    return [p for p, _ in res.predictors if p in set(res.metrics["predictor"])]


def overall_markdown(res) -> str:
    parts = []
    for t in res.targets:
        unit = UNITS.get(t, "")
        rows = []
        for p in _predictor_names(res):
            n, _ = _metric(res, p, t, "n")
            if not np.isfinite(n):
                continue
            miss, _ = _metric(res, p, t, "n_missing")
            rows.append([f"`{p}`", f"{n:,.0f}" + (f" ({miss:,.0f} NaN)" if miss else ""),
                         _pm(*_metric(res, p, t, "mape")), _pm(*_metric(res, p, t, "mape_macro")),
                         _pm(*_metric(res, p, t, "rmse"), digits=1),
                         _pm(*_metric(res, p, t, "kendall"), digits=3),
                         _pm(*_metric(res, p, t, "acc5"), digits=1),
                         _pm(*_metric(res, p, t, "acc10"), digits=1)])
        if not rows:
            continue
        hdr = ["predictor", "test records / seed", "MAPE %", "MAPE fam-avg %", f"RMSE {unit}",
               "Kendall τ", "Acc(5%) %", "Acc(10%) %"]
        parts.append(f"### {t} ({unit})\n\n" + _md_table(hdr, rows))
    return "\n\n".join(parts)


def published_markdown(res) -> str:
    if res.task is None or not res.task.published:
        return ""
    rows = []
    for pub in res.task.published:
        for t in pub.targets:
            if t not in res.targets:
                continue
            ours = "-"
            if pub.ours and pub.ours in _predictor_names(res) and t in _targets_of(res, pub.ours):
                m, s = _metric(res, pub.ours, t, "mape_macro" if pub.paper == "TraPPM" else "mape")
                ours = f"`{pub.ours}` {_pm(m, s)}"
            same = "this split" if pub.protocol == res.split else f"`{pub.protocol}`"
            rows.append([pub.paper, pub.method, t, f"{pub.mape:g}", pub.rmse, ours,
                         pub.their_split, same, pub.setting, pub.cite])
    if not rows:
        return ""
    hdr = ["paper", "method", "target", "published MAPE %", "published RMSE",
           "ours (this run, MAPE %)", "their split", "our closest split", "their setting", "source"]
    return _md_table(hdr, rows)


def per_family_markdown(res) -> str:
    pf = res.per_family
    title = (f"# Per-family MAPE (%) — task {res.task_name}, split {res.split}\n\n"
             f"Mean over {len(res.seeds)} seed(s) ({', '.join(map(str, res.seeds))}) of each "
             "family's MAPE on its test records (TraPPM Tables II/III layout). `fam-avg` = mean "
             "over families (TraPPM Table IV); `pooled` = MAPE over all test records.")
    parts = [title]
    for t in res.targets:
        sub = pf[(pf.target == t) & (pf.metric == "mape")]
        if not len(sub):
            continue
        nsub = pf[(pf.target == t) & (pf.metric == "n")]
        fams = sorted(set(sub["family"]))
        preds = [p for p in _predictor_names(res) if p in set(sub["predictor"])]
        rows = []
        for f in fams:
            nrec = nsub[nsub.family == f]["mean"]
            r = [f, _fmt(float(nrec.iloc[0]) if len(nrec) else float("nan"), 0)]
            for p in preds:
                v = sub[(sub.predictor == p) & (sub.family == f)]["mean"]
                r.append(_fmt(float(v.iloc[0])) if len(v) else "-")
            rows.append(r)
        rows.append(["**fam-avg**", ""] + [_fmt(_metric(res, p, t, "mape_macro")[0]) for p in preds])
        rows.append(["**pooled**", ""] + [_fmt(_metric(res, p, t, "mape")[0]) for p in preds])
        parts.append(f"## {t}\n\n" + _md_table(["family", "test records / seed",
                                                 *[f"`{p}`" for p in preds]], rows))
    return "\n\n".join(parts) + "\n"


def timing_markdown(res) -> str:
    if not len(res.fits):
        return ""
    rows = []
    for p in _predictor_names(res):
        g = res.fits[res.fits.predictor == p]
        rows.append([f"`{p}`", str(len(g)), _fmt(g.fit_s.mean(), 2), _fmt(g.fit_s.max(), 2),
                     _fmt(g.fit_s.sum(), 1), _fmt(g.predict_s.mean(), 3),
                     _fmt(g.epochs.mean(), 1) if g.epochs.max() > 0 else "-"])
    return _md_table(["predictor", "fits", "fit s (mean)", "fit s (max)", "fit s (total)",
                      "predict s (mean)", "epochs (mean)"], rows)


def data_markdown(res) -> str:
    fs = res.data.fs
    fam = fs.families()
    lines = [_md_table(["records", "models (groups)", "model names", "families", "graphs"],
                       [[f"{len(fs):,}", f"{len(np.unique(res.groups)):,}",
                         f"{fs.rows['model'].nunique():,}", f"{len(set(fam.tolist())):,}",
                         f"{len(set(fs.graph_index.tolist())):,}"]])]
    drops = [[r, f"{n:,}"] for r, n in res.data.drops.items()]
    info = res.data.info
    head = [["records in the task's source(s)", f"{info.get('source records', len(fs)):,}"]]
    tail = [["**records evaluated**", f"**{len(fs):,}**"]]
    lines.append(_md_table(["selection step", "records dropped"], head + drops + tail))
    extra = [f"{k}: {v:,}" for k, v in info.items() if k != "source records"]
    if extra:
        lines.append("Also: " + "; ".join(extra) + ".")
    per_target = ", ".join(f"{t} {int(np.isfinite(fs.target(t)).sum()):,}" for t in res.targets)
    lines.append(f"Labeled records per target: {per_target}.")
    tested = set()
    for f in res.folds:
        tested |= set(fam[f.test].tolist())
    never = sorted(set(fam.tolist()) - tested)
    if never:
        why = ("a single model, always in training" if res.split == "family-mc"
               else "in no test part")
        lines.append(f"Families never tested ({len(never)}; {why}): " + ", ".join(never) + ".")
    return "\n\n".join(lines)


def summary_markdown(res, plots: list[str] | None = None) -> str:
    from perfcast._version import __version__
    from perfcast.evaluation.splits import SPLITS

    t = res.task
    title = t.title if t else "custom feature set"
    s = [f"# Evaluation — task `{res.task_name}` ({title}), split `{res.split}`", "",
         f"Regenerate: `{res.command}`", "",
         f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by perfcast "
         f"{__version__} (feature layout `{res.data.fs.layout}`); wall time {res.wall_s:,.1f} s.",
         "", "## Task", ""]
    if t:
        s += [t.description + ".", ""]
    tlist = ", ".join(f"`{x}` ({UNITS.get(x, '')})" for x in res.targets)
    s += [f"Targets: {tlist}. Predictors: "
          + ", ".join(f"`{p}`" + (f" {json.dumps(pp)}" if pp else "") for p, pp in res.predictors)
          + ".", ""]
    s += ["## Split", "", f"`{res.split}`: {SPLITS[res.split]}.",
          f"Seeds: {', '.join(map(str, res.seeds))}"
          + (f"; K = {max(1, len(res.folds) // max(1, len(res.seeds)))} folds per seed "
             "(predictions of a seed's folds are pooled, then scored)" if res.split == "unseen-family"
             else "; one split per seed") + ". Reported: mean ± std over seeds.", "",
          GROUPING_NOTE, ""]
    ft = fold_table(res)
    cols = ["fold", "train_records", "train_models", "valid_records", "valid_models",
            "test_records", "test_models", "test_families"]
    s += [_md_table(["fold", "train rec.", "train models", "valid rec.", "valid models",
                     "test rec.", "test models", "test families"],
                    [[str(r[c]) for c in cols] for r in ft.to_dict("records")]), ""]
    s += ["## Data", "", data_markdown(res), ""]
    s += ["## Results", "",
          "Test-set metrics, mean ± std over seeds. MAPE = pooled over the test records; MAPE "
          "fam-avg = mean of the per-family MAPEs (how TraPPM's Table IV averages); Acc(x %) = % "
          "of predictions within x % of the measurement. Per family: [per_family.md](per_family.md).",
          "", overall_markdown(res), ""]
    pub = published_markdown(res)
    if pub:
        s += ["### Published numbers", "",
              "As printed in the papers — measured on *their* datasets, devices and software, "
              "and split by graph / configuration where ours groups every record of a model "
              "into one part — so they set a scale, not a like-for-like comparison. \"ours\" is "
              "the same method in this run (fam-avg MAPE beside TraPPM's family-averaged "
              "numbers, pooled MAPE otherwise).", "", pub, ""]
    if res.failures or res.skipped:
        s += ["## Not evaluated", ""]
        s += [f"- `{p}` failed ({m}); its results are left out." for p, m in res.failures.items()]
        s += [f"- `{p}` skipped: {m}." for p, m in res.skipped.items()]
        s += [""]
    s += ["## Wall time per predictor fit", "", timing_markdown(res), ""]
    if plots:
        s += ["## Plots", ""] + [f"- [{p}]({p})" for p in plots] + [""]
    return "\n".join(s)


def run_json(res) -> dict:
    return {"task": res.task_name, "split": res.split, "seeds": res.seeds,
            "predictors": [{"name": p, "params": pp} for p, pp in res.predictors],
            "targets": res.targets, "command": res.command, "records": len(res.data.fs),
            "models": int(len(np.unique(res.groups))),
            "families": int(len(set(res.data.fs.families().tolist()))),
            "drops": res.data.drops, "info": res.data.info,
            "folds": [f.name for f in res.folds], "failures": res.failures,
            "skipped": res.skipped, "wall_s": round(res.wall_s, 2), "metrics": res.overall()}


# -- plots ------------------------------------------------------------------------------------------

def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_plots(res, d: Path) -> list[str]:
    """Scatter per predictor × target, loss curves per learned predictor; the file names."""
    try:
        plt = _plt()
    except ImportError:  # matplotlib is optional
        return []
    names = []
    for (p, t), g in res.predictions.groupby(["predictor", "target"], sort=False):
        fn = f"pred_vs_actual_{_safe(p)}_{t}.png"
        _scatter(plt, res, p, t, g, d / fn)
        names.append(fn)
    for p in _predictor_names(res):
        hist = {f: h for (pp, f), h in res.histories.items() if pp == p and h}
        if hist:
            fn = f"loss_{_safe(p)}.png"
            if _loss_plot(plt, res, p, hist, d / fn):
                names.append(fn)
    return names


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _scatter(plt, res, p, t, g, path: Path) -> None:
    y = g["actual"].to_numpy(float)
    yh = g["predicted"].to_numpy(float)
    ok = np.isfinite(y) & (y > 0) & np.isfinite(yh)
    y, yh = y[ok], yh[ok]
    nonpos = int((yh <= 0).sum())
    lo = float(np.min(y)) if len(y) else 1.0
    yh = np.where(yh > 0, yh, lo / 10)
    fig, ax = plt.subplots(figsize=(5.2, 5.0), dpi=110)
    if len(y):
        a = min(y.min(), yh.min()) / 1.5
        b = max(y.max(), yh.max()) * 1.5
        xs = np.geomspace(a, b, 50)
        ax.fill_between(xs, xs * 0.9, xs * 1.1, color="tab:green", alpha=0.18, lw=0, label="±10 %")
        ax.plot(xs, xs, color="black", lw=0.8, label="y = x")
        ax.scatter(y, yh, s=6, alpha=0.4, color="tab:blue", lw=0, label="test records")
        ax.set_xlim(a, b)
        ax.set_ylim(a, b)
    ax.set_xscale("log")
    ax.set_yscale("log")
    unit = UNITS.get(t, "")
    ax.set_xlabel(f"measured {t} ({unit})")
    ax.set_ylabel(f"predicted {t} ({unit})")
    m, sd = _metric(res, p, t, "mape")
    tau, _ = _metric(res, p, t, "kendall")
    extra = f", {nonpos} pred. ≤ 0 shown at the floor" if nonpos else ""
    ax.set_title(f"{p} · task {res.task_name} · {res.split}\nMAPE {_pm(m, sd)} %, τ {_fmt(tau, 3)}, "
                 f"n {len(y):,}{extra}", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, which="both", alpha=0.2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _loss_plot(plt, res, p, hist: dict[str, list[dict]], path: Path) -> bool:
    fig, ax = plt.subplots(figsize=(6.0, 4.0), dpi=110)
    keys: list[str] = []
    for h in hist.values():
        for e in h:
            for k, v in e.items():
                if k != "epoch" and "loss" in k and isinstance(v, (int, float)) and k not in keys:
                    keys.append(k)
    if not keys:
        plt.close(fig)
        return False
    allpos = True
    for ci, k in enumerate(keys):
        for fi, (fold, h) in enumerate(hist.items()):
            xs = [e.get("epoch", i + 1) for i, e in enumerate(h) if k in e]
            ys = [float(e[k]) for e in h if k in e]
            if not ys:
                continue
            allpos &= all(v > 0 for v in ys if math.isfinite(v))
            ax.plot(xs, ys, color=f"C{ci}", alpha=0.85 if fi == 0 else 0.35, lw=1.0,
                    label=k if fi == 0 else None)
    if allpos:
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title(f"{p} · task {res.task_name} · {res.split} — {len(hist)} fold(s) "
                 "(first fold opaque)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
