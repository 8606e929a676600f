"""TraPPM transfer study (issue #6 item 5): a predictor trained on one device, adapted to another
with N ∈ {16, 32, 64, 128, all} labeled target records, against training from scratch on the same N.

Pairs (source → target): RTX 3090 infer → RTX 4090 infer, RTX 4090 infer → i9-10940X,
i9-10940X → i7-12700H, the public CPUs (i9 + i7) → this machine's CPU (inference records of task d).

Protocol per pair and seed (1337, 1338, 1339): the target's models are split per family 70/30
(TraPPM's Monte-Carlo split, `family_mc_split`); the 30 % are the test set. The source predictor
is trained on every source record except those of the test models (so a test model is new on both
devices), 10 % of its models held out for early stopping. N target records are drawn at random from
the 70 % ("all" = every one). Recipes, all with the same predictor and hyper-parameters:

* ``scratch``   – a new predictor fitted on the N records;
* ``finetune``  – the source predictor, every weight trained further on the N records
  (``warm_start``: same epochs, fresh Adam — what ``perfcast train --init-from`` did before);
* ``recalibrate`` – the source predictor unchanged, its log prediction mapped by
  log y = a + b·log ŷ fitted on the N records (least squares; b fixed to 1 below 32 records);
* ``zero-shot`` – the source predictor as is (N = 0, for scale).

MAPE / RMSE on the target's test records, mean over seeds. Writes
``reports/trappm/transfer.csv``, ``transfer.md`` and ``transfer.png``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/trappm_transfer.py [--encoder DIR] [--pairs ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the checkout's data (see perfcast.paths) unless the environment names other folders
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(ROOT / "datasets"))

from perfcast.evaluation.metrics import mape, rmse  # noqa: E402
from perfcast.evaluation.splits import family_mc_split, model_groups  # noqa: E402
from perfcast.evaluation.tasks import Task, get_task  # noqa: E402
from perfcast.predictors import create_predictor  # noqa: E402
from perfcast.training.trainer import hold_out_models  # noqa: E402

SEEDS = (1337, 1338, 1339)
NS = (16, 32, 64, 128, "all")
_I9 = "benchmark-infer-fp32-nchw-pt240-cpu-i9_10940x-dynamo.csv"
_I7 = "benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv"
PUBLIC_CPUS = Task("public-cpus", "Public CPU inference (i9-10940X + i7-12700H, fp32)", "all",
                   (_I9, _I7), ("time_ms",), "tasks c-i9 and c-i7 pooled")
PAIRS = {
    "rtx3090-infer→rtx4090-infer": ("rtx3090-infer", "b", None),
    "rtx4090-infer→i9-10940x": ("b", "c-i9", None),
    "i9-10940x→i7-12700h": ("c-i9", "c-i7", None),
    "public-cpus→this-cpu": (PUBLIC_CPUS, "d", "infer"),
}
TARGET = "time_ms"


def _load(task, mode: str | None):
    t = task if isinstance(task, Task) else get_task(task)
    fs = t.load(build_missing=False).fs
    if mode is not None:
        fs = fs.subset(np.flatnonzero(fs.rows["mode"].astype(str).to_numpy() == mode))
    keep = np.flatnonzero(np.isfinite(fs.target(TARGET)) & (fs.target(TARGET) > 0))
    return fs.subset(keep)


def _model_key(fs) -> np.ndarray:
    rows = fs.rows
    key = rows["arch"] if "arch" in rows.columns else rows["model"]
    return key.where(key.notna(), rows["model"]).astype(str).to_numpy()


def _new(params: dict, seed: int):
    return create_predictor("trappm", **{**params, "seed": seed})


def _fit_source(src, exclude: set[str], params: dict, seed: int):
    keep = np.flatnonzero(~np.isin(_model_key(src), list(exclude)))
    fs = src.subset(keep)
    n_models = fs.rows["model"].nunique()
    train, valid = hold_out_models(fs, max(1, round(0.1 * n_models)), seed)
    return _new(params, seed).fit(train, valid, targets=[TARGET])


def _recalibrate(src_pred, train, test) -> np.ndarray:
    """``Predictor.recalibrate``: log y = a + b·log ŷ on the N records (b = 1 below 32)."""
    return copy.deepcopy(src_pred).recalibrate(train, targets=[TARGET]).predict(test)[:, 0]


def run_pair(name: str, params: dict, seeds, ns, log) -> list[dict]:
    src_task, tgt_task, tgt_mode = PAIRS[name]
    src = _load(src_task, None)
    tgt = _load(tgt_task, tgt_mode)
    groups = model_groups(tgt.rows, tgt.summaries, tgt.graph_index)
    rows = []
    for seed in seeds:
        fold = family_mc_split(groups, tgt.families(), seed, valid_frac=0.0)
        pool, test = tgt.subset(fold.train), tgt.subset(fold.test)
        y = test.target(TARGET)
        t0 = time.perf_counter()
        source = _fit_source(src, set(_model_key(test)), params, seed)
        log(f"{name} seed {seed}: source on {len(src)} records fitted in "
            f"{time.perf_counter() - t0:.0f} s; target pool {len(pool)}, test {len(test)}")
        zs = source.predict(test)[:, 0]
        rows.append({"pair": name, "seed": seed, "n": 0, "recipe": "zero-shot",
                     "mape": mape(y, zs), "rmse": rmse(y, zs), "seconds": 0.0})
        rng = np.random.default_rng(seed)
        perm = rng.permutation(len(pool))
        for n in ns:
            k = len(pool) if n == "all" else int(n)
            if k > len(pool):
                continue
            train = pool.subset(np.sort(perm[:k]))
            for recipe in ("scratch", "finetune", "recalibrate"):
                t = time.perf_counter()
                if recipe == "scratch":
                    yhat = _new(params, seed).fit(train, targets=[TARGET]).predict(test)[:, 0]
                elif recipe == "finetune":
                    p = copy.deepcopy(source)
                    p.set_params(warm_start=True)
                    yhat = p.fit(train, targets=[TARGET]).predict(test)[:, 0]
                else:
                    yhat = _recalibrate(source, train, test)
                rows.append({"pair": name, "seed": seed, "n": "all" if n == "all" else k,
                             "n_records": k, "recipe": recipe, "mape": mape(y, yhat),
                             "rmse": rmse(y, yhat), "seconds": time.perf_counter() - t})
                log(f"  N={n} {recipe}: MAPE {rows[-1]['mape']:.2f} %")
    return rows


def write_report(df: pd.DataFrame, out: Path, command: str, params: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "transfer.csv", index=False)
    agg = (df.groupby(["pair", "n", "recipe"], sort=False)
           .agg(mape=("mape", "mean"), mape_std=("mape", "std"), rmse=("rmse", "mean"),
                n_records=("n_records", "max"), seeds=("seed", "nunique")).reset_index())
    lines = ["# TraPPM transfer to new hardware (issue #6)", "",
             f"Regenerate: `{command}`", "",
             f"Predictor: `trappm` {json.dumps(params)}; target {TARGET}; seeds "
             f"{', '.join(map(str, sorted(df.seed.unique())))}; test = 30 % of the target's "
             "models per family, never seen on either device (see the script's doc).", ""]
    for pair in df.pair.unique():
        a = agg[agg.pair == pair]
        zs = a[a.recipe == "zero-shot"]
        lines += [f"## {pair}", "",
                  f"zero-shot (source predictor as is): MAPE {zs.mape.iloc[0]:.2f} %, "
                  f"RMSE {zs.rmse.iloc[0]:.3g} ms", "",
                  "| N | scratch MAPE % | finetune MAPE % | recalibrate MAPE % | scratch RMSE ms "
                  "| finetune RMSE ms | recalibrate RMSE ms |", "|---|---|---|---|---|---|---|"]
        for n in [x for x in a.n.unique() if x != 0]:
            r = {rec: a[(a.n == n) & (a.recipe == rec)] for rec in ("scratch", "finetune",
                                                                  "recalibrate")}
            label = f"all ({int(r['scratch'].n_records.iloc[0])})" if n == "all" else str(n)
            best = min(r, key=lambda k: r[k].mape.iloc[0])
            cells = [(f"**{r[k].mape.iloc[0]:.2f}**" if k == best else f"{r[k].mape.iloc[0]:.2f}")
                     + f" ± {r[k].mape_std.iloc[0]:.2f}" for k in r]
            lines.append(f"| {label} | " + " | ".join(cells) + " | "
                         + " | ".join(f"{r[k].rmse.iloc[0]:.3g}" for k in r) + " |")
        lines.append("")
    # Table V-like summary: with TL (best transfer recipe) vs without (scratch), per N
    lines += ["## Table V (TraPPM) form: with vs without transfer, MAPE %", "",
              "| pair | N | without TL (scratch) | finetune | recalibrate |", "|---|---|---|---|---|"]
    for pair in df.pair.unique():
        a = agg[agg.pair == pair]
        for n in [x for x in a.n.unique() if x != 0]:
            g = {rec: a[(a.n == n) & (a.recipe == rec)].mape.iloc[0]
                 for rec in ("scratch", "finetune", "recalibrate")}
            lines.append(f"| {pair} | {n} | {g['scratch']:.2f} | {g['finetune']:.2f} | "
                         f"{g['recalibrate']:.2f} |")
    (out / "transfer.md").write_text("\n".join(lines) + "\n")
    _plot(agg, out / "transfer.png")


def _plot(agg: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = list(agg.pair.unique())
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.6), squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        a = agg[(agg.pair == pair) & (agg.n != 0)]
        for rec, style in (("scratch", "o-"), ("finetune", "s-"), ("recalibrate", "^-")):
            r = a[a.recipe == rec]
            ax.plot(r.n_records, r.mape, style, label=rec)
        zs = agg[(agg.pair == pair) & (agg.recipe == "zero-shot")].mape
        if len(zs):
            ax.axhline(float(zs.iloc[0]), color="grey", ls="--", label="zero-shot")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # a diverged run (MAPE in the 1,000s) must not flatten the rest
        ax.set_xlabel("labeled target records N")
        ax.set_ylabel("test MAPE %")
        ax.set_title(pair, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoder", default="shipped",
                    help="trappm encoder: directory, 'shipped' or 'random'")
    ap.add_argument("--pairs", default=",".join(PAIRS), help="comma-separated pair names")
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--out", default=str(ROOT / "reports" / "trappm"))
    ap.add_argument("--from-csv", action="store_true",
                    help="rewrite transfer.md / .png from OUT/transfer.csv (no training)")
    args = ap.parse_args()
    if args.from_csv:
        out = Path(args.out)
        md = (out / "transfer.md").read_text().splitlines() if (out / "transfer.md").exists() else []
        cmd = next((ln.split("`")[1] for ln in md if ln.startswith("Regenerate: `")),
                   "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/trappm_transfer.py")
        df = pd.read_csv(out / "transfer.csv")
        df["n"] = df["n"].astype(str).map(lambda v: v if v == "all" else int(float(v)))
        write_report(df, out, cmd, {"encoder": args.encoder})
        print(f"rewrote {out}/transfer.md")
        return 0
    params = {"encoder": args.encoder}
    seeds = [int(s) for s in args.seeds.split(",")]
    ns = [n if n == "all" else int(n) for n in args.ns.split(",")]
    rows = []
    for pair in args.pairs.split(","):
        if pair not in PAIRS:
            print(f"unknown pair {pair!r} (pairs: {', '.join(PAIRS)})", file=sys.stderr)
            return 2
        rows += run_pair(pair, params, seeds, ns, lambda m: print(m, flush=True))
    cmd = "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/trappm_transfer.py " + " ".join(
        a for a in sys.argv[1:])
    write_report(pd.DataFrame(rows), Path(args.out), cmd.strip(), params)
    print(f"wrote {args.out}/transfer.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
