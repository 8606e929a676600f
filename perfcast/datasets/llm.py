"""LLM serving measurements: LLM-Inference-Bench (latency of a static batch on 7 accelerators,
5 engines, 1–8 devices) and ML.ENERGY v2 (vLLM serving: time per output token, throughput,
energy per request on A100 / H100). One row per measured configuration, in the columns of
:data:`LLM_COLUMNS`; ``df.attrs["report"]`` says what was dropped and why.

What the sources' numbers mean (verified on every row, ``reports/llm/README.md``):

* **LLM-Inference-Bench** ``Latency`` (s) is the wall time of the whole batch: prefill of ``B``
  prompts of ``I`` tokens, then ``O = I`` decode steps. ``Throughput`` = ``B·(I+O) / Latency``
  exactly (prompt *and* generated tokens, summed over the batch) — derived, so latency is the
  one label. **llama.cpp** rows are one sequence: their ``Throughput = (I+O) / Latency`` without
  ``B``, and ``Batch Size`` is llama.cpp's logical batch ``n_batch``, not concurrent requests —
  read into ``n_batch`` (``n_ubatch`` = ``min(512, n_batch)``, llama-bench's default clamped as
  llama.cpp does), their ``batch_size`` / ``concurrent`` 1 (``batch_size`` is concurrent
  requests in every row, as ``--batch-size`` is in every engine).
  One "device" of MI250 and of Intel Max 1550 is a whole card (two dies).
* **ML.ENERGY** ``Avg TPOT (s)`` is the time per output token of a request under continuous
  batching at ``Avg BS`` running requests; ``Token tput`` counts output tokens of the whole
  server; ``Energy/req (J)`` is the energy of all GPUs per request (NVML via Zeus).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from perfcast.datasets._base import Drops, LoadReport, data_file, read_csv, resolve_data_dir

#: Columns of an LLM measurement frame (units in the names).
LLM_COLUMNS = ("model", "device", "n_devices", "framework", "precision", "batch_size",
               "n_batch", "n_ubatch", "input_len", "output_len", "latency_s", "ttft_s", "tpot_s",
               "throughput_tok_s", "energy_per_request_j", "energy_per_token_j",
               "power_per_device_w", "source", "source_row", "raw_device")

#: Engines (``--framework``) and how each source names them.
FRAMEWORKS = ("vllm", "trt-llm", "llama.cpp", "deepspeed-mii", "hf")
_LIB_FRAMEWORK = {"vLLM": "vllm", "TensorRT-LLM": "trt-llm", "llama.cpp": "llama.cpp",
                  "Deepspeed-MII": "deepspeed-mii"}
#: LLM-Inference-Bench hardware → (registry key, registry devices per counted device).
LIB_DEVICES = {"Nvidia A100 GPU": ("a100-40gb", 1), "Nvidia H100 GPU": ("h100-sxm", 1),
               "AMD MI250 GPU": ("mi250", 2), "AMD MI300X GPU": ("mi300x", 1),
               "Intel Max 1550": ("max1550", 1)}
_LIB_NOT_MAPPED = {
    "Intel PVC GPU": "Intel PVC rows: the same chip as 'Intel Max 1550' but ≈ 9× slower on the "
                     "same configurations (an early software stack); kept out rather than "
                     "merged",
    "Habana Gaudi2": "Habana Gaudi2: no dense BF16 peak on the vendor's spec sheet, so no "
                     "registry row",
    "SambaNova SN40L": "SambaNova SN40L: a dataflow accelerator, not in the registry",
}
MLENERGY_DEVICES = {"NVIDIA A100-SXM4-40GB": "a100-40gb", "NVIDIA H100 80GB HBM3": "h100-sxm"}
#: A row this much faster than the arithmetic lower bound (weights streamed once per decode
#: step at the device's peak bandwidth) cannot be a complete generation.
IMPOSSIBLE_RATIO = 0.8


def _shipped(models: pd.Series) -> pd.Series:
    """Which model ids have a shipped config (``hf:`` builds them offline)."""
    from perfcast.zoo.hf_config import _lookup_shipped

    ok = {m: _lookup_shipped(m) is not None for m in models.unique()}
    return models.map(ok)


def _bounds(df: pd.DataFrame) -> pd.Series:
    """The arithmetic lower bound (s) of each row's request (:mod:`perfcast.llm.physics`)."""
    from perfcast.devices import get_device
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.physics import generation_bound

    out = pd.Series(np.nan, index=df.index)
    chunk = np.fmin(df["n_batch"], df["n_ubatch"]).fillna(0).astype(int)
    for (model, dev, n, b, i, o, prec, fw, u), idx in df.assign(chunk=chunk).groupby(
            ["model", "device", "n_devices", "concurrent", "input_len", "output_len",
             "precision", "framework", "chunk"]).groups.items():
        g = generation_bound(llm_arch(f"hf:{model}"), get_device(dev), batch=int(b),
                             input_len=int(i), output_len=int(o), n_devices=int(n),
                             precision=prec, engine=fw,
                             prompt_chunk=int(u) if fw == "llama.cpp" else None)
        out[idx] = g.total_s
    return out


def load_llm_bench(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """LLM-Inference-Bench rows (see the module docstring); repeated configurations averaged,
    rows faster than physics dropped."""
    root = resolve_data_dir(data_dir)
    path = data_file(root, "llm-inference-bench.csv")
    raw = read_csv(path)
    raw.columns = [c.strip() for c in raw.columns]
    rep = LoadReport(source="llm-inference-bench.csv", rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)
    hw = raw["Hardware"].astype(str).str.strip()
    drops.mark_each(hw.map(lambda h: _LIB_NOT_MAPPED.get(h) if h not in LIB_DEVICES
                           else None).where(~hw.isin(LIB_DEVICES)))
    fw = raw["Framework"].astype(str).str.strip()
    drops.mark(~fw.isin(_LIB_FRAMEWORK), "engine without a perfcast --framework")
    model = raw["Model"].astype(str).str.strip()
    drops.mark(~_shipped(model), "model without a shipped config (custom code: DeciLM, Aquila)")
    df = pd.DataFrame({
        "model": model, "device": hw.map(lambda h: LIB_DEVICES.get(h, (None, 1))[0]),
        "n_devices": raw["Num of Hardware"].astype(int) * hw.map(
            lambda h: LIB_DEVICES.get(h, (None, 1))[1]),
        "framework": fw.map(_LIB_FRAMEWORK), "precision": "fp16",
        "batch_size": raw["Batch Size"].astype(int),
        "input_len": raw["Input Output Length"].astype(int),
        "output_len": raw["Input Output Length"].astype(int),
        "latency_s": pd.to_numeric(raw["Latency"], errors="coerce"),
        "throughput_tok_s": pd.to_numeric(raw["Throughput"], errors="coerce"),
        "source": "llm-inference-bench", "source_row": raw.index, "raw_device": hw})
    drops.mark(~(df["latency_s"] > 0), "no positive latency")
    kept = df[drops.kept].copy()
    # llama.cpp's rows are one sequence; their "Batch Size" is its logical batch n_batch
    from perfcast.workload import LLAMA_CPP_N_UBATCH

    lc = (kept["framework"] == "llama.cpp").to_numpy()
    kept["n_batch"] = np.where(lc, kept["batch_size"], np.nan)
    kept["n_ubatch"] = np.fmin(kept["n_batch"], LLAMA_CPP_N_UBATCH)
    kept["batch_size"] = np.where(lc, 1, kept["batch_size"])
    kept["concurrent"] = kept["batch_size"]
    kept["bound_s"] = _bounds(kept)
    fast = kept["latency_s"] < IMPOSSIBLE_RATIO * kept["bound_s"]
    drops.mark(fast.reindex(df.index, fill_value=False),
               f"faster than {IMPOSSIBLE_RATIO:.0%} of the arithmetic bound (weights and KV "
               f"cache streamed once per decode step at peak bandwidth): not a full generation")
    kept = kept[~fast]
    kept["_n_batch"] = kept["n_batch"].fillna(0)  # a key without NaN (groupby drops those)
    keys = ["model", "device", "n_devices", "framework", "batch_size", "_n_batch", "input_len"]
    dup = kept.duplicated(keys, keep="first")
    drops.mark(dup.reindex(df.index, fill_value=False),
               "repeated configuration (averaged into the first row)")
    agg = kept.groupby(keys, sort=False).agg(latency_s=("latency_s", "mean")).reset_index()
    kept = kept[~dup].drop(columns="latency_s").merge(agg, on=keys, how="left") \
        .drop(columns="_n_batch")
    kept["throughput_tok_s"] = kept["concurrent"] * (kept["input_len"] + kept["output_len"]) \
        / kept["latency_s"]
    rep.dropped = drops.counts()
    rep.examples = drops.examples(hw + " · " + model + " · " + fw)
    return _finish(kept, rep)


def load_mlenergy(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """ML.ENERGY v2 LLM text-generation rows (see the module docstring); diffusion and
    vision-language rows dropped (their images are not in our graphs)."""
    root = resolve_data_dir(data_dir)
    path = data_file(root, "mlenergy-leaderboard-v2.csv")
    raw = read_csv(path)
    rep = LoadReport(source="mlenergy-leaderboard-v2.csv", rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)
    task = raw["task"].astype(str)
    drops.mark(task != "llm_text_generation",
               "not LLM text generation (diffusion; vision-language chat with images)")
    model = raw["Model"].astype(str).str.strip()
    drops.mark(~_shipped(model), "model without a shipped config (custom code: Phi-3-small)")
    gpu = raw["GPU"].astype(str).str.strip()
    drops.mark(~gpu.isin(MLENERGY_DEVICES), "GPU not in the registry")
    n = raw["TP"].astype(float).fillna(1) * raw["PP"].astype(float).fillna(1)
    out_tok = pd.to_numeric(raw["Avg Output Tokens"], errors="coerce")
    e_req = pd.to_numeric(raw["Energy/req (J)"], errors="coerce")
    tput = pd.to_numeric(raw["Token tput (tok/s)"], errors="coerce")
    df = pd.DataFrame({
        "model": model, "device": gpu.map(MLENERGY_DEVICES), "n_devices": n.astype(int),
        "framework": "vllm", "precision": "bf16",
        "batch_size": pd.to_numeric(raw["Avg BS (reqs)"], errors="coerce"),
        "input_len": np.nan, "output_len": out_tok,
        "tpot_s": pd.to_numeric(raw["Avg TPOT (s)"], errors="coerce"),
        "throughput_tok_s": tput, "token_time_s": 1.0 / tput,
        "energy_per_request_j": e_req,
        "energy_per_token_j": e_req / out_tok,
        # requests/s = output tokens/s ÷ tokens per request; energy/req × requests/s = power
        "power_per_device_w": e_req * tput / out_tok / n,
        "source": "mlenergy-v2", "source_row": raw.index, "raw_device": gpu,
        "max_batch": pd.to_numeric(raw["Max BS (reqs)"], errors="coerce"),
        "subtask": raw.get("subtask")})
    drops.mark(~(df["tpot_s"] > 0) | ~(df["energy_per_request_j"] > 0),
               "no positive TPOT or energy")
    kept = df[drops.kept].copy()
    rep.dropped = drops.counts()
    rep.examples = drops.examples(model + " · " + task)
    return _finish(kept, rep)


def _finish(df: pd.DataFrame, rep: LoadReport) -> pd.DataFrame:
    for c in LLM_COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    others = [c for c in df.columns if c not in LLM_COLUMNS]
    df = df[[*LLM_COLUMNS, *others]].reset_index(drop=True)
    rep.rows_out = len(df)
    rep.devices = sorted(df["device"].dropna().unique().tolist())
    rep.n_models = int(df["model"].nunique())
    rep.check()
    df.attrs["report"] = rep
    return df


__all__ = ["FRAMEWORKS", "IMPOSSIBLE_RATIO", "LIB_DEVICES", "LLM_COLUMNS", "MLENERGY_DEVICES",
           "load_llm_bench", "load_mlenergy"]
