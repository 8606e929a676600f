""":class:`GenerationPrediction`: the answer of one generation request."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class GenerationPrediction:
    """A generation forecast of ``batch_size`` concurrent requests (``n_batch`` / ``n_ubatch``:
    llama.cpp's logical and physical batch, ``None`` for the other engines). Times in ms for
    the whole batch (``time_ms``), to the first
    token (``ttft_ms``, its ``coverage`` interval ``ttft_ms_low`` – ``ttft_ms_high``) and per
    output token (``tpot_ms``); ``prefill``: how the prompt was priced (passes, tokens per
    pass, prefill tokens/s, parts in ms, the GEMM peak); memory in MiB per device; energy in J
    for the batch (all devices), per request, per output token and per 1,000 output tokens,
    and by phase (``energy_by_phase_j``); power in W per device, mean and by phase
    (``power_by_phase_w``); ``flops`` of the whole batch from the traced prefill and
    decode-step graphs (:func:`perfcast.llm.graphs.request_graph_flops`)."""

    model: str
    device: str
    mode: str
    engine: str
    precision: str
    batch_size: int
    input_len: int
    output_len: int
    tensor_parallel: int
    n_batch: int | None = None
    n_ubatch: int | None = None
    time_ms: float | None = None
    ttft_ms: float | None = None
    ttft_ms_low: float | None = None
    ttft_ms_high: float | None = None
    coverage: float | None = None
    tpot_ms: float | None = None
    throughput_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    memory_mb: float | None = None
    memory_needed_mb: float | None = None
    memory_breakdown_mb: dict[str, float] = field(default_factory=dict)
    capacity_mb: float | None = None
    fits: bool | None = None
    energy_j: float | None = None
    energy_per_token_j: float | None = None
    energy_per_request_j: float | None = None
    energy_per_1k_tokens_j: float | None = None
    power_w: float | None = None
    power_by_phase_w: dict[str, float] = field(default_factory=dict)
    energy_by_phase_j: dict[str, float] = field(default_factory=dict)
    prefill: dict[str, Any] = field(default_factory=dict)
    bound_ms: float | None = None
    flops: float | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    trained_on: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
