"""Write ``reports/llm/README.md``: LLM generation predictors on the public serving measurements
under the thesis' stratified 5-fold CV, leave-one-model-out and leave-one-hardware-out, beside
the arithmetic bound alone and the thesis' published numbers (ch. 6, Tables 6.5 / 6.6), with
the GNN baseline of §6.5.2 on the same splits, the §6.5.3 grid search, the newer-GPU transfer
(train on one NVIDIA GPU, predict the other), the engine model fitted on all rows, memory vs
``accelerate estimate-memory`` and the traced graphs vs the closed-form arithmetic.

    .venv/bin/python benchmarks/llm_graphs.py     # once: traced prefill graphs (≈ 25 min)
    .venv/bin/python benchmarks/llm_report.py [--regrid]   # ≈ 1 h on 2 cores
    .venv/bin/python benchmarks/llm_report.py --smoke      # every code path, tiny models, temp dir

Predictors (``perfcast.llm.model``): ``bound`` (the arithmetic lower bound alone); ``thesis``
(XGBoost on log(target) from Table 6.3-style features + the registry's hardware specs,
hyper-parameters from the §6.5.3 grid); ``thesis-nohw`` (Table 6.6: without hardware);
``GNN`` (§6.5.2: two GraphSAGE layers on the model's traced prefill graph ⊕ static
[TM, TP, TMmem, BS, SL, HF] (HF in log scale), MSE, Adam 1e-3 — perfcast's ``nnlqp``
estimator);
``perfcast`` (what ships: latency = the blend of the engine model and the residual booster,
server token time = bound × residual booster, power = fraction of TDP bounded to
[idle, TDP]); ``engine`` / ``residual`` (the blend's two halves). Energy per output token =
power × devices × seconds per output token (both predicted out of fold).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from perfcast.datasets.llm import load_llm_bench, load_mlenergy  # noqa: E402
from perfcast.llm.model import LLMGenerationPredictor, features  # noqa: E402

OUT = REPO / "reports" / "llm"
#: ``--smoke``: every code path with tiny models (numbers meaningless), written to a temporary
#: directory instead of ``reports/llm/`` — to check the script before a 1-hour run.
SMOKE = "--smoke" in sys.argv
if SMOKE:
    import tempfile

    OUT = Path(tempfile.mkdtemp(prefix="llm_report_smoke."))
    if (REPO / "reports" / "llm" / "grid.json").is_file():
        import shutil

        shutil.copy(REPO / "reports" / "llm" / "grid.json", OUT / "grid.json")
#: The thesis' Table 6.5 (MAPE %, RMSE, Kendall τ) — GNN, XGBoost.
THESIS_65 = {"Throughput": ((17.60, 481.82, 0.852), (5.49, 109.73, 0.96)),
             "Memory": ((9.45, 2657.45, 0.874), (1.81, 1209.22, 0.98)),
             "Energy": ((53.18, 1.94, 0.41), (6.27, 0.20, 0.96))}
#: The thesis' Table 6.6 MAPE % (without HF, with HF) per target and feature set.
THESIS_66 = {"T": {"TM": (39.36, 17.89), "TM+TP+TMmem": (43.25, 6.16), "MF": (43.19, 5.49)},
             "M": {"TM": (24.21, 11.68), "TM+TP+TMmem": (25.57, 1.94), "MF": (25.44, 1.81)},
             "E": {"TM": (31.08, 14.82), "TM+TP+TMmem": (32.21, 6.28), "MF": (32.11, 6.27)}}
#: §6.5.3's grid (reduced to fit 2 cores: 16 of its 180 points, subsample 1 as it chose).
GRID = {"n_estimators": (500, 2000), "learning_rate": (0.1, 0.01), "max_depth": (3, 5, 8, 10)}
SPLITS = (("cv5", "stratified 5-fold CV (hardware × engine strata)"),
          ("lomo", "leave-one-model-out"), ("loho", "leave-one-hardware-out"))


def mape(y, p) -> float:
    y, p = np.asarray(y, float), np.asarray(p, float)
    return float(np.mean(np.abs(p - y) / y) * 100)


def metrics(y, p) -> tuple[float, float, float]:
    from scipy.stats import kendalltau

    y, p = np.asarray(y, float), np.asarray(p, float)
    ok = np.isfinite(p)
    y, p = y[ok], p[ok]
    return mape(y, p), float(np.sqrt(np.mean((p - y) ** 2))), float(kendalltau(y, p)[0])


def folds(df: pd.DataFrame, split: str, seed: int = 0):
    """(name, test mask) per fold."""
    if split == "cv5":  # stratified by hardware × engine, as the thesis stratifies
        rng = np.random.default_rng(seed)
        fold = np.empty(len(df), int)
        for _, idx in df.groupby(["device", "framework"]).indices.items():
            idx = rng.permutation(idx)
            fold[idx] = np.arange(len(idx)) % 5
        for k in range(5):
            yield f"fold {k}", fold == k
    elif split == "lomo":
        for m in sorted(df["model"].unique()):
            yield m, (df["model"] == m).to_numpy()
    elif split == "loho":
        for d in sorted(df["device"].unique()):
            yield d, (df["device"] == d).to_numpy()


def out_of_fold(df, split, fit_predict) -> np.ndarray:
    pred = np.full(len(df), np.nan)
    for _, test in folds(df, split):
        if test.sum() == 0 or (~test).sum() < 20:
            continue
        pred[test] = fit_predict(~test, test)
    return pred


def xgb_fp(X, y, **params):
    if SMOKE:
        params = {**params, "n_estimators": 5}

    def fp(train, test):
        m = LLMGenerationPredictor(**params).fit(X[train], y[train])
        return m.predict(X[test])
    return fp


def md(rows: list[dict], cols: list[str] | None = None, fmt: str = "{:.1f}") -> str:
    cols = cols or list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            cells.append(fmt.format(v) if isinstance(v, float) and np.isfinite(v)
                         else ("—" if isinstance(v, float) else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the GNN baseline (thesis §6.5.2) on the traced prefill graphs
# --------------------------------------------------------------------------------------------

def gnn_feature_set(df: pd.DataFrame, X: pd.DataFrame, y_ms: np.ndarray, target: str):
    """A FeatureSet: each record's graph = its model's prefill graph (batch 1, 128 tokens,
    perfcast's graph cache); static = [TM, TP, TMmem, BS, SL, HF] + engine + devices."""
    import perfcast
    from perfcast.features.records import TARGETS, FeatureSet, graph_data

    graphs, index = [], {}
    for m in sorted(df["model"].unique()):
        g = perfcast.load_graph(f"hf:{m}", batch_size=1, seq_len=128)
        index[m] = len(graphs)
        graphs.append(graph_data(g))
    mem = np.log1p(X["params_b"] * 1e9 * X["weight_bytes_per_param"]
                   + X["kv_kib_per_token"] * 1024 * X["concurrent"]
                   * (X["input_len"].fillna(X["output_len"]) + X["output_len"]))
    cols = {"TM": X["log_tflop"], "TP": np.log(X["params_b"]), "TMmem": mem,
            "BS": np.log(X["concurrent"]), "SL_in": np.log(X["input_len"].fillna(
                X["output_len"])), "SL_out": np.log(X["output_len"]),
            "n_devices": X["n_devices"], **{c: X[c] for c in X.columns
                                            if c.startswith("engine_")},
            # hardware in log scale: a fold whose training rows have one GPU leaves these
            # columns constant (unscaled by the scaler), and raw watts / GB/s of an unseen GPU
            # then drive the network far outside anything it saw (predictions underflow to 0)
            "peak16": np.log(X["peak16_tflops"]), "bw": np.log(X["bandwidth_tbs"]),
            "mem_gb": np.log(X["memory_gb"]), "tdp": np.log(X["tdp_w"]),
            "year": X["arch_year"] - 2020, "l2": np.log1p(X["l2_mb"].fillna(0))}
    static = np.column_stack([np.asarray(v, float) for v in cols.values()]).astype(np.float32)
    yy = np.full((len(df), len(TARGETS)), np.nan)
    yy[:, TARGETS.index(target)] = y_ms
    rows = df[["model", "device", "framework"]].reset_index(drop=True).assign(
        family=df["model"].to_numpy(), batch_size=X["concurrent"].to_numpy())
    return FeatureSet(rows=rows, static=static,
                      graph_index=np.array([index[m] for m in df["model"]], np.int64),
                      graphs=graphs, y=yy, static_names=tuple(cols))


def gnn_fp(fs, target: str):
    from perfcast.predictors.gnn import NNLQP

    import dataclasses

    def fp(train, test):
        # a static column constant over the training rows (the hardware when they come from
        # one GPU) carries nothing the network could learn: it is held at that constant for
        # the test rows too, instead of feeding an unseen GPU's values through untrained
        # weights (which drove the log-space output to 0 or overflow)
        const = np.ptp(fs.static[train], axis=0) == 0
        static = fs.static.copy()
        static[:, const] = fs.static[train][0, const]
        f = dataclasses.replace(fs, static=static)
        m = NNLQP(hidden=32, fc_hidden=64, epochs=1 if SMOKE else 20, batch_size=16, lr=1e-3,
                  loss="mse", seed=0)
        m.fit(f.subset(np.flatnonzero(train)), targets=[target])
        return m.predict(f.subset(np.flatnonzero(test)))[:, 0]
    return fp


# --------------------------------------------------------------------------------------------
# pieces
# --------------------------------------------------------------------------------------------

def grid_search(lib, Xl) -> tuple[dict, list[dict]]:
    """§6.5.3 on the latency target, pooled 5-fold CV MAPE; kept in ``reports/llm/grid.json``
    (15 min of the report's time) and rerun with ``--regrid``."""
    import itertools

    cache = OUT / "grid.json"
    if cache.is_file() and "--regrid" not in sys.argv:
        rows = json.loads(cache.read_text())["rows"]
        best = min(rows, key=lambda r: r["CV MAPE %"])
        return {k: best[k] for k in GRID}, rows
    y = lib["latency_s"].to_numpy(float)
    rows = []
    for n, lr, d in itertools.product(*GRID.values()):
        p = out_of_fold(lib, "cv5", xgb_fp(Xl, y, target_mode="direct", hardware="specs",
                                           n_estimators=n, learning_rate=lr, max_depth=d,
                                           subsample=1.0))
        rows.append({"n_estimators": n, "learning_rate": lr, "max_depth": d,
                     "CV MAPE %": mape(y, p)})
        print("grid", rows[-1], file=sys.stderr, flush=True)
    best = min(rows, key=lambda r: r["CV MAPE %"])
    cache.write_text(json.dumps({"_comment": "§6.5.3 grid search of benchmarks/llm_report.py "
                                             "(pooled 5-fold CV MAPE % of the thesis XGBoost "
                                             "on LLM-Inference-Bench latency); rerun it with "
                                             "--regrid", "rows": rows}, indent=1))
    return {k: best[k] for k in GRID}, rows


def ablation(df, X, y, split, thesis_params) -> list[dict]:
    """Table 6.6: feature sets × with / without hardware (thesis XGBoost, direct)."""
    from perfcast.llm.model import REQUEST_FEATURES

    sets = {"TM": ["log_tflop"], "TM+TP+TMmem": ["log_tflop", "params_b", "log_mem"],
            "MF": None}
    X = X.assign(log_mem=np.log(X["params_b"] * X["weight_bytes_per_param"]
                                + X["kv_kib_per_token"] * 1e-6))
    out = []
    for name, cols in sets.items():
        row = {"features": name}
        for hw in ("none", "specs"):
            def fp(train, test, cols=cols, hw=hw):
                m = LLMGenerationPredictor(target_mode="direct", hardware=hw, **thesis_params)
                if cols is not None:  # restrict the booster to the set + the request
                    m.feature_names = lambda c=cols, m=m: [*REQUEST_FEATURES, *c, *(
                        () if hw == "none" else
                        ("peak16_tflops", "bandwidth_tbs", "memory_gb", "tdp_w", "arch_year",
                         "l2_mb"))]
                return m.fit(X[train], y[train]).predict(X[test])
            p = out_of_fold(df, split, fp)
            row["without HF" if hw == "none" else "with HF"] = mape(y, p)
        out.append(row)
    return out


def accelerate_rows() -> list[dict]:
    """accelerate's estimate-memory numbers for shipped configs, computed as its command does
    (``calculate_maximum_sizes`` on an empty model) — the command itself needs the hub."""
    import torch  # noqa: F401
    from accelerate import init_empty_weights
    from accelerate.utils import calculate_maximum_sizes
    from transformers import AutoModelForCausalLM

    from perfcast.devices import get_device
    from perfcast.generation import predict_generation
    from perfcast.workload import Workload
    from perfcast.zoo.hf import resolve_hf_config

    rows = []
    for m in ("meta-llama/Llama-2-7b-hf", "meta-llama/Meta-Llama-3-8B",
              "mistralai/Mixtral-8x7B-v0.1", "meta-llama/Meta-Llama-3-70B"):
        config, _ = resolve_hf_config(m)
        with init_empty_weights():
            model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        total, largest = calculate_maximum_sizes(model)
        dev = get_device("h100-sxm")
        for prec, div in (("fp16", 2), ("int8", 4), ("int4", 8)):
            tp = 1 if "70B" not in m and "Mixtral" not in m else 4
            p = predict_generation(Workload.of(f"hf:{m}", mode="generate", input_len=512,
                                               output_len=512, batch_size=16,
                                               tensor_parallel=tp, precision=prec), dev)
            mb = p.memory_breakdown_mb
            rows.append({"model": m, "precision": prec,
                         "accelerate total (MiB)": total / div / 2 ** 20,
                         "accelerate +20 % (MiB)": 1.2 * total / div / 2 ** 20,
                         "perfcast weights (MiB, all devices)": mb["weights"] * tp,
                         "perfcast need per device, B=16, 512+512, TP": (
                             f"{p.memory_needed_mb:,.0f} (TP {tp}: KV {mb['kv_cache']:,.0f}, "
                             f"act {mb['activations']:,.0f}, runtime {mb['runtime']:,.0f})")})
    return rows


def graph_rows() -> list[dict]:
    """Traced prefill FLOPs vs the closed form the bound uses."""
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.graphs import graph_summary

    rows = []
    for m in ("meta-llama/Llama-2-7b-hf", "meta-llama/Meta-Llama-3-70B",
              "mistralai/Mixtral-8x7B-v0.1", "google/gemma-2-9b-it", "Qwen/Qwen2-7B",
              "microsoft/Phi-3-mini-4k-instruct"):
        s = graph_summary(m)
        if s is None:
            continue
        a = llm_arch(f"hf:{m}")
        for t, f in zip(s["lengths"], s["flops"]):
            closed = t * a.flops_per_token() + a.attention_flops(t, t / 2.0)
            rows.append({"model": m, "tokens": t, "graph nodes": s["nodes"][0],
                         "graph GFLOP": f / 1e9, "closed form GFLOP": closed / 1e9,
                         "closed / graph": closed / f,
                         "activation peak MiB (sim, fp16)": s["activation_peak_mb"][
                             s["lengths"].index(t)]})
    return rows


def decode_rows() -> list[dict]:
    """Traced decode-step graphs vs the closed form the bound uses and vs the decode step
    interpolated from the prefill graph (α + 2β·c), every traced model."""
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.graphs import _summaries, graph_summary

    rows = []
    for m in sorted(_summaries()):
        s = graph_summary(m)
        if "decode_flops" not in s:
            continue
        a = llm_arch(f"hf:{m}")
        for c, f, n in zip(s["decode_lengths"], s["decode_flops"], s["decode_nodes"]):
            closed = a.flops_per_token() + a.attention_flops(1, c)
            interp = s["flops_alpha"] + 2 * s["flops_beta"] * c
            rows.append({"model": m, "cache tokens": c, "graph nodes": n,
                         "decode graph GFLOP": f / 1e9, "closed / graph": closed / f,
                         "prefill-interpolated / graph": interp / f,
                         "line error": s["decode_linearity_error"]})
    return rows


def transfer_rows(lib, Xl) -> list[dict]:
    """Train on one NVIDIA GPU (and nothing else), predict the other, per engine."""
    y = lib["latency_s"].to_numpy(float)
    dev, fw = lib["device"].to_numpy(), lib["framework"].to_numpy()
    rows = []
    for a, b in (("a100-40gb", "h100-sxm"), ("h100-sxm", "a100-40gb")):
        tr, te = dev == a, dev == b
        preds = {"bound": Xl["bound_s"].to_numpy()[te]}
        for v, kw in VARIANTS_LAT.items():
            if v.startswith("thesis"):
                kw = {**kw, **THESIS_PARAMS}
            preds[v] = LLMGenerationPredictor(**kw).fit(Xl[tr], y[tr]).predict(Xl[te])
        for f in ["all", *sorted(set(fw[te]))]:
            k = np.ones(te.sum(), bool) if f == "all" else fw[te] == f
            rows.append({"train → test": f"{a} → {b}", "framework": f, "n": int(k.sum()),
                         **{v: mape(y[te][k], p[k]) for v, p in preds.items()}})
    return rows


VARIANTS_LAT = {
    "thesis": {"target_mode": "direct", "hardware": "specs"},
    "thesis-nohw": {"target_mode": "direct", "hardware": "none"},
    "engine": {"target_mode": "engine", "hardware": "none"},
    "residual": {"target_mode": "residual", "hardware": "vendor"},
    "perfcast": {"target_mode": "blend", "hardware": "vendor"},
}
VARIANTS_TOK = {
    "thesis": {"target_mode": "direct", "hardware": "specs"},
    "thesis-nohw": {"target_mode": "direct", "hardware": "none"},
    "perfcast": {"target_mode": "residual", "hardware": "vendor"},
}
THESIS_PARAMS: dict = {}


def main() -> None:
    t0 = time.time()
    OUT.mkdir(parents=True, exist_ok=True)
    lib, mle = load_llm_bench(), load_mlenergy()
    print("features …", file=sys.stderr, flush=True)
    Xl = features(lib, "latency_s")
    Xk = features(mle, "token_time_s")
    Xp = features(mle, "tpot_s")
    y_lat = lib["latency_s"].to_numpy(float)
    tokens = (lib["concurrent"] * (lib["input_len"] + lib["output_len"])).to_numpy(float)
    y_tok = mle["token_time_s"].to_numpy(float)
    y_pow = mle["power_per_device_w"].to_numpy(float)
    y_tpot = mle["tpot_s"].to_numpy(float)
    y_e = mle["energy_per_token_j"].to_numpy(float)
    n_dev = mle["n_devices"].to_numpy(float)

    best, grid = grid_search(lib, Xl)
    THESIS_PARAMS.update(best, subsample=1.0)
    if SMOKE:
        THESIS_PARAMS["n_estimators"] = 5
    print("GNN graphs …", file=sys.stderr, flush=True)
    fs_lat = gnn_feature_set(lib, Xl, y_lat * 1e3, "time_ms")
    fs_e = gnn_feature_set(mle, Xk, y_e, "energy_j")

    results, tables = {}, {}
    for split, title in SPLITS:
        print(split, file=sys.stderr, flush=True)
        lat = {"bound": Xl["bound_s"].to_numpy()}
        for v, kw in VARIANTS_LAT.items():
            kw = {**kw, **(THESIS_PARAMS if v.startswith("thesis") else {})}
            lat[v] = out_of_fold(lib, split, xgb_fp(Xl, y_lat, **kw))
        lat["GNN"] = out_of_fold(lib, split, gnn_fp(fs_lat, "time_ms")) / 1e3
        tok = {"bound": Xk["bound_s"].to_numpy()}
        for v, kw in VARIANTS_TOK.items():
            kw = {**kw, **(THESIS_PARAMS if v.startswith("thesis") else {})}
            tok[v] = out_of_fold(mle, split, xgb_fp(Xk, y_tok, target=
                                                    "token_time_s", **kw))
        tpot = {"bound": Xp["bound_s"].to_numpy()}
        for v, kw in VARIANTS_TOK.items():
            kw = {**kw, **(THESIS_PARAMS if v.startswith("thesis") else {})}
            tpot[v] = out_of_fold(mle, split, xgb_fp(Xp, y_tpot, target="tpot_s", **kw))
        powr = {v: out_of_fold(mle, split, xgb_fp(Xp, y_pow, target="power_per_device_w",
                                                 target_mode="direct", hardware=hw))
                for v, hw in (("thesis", "specs"), ("thesis-nohw", "none"))}
        idle, tdp = 0.1 * Xp["tdp_w"].to_numpy(), Xp["tdp_w"].to_numpy()
        powr["perfcast"] = np.clip(powr["thesis"], idle, tdp)
        energy = {"TDP × measured token time": tdp * n_dev * y_tok}
        for v in ("thesis", "perfcast"):
            energy[v + " (power × token time)"] = powr[v] * n_dev * tok[v]
        energy["thesis (direct J/token)"] = out_of_fold(mle, split, xgb_fp(
            Xk, y_e, target="token_time_s", target_mode="direct", hardware="specs",
            **THESIS_PARAMS))
        energy["GNN (direct J/token)"] = out_of_fold(mle, split, gnn_fp(fs_e, "energy_j"))
        results[split] = {"lat": lat, "tok": tok, "tpot": tpot, "pow": powr, "energy": energy}
        tables[split] = {
            "lat": group_table(lib, y_lat, lat, split),
            "tok": group_table(mle, y_tok, tok, split),
            "tpot": group_table(mle, y_tpot, tpot, split),
            "pow": group_table(mle, y_pow, powr, split),
        }
    abl = {s: {"T": ablation(lib, Xl, y_lat, s, THESIS_PARAMS),
               "E": ablation(mle, Xk, y_e, s, THESIS_PARAMS)} for s, _ in SPLITS}
    transfer = transfer_rows(lib, Xl)
    full = LLMGenerationPredictor(target_mode="engine", n_estimators=0).fit(Xl, y_lat)
    engines = [{"engine / vendor": g.replace("|", " / "), **{k: v for k, v in zip(
        ("a", "b", "t0 (ms)", "t1 (µs/layer)", "κ"), (t[0], t[1], t[2] * 1e3, t[3] * 1e6,
                                                     t[4]))}}
               for g, t in sorted(full.engines_.items())]
    acc = accelerate_rows()
    graphs = graph_rows()
    decodes = decode_rows()
    write(lib, mle, results, tables, abl, transfer, engines, acc, graphs, decodes, grid,
          tokens, time.time() - t0)


def group_table(df, y, preds, split) -> list[dict]:
    rows = []
    for name, test in folds(df, split):
        rows.append({"group": name, "n": int(test.sum()),
                     **{k: mape(y[test], p[test]) for k, p in preds.items()
                        if np.isfinite(p[test]).all()}})
    rows.append({"group": "all (pooled)", "n": len(df),
                 **{k: mape(y[np.isfinite(p)], p[np.isfinite(p)]) for k, p in preds.items()}})
    return rows


def reading(lib, mle, results) -> list[str]:
    """The goals, met or not, and why — numbers from this run."""
    y_lat = lib["latency_s"].to_numpy(float)
    y_e = mle["energy_per_token_j"].to_numpy(float)
    dev = lib["device"].to_numpy()
    lat = {s: results[s]["lat"] for s, _ in SPLITS}
    pc = {s: mape(y_lat, lat[s]["perfcast"]) for s in lat}
    loho = lat["loho"]["perfcast"]
    per_dev = {d: mape(y_lat[dev == d], loho[dev == d]) for d in sorted(set(dev))}
    nv = np.isin(dev, ["a100-40gb", "h100-sxm"])
    en = {s: mape(y_e, results[s]["energy"]["perfcast (power × token time)"]) for s in lat}
    pw = {s: mape(mle["power_per_device_w"], results[s]["pow"]["perfcast"]) for s in lat}
    tk = {s: mape(mle["token_time_s"], results[s]["tok"]["perfcast"]) for s in lat}

    def met(v, goal):
        return f"**{v:.1f}** ({'met' if v <= goal else 'not met'}, goal ≤ {goal:g})"

    models = lib["model"].to_numpy()
    lomo_pm = {m: mape(y_lat[models == m], lat["lomo"]["perfcast"][models == m])
               for m in sorted(set(models))}
    misses = ", ".join(f"{m.split('/')[-1]} {v:.1f} ({(models == m).sum()} rows)"
                       for m, v in sorted(lomo_pm.items(), key=lambda kv: -kv[1]) if v > 10)
    ratio = y_lat / lib["bound_s"].to_numpy(float)
    fw, bs = lib["framework"].to_numpy(), lib["batch_size"].to_numpy()

    def factor(d):  # median measured / bound of vLLM rows at the smallest and largest batch
        m = (dev == d) & (fw == "vllm")
        if not m.any():
            return "—"
        lo, hi = bs[m].min(), bs[m].max()
        return (f"{np.median(ratio[m & (bs == lo)]):.1f}× at batch {lo:g}, "
                f"{np.median(ratio[m & (bs == hi)]):.1f}× at batch {hi:g}")

    return [
        "## Reading the results", "",
        f"* **Latency, 5-fold CV**: {met(pc['cv5'], 5.5)}; the thesis formulation "
        f"{mape(y_lat, lat['cv5']['thesis']):.1f}. Random folds share every model × GPU × "
        f"engine with the training rows: this split measures interpolation.",
        f"* **Leave-one-model-out**: {met(pc['lomo'], 10)} (thesis "
        f"{mape(y_lat, lat['lomo']['thesis']):.1f}, NVIDIA rows "
        f"{mape(y_lat[nv], lat['lomo']['perfcast'][nv]):.1f}). Held-out models over 10 %: "
        f"{misses or 'none'}. Mixtral is the only MoE in the data (which experts a batch "
        f"touches is assumed uniform); the others' engine rows differ from their siblings' "
        f"(per-model table in the detail section).",
        f"* **Leave-one-hardware-out**: NVIDIA {met(mape(y_lat[nv], loho[nv]), 20)} "
        f"(" + ", ".join(f"{d} {v:.1f}" for d, v in per_dev.items()) + "). A held-out "
        "NVIDIA GPU leaves one NVIDIA GPU to learn from, so the engine model's bandwidth "
        "efficiency and per-pass overhead are not separable (one bandwidth): the transfer table "
        "shows the same in both directions. AMD and Intel are not within 20 %: their engines' "
        "efficiency is a property of the software stack, not of the spec sheet (measured / "
        f"bound of vLLM: MI300X {factor('mi300x')}; MI250 {factor('mi250')}; A100 "
        f"{factor('a100-40gb')}; Max 1550 has {(dev == 'max1550').sum()} rows) — nothing the "
        "held-out GPU's spec sheet could tell.",
        f"* **Energy per output token**: CV {met(en['cv5'], 6.3)}, LOMO {en['lomo']:.1f}, "
        f"LOHO {en['loho']:.1f}. It is power × GPUs × seconds per token, and both factors "
        f"carry error: power per GPU {pw['cv5']:.1f} / {pw['lomo']:.1f} / {pw['loho']:.1f} %, "
        f"the server's seconds per output token {tk['cv5']:.1f} / {tk['lomo']:.1f} / "
        f"{tk['loho']:.1f} % (CV / LOMO / LOHO). The token time under continuous batching "
        f"depends on the prompts ML.ENERGY served (ShareGPT; their lengths are not published: "
        f"the output length stands for them), which no feature knows. The thesis' 6.27 % is "
        f"a forward pass of fixed shape on its own measurements.",
        "* **Memory**: neither source measures LLM memory, so no MAPE is claimed; it is "
        "arithmetic that is exact by construction for the weights and KV cache (tested by hand "
        "for an MHA and a GQA model), the simulated activations, and the measured runtime, "
        "and is compared with accelerate's weights-only estimate below.",
        "",
    ]


def write(lib, mle, results, tables, abl, transfer, engines, acc, graphs, decodes, grid,
          tokens, seconds) -> None:
    y_lat = lib["latency_s"].to_numpy(float)
    y_tok = mle["token_time_s"].to_numpy(float)
    y_e = mle["energy_per_token_j"].to_numpy(float)
    nv = lib["device"].isin(["a100-40gb", "h100-sxm"]).to_numpy()
    L = []
    L += ["# LLM generation: latency, tokens/s, power and energy (issue #14)", "",
          f"`.venv/bin/python benchmarks/llm_report.py` ({time.strftime('%Y-%m-%d')}, "
          f"{seconds / 60:.0f} min on 2 cores; the traced graphs it reads come from "
          f"`.venv/bin/python benchmarks/llm_graphs.py`). MAPE %, every prediction out of "
          f"fold; nothing here is tuned on a test fold except the thesis' grid search (on "
          f"5-fold CV, as §6.5.3 does).", "",
          "## Data and what it counts", "",
          f"* **LLM-Inference-Bench** ({len(lib):,} configurations after the drops below): "
          f"`Latency` is the wall time of a static batch — prefill of B prompts of I tokens, "
          f"then O = I decode steps; `Throughput` = B·(I+O)/Latency exactly (prompt *and* "
          f"generated tokens of the whole batch per second; verified on every row of the "
          f"file, `tests/test_llm.py`). `throughput_tokens_per_s` is defined the same way; "
          f"`output_tokens_per_s` = B·O/latency. llama.cpp rows are one sequence "
          f"(Throughput = (I+O)/Latency, no B): their `Batch Size` is llama.cpp's prompt chunk "
          f"(`n_batch`), and with several GPUs llama.cpp splits layers (the rows do not get "
          f"faster with more GPUs) — both modelled in the bound.",
          f"* **ML.ENERGY v2** ({len(mle):,} vLLM configurations on A100-40GB / H100): "
          f"`Token tput` = output tokens per second of the whole server, `Avg TPOT` a request's "
          f"time per output token at `Avg BS` running requests, `Energy/req` all GPUs' energy "
          f"per request. Power per GPU = energy/req × requests/s ÷ GPUs. Energy per output "
          f"token = power × GPUs ÷ token throughput; note that batch ÷ TPOT is *not* the token "
          f"throughput (ratio {np.median(mle['throughput_tok_s'] * mle['tpot_s'] / mle['batch_size']):.2f} "
          f"median: prefills and queueing), so energy per token is built on seconds per output "
          f"token of the server (1 / Token tput); a request's TPOT is learned and reported as "
          f"its own target. No source measures TTFT: `ttft_ms` is the engine model's prefill "
          f"share of the predicted latency, not a learned target.",
          "* **Quantization**: no row of either source is quantized — LLM-Inference-Bench names "
          "no precision and its llama.cpp rows run at 16-bit speed (H100, Llama-2-7B: "
          "≈ 9 ms per token = 1.5 TB/s of 13.5 GB fp16 weights, 44 % of peak; 4-bit weights "
          "would mean 12 %). int8 / int4 times are therefore **extrapolated** by the bound "
          "(smaller weights streamed) with the 16-bit factor, and every such answer says so.",
          ""]
    # summary
    L += ["## Summary (pooled MAPE %; NVIDIA = A100 + H100 rows)", "",
          "| split | latency: bound | thesis | GNN | perfcast | perfcast NVIDIA | "
          "server s/token: thesis | perfcast | TPOT: thesis | perfcast | power: thesis | "
          "perfcast | energy/token: thesis | GNN | perfcast |", "|" + "---|" * 15]
    y_tpot = mle["tpot_s"].to_numpy(float)
    for split, _ in SPLITS:
        r = results[split]
        lat, tok, pw, en = r["lat"], r["tok"], r["pow"], r["energy"]
        L.append(f"| {split} | {mape(y_lat, lat['bound']):.1f} | {mape(y_lat, lat['thesis']):.1f}"
                 f" | {mape(y_lat, lat['GNN']):.1f} | {mape(y_lat, lat['perfcast']):.1f} | "
                 f"{mape(y_lat[nv], lat['perfcast'][nv]):.1f} | "
                 f"{mape(y_tok, tok['thesis']):.1f} | {mape(y_tok, tok['perfcast']):.1f} | "
                 f"{mape(y_tpot, r['tpot']['thesis']):.1f} | "
                 f"{mape(y_tpot, r['tpot']['perfcast']):.1f} | "
                 f"{mape(mle['power_per_device_w'], pw['thesis']):.1f} | "
                 f"{mape(mle['power_per_device_w'], pw['perfcast']):.1f} | "
                 f"{mape(y_e, en['thesis (direct J/token)']):.1f} | "
                 f"{mape(y_e, en['GNN (direct J/token)']):.1f} | "
                 f"{mape(y_e, en['perfcast (power × token time)']):.1f} |")
    L += ["", "**Goals** (issue #14): 5-fold CV latency/throughput ≤ 5.5 %, memory ≤ 2 %, "
          "energy ≤ 6.3 %; leave-one-model-out ≤ 10 %; leave-one-hardware-out ≤ 20 % on NVIDIA. "
          "Where a number above is over its goal it is not reached; *Reading the results* says "
          "why.", ""]
    L += reading(lib, mle, results)
    # Table 6.5
    L += ["## Table 6.5 side by side (MAPE % / RMSE / Kendall τ)", "",
          "The thesis' targets are an encoder's forward throughput (samples/s), peak memory "
          "(MB) and energy per sample (J) on its own V100/A100/H100 measurements, stratified "
          "5-fold CV; ours are LLM generation throughput (tokens/s, from the predicted "
          "latency), and energy per output token (J) — not the same data, the same protocol. "
          "Memory has no LLM measurement in either source: our memory is arithmetic (weights, "
          "KV cache, simulated activations, measured runtime; compared with accelerate below), "
          "so its row stays empty rather than invented.", ""]
    for split, title in SPLITS:
        r = results[split]
        thr = tokens
        rows = []
        for target, (g, x) in THESIS_65.items():
            row = {"target": target, "thesis GNN": "%.2f / %.2f / %.3f" % g,
                   "thesis XGBoost": "%.2f / %.2f / %.2f" % x}
            if target == "Throughput":
                for v in ("GNN", "thesis", "perfcast"):
                    row[f"ours {v}"] = "%.2f / %.0f / %.3f" % metrics(
                        thr / y_lat, thr / r["lat"][v])
            elif target == "Energy":
                for v, k in (("GNN", "GNN (direct J/token)"),
                             ("thesis", "thesis (direct J/token)"),
                             ("perfcast", "perfcast (power × token time)")):
                    row[f"ours {v}"] = "%.2f / %.3f / %.3f" % metrics(y_e, r["energy"][k])
            else:
                for v in ("GNN", "thesis", "perfcast"):
                    row[f"ours {v}"] = "no measurement"
            rows.append(row)
        L += [f"### {title}", "", md(rows), ""]
    # Table 6.6
    L += ["## Table 6.6 ablation (thesis XGBoost, MAPE %: without / with hardware features)",
          "", "TM = the request's FLOPs (our 'MACs'), TP = parameters, TMmem = weights + KV "
          "bytes, MF = every model feature; the request's batch, lengths, devices and engine "
          "are in every set.", ""]
    for split, _ in SPLITS:
        rows = []
        for tgt, key in (("T", "T"), ("E", "E")):
            for r in abl[split][key]:
                th = THESIS_66[tgt][r["features"]]
                rows.append({"target": tgt, "features": r["features"],
                             "thesis w/o HF": th[0], "thesis with HF": th[1],
                             "ours w/o HF": r["without HF"], "ours with HF": r["with HF"]})
        L += [f"### {dict(SPLITS)[split]}", "", md(rows), ""]
    # transfer
    L += ["## Newer-GPU transfer: train on one NVIDIA GPU only, predict the other (latency)", "",
          "The situation of a user with an unmeasured GPU, in both directions (A100 → H100 is "
          "'older → newer'). Hardware enters `engine` only through the spec sheet.", "",
          md(transfer), ""]
    # per split details
    for split, title in SPLITS:
        t = tables[split]
        L += [f"## {title}: detail", "",
              f"### Batch latency, LLM-Inference-Bench ({len(lib):,} configurations)", "",
              md(t["lat"]), "",
              f"### Seconds per output token of the server, ML.ENERGY ({len(mle):,})", "",
              md(t["tok"]), "",
              f"### Time per output token of a request (Avg TPOT), ML.ENERGY ({len(mle):,})",
              "", md(t["tpot"]), "", "### Average power per GPU while serving, ML.ENERGY", "",
              md(t["pow"]), "", "### Energy per output token (J), pooled MAPE %", "",
              md([{k: mape(y_e, v) for k, v in results[split]["energy"].items()}]), ""]
    # engine model
    L += ["## The engine model fitted on every row", "",
          "time = Σ passes count · (max(a·FLOPs/(n·peak), b·bytes/(n·BW)) + t0 + t1·layers + "
          "κ·2·layers·all-reduce(n)) — floors a ≥ 1.33, b ≥ 1.04, t1 ≥ 20 µs from vidur's "
          "A100 kernel profile (`../shared/data/vidur/compute/mlp-a100.csv`: the layer GEMMs "
          "reach 1/1.33 of the fp16 peak at ≥ 2,048 tokens and 1/1.04 of the bandwidth at 1–32 "
          "tokens; the layer's other kernels take ≥ 20 µs; A40's GDDR6 reaches 1/1.30 of its "
          "bandwidth). The all-reduce shape is vidur's A100 DGX NVLink profile "
          "(α = 42 µs, β = 170 / 106 / 87 GB/s for 2 / 4 / 8 GPUs). vidur's attention kernel "
          "profile is not in the snapshot, so attention is the roofline term.", "",
          md(engines, fmt="{:.3g}"), ""]
    # memory vs accelerate
    L += ["## Memory: perfcast vs `accelerate estimate-memory`", "",
          "`accelerate estimate-memory ID` needs the hub (it failed here: gated repo / offline), "
          "so its numbers are computed as the command computes them — "
          "`accelerate.utils.calculate_maximum_sizes` on the model built empty "
          "(`init_empty_weights`) from perfcast's shipped config, fp32 size ÷ 2 / 4 / 8 for "
          "fp16 / int8 / int4 (accelerate 1.15). accelerate counts weights only and advises "
          "+20 % for inference; perfcast adds the KV cache (vLLM 16-token blocks), the "
          "simulated prefill activations and the measured runtime, per device under tensor "
          "parallelism, and its int4 / int8 weights carry one fp16 scale per 128 weights. "
          "vLLM itself pre-allocates `gpu_memory_utilization` 0.9 of each GPU: "
          "`memory_mb` reports that, `memory_needed_mb` the need.", "",
          md(acc, fmt="{:,.0f}"), ""]
    L += ["## Traced graphs vs the closed form", "",
          "`benchmarks/llm_graphs.py` traces each shipped decoder's prefill graph (batch 1) at "
          "128 and 256 tokens and simulates its memory; FLOPs α·T + β·T² and activations "
          "c + d·T are then exact at any length. The bound uses the closed form (2 × active "
          "parameters per token + causal attention); the graph additionally counts the LM "
          "head over every prompt position, norms and rotary, which is the gap below. The "
          "activation term of `memory_mb` is the simulation's.", "", md(graphs, fmt="{:,.3g}"),
          "", "### Decode-step graphs (one token over a KV cache of c tokens)", "",
          "Traced with the cache handed to the model as a transformers `DynamicCache` at 128, "
          "512 and 1,024 cache tokens (those within the model's positions); FLOPs are a line "
          "in c (`line error`: the largest relative distance of a trace from the least-squares "
          "line), so a request's O − 1 steps at cache lengths I … I+O−2 are summed from it "
          "(`flops` of a `--mode generate` answer) — O graphs are never traced. `closed / "
          "graph`: the bound's decode FLOPs (2 × parameters a token multiplies + attention "
          "over c keys) over the traced graph's; `prefill-interpolated / graph`: the decode "
          "step derived from the prefill traces (α + 2β·c).", "",
          md(decodes, fmt="{:,.4g}") if decodes else "(no decode graph traced)", ""]
    L += ["## §6.5.3 grid search (thesis XGBoost, latency, pooled 5-fold CV MAPE %)", "",
          md(grid, fmt="{:g}"), ""]
    L += ["## Speed", "", "A 7B generate prediction, cold (a fresh process) and warm (the same "
          "process): `.venv/bin/python benchmarks/llm_speed.py` → [speed.md](speed.md).", ""]
    L += ["## What was dropped", "", lib.attrs["report"].to_markdown(),
          mle.attrs["report"].to_markdown()]
    from perfcast.paths import write_file_atomically

    write_file_atomically(OUT / "README.md", "\n".join(L) + "\n")
    print(OUT / "README.md")


if __name__ == "__main__":
    main()
