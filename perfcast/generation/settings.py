"""What a ``generate`` request leaves open and what it means to each engine: the defaults, the
serving precisions, llama.cpp's logical / physical batch and GGUF formats."""

from __future__ import annotations

from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload import (
    DEFAULT_ENGINE,
    GENERATE_PRECISIONS,
    LLAMA_CPP_N_BATCH,
    LLAMA_CPP_N_UBATCH,
    Workload,
)


#: What a ``generate`` request leaves open defaults to (:func:`resolve`): one request (one
#: sequence, in every engine), fp16, vLLM.
DEFAULTS = {"engine": DEFAULT_ENGINE, "precision": "fp16", "batch_size": 1}
#: llama.cpp's logical and physical batch when not given: llama-bench's ``-b 2048 -ub 512``
#: (``n_ubatch`` is clamped to ``n_batch``, as llama.cpp does).
LLAMA_CPP_DEFAULTS = {"n_batch": LLAMA_CPP_N_BATCH, "n_ubatch": LLAMA_CPP_N_UBATCH}
#: What a serving precision means to llama.cpp: its GGUF format (int4 → the usual 4-bit
#: K-quant, int8 → Q8_0; :data:`perfcast.workload.GGUF_PRECISIONS`).
LLAMA_CPP_PRECISION = {"int4": "Q4_K_M", "int8": "Q8_0", "fp16": "F16", "bf16": "BF16",
                       "fp32": "F32"}
#: Serving precisions (declared with the other options in :mod:`perfcast.workload`).
PRECISIONS = GENERATE_PRECISIONS


def resolve(w: Workload) -> Workload:
    """The ``--mode generate`` workload ``w`` with :data:`DEFAULTS` filled in (a batch of 1,
    fp16; the engine is set by :meth:`Workload.of`); llama.cpp: ``n_batch`` 2,048, ``n_ubatch``
    ``min(512, n_batch)`` (:data:`LLAMA_CPP_DEFAULTS`) and its GGUF format for a generic
    precision (:data:`LLAMA_CPP_PRECISION`). Refuses another mode."""
    if not isinstance(w, Workload):
        raise PerfcastError(f"a generation request is a perfcast.workload.Workload (mode "
                            f"generate), not {type(w).__name__}")
    if w.mode != "generate":
        raise PerfcastError(f"LLM generation needs --mode generate, not --mode {w.mode}")
    engine = w.engine or DEFAULTS["engine"]
    changes = {k: DEFAULTS[k] for k in ("batch_size", "precision", "engine")
               if getattr(w, k) is None}
    if engine == "llama.cpp":
        prec = changes.get("precision", w.precision)
        if prec in LLAMA_CPP_PRECISION:
            changes["precision"] = LLAMA_CPP_PRECISION[prec]
        nb = w.n_batch if w.n_batch is not None else LLAMA_CPP_DEFAULTS["n_batch"]
        if w.n_batch is None:
            changes["n_batch"] = nb
        if w.n_ubatch is None:
            changes["n_ubatch"] = min(LLAMA_CPP_DEFAULTS["n_ubatch"], nb)
    return w.replace(**changes) if changes else w


def prompt_pass_tokens(req: Workload) -> int | None:
    """Tokens per prompt pass of a resolved request: llama.cpp's ``min(n_batch, n_ubatch)``;
    ``None`` for the other engines (their own chunking, :data:`perfcast.llm.prefill.
    ENGINE_PREFILL`)."""
    if req.engine != "llama.cpp":
        return None
    return min(req.n_batch or LLAMA_CPP_N_BATCH, req.n_ubatch or LLAMA_CPP_N_UBATCH)


def _llama_settings(req: Workload) -> dict[str, Any]:
    """The columns a llama.cpp request row carries for the learned model: ``n_batch`` and
    ``n_ubatch`` (``None`` for the other engines)."""
    llama = req.engine == "llama.cpp"
    return {"n_batch": req.n_batch if llama else None,
            "n_ubatch": req.n_ubatch if llama else None}


WEIGHT_NOTE = {"int8": "1 byte + an fp16 scale per 128 weights",
               "int4": "½ byte + an fp16 scale per group of 128 weights (GPTQ / AWQ layout)"}


def _gguf_note(precision: str) -> str:
    from perfcast.llm.arch import GGUF_BITS

    return (f"{GGUF_BITS[precision]:.2f} bits per weight, llama.cpp's file average for "
            f"{precision}")
