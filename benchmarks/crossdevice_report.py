"""Cross-device evaluation of ``crossdevice`` → ``reports/crossdevice/`` (README.md, logo.csv,
newest.csv).

    .venv/bin/python benchmarks/crossdevice_report.py

Data: task ``gpu`` (:mod:`perfcast.evaluation.tasks`) — every single-GPU whole-model label: timm
(RTX 3090 train/infer AMP, RTX 4090 infer AMP), the torchvision benchmark (TITAN Xp, TITAN RTX,
RTX 2080 Ti; fp32/fp16; train/infer) and NeuSight's transformers (V100, T4, P4, P100, L4, A100
PCIe 40/80 GB, MI100/210/250), at most 3 models per (file, family) by a hash of the name.

1. **Leave-one-GPU-out**: for every GPU, ``crossdevice`` trained on the other GPUs' records
   predicts every record of the held-out GPU (MAPE per GPU, CNNs and transformers apart), beside
   correction variants and the label-free roofline; on NeuSight's rows the published predictions
   of NeuSight, Habitat, the micro-benchmark model and NeuSight's roofline, on exactly the rows
   both have.
2. **Leave-newest-out**: trained on the GPUs of architectures launched before the newest in the
   data (Ada: RTX 4090, L4 — from Ampere and older), predicting the newest from their spec
   sheets; beside scaling the same model's measurement on a previous-generation GPU by the peak
   ratio, and anchor transfer.
3. **Anchor transfer** (:mod:`perfcast.anchors`): a held-out GPU's record predicted as
   ``base · exp(w · ρ)``, ``ρ`` the base's log residual on the *other* GPUs that measured the
   same configuration (the anchors; at prediction time their own learned answers), for
   ``w ∈ {0, ¼, ½, ¾, 1}`` per regime — the regime weights :data:`perfcast.anchors.ANCHOR_WEIGHTS`
   are the winners here.
4. **fp32 and TF32**: the fp32 records of GPUs with TF32 units priced as the data say they ran
   (PyTorch's default: matmuls FP32) and as if TF32 had been on.
5. **Intervals**: 90 % split-conformal intervals from the other GPUs' held-out residuals, their
   coverage and width per regime (GPU held out, newest architecture held out).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(ROOT / "datasets"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

TRANSFORMER_FAMILIES = ("bert", "gpt2", "gpt3", "opt", "switch")
#: Correction variants compared (the first is what ships).
VARIANTS = {"xgboost": {"correction": "xgboost"},
            "ridge": {"correction": "ridge"},
            "kernels only": {"correction": "none"}}
#: Anchor weights tried per regime.
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: What a configuration is: records of the same configuration on two GPUs anchor each other.
CONFIG = ["raw_model", "mode", "precision", "batch_size", "seq_len", "optimizer"]


def md_table(df: pd.DataFrame, digits: int = 1) -> str:
    """A Markdown table (no tabulate dependency)."""
    def cell(v):
        if isinstance(v, float):
            return "" if not np.isfinite(v) else f"{v:.{digits}f}"
        return str(v)
    lines = ["| " + " | ".join(map(str, df.columns)) + " |",
             "|" + "|".join("---" for _ in df.columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |"
              for row in df.itertuples(index=False, name=None)]
    return "\n".join(lines)


def mape(y, p) -> float:
    y, p = np.asarray(y, float), np.asarray(p, float)
    ok = np.isfinite(y) & np.isfinite(p) & (y > 0)
    return float(np.mean(np.abs(p[ok] - y[ok]) / y[ok]) * 100) if ok.any() else float("nan")


def regime(row) -> str:
    """The anchor regime of a record: its precision class and kind of model."""
    half = "fp32" if row["precision"] == "fp32" else "half"
    return f"{half}, {row['kind']}"


def _frame(fs) -> pd.DataFrame:
    rows = fs.rows
    res = pd.DataFrame({"device": rows["device"].astype(str).to_numpy(),
                        "time_ms": fs.target("time_ms")})
    for c in ("model", "raw_model", "family", "kind", "mode", "optimizer", "precision",
              "batch_size", "seq_len", "source"):
        if c in rows:
            res[c] = rows[c].to_numpy()
    res["optimizer"] = res["optimizer"].fillna("")
    res["seq_len"] = res["seq_len"].fillna(-1)
    return res


def fit_predict(fs, train_idx, test_idx, params, tf32: str | None = None):
    """A crossdevice model fitted on ``train_idx``; its predictions of ``test_idx`` and of the
    training records (the anchors' base)."""
    from perfcast.predictors import create_predictor

    pred = create_predictor("crossdevice", **params).fit(fs.subset(train_idx),
                                                         targets=["time_ms"])
    test = fs.subset(test_idx)
    if tf32 is not None:
        test.rows = test.rows.assign(tf32=tf32)
    return pred, pred.predict(test)[:, 0], pred.predict(fs.subset(train_idx))[:, 0]


def logo(fs, res: pd.DataFrame) -> dict:
    """Leave-one-GPU-out predictions of every variant (columns of ``res``) and of the shipped
    variant on the training GPUs (``base_on_train[gpu]``: the anchors' base)."""
    from perfcast.predictors import create_predictor

    dev = res["device"].to_numpy()
    res["roofline"] = create_predictor("roofline").fit(fs, targets=["time_ms"]).predict(fs)[:, 0]
    base_on_train = {}
    for name, params in VARIANTS.items():
        res[name] = np.nan
        for d in sorted(set(dev)):
            te, tr = np.flatnonzero(dev == d), np.flatnonzero(dev != d)
            _, p_te, p_tr = fit_predict(fs, tr, te, params)
            res.loc[te, name] = p_te
            if name == "xgboost":
                base_on_train[d] = pd.Series(p_tr, index=tr)
        print(f"  {name}: mean over GPUs "
              f"{res.groupby('device').apply(lambda g: mape(g.time_ms, g[name])).mean():.1f} %",
              flush=True)
    return base_on_train


def anchor_residuals(res: pd.DataFrame, base_on_train: dict, held: str) -> pd.Series:
    """For the records of GPU ``held``: the mean log residual ``log(y_A / base_A)`` of the other
    GPUs' records of the same configuration (NaN where no other GPU measured it)."""
    base = base_on_train[held]
    other = res.loc[base.index].assign(base=base.to_numpy())
    other["rho"] = np.log(other["time_ms"] / other["base"])
    rho = other.groupby(CONFIG)["rho"].mean()
    mine = res[res["device"] == held]
    keys = pd.MultiIndex.from_frame(mine[CONFIG])
    return pd.Series(rho.reindex(keys).to_numpy(), index=mine.index)


def anchor_table(res: pd.DataFrame, base_on_train: dict) -> tuple[pd.DataFrame, dict]:
    """MAPE of ``base · exp(w·ρ)`` per regime and weight, on the records that have anchors."""
    res["rho"] = np.nan
    for d in res["device"].unique():
        r = anchor_residuals(res, base_on_train, d)
        res.loc[r.index, "rho"] = r
    has = res[np.isfinite(res["rho"])].copy()
    has["regime"] = has.apply(regime, axis=1)
    rows, best = [], {}
    for reg, g in has.groupby("regime"):
        row = {"regime": reg, "records": len(g), "GPUs": g["device"].nunique()}
        scores = {}
        for w in WEIGHTS:
            # mean over GPUs, like every LOGO figure
            scores[w] = float(g.groupby("device").apply(
                lambda x: mape(x.time_ms, x.xgboost * np.exp(w * x.rho))).mean())
            row[f"w = {w:g} %"] = scores[w]
        best[reg] = min(scores, key=scores.get)
        row["chosen w"] = f"{best[reg]:g}"
        rows.append(row)
    return pd.DataFrame(rows), best


def newest(fs, res: pd.DataFrame) -> pd.DataFrame:
    """Leave-newest-out: fit on the GPUs launched before the newest architecture year in the
    data, predict the newest; with measured anchors on the older GPUs and the peak-ratio
    scaling of the same configuration measured on them."""
    from perfcast.devices import get_device
    from perfcast.devices.derive import arch_year

    years = {d: arch_year(get_device(d))[0] for d in res["device"].unique()}
    top = max(years.values())
    new = sorted(d for d, y in years.items() if y == top)
    dev = res["device"].to_numpy()
    te = np.flatnonzero(np.isin(dev, new))
    tr = np.flatnonzero(~np.isin(dev, new))
    _, p_te, p_tr = fit_predict(fs, tr, te, VARIANTS["xgboost"])
    out = res.iloc[te][["device", "kind", "model", "raw_model", "mode", "precision",
                        "batch_size", "seq_len", "optimizer", "time_ms"]].copy()
    out["base"] = p_te
    base_tr = pd.Series(p_tr, index=tr)
    other = res.loc[tr].assign(base=base_tr.to_numpy())
    other["rho"] = np.log(other.time_ms / other.base)
    keys = pd.MultiIndex.from_frame(out[CONFIG].fillna(-1))
    out["rho"] = other.groupby(CONFIG)["rho"].mean().reindex(keys).to_numpy()
    out["anchored"] = out.base * np.exp(np.where(np.isfinite(out.rho), out.rho, 0.0))
    # the same configuration measured on the newest older GPU, scaled by the peak ratio
    older = sorted((y, d) for d, y in years.items() if y < top)
    peak_prec = lambda d, p: get_device(d).peak_tflops("fp16" if p != "fp32" else "fp32")
    scaled = np.full(len(out), np.nan)
    anchor_of = np.full(len(out), "", dtype=object)
    for i, (_, r) in enumerate(out.iterrows()):
        same = other[(other.raw_model == r.raw_model) & (other["mode"] == r["mode"])
                     & (other.precision == r.precision) & (other.batch_size == r.batch_size)
                     & (other.seq_len == r.seq_len)]
        if not len(same):
            continue
        # the most recent older GPU that measured it
        best = max(same.device.unique(), key=lambda d: (years[d], get_device(d).peak_fp32_tflops))
        y_a = same[same.device == best].time_ms.mean()
        scaled[i] = y_a * peak_prec(best, r.precision) / peak_prec(r.device, r.precision)
        anchor_of[i] = best
    out["peak-ratio scaling"] = scaled
    out["previous GPU"] = anchor_of
    out.attrs["new"], out.attrs["train_gpus"] = new, sorted(set(dev[tr]))
    return out


def tf32_table(fs, res: pd.DataFrame) -> pd.DataFrame:
    """fp32 records of GPUs with TF32 units, predicted (leave-one-GPU-out) with each ``--tf32``."""
    from perfcast.devices import get_device
    from perfcast.devices.derive import complete

    rows = []
    dev = res["device"].to_numpy()
    for d in sorted(set(dev)):
        if not complete(get_device(d))[0].peak_tf32_tflops:
            continue
        te = np.flatnonzero((dev == d) & (res["precision"].to_numpy() == "fp32"))
        if not len(te):
            continue
        tr = np.flatnonzero(dev != d)
        row = {"GPU": d, "records": len(te),
               "what ran": "PyTorch default (matmuls FP32; no convolutions)"}
        for mode in ("default", "on", "off"):
            _, p, _ = fit_predict(fs, tr, te, VARIANTS["xgboost"], tf32=mode)
            row[f"--tf32 {mode} %"] = mape(res.time_ms.to_numpy()[te], p)
        rows.append(row)
    return pd.DataFrame(rows)


def coverage_table(res: pd.DataFrame, nw: pd.DataFrame, alpha: float = 0.1) -> pd.DataFrame:
    """90 % split-conformal intervals per regime: for each held-out GPU the interval comes from
    the held-out residuals of the *other* GPUs (cross-conformal by GPU); coverage and median
    width (high/low) of the held-out GPU's records, mean over GPUs."""
    from perfcast.uncertainty import conformal_bounds

    r = np.log(res.time_ms / res.xgboost)
    rows = []
    for name, sel in (("leave-one-GPU-out, CNNs", res.kind == "cnn"),
                      ("leave-one-GPU-out, transformers", res.kind == "transformer"),
                      ("leave-one-GPU-out, all", res.kind.notna())):
        cov, wid = [], []
        for d in res.loc[sel, "device"].unique():
            mine = sel & (res.device == d)
            cal = r[sel & (res.device != d)].dropna().to_numpy()
            lo, hi = conformal_bounds(np.sort(cal), 1 - alpha)
            x = r[mine].dropna().to_numpy()
            cov.append(np.mean((x >= lo) & (x <= hi)) * 100)
            wid.append(np.exp(hi - lo))
        rows.append({"regime": name, "GPUs": len(cov), "coverage %": float(np.mean(cov)),
                     "min over GPUs %": float(np.min(cov)),
                     "width (high / low)": float(np.median(wid))})
    cal = r.dropna().to_numpy()
    lo, hi = conformal_bounds(np.sort(cal), 1 - alpha)
    x = np.log(nw.time_ms / nw.base).dropna().to_numpy()
    rows.append({"regime": "leave-newest-out (calibrated on leave-one-GPU-out)",
                 "GPUs": nw.device.nunique(), "coverage %": float(np.mean((x >= lo) & (x <= hi))
                                                              * 100),
                 "min over GPUs %": float("nan"), "width (high / low)": float(np.exp(hi - lo))})
    return pd.DataFrame(rows)


def per_gpu(res: pd.DataFrame) -> pd.DataFrame:
    cols = [*VARIANTS, "roofline"]
    out = (res.groupby(["device", "kind"])
           .apply(lambda g: pd.Series({"records": len(g),
                                       **{f"{c} %": mape(g.time_ms, g[c]) for c in cols}}))
           .reset_index())
    out["records"] = out["records"].astype(int)
    return out


def peers_table(res: pd.DataFrame, ours: str) -> pd.DataFrame:
    """Per NeuSight GPU: each peer's MAPE and ours on exactly the rows the peer has."""
    from perfcast.datasets import load_neusight_peers

    peers = load_neusight_peers()
    peers = peers[peers["in_examples"].astype(bool)]
    ns = res[res["source"].astype(str).str.contains("neusight")].copy()
    ns["seq_len"] = ns["seq_len"].replace(-1, np.nan)
    key = ["device", "raw_model", "mode", "seq_len", "batch_size"]
    rows = []
    for dev, g in ns.groupby("device"):
        row = {"GPU": dev, "records": len(g), "perfcast": mape(g.time_ms, g[ours]),
               "roofline (perfcast)": mape(g.time_ms, g.roofline)}
        for name in ("neusight", "habitat", "micro", "roofline"):
            pg = peers[(peers["device"] == dev) & (peers["predictor"] == name)]
            m = g.merge(pg[key + ["time_ms"]].rename(columns={"time_ms": "peer_ms"}), on=key)
            row[f"{name} (rows)"] = (f"{mape(m.time_ms, m.peer_ms):.1f} vs "
                                     f"{mape(m.time_ms, m[ours]):.1f} ({len(m)})") if len(m) \
                else ""
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "reports" / "crossdevice"))
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from perfcast.evaluation import get_task

    t0 = time.perf_counter()
    data = get_task("gpu").load(workers=args.workers)
    fs = data.fs
    fs.rows["kind"] = np.where(fs.rows["family"].astype(str).isin(TRANSFORMER_FAMILIES),
                               "transformer", "cnn")
    keep = np.flatnonzero([fs.plans[g] is not None for g in fs.graph_index])
    fs = fs.subset(keep)
    print(f"task gpu: {len(fs)} records with a kernel plan, drops {data.drops} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    res = _frame(fs)
    base_on_train = logo(fs, res)
    anchors, best = anchor_table(res, base_on_train)
    print(anchors.to_string(), flush=True)
    nw = newest(fs, res)
    print(nw.groupby("device")[["time_ms"]].size(), flush=True)
    tf = tf32_table(fs, res)
    cov = coverage_table(res, nw)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res.to_csv(out / "logo.csv", index=False)
    nw.to_csv(out / "newest.csv", index=False)
    table = per_gpu(res)
    means = {c: table.groupby("kind")[f"{c} %"].mean() for c in [*VARIANTS, "roofline"]}
    nw_rows = []
    for d, g in nw.groupby("device"):
        sc = g[np.isfinite(g["peak-ratio scaling"])]
        nw_rows.append({"GPU": d, "records": len(g), "kind": ", ".join(sorted(g.kind.unique())),
                        "crossdevice (spec only) %": mape(g.time_ms, g.base),
                        "anchored on older GPUs' measurements %": mape(g.time_ms, g.anchored),
                        "records with a previous-GPU measurement": len(sc),
                        "peak-ratio scaling of it %": mape(sc.time_ms, sc["peak-ratio scaling"]),
                        "crossdevice on those %": mape(sc.time_ms, sc.base),
                        "anchored on those %": mape(sc.time_ms, sc.anchored)})
    lines = ["# crossdevice: any GPU from its spec sheet", "",
             f"`.venv/bin/python benchmarks/crossdevice_report.py` (task `gpu`; "
             f"{time.strftime('%Y-%m-%d')}, {time.perf_counter() - t0:.0f} s). {len(fs)} records "
             f"on {fs.rows['device'].nunique()} GPUs. MAPE % (per GPU; means are over GPUs).",
             "", "The model (perfcast/predictors/crossdevice/): each kernel's GPU time from "
             "the operator model (reports/crossdevice/kernels.md), eager PyTorch's dispatch "
             "queue, and a correction that reads the device only through its board power and "
             "vendor — monotone by construction (a GPU at least as good in every spec number is "
             "never slower; tests/test_physics_properties.py). `xgboost` ships.", "",
             "## 1. Leave-one-GPU-out", "", md_table(table), "",
             "Mean over GPUs: " + "; ".join(
                 f"{c}: " + ", ".join(f"{k} {v:.1f}" for k, v in m.items())
                 for c, m in means.items()), "",
             "### NeuSight's GPUs beside the published peers", "",
             "Each peer column: the peer's MAPE vs perfcast's on exactly the rows the peer "
             "published (row count); NeuSight's own numbers are its held-out-GPU predictions.",
             "", md_table(peers_table(res, "xgboost")), "",
             "## 2. Leave-newest-out", "",
             f"Trained on {', '.join(nw.attrs['train_gpus'])} (architectures before "
             f"{', '.join(nw.attrs['new'])}); the newest GPUs predicted from their spec sheets. "
             "`peak-ratio scaling`: the same configuration measured on the most recent older GPU "
             "that ran it, × the ratio of the precision's peaks (the baseline a user would "
             "compute by hand); `anchored`: crossdevice × the base's residual on the older GPUs "
             "that measured it.", "", md_table(pd.DataFrame(nw_rows)), "",
             "## 3. Anchor transfer per regime", "",
             "Held-out GPU records that other GPUs measured in the same configuration: "
             "`base · exp(w · ρ)`, ρ the base's mean log residual on those GPUs (mean over "
             "held-out GPUs). The chosen weights ship as perfcast.anchors.ANCHOR_WEIGHTS; at "
             "prediction time the anchors are the labeled GPUs' own learned answers "
             "(reports/eval: their unseen-family error adds to this).", "",
             md_table(anchors), "",
             "## 4. fp32 and TF32", "",
             "fp32 records of GPUs with TF32 units (leave-one-GPU-out), priced as PyTorch's "
             "defaults ran them and as if TF32 were on / off for everything.", "",
             md_table(tf) if len(tf) else "(no fp32 record on a GPU with TF32 units)", "",
             "## 5. Interval coverage per regime", "",
             "90 % split-conformal intervals in log space; for a held-out GPU the residuals of "
             "the other held-out GPUs calibrate (cross-conformal by GPU). Width: median "
             "high / low ratio.", "", md_table(cov), ""]
    (out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
