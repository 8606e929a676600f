"""Operator-level kernel model (issue #13 item 2): train, judge zero-shot across GPUs, ship.

Trains :class:`perfcast.predictors.kernels.KernelModel` (one XGBoost booster per kernel class
predicting log-utilization of the roofline bound) on NeuSight's ``neusight/ops/train`` and
judges it

* **leave-one-GPU-out** (LOGO): per kernel class, for each of its five training GPUs, a model
  trained on the other four predicts the held-out GPU's rows (same dims, a GPU never seen);
* on **ops/test** (NeuSight's test sets: larger dims, plus L4 and A100-80GB) per file × GPU with
  the model trained on all five GPUs — and, as the strict zero-shot column, with the LOGO model
  that never saw the row's GPU (L4 and A100-80GB are unseen by every model but conv's);

MAPE, median APE and the roofline bound's MAPE beside. Writes ``reports/crossdevice/kernels.md``
and saves the model trained on all training GPUs to ``--out``.

    .venv/bin/python benchmarks/kernel_model.py [--out perfcast/predictors/shipped_kernels]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))

from perfcast.datasets.kernels import load_kernels  # noqa: E402
from perfcast.predictors.kernels import KERNEL_CLASSES, KernelModel, kernel_features  # noqa: E402

DEFAULT_OUT = ROOT / "perfcast" / "predictors" / "shipped_kernels"
DEFAULT_REPORT = ROOT / "reports" / "crossdevice" / "kernels.md"
SHORT = {"p4": "P4", "p100-16gb-pcie": "P100", "t4": "T4", "v100-32gb-pcie": "V100",
         "a100-40gb-pcie": "A100-40", "a100-80gb-pcie": "A100-80", "l4": "L4"}


def ape(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.abs(p - y) / y * 100.0


def roofline(frame: pd.DataFrame) -> np.ndarray:
    out = np.full(len(frame), np.nan)
    for kc in frame["kernel_class"].unique():
        sel = (frame["kernel_class"] == kc).to_numpy()
        out[sel] = kernel_features(kc, frame[sel])[1]
    return out


def logo(train: pd.DataFrame, params: dict, log, vidur) -> tuple[pd.DataFrame, dict]:
    """Per class and held-out GPU: predictions on the held-out rows; the LOGO models."""
    parts, models = [], {}
    for kc in KERNEL_CLASSES:
        rows = train[train["kernel_class"] == kc]
        for dev in sorted(rows["device_key"].unique()):
            t0 = time.perf_counter()
            held = rows["device_key"] == dev
            model = KernelModel(**params).fit_gpu_time(vidur).fit(rows[~held], classes=[kc])
            models[(kc, dev)] = model
            out = rows[held].copy()
            out["pred"] = model.predict_measured(out)
            out["gpu_bound"] = out["latency_ms"].to_numpy() > model.get_params()[
                "gpu_bound_factor"] * np.quantile(out["latency_ms"].to_numpy(), 0.01)
            parts.append(out)
            log(f"  LOGO {kc:<11} hold out {dev:<15} {len(out):>6} rows "
                f"{time.perf_counter() - t0:5.1f}s")
    return pd.concat(parts), models


def summarize(df: pd.DataFrame, keys: list[str], pred_cols: dict[str, str]) -> pd.DataFrame:
    rows = []
    for k, g in df.groupby(keys, sort=True):
        k = k if isinstance(k, tuple) else (k,)
        y = g["latency_ms"].to_numpy()
        rec = dict(zip(keys, k))
        rec["rows"] = len(g)
        if "gpu_bound" in g:
            b = g["gpu_bound"].to_numpy(bool)
            rec["GPU-bound rows"] = int(b.sum())
            p = g[next(iter(pred_cols.values()))].to_numpy()
            rec["ours MAPE, GPU-bound"] = float(np.mean(ape(y[b], p[b]))) if b.any() else np.nan
        for name, col in pred_cols.items():
            p = g[col].to_numpy()
            ok = np.isfinite(p)
            rec[f"{name} MAPE"] = float(np.mean(ape(y[ok], p[ok]))) if ok.any() else np.nan
            rec[f"{name} medAPE"] = float(np.median(ape(y[ok], p[ok]))) if ok.any() else np.nan
        rec["roofline MAPE"] = float(np.mean(ape(y, g["roof"].to_numpy())))
        rows.append(rec)
    return pd.DataFrame(rows)


def md_table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(df[c]) else "---"
                           for c in cols) + "|"]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, float):
                cells.append("–" if not np.isfinite(v) else f"{v:.1f}")
            else:
                cells.append(SHORT.get(v, str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to save the model "
                    "trained on all training GPUs")
    ap.add_argument("--report", type=Path, default=DEFAULT_REPORT)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--params", default="{}", help="JSON of KernelModel hyper-parameters")
    ap.add_argument("--skip-logo", action="store_true")
    args = ap.parse_args(argv)
    params = json.loads(args.params)
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    t_all = time.perf_counter()

    train = load_kernels("train", args.data_dir)
    test = load_kernels("test", args.data_dir)
    log(f"train {len(train)} rows, test {len(test)} rows")

    # -- the shipped model: all training GPUs
    t0 = time.perf_counter()
    # the kernels' own GPU time (the fixed time τ, and tensor-core kernels): Vidur's CUDA-event
    # operator profiles; then the operator model on NeuSight's GPU-bound kernels
    from perfcast.datasets.vidur import load_vidur_ops

    vidur = load_vidur_ops(data_dir=args.data_dir)
    full = KernelModel(**params).fit_gpu_time(vidur).fit(train)
    fit_full = time.perf_counter() - t0
    full.save(args.out)
    size = dir_size(args.out)
    log(f"full fit {fit_full:.0f}s {json.dumps(full.fit_seconds_)}; saved {args.out} "
        f"({size / 1e6:.2f} MB)")

    # -- LOGO
    t0 = time.perf_counter()
    models = {}
    if not args.skip_logo:
        lo, models = logo(train, params, log, vidur)
        lo["roof"] = roofline(lo)
        lo["group"] = np.where(lo["kernel_class"] == "gemm", "gemm/" + lo["op"],
                               lo["kernel_class"])
        logo_tab = summarize(lo, ["group", "device_key"], {"ours": "pred"})
        logo_cls = summarize(lo, ["group"], {"ours": "pred"})
    fit_logo = time.perf_counter() - t0

    # -- ops/test
    te = test.copy()
    te["pred"] = full.predict_measured(te)
    te["roof"] = roofline(te)
    te["pred_zs"] = te["pred"]
    if models:
        for (kc, dev), m in models.items():
            sel = ((te["kernel_class"] == kc) & (te["device_key"] == dev)).to_numpy()
            if sel.any():
                te.loc[sel, "pred_zs"] = m.predict_measured(te[sel])
    te["file"] = te["source"].str.rsplit("/", n=1).str[-1]
    test_tab = summarize(te, ["file", "device_key"], {"ours": "pred", "zero-shot": "pred_zs"})
    test_file = summarize(te, ["file"], {"ours": "pred", "zero-shot": "pred_zs"})
    below = int((te["pred"] < te["roof"] * (1 - 1e-9)).sum())
    total = time.perf_counter() - t_all

    cmd = "PERFCAST_DATA=../shared/data .venv/bin/python benchmarks/kernel_model.py" + \
        (f" --params '{args.params}'" if params else "") + \
        (f" --out {args.out}" if args.out != DEFAULT_OUT else "")
    p = full.get_params()
    lines = [
        "# Operator-level kernel model: zero-shot across GPUs",
        "",
        f"`{cmd}`",
        "",
        "KernelModel (perfcast/predictors/kernels/): per kernel class, the GPU time as a "
        "physical base τ + c/η + m/β (c = FLOPs / peak, m = bytes / bandwidth) times a factor "
        "learned by XGBoost from the kernel's shape alone (no device number: a GPU at least as "
        "good in every spec number never gets a slower kernel), faded out below the sizes it "
        "was learned on, never below the roofline; trained on the GPU-bound rows only (latency "
        "> 3 x the 1st percentile of the class on its GPU: below, NeuSight's host-timed harness "
        "reads its own dispatch). "
        "Predictions are compared with the measurements as max(predicted GPU time, the "
        "harness's floor on that GPU — for a GPU the model did not see, the median floor of "
        "the others). Data: NeuSight ops (PyTorch 2.1, fp32), "
        f"train {len(train)} rows, test {len(test)} rows (load_kernels; drops in its report). "
        "Roofline = max(FLOPs / FP32 peak, bytes / bandwidth); conv FLOPs divided by 4 "
        "(Winograd F(4x4,3x3): 3x3 stride-1 convs ran up to 2.25x faster than the direct-FLOP "
        "roofline). MAPE and median APE in %.",
        "",
        f"Hyper-parameters: rounds {p['rounds']}, depth {p['max_depth']}, eta {p['eta']}, "
        f"subsample {p['subsample']}, colsample {p['colsample_bytree']}, min_child_weight "
        f"{p['min_child_weight']}, nthread {p['nthread']}, GPU-bound factor "
        f"{p['gpu_bound_factor']}, rows per class "
        f"{p['max_rows_per_class'] or 'all (no subsampling)'}"
        + (f", per class {p['class_params']}" if p["class_params"] else "") + ".",
        "",
        f"Fit on all training GPUs: {fit_full:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in full.fit_seconds_.items())});"
        f" LOGO (25 fits): {fit_logo:.0f} s; whole run {total / 60:.1f} min on 2 shared cores. "
        f"Saved model: {size / 1e6:.2f} MB. Test predictions below the roofline: {below}.",
        "",
        "GPU-time constants of `t = τ + ((c/η)^p + (m/β)^p)^(1/p)` (p = 1: the sum; "
        "KernelModel.fit_gpu_time on Vidur's "
        "A100 + A40 operator profiles, CUDA-event times: what prices tensor-core kernels, and "
        "the fixed time τ of every kernel; the cross-GPU check is "
        "reports/crossdevice/small_work.md), the operator model's base fitted on NeuSight's "
        "GPU-bound kernels with that τ, and the largest measured slowdown over roofline + "
        "launch floor per class (the upper bound of a composed time):",
        "",
        md_table(pd.DataFrame([{"class": kc, "τ µs": f"{1e3 * v['tau_ms']:.2f}",
                                "η": f"{v['eta']:.3f}", "β": f"{v['beta']:.3f}",
                                "p": f"{v['p']:.2f}",
                                "Vidur rows": str(full.gpu_time_.get(kc, {}).get("rows", 0)),
                                "operator η": f"{full.base_[kc]['eta']:.3f}",
                                "operator β": f"{full.base_[kc]['beta']:.3f}",
                                "K (max slowdown)": f"{full.slowdown_max(kc):.2f}"}
                               for kc, v in full.gpu_time_constants().items()])),
        "",
        f"Upper-bound launch per kernel: {1e3 * full.upper_launch_ms():.1f} µs (the largest "
        "element-wise harness floor).",
        "",
    ]
    if models:
        lines += ["## Leave-one-GPU-out (train rows of the held-out GPU)", "",
                  md_table(logo_cls), "", md_table(logo_tab), ""]
    lines += ["## ops/test (NeuSight's test sets) per file",
              "",
              "`ours` = model trained on all five training GPUs; `zero-shot` = for a training "
              "GPU the LOGO model that never saw it (L4, and A100-80 outside conv, are unseen by "
              "every model). vec.csv = habitat.csv = elem + ln + softmax.",
              "", md_table(test_file), "", md_table(test_tab), ""]
    lines += [
        "## Notes",
        "",
        "- Training dims are random integers (about 1 in 4 a multiple of 4, almost none a "
        "multiple of 64); the test GEMMs are aligned multiples of 64, for which cuBLAS picks "
        "other, faster kernels (e.g. P4 linear: `maxwell_sgemm_64x64_tn` at u ≈ 0.2-0.35 in "
        "training vs `sgemm_128x128x8_NT_vec` at u ≈ 0.8 in test). No training row teaches "
        "that, so linear.csv on P4 and V100 is where the model loses to the roofline.",
        "- Large-kernel utilization is a per-GPU level the listed spec numbers do not explain "
        "(T4/P4, 70-75 W cards, saturate near 0.35-0.55 of peak; V100/A100 near 0.8-0.9); a "
        "held-out GPU's level is inferred from the other four — the main LOGO error.",
        "- Small kernels sit on a host-side floor (~24-58 µs per class and machine) that no "
        "device spec predicts: the model learns the GPU time of the kernels above it; whole "
        "models add their own dispatch cost (perfcast.predictors.crossdevice).",
        "- Monotone by construction: the earlier model (utilization from tile waves per SM and "
        "intensity over the ridge point) was 1-3 points better on LOGO GEMMs/convs but could "
        "answer slower for a GPU with more SMs at the same peak.",
        "",
    ]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines))
    log(f"wrote {args.report}; total {total / 60:.1f} min")
    if models:
        print(logo_cls.to_string())
    print(test_file.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
