"""Fitting the prefill model's constants (:mod:`perfcast.llm.prefill`) — ``perfcast train
--recipe llm --only prefill``:

1. **operators** (:func:`fit_operators`): the GEMM constants ``τ, η, β, p`` of
   ``τ + ((c/η)^p + (m/β)^p)^(1/p)`` and the memory-bound operators' ``τ, η`` of
   ``τ + bytes/(η·BW)``, least squares in log space on Vidur's operator profiles (every
   GEMM, norm and element-wise operator of the 7 LLMs' layers, 1–32k tokens, TP 1–8, A100 and
   A40: :func:`perfcast.datasets.vidur.load_vidur_ops`);
2. **llama.cpp** (:func:`fit_llama_cpp`): per vendor, the streaming factor ``b`` of its own
   kernels, its per-pass and per-layer overheads and the pipelining of its layer split, on the
   **prompt-only** signal of LLM-Inference-Bench: rows that differ only in ``n_batch`` (1, 16,
   32, 64) generate the same tokens, so their latency differences are differences of prompt
   processing alone (:func:`prompt_differences`);
3. **intervals**: the 5 % / 95 % quantiles of the held-out log ratio measured / predicted —
   Vidur's per-layer prefill time with each GPU held out (:func:`operator_loho`) and
   llama.cpp's prompt differences with each accelerator held out (:func:`llama_cpp_loho`).

Everything here is deterministic (no random split); the evaluation that reports the same
held-out errors is ``benchmarks/llm_serving_eval.py`` (``reports/llm/serving.md``).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcast.errors import PerfcastError

#: Starting values and bounds of the operator fits.
GEMM_START = {"tau_s": 5e-6, "eta": 0.8, "beta": 0.8, "p": 2.0}
GEMM_BOUNDS = {"tau_s": (0.0, 1e-3), "eta": (0.05, 1.0), "beta": (0.05, 1.5), "p": (1.0, 8.0)}
MEMOP_START = {"tau_s": 3e-6, "eta": 0.7}
MEMOP_BOUNDS = {"tau_s": (0.0, 1e-3), "eta": (0.02, 1.2)}
#: llama.cpp parameters, their starting values and bounds.
LLAMA_PARAMS = ("b", "t_pass_s", "t_layer_s", "pipeline")
LLAMA_START = np.array([1.5, 1e-3, 2e-5, 0.5])
LLAMA_LOWER = np.array([1.0, 0.0, 0.0, 0.0])
LLAMA_UPPER = np.array([5.0, 0.05, 1e-3, 1.0])
#: The grid of ``b`` on which the operator part of a llama.cpp prompt is precomputed.
B_GRID = np.round(np.arange(1.0, 5.0001, 0.1), 4)
COVERAGE = 0.9


# --------------------------------------------------------------------------- operators
def _op_terms(ops: pd.DataFrame, devices: dict) -> pd.DataFrame:
    """Per Vidur operator row: ``kind`` (gemm / memop), ``c`` = FLOPs ÷ peak (s), ``m`` = bytes
    ÷ bandwidth (s), ``bytes``, ``bw`` — with the bytes :mod:`perfcast.llm.prefill` counts
    (2-byte activations and weights)."""
    peak = ops["device_key"].map(lambda k: float(devices[k].peak_tflops("fp16")) * 1e12)
    bw = ops["device_key"].map(lambda k: float(devices[k].bandwidth_gbs) * 1e9)
    gemm = ops["kernel_class"] == "gemm"
    M, N, K = ops["M"], ops["N"], ops["K"]
    t, H = ops["B"], ops["H"]
    byt = pd.Series(np.nan, index=ops.index)
    byt[gemm] = 2.0 * (N * K + M * K + M * N)[gemm]
    op = ops["operator"]
    two = op.isin(["input_layernorm", "post_attention_layernorm", "attn_rope"])
    byt[two] = (2 * 2.0 * t * H)[two]  # read + write
    three = op.isin(["mlp_act", "add"])
    byt[three] = (3 * 2.0 * t * H)[three]  # two inputs, one output
    out = pd.DataFrame({"kind": np.where(gemm, "gemm", "memop"),
                        "c": np.where(gemm, 2.0 * M * N * K / peak, 0.0),
                        "m": byt / bw, "bytes": byt, "bw": bw,
                        "y": ops["latency_ms"] / 1e3}, index=ops.index)
    return out[np.isfinite(out["m"]) & (out["y"] > 0)]


def _gemm_pred(q, c, m):
    tau, eta, beta, p = q
    return tau + ((c / eta) ** p + (m / beta) ** p) ** (1.0 / p)


def _memop_pred(q, m):
    tau, eta = q
    return tau + m / eta


def fit_operators(ops: pd.DataFrame, devices: dict | None = None) -> dict[str, dict[str, float]]:
    """``{"gemm": {tau_s, eta, beta, p}, "memop": {tau_s, eta}}`` fitted on operator rows in
    the frame of :func:`perfcast.datasets.vidur.load_vidur_ops` (least squares on the log
    time, a soft-L1 loss)."""
    from scipy.optimize import least_squares

    from perfcast.devices import get_device

    devices = devices or {k: get_device(k) for k in ops["device_key"].unique()}
    T = _op_terms(ops, devices)
    if not len(T):
        raise PerfcastError("no operator rows to fit the prefill constants on")
    out: dict[str, dict[str, float]] = {}
    g = T[T["kind"] == "gemm"]
    names = list(GEMM_START)
    lo = [GEMM_BOUNDS[n][0] for n in names]
    hi = [GEMM_BOUNDS[n][1] for n in names]
    c, m, y = g["c"].to_numpy(), g["m"].to_numpy(), np.log(g["y"].to_numpy())
    scale = np.array([1e-6, 1, 1, 1])
    r = least_squares(lambda z: np.log(_gemm_pred(z * scale, c, m)) - y,
                      np.array(list(GEMM_START.values())) / scale,
                      bounds=(np.array(lo) / scale, np.array(hi) / scale),
                      loss="soft_l1", f_scale=0.1)
    out["gemm"] = {n: float(v) for n, v in zip(names, r.x * scale)}
    e = T[T["kind"] == "memop"]
    names = list(MEMOP_START)
    lo = [MEMOP_BOUNDS[n][0] for n in names]
    hi = [MEMOP_BOUNDS[n][1] for n in names]
    m, y = e["m"].to_numpy(), np.log(e["y"].to_numpy())
    scale = np.array([1e-6, 1])
    r = least_squares(lambda z: np.log(_memop_pred(z * scale, m)) - y,
                      np.array(list(MEMOP_START.values())) / scale,
                      bounds=(np.array(lo) / scale, np.array(hi) / scale),
                      loss="soft_l1", f_scale=0.1)
    out["memop"] = {n: float(v) for n, v in zip(names, r.x * scale)}
    return out


def layer_times(ops: pd.DataFrame, consts: dict[str, dict[str, float]],
                devices: dict | None = None) -> pd.DataFrame:
    """Per Vidur profile row (model, tokens, TP, device): the measured and predicted time of
    one layer's token-level operators (GEMMs, norms, rotary, activation, residual add) — the
    prefill a layer spends outside attention."""
    from perfcast.devices import get_device

    devices = devices or {k: get_device(k) for k in ops["device_key"].unique()}
    T = _op_terms(ops, devices)
    g = consts["gemm"]
    k = consts["memop"]
    pred = np.where(T["kind"] == "gemm",
                    _gemm_pred([g["tau_s"], g["eta"], g["beta"], g["p"]], T["c"], T["m"]),
                    _memop_pred([k["tau_s"], k["eta"]], T["m"]))
    df = ops.loc[T.index, ["model", "num_tokens", "tp", "device_key", "phase"]].copy()
    df["measured_s"], df["predicted_s"] = T["y"], pred
    return df.groupby(["device_key", "model", "tp", "num_tokens", "phase"], as_index=False)[
        ["measured_s", "predicted_s"]].sum()


def operator_loho(ops: pd.DataFrame) -> pd.DataFrame:
    """Leave-one-GPU-out on Vidur: constants fitted on the other GPU's operators, the held-out
    GPU's per-layer times predicted (:func:`layer_times`); one row per layer configuration
    with ``held_out``."""
    parts = []
    for dev in sorted(ops["device_key"].unique()):
        train = ops[ops["device_key"] != dev]
        if not len(train):
            continue
        consts = fit_operators(train)
        lt = layer_times(ops[ops["device_key"] == dev], consts)
        lt["held_out"] = dev
        parts.append(lt)
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------- llama.cpp
def prompt_differences(bench: pd.DataFrame) -> pd.DataFrame:
    """LLM-Inference-Bench llama.cpp rows paired within a configuration (device, devices,
    model, prompt = output length; one sequence each) that differ only in ``n_batch`` (its
    "Batch Size", the records' ``n_batch`` column — :func:`perfcast.datasets.llm.
    load_llm_bench`): one row
    per (configuration, ``n_batch`` a, the largest ``n_batch`` b of the configuration) with
    ``measured_s`` = latency(a) − latency(b) — prompt processing at a minus at b, the generated
    tokens being the same — and ``latency_b_s``."""
    lc = bench[bench["framework"] == "llama.cpp"]
    if "n_batch" not in lc.columns:
        raise PerfcastError("llama.cpp rows need their n_batch column (load_llm_bench's)")
    rows = []
    keys = ["device", "n_devices", "model", "input_len", "output_len", "precision"]
    for key, g in lc.groupby(keys):
        if g["n_batch"].nunique() < 2:
            continue
        top = g.loc[g["n_batch"].idxmax()]
        for _, r in g.iterrows():
            if r["n_batch"] == top["n_batch"]:
                continue
            rows.append({**dict(zip(keys, key)), "n_batch_a": int(r["n_batch"]),
                         "n_batch_b": int(top["n_batch"]),
                         "measured_s": float(r["latency_s"] - top["latency_s"]),
                         "latency_a_s": float(r["latency_s"]),
                         "latency_b_s": float(top["latency_s"])})
    return pd.DataFrame(rows)


def _ops_on_grid(diffs: pd.DataFrame, consts, devices: dict) -> dict[str, np.ndarray]:
    """For every difference row: the operator part of prompt processing at ``n_batch`` a and b
    for each ``b`` of :data:`B_GRID` (no overheads, one device's time), and the passes."""
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.prefill import PrefillConstants, estimate_prefill
    from perfcast.workload import LLAMA_CPP_N_UBATCH

    k = PrefillConstants(gemm=consts["gemm"], memop=consts["memop"])
    cache: dict[tuple, tuple[np.ndarray, int, int]] = {}

    def one(model, dev, prec, i, nb):
        key = (model, dev, prec, i, nb)
        if key not in cache:
            arch = llm_arch(f"hf:{model}")
            vals = np.array([estimate_prefill(
                arch, devices[dev], engine="llama.cpp", precision=prec, batch=1, input_len=i,
                n_devices=1, chunk=min(nb, LLAMA_CPP_N_UBATCH), constants=k,
                overheads={"b": float(b), "t_pass_s": 0.0, "t_layer_s": 0.0}).seconds
                for b in B_GRID])
            npass = math.ceil(i / min(nb, LLAMA_CPP_N_UBATCH))
            cache[key] = (vals, npass, arch.layers)
        return cache[key]

    A, B, pa, pb, layers = [], [], [], [], []
    for r in diffs.itertuples(index=False):
        va, na, lay = one(r.model, r.device, r.precision, int(r.input_len), int(r.n_batch_a))
        vb, nb_, _ = one(r.model, r.device, r.precision, int(r.input_len), int(r.n_batch_b))
        A.append(va)
        B.append(vb)
        pa.append(na)
        pb.append(nb_)
        layers.append(lay)
    return {"ops_a": np.array(A), "ops_b": np.array(B), "pass_a": np.array(pa, float),
            "pass_b": np.array(pb, float), "layers": np.array(layers, float),
            "n": diffs["n_devices"].to_numpy(float)}


def _llama_pred(theta, G: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Predicted prompt time at ``n_batch`` a and b of every row for parameters ``theta``."""
    b, t_pass, t_layer, e_pp = theta
    j = np.interp(b, B_GRID, np.arange(len(B_GRID)))
    lo = int(min(math.floor(j), len(B_GRID) - 2))
    w = j - lo
    op_a = (1 - w) * G["ops_a"][:, lo] + w * G["ops_a"][:, lo + 1]
    op_b = (1 - w) * G["ops_b"][:, lo] + w * G["ops_b"][:, lo + 1]
    over = t_pass + t_layer * G["layers"]
    pa = (op_a + G["pass_a"] * over) / (1 + e_pp * (np.minimum(G["n"], G["pass_a"]) - 1))
    pb = (op_b + G["pass_b"] * over) / (1 + e_pp * (np.minimum(G["n"], G["pass_b"]) - 1))
    return pa, pb


def fit_llama_cpp(diffs: pd.DataFrame, G: dict[str, np.ndarray]) -> dict[str, float]:
    """llama.cpp's ``b, t_pass_s, t_layer_s, pipeline`` fitted on prompt differences (rows of
    :func:`prompt_differences`, their operator grid ``G``): least squares on
    (predicted − measured difference) ÷ the latency at ``n_batch`` b (a soft-L1 loss)."""
    from scipy.optimize import least_squares

    y = diffs["measured_s"].to_numpy(float)
    base = diffs["latency_b_s"].to_numpy(float)
    scale = np.array([1.0, 1e-3, 1e-5, 1.0])

    def resid(z):
        pa, pb = _llama_pred(z * scale, G)
        return ((pa - pb) - y) / base

    r = least_squares(resid, LLAMA_START / scale, bounds=(LLAMA_LOWER / scale,
                                                           LLAMA_UPPER / scale),
                      loss="soft_l1", f_scale=0.02)
    return {n: float(v) for n, v in zip(LLAMA_PARAMS, r.x * scale)}


def _vendor_of(devices: dict, key: str) -> str:
    from perfcast.llm.prefill import _vendor

    return _vendor(devices[key])


def fit_llama_cpp_by_vendor(diffs: pd.DataFrame, G: dict[str, np.ndarray], devices: dict
                            ) -> dict[str, dict[str, float]]:
    """``{"llama.cpp|vendor": params}`` for each vendor with rows, and ``"llama.cpp"`` pooled."""
    vend = diffs["device"].map(lambda k: _vendor_of(devices, k)).to_numpy()
    out = {"llama.cpp": fit_llama_cpp(diffs, G)}
    for v in sorted(set(vend)):
        m = vend == v
        out[f"llama.cpp|{v}"] = fit_llama_cpp(diffs[m], {k: a[m] for k, a in G.items()})
    return out


def llama_cpp_loho(diffs: pd.DataFrame, G: dict[str, np.ndarray], devices: dict
                   ) -> pd.DataFrame:
    """Leave-one-accelerator-out on the prompt differences: the held-out device's rows
    predicted with the parameters of its vendor's other devices (none left: every other
    device's); ``predicted_s`` beside ``measured_s``."""
    vend = diffs["device"].map(lambda k: _vendor_of(devices, k)).to_numpy()
    dev = diffs["device"].to_numpy()
    pred = np.full(len(diffs), np.nan)
    source = np.empty(len(diffs), dtype=object)
    for d in sorted(set(dev)):
        test = dev == d
        same = (vend == vend[test][0]) & ~test
        train = same if same.any() else ~test
        theta = fit_llama_cpp(diffs[train], {k: a[train] for k, a in G.items()})
        pa, pb = _llama_pred([theta[n] for n in LLAMA_PARAMS], {k: a[test] for k, a in G.items()})
        pred[test] = pa - pb
        source[test] = ("same vendor: " if same.any() else "other vendors: ") + ", ".join(
            sorted(set(dev[train])))
    out = diffs.copy()
    out["predicted_s"], out["trained_on"] = pred, source
    return out


# --------------------------------------------------------------------------- the recipe
#: Engines whose per-pass overheads come from the ``llm-latency`` engine model, and vendors.
OVERHEAD_ENGINES = ("vllm", "trt-llm", "deepspeed-mii", "hf")
VENDORS = ("nvidia", "amd", "intel")


def engine_model_overheads(out_root: str | Path | None = None, model=None
                           ) -> dict[str, dict[str, float]]:
    """``{"engine|vendor": {t_pass_s, t_layer_s}}`` for the engines but llama.cpp: the
    per-pass ``t0`` and per-layer ``t1`` of the ``llm-latency`` engine model (``model``, else
    the one in ``out_root``, else the shipped one), as it resolves an engine it never saw on a
    vendor (that vendor's vLLM, the engine pooled, all pooled)."""
    from perfcast.llm.model import LLMGenerationPredictor
    from perfcast.shipped import load_shipped
    from perfcast.training.llm import LLM_MODELS

    if model is None:
        fresh = Path(out_root) / LLM_MODELS["latency_s"][2] if out_root else None
        model = LLMGenerationPredictor.load(fresh) if fresh and (fresh / "config.json"
                                                                 ).is_file() \
            else load_shipped(LLM_MODELS["latency_s"][2])
    member = model.members_[0] if getattr(model, "members_", None) else model
    out = {}
    for e in OVERHEAD_ENGINES:
        for v in VENDORS:
            th = member._engine_theta(f"{e}|{v}", e)
            out[f"{e}|{v}"] = {"t_pass_s": float(th[2]), "t_layer_s": float(th[3])}
    return out


def _quantiles(log_ratio: np.ndarray, coverage: float = COVERAGE) -> list[float]:
    a = (1 - coverage) / 2
    lr = log_ratio[np.isfinite(log_ratio)]
    return [float(np.quantile(lr, a)), float(np.quantile(lr, 1 - a))]


def train_prefill(out_root: str | Path) -> dict[str, Any]:
    """Fit every constant of :class:`~perfcast.llm.prefill.PrefillConstants` on all the data
    and write ``<out_root>/llm-prefill/config.json``; the intervals from the held-out runs."""
    import hashlib

    from perfcast.datasets.llm import load_llm_bench
    from perfcast.datasets.vidur import load_vidur_ops, vidur_files
    from perfcast.devices import get_device
    from perfcast.llm.prefill import SHIPPED_NAME, PrefillConstants
    from perfcast.paths import public_data_dir

    t0 = time.perf_counter()
    ops = load_vidur_ops()
    consts = fit_operators(ops)
    loho = operator_loho(ops)
    pre = loho[loho["phase"] == "prefill"]
    q_ops = _quantiles(np.log(pre["measured_s"] / pre["predicted_s"]).to_numpy())
    bench = load_llm_bench()
    diffs = prompt_differences(bench)
    devices = {k: get_device(k) for k in diffs["device"].unique()}
    G = _ops_on_grid(diffs, consts, devices)
    engines = fit_llama_cpp_by_vendor(diffs, G, devices)
    lh = llama_cpp_loho(diffs, G, devices)
    ok = (lh["measured_s"] > 0) & (lh["n_batch_a"] == 1)
    vend = lh["device"].map(lambda d: _vendor_of(devices, d))
    interval = {"*": q_ops}
    for v in sorted(vend[ok].unique()):
        sel = ok & (vend == v)
        q = _quantiles(np.log(lh.loc[sel, "measured_s"] / lh.loc[sel, "predicted_s"])
                       .to_numpy())
        interval[f"llama.cpp|{v}"] = [min(q_ops[0], q[0]), max(q_ops[1], q[1])]
    engines = {k: {n: (0.0 if abs(x) < 1e-9 else x) for n, x in v.items()}
               for k, v in engines.items()}
    engines.update(engine_model_overheads(out_root))
    files = {"vidur": [str(p.relative_to(public_data_dir())) for p in vidur_files().values()],
             "llm-inference-bench": "llm-inference-bench.csv"}
    sha = {f: hashlib.sha256((public_data_dir() / f).read_bytes()).hexdigest()
           for f in [*files["vidur"], files["llm-inference-bench"]]}
    k = PrefillConstants(
        gemm=consts["gemm"], memop=consts["memop"], engines=engines,
        interval=interval,
        coverage=COVERAGE,
        trained_on={"operators": {"source": "vidur compute profiles", "files": files["vidur"],
                                  "rows": int(len(ops)),
                                  "devices": sorted(ops["device_key"].unique().tolist())},
                    "llama.cpp": {"source": "llm-inference-bench (llama.cpp rows differing "
                                            "only in n_batch)", "pairs": int(len(diffs)),
                                  "devices": sorted(diffs["device"].unique().tolist())},
                    "sha256": sha, "interval": "5 % / 95 % quantiles of the held-out log "
                    "ratio measured / predicted: Vidur per-layer prefill time, each GPU held "
                    "out (*); llama.cpp|vendor: the vendor's prompt differences (n_batch 1 vs "
                    "the largest), each accelerator held out, widened to the operators'",
                    "evaluation": "reports/llm/serving.md",
                    "command": "perfcast train --recipe llm --only prefill --out "
                               "perfcast/shipped"})
    path = k.save(Path(out_root) / SHIPPED_NAME)
    return {"path": str(path.parent), "records": int(len(ops) + len(diffs)),
            "seconds": round(time.perf_counter() - t0, 1)}


__all__ = ["B_GRID", "LLAMA_PARAMS", "OVERHEAD_ENGINES", "engine_model_overheads", "fit_llama_cpp", "fit_llama_cpp_by_vendor",
           "fit_operators", "layer_times", "llama_cpp_loho", "operator_loho",
           "prompt_differences", "train_prefill"]
