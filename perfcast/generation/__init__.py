"""LLM generation as a prediction: ``perfcast predict hf:ID --mode generate`` — a batch of ``B``
concurrent requests of ``I`` prompt tokens generating ``O`` tokens each, served by an engine
(vLLM, TensorRT-LLM, llama.cpp …) on ``tensor_parallel`` devices.

* :mod:`~perfcast.generation.settings` — the defaults a request leaves open and llama.cpp's
  settings (``--n-batch`` / ``--n-ubatch``; ``--batch-size`` is concurrent requests everywhere);
* :mod:`~perfcast.generation.result` — :class:`GenerationPrediction`;
* :mod:`~perfcast.generation.memory` — weights, KV cache, activations and runtime per device;
* :mod:`~perfcast.generation.decode` — the decode steps: the shipped ``llm-latency`` model over
  the arithmetic bound, its envelope and dominance caps;
* :mod:`~perfcast.generation.predict` — time to first token (:mod:`perfcast.llm.prefill`),
  decode, memory and energy per phase (:mod:`perfcast.energy`) of one request;
* :mod:`~perfcast.generation.limits` — the most requests or the longest prompt that fit.

Their errors on public measurements are in ``reports/llm/`` (BENCHMARKS.md)."""

from __future__ import annotations

from perfcast.workload import ENGINES
from perfcast.generation.settings import (
    DEFAULTS,
    LLAMA_CPP_DEFAULTS,
    LLAMA_CPP_PRECISION,
    PRECISIONS,
    prompt_pass_tokens,
    resolve,
)
from perfcast.generation.result import (
    GenerationPrediction,
)
from perfcast.generation.memory import (
    memory_per_device,
)
from perfcast.generation.decode import (
    decode_step_seconds,
)
from perfcast.generation.predict import (
    predict_generation,
)
from perfcast.generation.limits import (
    max_generation_batch,
    max_generation_context,
)

__all__ = [
    "DEFAULTS",
    "ENGINES",
    "GenerationPrediction",
    "LLAMA_CPP_DEFAULTS",
    "LLAMA_CPP_PRECISION",
    "PRECISIONS",
    "decode_step_seconds",
    "max_generation_batch",
    "max_generation_context",
    "memory_per_device",
    "predict_generation",
    "prompt_pass_tokens",
    "resolve",
]
