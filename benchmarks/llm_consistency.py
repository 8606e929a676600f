"""Physical consistency of ``--mode generate`` and what it costs in accuracy, written to
``reports/llm/consistency.md``:

    .venv/bin/python benchmarks/llm_consistency.py          # ≈ 6 min on 2 cores

1. **More work is never faster**: Llama-2-7B on six GPUs (measured and not) × three engines,
   the prompt (64 … 2,048 tokens), the output (2 … 1,024) and the running sequences (1 … 256)
   stepped up one at a time; every step where the request time, the TTFT or the time per
   output token went *down* is a violation (TPOT along the output is not checked: a fixed
   per-request cost spread over more tokens lowers it). With the monotone envelope of the
   learned decode steps (what ships) and with the learned model alone.
2. **A better GPU is never slower**: every ordered pair of built-in GPUs of one vendor where
   the first is at least as good as the second in every spec number, or in memory bandwidth and
   the FP16 peak; vLLM and llama.cpp, two requests; a violation is the better GPU answering
   slower in TTFT, TPOT or the whole request. Measured GPUs keep their learned answer, so a
   pair of two measured GPUs may still disagree (counted apart).
3. **Accuracy held out**: LLM-Inference-Bench, leave-one-hardware-out — the latency model
   refitted without the GPU (which is then a GPU without measurements, as a new one is), up to
   400 requests per GPU, whole-request MAPE through ``perfcast.predict`` with and without the
   envelope and the cross-GPU cap.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import perfcast  # noqa: E402
import perfcast.generation as G  # noqa: E402
import perfcast.shipped as S  # noqa: E402

OUT = REPO / "reports" / "llm" / "consistency.md"
MODEL = "hf:meta-llama/Llama-2-7b-hf"
DEVICES = ("a100-40gb", "h100-sxm", "rtx4090", "l4", "mi300x", "a100-80gb")
ENGINES = ("vllm", "llama.cpp", "trt-llm")
COMMAND = ".venv/bin/python benchmarks/llm_consistency.py"


class learned_alone:  # noqa: N801 - a context manager read as a phrase
    """The learned decode steps without the envelope and without the cross-GPU cap."""

    def __enter__(self):
        self.saved = G._monotone, G.dominated_gpus
        G._monotone = lambda grid: grid
        G.dominated_gpus = lambda *a, **k: []
        G._ENVELOPES.clear()
        return self

    def __exit__(self, *exc):
        G._monotone, G.dominated_gpus = self.saved
        G._ENVELOPES.clear()


def _predict(device, engine, model=MODEL, **kw):
    kw = {"batch_size": 1, "input_len": 512, "output_len": 128, **kw}
    try:
        return perfcast.predict(model, mode="generate", device=device, engine=engine, **kw)
    except perfcast.PerfcastError:
        return None


def work_violations() -> list[dict]:
    """Steps of more work answered faster (item 1)."""
    out = []
    for device in DEVICES:
        for engine in ENGINES:
            ladders = [("prompt", "input_len", (64, 128, 200, 256, 512, 700, 1024, 2048),
                        ("ttft_ms", "tpot_ms", "time_ms")),
                       ("output", "output_len", (2, 16, 64, 100, 128, 512, 1024), ("time_ms",))]
            # (--batch-size is concurrent sequences in every engine, llama.cpp's too)
            ladders.append(("sequences", "batch_size", (1, 2, 3, 8, 16, 48, 64, 128, 256),
                            ("ttft_ms", "tpot_ms", "time_ms")))
            for axis, field, values, keys in ladders:
                for batch in ((1, 16) if axis != "sequences" else (None,)):
                    seq = [_predict(device, engine, **{field: v},
                                    **({"batch_size": batch} if batch else {}))
                           for v in values]
                    for v, a, b in zip(values[1:], seq, seq[1:]):
                        if a is None or b is None:
                            continue
                        for k in keys:
                            if getattr(b, k) < getattr(a, k) * (1 - 1e-9):
                                out.append({"device": device, "engine": engine, "axis": axis,
                                            "at": v, "quantity": k,
                                            "drop_%": 100 * (1 - getattr(b, k) / getattr(a, k))})
    return out


def device_violations() -> tuple[list[dict], int]:
    """Pairs (better, worse) answered the wrong way round (item 2)."""
    from perfcast.devices import device_origin, list_devices

    measured = set(S.load_shipped("llm-latency").trained_on_.get("devices", []))
    gpus = [d for d in list_devices() if d.is_gpu and device_origin(d.key) == "built-in"]
    out, pairs = [], 0
    for engine in ("vllm", "llama.cpp"):
        for req in ({"batch_size": 1, "input_len": 512, "output_len": 128},
                    {"batch_size": 16, "input_len": 1024, "output_len": 256}):
            answers = {d.key: _predict(d.key, engine, **req) for d in gpus}
            for x in gpus:
                for a in gpus:
                    if x.key == a.key or not G._serving_dominance(x, a, "fp16"):
                        continue
                    px, pa = answers[x.key], answers[a.key]
                    if px is None or pa is None or not px.fits or not pa.fits:
                        continue
                    pairs += 1
                    for k in ("ttft_ms", "tpot_ms", "time_ms"):
                        if getattr(px, k) > getattr(pa, k) * (1 + 1e-9):
                            out.append({"engine": engine, "better": x.key, "worse": a.key,
                                        "batch": req["batch_size"], "quantity": k,
                                        "slower_by_%": 100 * (getattr(px, k) / getattr(pa, k)
                                                              - 1),
                                        "both measured": x.key in measured
                                        and a.key in measured})
    return out, pairs


def loho() -> pd.DataFrame:
    """Whole-request MAPE per held-out GPU and engine (item 3)."""
    from perfcast.datasets.llm import load_llm_bench
    from perfcast.llm.model import LLMGenerationPredictor, features

    lib = load_llm_bench()
    ship = S.load_shipped("llm-latency")
    X, y = features(lib, "latency_s"), lib["latency_s"].to_numpy(float)
    saved = S.load_shipped
    rows = []
    try:
        for d in sorted(lib["device"].unique()):
            train = (lib["device"] != d).to_numpy()
            m = LLMGenerationPredictor(**ship.get_params()).fit(X[train], y[train])
            m.trained_on_ = {**ship.trained_on_, "devices": sorted(set(lib["device"][train]))}
            S.load_shipped = lambda mid, m=m: m if mid == "llm-latency" else saved(mid)
            test = lib[~train]
            test = test.sample(min(400, len(test)), random_state=0)
            for variant in ("shipped (envelope + cap)", "learned alone"):
                G._ENVELOPES.clear()  # a grid of another fold's model
                with learned_alone() if variant == "learned alone" else nullcontext():
                    for r in test.itertuples():
                        llama = {"n_batch": int(r.n_batch)} if r.framework == "llama.cpp" \
                            else {}  # (llama.cpp's rows: one sequence at that n_batch)
                        p = _predict(r.device, r.framework, model="hf:" + r.model,
                                     batch_size=int(r.batch_size), **llama,
                                     input_len=int(r.input_len), output_len=int(r.output_len),
                                     tensor_parallel=int(r.n_devices))
                        if p is not None:
                            rows.append({"device": d, "engine": r.framework, "variant": variant,
                                         "ape": abs(p.time_ms / (r.latency_s * 1e3) - 1) * 100})
            print(f"  {d} held out", file=sys.stderr, flush=True)
    finally:
        S.load_shipped = saved
        G._ENVELOPES.clear()
    return pd.DataFrame(rows)


def _md(df: pd.DataFrame, fmt: str = "{:.1f}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt.format(v) if isinstance(v, float) else str(v)
                                       for v in r) + " |")
    return "\n".join(lines)


def main() -> None:
    t0 = time.time()
    print("more work …", file=sys.stderr, flush=True)
    shipped_w = work_violations()
    with learned_alone():
        alone_w = work_violations()
    print("better GPUs …", file=sys.stderr, flush=True)
    shipped_d, pairs = device_violations()
    with learned_alone():
        alone_d, _ = device_violations()
    print("leave-one-hardware-out …", file=sys.stderr, flush=True)
    acc = loho()
    table = acc.pivot_table(index=["device", "engine"], columns="variant", values="ape",
                            aggfunc="mean").reset_index()
    table["requests"] = acc[acc.variant == "learned alone"].groupby(
        ["device", "engine"]).size().to_numpy()
    pooled = acc.groupby("variant").ape.mean()
    nv = acc[acc.device.isin(["a100-40gb", "h100-sxm"])].groupby("variant").ape.mean()

    def worst(rows, key):
        return max((r[key] for r in rows), default=0.0)

    dsh = [r for r in shipped_d if not r["both measured"]]
    text = f"""# LLM generation: physical consistency

Regenerate: `{COMMAND}` ({time.time() - t0:,.0f} s). Model: Llama-2-7B (fp16 / GGUF F16).

## 1. More work is never faster

{len(DEVICES)} GPUs ({', '.join(DEVICES)}) × {len(ENGINES)} engines; prompt, output and running
sequences stepped up one at a time (the output at 1 and 16 sequences, the prompt likewise).

| | violations | worst drop |
|---|---|---|
| shipped: learned decode steps through the monotone envelope | {len(shipped_w)} | {worst(shipped_w, 'drop_%'):.1f} % |
| the learned model alone | {len(alone_w)} | {worst(alone_w, 'drop_%'):.1f} % |

The envelope (`perfcast.generation.decode._decode_envelope`): the learned decode steps on a fixed grid
of powers of two in sequences, prompt and output, raised to a running maximum along each axis,
interpolated multilinearly (log₂ for sequences and prompt, linear for output tokens). TTFT is the
prefill model's (operators on the spec sheet), monotone without help.

## 2. A better GPU is never slower

{pairs} ordered (better, worse) pairs of built-in GPUs of one vendor × 2 engines × 2 requests
where both fit. Violations:

| | violations (a GPU outside the data involved) | worst | both GPUs measured |
|---|---|---|---|
| shipped (cap at the GPUs it beats) | {len(dsh)} | {worst(dsh, 'slower_by_%'):.1f} % | {len(shipped_d) - len(dsh)} |
| the learned model alone | {len([r for r in alone_d if not r['both measured']])} | {worst(alone_d, 'slower_by_%'):.1f} % | {len([r for r in alone_d if r['both measured']])} |

A measured GPU keeps its learned answer, so two measured GPUs can still disagree (last column).

## 3. Accuracy held out (LLM-Inference-Bench, leave-one-hardware-out)

Whole-request MAPE %, the latency model refitted without the GPU. Pooled: shipped
{pooled.get('shipped (envelope + cap)', float('nan')):.2f} %, learned alone
{pooled.get('learned alone', float('nan')):.2f} %; NVIDIA (A100, H100): shipped
{nv.get('shipped (envelope + cap)', float('nan')):.2f} %, learned alone
{nv.get('learned alone', float('nan')):.2f} %.

{_md(table)}
"""
    OUT.write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
