"""TraPPM beside the other predictors (issue #6 item 4) → reports/trappm/comparison.md + plots.

Reads the evaluation reports written by `benchmarks/run_evaluations.sh` (reports/eval/: dippm,
nnlqp, mlp, xgboost, roofline / memsim) and `benchmarks/trappm_evaluate.sh` (reports/trappm/eval*:
trappm with the shipped GAE encoder, a random frozen encoder, the GraphMAE encoder, the Huber
loss), checks that both used the same splits (folds.csv: per fold the test families and record
counts) and writes one comparison: overall MAPE per task × split, per-family MAPE (TraPPM's
Tables II/III form), the epoch-vs-loss convergence plot (TraPPM Fig. 5) and the ablation.

    .venv/bin/python benchmarks/trappm_report.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
R = ROOT / "reports" / "trappm"
TASKS = {"a": "RTX 3090 train step time", "b": "RTX 4090 inference", "c-i9": "i9-10940X inference",
         "c-i7": "i7-12700H inference", "e": "A100 train memory"}
SPLITS = ("unseen-family", "family-mc")
#: column → (report root, predictor name in it)
COLUMNS = {
    "trappm": (R / "eval", "trappm"),
    "trappm (random enc.)": (R / "eval-random", "trappm"),
    "trappm (GraphMAE enc.)": (R / "eval-graphmae", "trappm"),
    "trappm (Huber)": (R / "eval-huber", "trappm"),
    "trappm (GAE, linear out)": (R / "eval-gae-linear-out", "trappm"),
    "dippm": (ROOT / "reports" / "eval", "dippm"),
    "nnlqp": (ROOT / "reports" / "eval", "nnlqp"),
    "mlp": (ROOT / "reports" / "eval", "mlp"),
    "xgboost": (ROOT / "reports" / "eval", "xgboost"),
    "roofline / memsim": (ROOT / "reports" / "eval", None),
}


def _analytical(df: pd.DataFrame) -> str:
    """The task's analytical baseline in a report (memsim for memory, else the roofline)."""
    return "memsim" if (df.predictor == "memsim").any() else "roofline"


def _metric(root: Path, task: str, split: str, predictor: str | None, target: str):
    f = root / task / split / "metrics.csv"
    if not f.exists():
        return None
    m = pd.read_csv(f)
    predictor = predictor or _analytical(m)
    r = m[(m.predictor == predictor) & (m.target == target) & (m.metric == "mape")]
    return (float(r["mean"].iloc[0]), float(r["std"].fillna(0).iloc[0])) if len(r) else None


def _median_ape(root: Path, task: str, split: str, predictor: str | None, target: str):
    """Median absolute percentage error over the test records (robust to single blow-ups)."""
    f = root / task / split / "predictions.csv"
    if not f.exists():
        return None
    d = pd.read_csv(f, usecols=["predictor", "target", "actual", "predicted"])
    predictor = predictor or _analytical(d)
    d = d[(d.predictor == predictor) & (d.target == target)]
    if not len(d):
        return None
    return float(np.median(np.abs(d.predicted - d.actual) / d.actual) * 100)


def _target(task: str) -> str:
    return "memory_mb" if task == "e" else "time_ms"


def _folds(root: Path, task: str, split: str):
    """The test records of every fold (from predictions.csv): fold → set of (model, batch)."""
    f = root / task / split / "predictions.csv"
    if not f.exists():
        return None
    d = pd.read_csv(f, usecols=["fold", "model", "batch_size"]).drop_duplicates()
    return {k: set(map(tuple, g[["model", "batch_size"]].astype(str).values))
            for k, g in d.groupby("fold")}


def same_splits() -> list[str]:
    """Reports whose folds differ from reports/eval's (should be none)."""
    bad = []
    for task in TASKS:
        for split in SPLITS:
            ref = _folds(ROOT / "reports" / "eval", task, split)
            for col, (root, _) in COLUMNS.items():
                got = _folds(root, task, split)
                if ref is not None and got is not None and got != ref:
                    bad.append(f"{col} {task}/{split}")
    return bad


def overall(median: bool = False) -> tuple[str, pd.DataFrame]:
    rows = []
    for task, title in TASKS.items():
        for split in SPLITS:
            r = {"task": f"({task}) {title}", "split": split}
            for col, (root, p) in COLUMNS.items():
                if median:
                    v = _median_ape(root, task, split, p, _target(task))
                    r[col] = np.nan if v is None else v
                    continue
                v = _metric(root, task, split, p, _target(task))
                r[col] = v[0] if v else np.nan
            if any(np.isfinite(r[c]) for c in COLUMNS):
                rows.append(r)
    df = pd.DataFrame(rows)
    cols = list(COLUMNS)
    lines = ["| task | split | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    learned = ["trappm", "dippm", "nnlqp", "mlp", "xgboost"]
    for _, r in df.iterrows():
        vals = [r[c] for c in learned if np.isfinite(r[c])]
        best = min(vals) if vals else None
        cells = []
        for c in cols:
            v = r[c]
            s = "–" if not np.isfinite(v) else f"{v:.2f}"
            if best is not None and c in learned and np.isfinite(v) and v == best:
                s = f"**{s}**"
            cells.append(s)
        lines.append(f"| {r.task} | {r.split} | " + " | ".join(cells) + " |")
    return "\n".join(lines), df


def per_family(task: str, split: str = "family-mc") -> str:
    target = _target(task)
    frames = {}
    for col, (root, p) in COLUMNS.items():
        f = root / task / split / "per_family.csv"
        if p is None or not f.exists():
            continue
        d = pd.read_csv(f)
        d = d[(d.predictor == p) & (d.target == target) & (d.metric == "mape")]
        if len(d):
            frames[col] = d.set_index("family")["mean"]
    if not frames:
        return ""
    t = pd.DataFrame(frames)
    cols = [c for c in ("trappm", "trappm (random enc.)", "dippm", "nnlqp", "mlp", "xgboost")
            if c in t]
    t = t[cols].sort_index()
    lines = ["| family | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for fam, r in t.iterrows():
        best = np.nanmin(r.to_numpy(dtype=float))
        lines.append(f"| {fam} | " + " | ".join(
            ("–" if not np.isfinite(v) else (f"**{v:.1f}**" if v == best else f"{v:.1f}"))
            for v in r.to_numpy(dtype=float)) + " |")
    wins = (t.to_numpy(dtype=float) == np.nanmin(t.to_numpy(dtype=float), axis=1,
                                                 keepdims=True)).sum(axis=0)
    lines.append("| families won | " + " | ".join(str(int(w)) for w in wins) + " |")
    return "\n".join(lines)


def convergence_plot(task: str, split: str, path: Path) -> bool:
    """Mean validation loss per epoch over the folds (TraPPM Fig. 5): trappm, its random-encoder
    ablation and the supervised GNN/MLP baselines of reports/trappm/eval-baselines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {"trappm": R / "eval", "trappm (random enc.)": R / "eval-random",
              "nnlqp": R / "eval-baselines", "dippm": R / "eval-baselines",
              "mlp": R / "eval-baselines"}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    drawn = False
    for label, root in series.items():
        f = root / task / split / "histories.csv"
        if not f.exists():
            continue
        h = pd.read_csv(f)
        name = "trappm" if label.startswith("trappm") else label
        h = h[h.predictor == name]
        if not len(h):
            continue
        for ax, col in zip(axes, ("train_loss", "valid_loss")):
            if col in h:
                m = h.groupby("epoch")[col].mean()
                ax.plot(m.index, m.values, label=label)
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    for ax, col in zip(axes, ("training loss", "validation loss")):
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"{col} (standardised log target)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"task {task} ({TASKS[task]}), {split}: mean over folds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def corpus_summary(corpus: Path) -> str:
    """Composition and build time of the unlabeled corpus (from its index.csv)."""
    f = corpus / "index.csv"
    if not f.exists():
        return ""
    d = pd.read_csv(f)
    ok = d[d.status == "ok"]

    def kind(r) -> str:
        if r["mode"] == "train":
            return "training graphs, 224 px, batch 8"
        b = "batch 1" if r["batch_size"] == 1 else "batch 2–128 (one symbolic-batch trace)"
        return f"inference, {r['input_size']} px, {b}"

    d = d.assign(kind=d.apply(kind, axis=1))
    rows = ["| part | graphs ok | failed / timeout | models | families | worker time (h) | "
            "s per graph |", "|---|---|---|---|---|---|---|"]
    for k, g in d.groupby("kind", sort=True):
        g_ok = g[g.status == "ok"]
        rows.append(f"| {k} | {len(g_ok):,} | {len(g) - len(g_ok):,} | {g_ok.model.nunique():,} | "
                    f"{g_ok.family.nunique()} | {g.seconds.sum() / 3600:.2f} | "
                    f"{g.seconds.sum() / max(len(g), 1):.2f} |")
    rows.append(f"| **all** | **{len(ok):,}** | {len(d) - len(ok):,} | {ok.model.nunique():,} | "
                f"{ok.family.nunique()} | {d.seconds.sum() / 3600:.2f} | "
                f"{d.seconds.sum() / max(len(d), 1):.2f} |")
    nodes = ok.nodes.astype(float)
    size_mb = sum(p.stat().st_size for p in (corpus / "graphs").glob("*.npz")) / 2**20
    return "\n".join(
        [f"Corpus `{corpus}`: {len(ok):,} graphs ({ok.model.nunique():,} timm models, "
         f"{ok.family.nunique()} families; nodes per graph median {nodes.median():.0f}, max "
         f"{nodes.max():.0f}; {size_mb:,.0f} MB of .npz). Worker time = the index's `seconds` "
         "(a symbolic-batch trace's time is shared by its graphs); wall time ≈ worker time ÷ "
         "workers (2).", "", *rows])


def main() -> int:
    table, df = overall()
    bad = same_splits()
    df.to_csv(R / "comparison.csv", index=False, float_format="%.4g")
    lines = ["# TraPPM vs the other predictors on our real labels (issue #6)", "",
             "Regenerate: `bash benchmarks/run_evaluations.sh` (reports/eval, the other predictors), "
             "`bash benchmarks/trappm_evaluate.sh` (reports/trappm/eval*), then "
             "`.venv/bin/python benchmarks/trappm_report.py`.", "",
             "MAPE % on the test records (pooled; mean over the 5 seeds of family-mc = TraPPM's "
             "per-family 70/30 Monte Carlo split, seeds 1337–1341; unseen-family = 5 folds of whole "
             "families). **Bold**: best learned predictor of the row. Splits identical across "
             "columns: " + ("yes (every fold's test records compared)" if not bad else "NO — " + ", ".join(bad)),
             "", table, "",
             "Median absolute percentage error (same records; robust to a single blow-up — e.g. "
             "GraphMAE's task b fold with one densenet264d prediction of 4.6·10⁹ ms):", "",
             overall(median=True)[0], ""]
    for task in TASKS:
        pf = per_family(task)
        if pf:
            lines += [f"## Per family, task {task} ({TASKS[task]}), family-mc", "", pf, ""]
    cs = corpus_summary(Path(os.environ.get("PERFCAST_CORPUS",
                                            Path.home() / ".cache" / "perfcast" / "corpus")))
    if cs:
        (R / "corpus.md").write_text("# The unlabeled corpus (issue #6 item 1)\n\nRegenerate: "
                                     "`.venv/bin/python benchmarks/trappm_report.py`\n\n" + cs + "\n")
    plots = []
    for task in ("a",):
        fn = f"convergence_{task}.png"
        if convergence_plot(task, "family-mc", R / fn):
            plots.append(fn)
    if plots:
        lines += ["## Convergence (epoch vs loss, TraPPM Fig. 5)", ""]
        lines += [f"![{p}]({p})" for p in plots] + [""]
    (R / "comparison.md").write_text("\n".join(lines))
    print((R / "comparison.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
