"""The mainstream questions and the physical bounds each answer must lie between.

Shared by the fast-tier test ``tests/test_mainstream.py`` (one parametrized case per row) and
``benchmarks/mainstream_table.py`` (the same rows as a Markdown table for BENCHMARKS.md).

Every bound is computed here from first principles — published architecture constants and the
device registry's datasheet peaks and bandwidths (:func:`perfcast.devices.get_device`). Nothing
is read back from perfcast's graphs or predictors, and no expected value comes from a dataset.

Work
----
* **ResNet-50** (``timm:resnet50``, 3×224×224): its convolutions listed from the v1.5 layout
  timm and torchvision use (stride in the 3×3 conv) — 4.09 GMACs forward per image, 25.6 M
  parameters, 11.3 M conv outputs per image (timm's model card: 4.1 GMACs, 25.6 M, 11.1 M
  activations; He et al. 2016, Table 1 give 3.8 G multiply-adds for v1, stride in the 1×1).
* **ViT-B/16** (``timm:vit_base_patch16_224``): 197 tokens, d = 768, 12 layers, MLP 3,072 —
  17.6 GMACs, 86.6 M parameters (Dosovitskiy et al. 2021; DeiT-B in Touvron et al. 2021,
  Table 1: 17.6 G, 86 M).
* **BERT-base** (``hf:bert-base-uncased``, sequence 128): 12 layers, d = 768, FFN 3,072,
  vocabulary 30,522 — 110 M parameters (Devlin et al. 2019). The lower bounds count the encoder
  only; the ceilings add the masked-LM head (the shipped config names ``BertForMaskedLM``), so
  both hold whichever head the graph carries.
* **Llama-2-7B / Llama-3-8B**: parameters from the config arithmetic (the model cards: 32
  layers, d = 4,096, FFN 11,008 / 14,336, 32 heads with 32 / 8 KV heads, vocabulary 32,000 /
  128,256, untied LM head): 6,738,415,616 and 8,030,261,248.

A forward pass is 2 FLOPs per MAC; a training step is 3 forward passes (forward, input
gradients, weight gradients) less the input gradient of the first layer, which is never
computed (lower bound), or exactly 3 (ceiling).

Lower bounds
------------
``time ≥ max(FLOPs ÷ (0.9 × peak), bytes ÷ (0.95 × bandwidth))``: no whole network runs above
90 % of the datasheet peak of the fastest unit its precision may use, nor streams above 95 % of
the datasheet bandwidth. The fastest unit: AMP / FP16 → the FP16 tensor peak; FP32 convolution
networks on GPUs with TF32 → the TF32 peak (PyTorch's default runs cuDNN convolutions in TF32);
FP32 matmul networks → the FP32 peak (PyTorch's default keeps matmuls in FP32); llama.cpp's
quantized prompt → the INT8 tensor peak (its MMQ kernels; :data:`INT8_DENSE_TOPS`). The bytes:
the weights read once (training: read, gradient read, weight written) at 2 bytes (AMP/FP16)
or 4 (FP32); decode: every weight but the embedding table per output token (GGUF Q4_K_M at
4.5 bits per weight, the smallest of the Q4_K / Q6_K blocks it mixes) plus the KV cache of
the first step. On the CPU (no bandwidth in the registry) only the compute term.

Ceilings
--------
* **one device, infer / train** — ``time ≤ launches + FLOPs ÷ (MFU floor × peak) + activation
  traffic ÷ (0.5 × bandwidth)`` with
  - the MFU floor :data:`MFU_FLOOR`: 15 % of the peak for work that fills the device (batch
    > 8: large-batch training and inference reach it on every GPU listed here), 5 % for a batch
    of ≤ 8, where small GEMMs cannot fill the GPU; the peak of the *slowest* unit the precision
    may run on (AMP → FP16 tensor peak with FP32 accumulation; FP32 → the FP32 vector peak even
    where TF32 exists), so the ceiling holds whichever kernels are picked;
  - the activation traffic: the elements every convolution / GEMM / attention matmul writes
    (per sample, from the architecture) × :data:`TOUCHES` (8 in inference: the write and the
    reads and writes of the batch-norm / activation / residual / layer-norm / softmax ops that
    follow, about twice what eager PyTorch does; 24 in training) × 2 bytes (AMP) or 4 (FP32),
    at half the bandwidth (the CPU: :data:`CPU_CEILING_BANDWIDTH_GBS`);
  - launches (batch ≤ 8 only, where the GPU waits for the host): the kernels an eager framework
    launches (counted from the layers, generously: unfused attention; training 3× the forward
    plus :data:`OPTIMIZER_KERNELS_PER_TENSOR` per parameter tensor for an unfused optimizer)
    × :data:`LAUNCH_CEILING_S` (50 µs: PyTorch's per-op host path is 5–20 µs).
* **prefill (TTFT)** — ``FLOPs ÷ (0.15 × FP16 peak) + the weights streamed per pass at half
  the bandwidth + kernels × 50 µs + 50 ms engine overhead``, the prompt in passes of ≤ 512
  tokens (llama.cpp's n_ubatch; vLLM's chunks are larger, so fewer passes), FLOPs counting the
  LM head on every prompt token and non-causal attention (the generous side). A batch of
  requests: the lower bound is one request's prefill, the ceiling all of them.
* **decode (TPOT)** — ``3 × (all weights + the last step's KV cache) ÷ bandwidth
  + 2·params·B ÷ (0.15 × peak) + 5 ms`` per step (Q4_K_M at 6.5625 bits per weight, its
  largest block): an engine reaching a third of the bandwidth at batch 1, with scheduling and
  sampling.
* **8 GPUs, data parallel** — samples/s at global batch ``8·b`` ÷ samples/s of one GPU at ``b``:
  at most 8 (each GPU does the one-GPU step plus communication), at least 5 (the fp32
  gradients' ring all-reduce over NVLink takes a few ms against steps of 30–300 ms).
* **the issue's acceptance** (issue 38) — ResNet-50 AMP training on an A100-80GB: samples/s
  strictly increasing over batches 1, 32, 256; 1,800–3,200 img/s at 256; 8 GPUs at global
  batch 2,048 ≥ 7× one GPU at 256. llama.cpp Llama-3-8B Q4_K_M on an RTX 4090, one request,
  1,024 prompt tokens: TTFT < 500 ms (tighter than the generic ceiling; the lower of the two is
  used).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any

# ------------------------------------------------------------------------------ the constants
#: Lower bounds: the largest share of the datasheet peak / bandwidth a whole network reaches.
LOWER_PEAK_SHARE = 0.9
LOWER_BANDWIDTH_SHARE = 0.95
#: Ceilings: the least share of the (slowest applicable) peak a workload reaches; "small" is a
#: batch of at most :data:`SMALL_BATCH`.
MFU_FLOOR = {"large": 0.15, "small": 0.05}
SMALL_BATCH = 8
#: Ceilings: the least share of the bandwidth the activation traffic streams at.
BANDWIDTH_FLOOR = 0.5
#: Ceilings: reads + writes of each conv / GEMM / attention-matmul output element.
TOUCHES = {"infer": 8, "train": 24}
#: Ceilings: host time per launched kernel (s) when the batch is small.
LAUNCH_CEILING_S = 50e-6
#: Ceilings: kernels an unfused (per-tensor) optimizer step launches per parameter tensor.
OPTIMIZER_KERNELS_PER_TENSOR = 10
#: Ceilings on the CPU, which has no bandwidth in the registry: below one DDR4-2400 channel
#: (19.2 GB/s), so generous.
CPU_CEILING_BANDWIDTH_GBS = 5.0
#: Prefill ceilings: tokens per pass, kernels per layer per pass, engine overhead (ms).
PREFILL_PASS_TOKENS = 512
PREFILL_KERNELS_PER_LAYER = 20
PREFILL_ENGINE_OVERHEAD_MS = 50.0
#: Decode ceilings: multiple of the streaming time and the per-step overhead (ms).
DECODE_STREAM_MULTIPLE = 3.0
DECODE_STEP_OVERHEAD_MS = 5.0
#: Data-parallel speed-up bounds (8 GPUs ÷ one GPU at the same per-GPU batch).
SPEEDUP_BOUNDS = (5.0, 8.0)
#: Dense INT8 tensor peaks (TOPS; not in the registry) of the GPUs llama.cpp rows use: the
#: NVIDIA Ada whitepaper (RTX 4090: 660.6) and the T4 datasheet (130).
INT8_DENSE_TOPS = {"rtx4090": 660.6, "t4": 130.0}
#: Bits per weight of GGUF formats: (smallest block, largest block) of the mix — Q4_K's 144
#: bytes per 256 weights and Q6_K's 210 (ggml-quants block layouts); F16 is 16 bits.
GGUF_BITS = {"Q4_K_M": (4.5, 6.5625), "F16": (16.0, 16.0)}


# ------------------------------------------------------------------------- the architectures
@dataclass(frozen=True)
class Net:
    """Per-sample numbers of a network at its input size, from its published architecture.
    ``macs_low`` / ``macs_high``: forward multiply-accumulates the lower bound / the ceiling
    count (equal unless a head is optional); ``first_layer_macs``: the layer whose input
    gradient training never computes; ``activations``: elements written by its convolutions,
    GEMMs and attention matmuls; ``kernels``: forward kernels an eager framework launches
    (counted generously); ``param_tensors``: weight and bias tensors."""

    name: str
    slug: str
    model: str
    macs_low: float
    macs_high: float
    first_layer_macs: float
    params: float
    activations: float
    kernels: int
    param_tensors: int
    #: the network's FLOPs are convolutions (FP32 runs them in TF32 on GPUs that have it)
    conv_net: bool = False
    seq_len: int | None = None


def resnet50_convs(image: int = 224) -> list[tuple[int, int, int, int]]:
    """ResNet-50 v1.5's convolutions as ``(in channels, out channels, kernel, output side)``:
    the 7×7 stem, then bottlenecks of [3, 4, 6, 3] blocks (widths 64 … 512, expansion 4; the
    stride on each stage's first 3×3, a 1×1 projection on each stage's first block)."""
    side = image // 2
    convs = [(3, 64, 7, side)]
    side //= 2  # max pool
    cin = 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            out_side = side // stride
            convs += [(cin, width, 1, side), (width, width, 3, out_side),
                      (width, 4 * width, 1, out_side)]
            if block == 0:
                convs.append((cin, 4 * width, 1, out_side))
            cin, side = 4 * width, out_side
    return convs


def resnet50() -> Net:
    convs = resnet50_convs()
    fc = 2048 * 1000
    macs = sum(ci * co * k * k * s * s for ci, co, k, s in convs) + fc
    params = sum(ci * co * k * k + 2 * co for ci, co, k, _ in convs) + fc + 1000
    # forward kernels: conv + batch norm per conv, a ReLU after all but each block's last conv
    # and projection (49), the residual adds (16), max pool, average pool, the classifier
    kernels = 2 * len(convs) + 49 + 16 + 3
    stem_ci, stem_co, stem_k, stem_side = convs[0]
    return Net("ResNet-50", "resnet50", "timm:resnet50", macs, macs,
               stem_ci * stem_co * stem_k ** 2 * stem_side ** 2, params,
               sum(co * s * s for _, co, _, s in convs) + 1000, kernels,
               param_tensors=3 * len(convs) + 2, conv_net=True)


def _encoder(layers: int, d: int, ffn: int, heads: int, tokens: int) -> tuple[float, float]:
    """MACs and GEMM / attention-matmul output elements of ``layers`` transformer layers over
    ``tokens`` tokens: Q, K, V, output projection and the two FFN GEMMs (``4d² + 2·d·ffn`` per
    token) and the two attention matmuls (``2·tokens²·d``); outputs ``(4d + ffn + d)·tokens``
    from the GEMMs (QKV, projection, FFN in and out) and ``2·heads·tokens²`` (scores, probs)."""
    macs = layers * ((4 * d * d + 2 * d * ffn) * tokens + 2 * tokens * tokens * d)
    acts = layers * ((5 * d + ffn) * tokens + 2 * heads * tokens * tokens)
    return macs, acts


def vit_b16() -> Net:
    d, layers, ffn, heads, patch, classes = 768, 12, 3072, 12, 16, 1000
    tokens = (224 // patch) ** 2 + 1
    patch_macs = (tokens - 1) * 3 * patch * patch * d
    macs, acts = _encoder(layers, d, ffn, heads, tokens)
    params = (3 * patch * patch * d + d + d + tokens * d          # patch embed, cls, positions
              + layers * (4 * d * d + 4 * d + 2 * d * ffn + ffn + d + 4 * d)
              + 2 * d + d * classes + classes)
    # per layer: 2 layer norms, QKV, 3 copies for the heads, QKᵀ, scale, softmax, AV, a copy,
    # projection, 2 adds, FFN in, GELU, FFN out (+ slack to 20); embed: conv, cat, add, …
    total = macs + patch_macs + d * classes
    return Net("ViT-B/16", "vit-b16", "timm:vit_base_patch16_224", total, total, patch_macs, params,
               acts + (tokens - 1) * d + classes, 20 * layers + 10, 12 * layers + 8)


def bert_base(seq_len: int = 128) -> Net:
    d, layers, ffn, heads, vocab = 768, 12, 3072, 12, 30522
    macs, acts = _encoder(layers, d, ffn, heads, seq_len)
    pooler = d * d
    mlm_head = seq_len * (d * d + d * vocab)  # transform + decoder over every token
    params = (vocab * d + 512 * d + 2 * d + 2 * d
              + layers * (4 * d * d + 4 * d + 2 * d * ffn + ffn + d + 4 * d) + d * d + d)
    # embeddings: 3 gathers, 2 adds, layer norm; per layer as ViT (20) plus the mask add
    return Net("BERT-base", "bert-base", "hf:bert-base-uncased", macs, macs + pooler + mlm_head,
               0.0, params,
               acts + seq_len * (d + vocab), 21 * layers + 10, 16 * layers + 10,
               seq_len=seq_len)


@dataclass(frozen=True)
class Llama:
    """A Llama decoder from its config: ``vocab``, ``d`` (hidden), ``layers``, ``heads``,
    ``kv_heads``, ``ffn`` (SwiGLU: three d × ffn matrices), an untied LM head."""

    name: str
    slug: str
    model: str
    vocab: int
    d: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int

    @property
    def head_dim(self) -> int:
        return self.d // self.heads

    @property
    def layer_params(self) -> int:
        kv = self.kv_heads * self.head_dim
        return 2 * self.d * self.d + 2 * self.d * kv + 3 * self.d * self.ffn + 2 * self.d

    @property
    def params(self) -> int:
        return 2 * self.vocab * self.d + self.layers * self.layer_params + self.d

    @property
    def streamed_params(self) -> int:
        """Parameters a decode step reads: all but the embedding table (one row is gathered)."""
        return self.params - self.vocab * self.d

    def kv_bytes_per_token(self, bytes_per_value: float = 2.0) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value


LLAMA2_7B = Llama("Llama-2-7B", "llama2-7b", "hf:meta-llama/Llama-2-7b-hf",
                  32000, 4096, 32, 32, 32, 11008)
LLAMA3_8B = Llama("Llama-3-8B", "llama3-8b", "hf:meta-llama/Meta-Llama-3-8B",
                  128256, 4096, 32, 32, 8, 14336)
#: Published parameter counts the arithmetic must reproduce (the model cards).
PUBLISHED_PARAMS = {"Llama-2-7B": 6_738_415_616, "Llama-3-8B": 8_030_261_248,
                    "ResNet-50": 25.6e6, "ViT-B/16": 86.6e6, "BERT-base": 110e6}
#: Published forward GMACs per sample (ResNet-50: timm's card; ViT-B/16: DeiT-B, Table 1).
PUBLISHED_GMACS = {"ResNet-50": 4.1, "ViT-B/16": 17.6}


# ------------------------------------------------------------------------------ the devices
@functools.cache
def device(key: str):
    from perfcast.devices import get_device

    return get_device(key)


def fast_peak(dev, precision: str, conv_net: bool = False) -> tuple[float, str]:
    """FLOP/s of the fastest unit ``precision`` may run on (the lower bounds), and its name."""
    if precision in ("amp", "fp16"):
        return dev.peak_tflops("fp16") * 1e12, "FP16"
    if conv_net and dev.kind == "gpu" and dev.peak_tf32_tflops:
        return dev.peak_tf32_tflops * 1e12, "TF32"
    return dev.peak_tflops("fp32") * 1e12, "FP32"


def slow_peak(dev, precision: str) -> float:
    """FLOP/s of the slowest unit ``precision`` may run on (the ceilings)."""
    return dev.peak_tflops("fp16" if precision in ("amp", "fp16") else "fp32") * 1e12


def bandwidth(dev, ceiling: bool) -> float | None:
    """Bytes/s: the datasheet's; the CPU's ceiling assumption; ``None`` for a CPU lower bound."""
    if dev.bandwidth_gbs:
        return dev.bandwidth_gbs * 1e9
    return CPU_CEILING_BANDWIDTH_GBS * 1e9 if ceiling else None


# ---------------------------------------------------------------------------- the questions
@dataclass(frozen=True)
class Question:
    """What perfcast is asked: the keywords of :func:`perfcast.predict`."""

    model: str
    device: str
    mode: str
    precision: str
    batch_size: int
    seq_len: int | None = None
    engine: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    data_parallel: int | None = None

    def kwargs(self) -> dict[str, Any]:
        names = ("device", "mode", "precision", "batch_size", "seq_len", "engine", "input_len",
                 "output_len", "data_parallel")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}

    def command(self) -> str:
        """The ``perfcast predict`` command asking the same."""
        parts = [f"perfcast predict {self.model}"]
        for k, v in self.kwargs().items():
            parts.append(f"--{k.replace('_', '-')} {v}")
        return " ".join(parts)


@dataclass(frozen=True)
class Row:
    """One mainstream question and the bounds its answer must lie between. ``quantity``:
    ``time_ms`` (per batch), ``ttft_ms``, ``tpot_ms``, ``samples_per_s``, ``speedup`` (the
    question's samples/s ÷ ``reference[0]``'s) or ``monotone`` (the least ratio of consecutive
    samples/s over ``reference`` + the question, in batch order). ``lower_strict``: the value
    must exceed ``lower``."""

    id: str
    question: Question
    quantity: str
    lower: float
    upper: float
    lower_rule: str
    upper_rule: str
    reference: tuple[Question, ...] = ()
    lower_strict: bool = False
    unit: str = "ms"


def _bytes_per_value(precision: str) -> int:
    return 2 if precision in ("amp", "fp16") else 4


def single_device(net: Net, device_key: str, mode: str, precision: str, batch: int) -> Row:
    """A one-device inference latency or training step time (ms per batch)."""
    dev = device(device_key)
    train = mode == "train"
    flops_low = 2 * batch * (3 * net.macs_low - net.first_layer_macs if train else net.macs_low)
    flops_high = 2 * batch * net.macs_high * (3 if train else 1)
    bpv = _bytes_per_value(precision)
    weight_bytes = net.params * bpv * (3 if train else 1)
    peak_fast, unit = fast_peak(dev, precision, net.conv_net)
    lower_s = flops_low / (LOWER_PEAK_SHARE * peak_fast)
    low_bw = bandwidth(dev, ceiling=False)
    if low_bw:
        lower_s = max(lower_s, weight_bytes / (LOWER_BANDWIDTH_SHARE * low_bw))
    regime = "small" if batch <= SMALL_BATCH else "large"
    kernels = (3 * net.kernels + OPTIMIZER_KERNELS_PER_TENSOR * net.param_tensors if train
               else net.kernels)
    launch_s = kernels * LAUNCH_CEILING_S if regime == "small" else 0.0
    compute_s = flops_high / (MFU_FLOOR[regime] * slow_peak(dev, precision))
    traffic = batch * net.activations * TOUCHES[mode] * bpv + weight_bytes
    memory_s = traffic / (BANDWIDTH_FLOOR * bandwidth(dev, ceiling=True))
    lower_rule = (f"{flops_low / 1e9:,.0f} GFLOP ÷ (0.9 × {unit} {peak_fast / 1e12:g} TFLOP/s)"
                  + (f", ≥ weights ÷ 0.95·{dev.bandwidth_gbs:g} GB/s" if low_bw else ""))
    upper_rule = (("" if not launch_s else f"{kernels:,} kernels × 50 µs + ")
                  + f"{flops_high / 1e9:,.0f} GFLOP ÷ ({MFU_FLOOR[regime]:.0%} × "
                  f"{slow_peak(dev, precision) / 1e12:g} TFLOP/s) + {traffic / 1e9:,.1f} GB ÷ "
                  f"(50 % × {bandwidth(dev, True) / 1e9:g} GB/s)")
    q = Question(net.model, device_key, mode, precision, batch, seq_len=net.seq_len)
    return Row(f"{net.slug}-{mode}-{precision}-b{batch}-{device_key}", q, "time_ms",
               lower_s * 1e3, (launch_s + compute_s + memory_s) * 1e3, lower_rule, upper_rule)


def speedup(net: Net, device_key: str, precision: str, per_gpu_batch: int, gpus: int = 8,
            bounds: tuple[float, float] = SPEEDUP_BOUNDS, why: str = "") -> Row:
    """``gpus``-way data parallel samples/s at global batch ``gpus·per_gpu_batch`` ÷ one GPU's
    at ``per_gpu_batch``."""
    one = Question(net.model, device_key, "train", precision, per_gpu_batch, seq_len=net.seq_len)
    many = replace(one, batch_size=gpus * per_gpu_batch, data_parallel=gpus)
    return Row(f"{net.slug}-dp{gpus}-{precision}-b{gpus * per_gpu_batch}-{device_key}", many,
               "speedup", bounds[0], bounds[1],
               why or f"≥ {bounds[0]:g}× one GPU at batch {per_gpu_batch} (all-reduce "
                      f"overlapped)",
               f"≤ {gpus}× (each GPU runs the one-GPU step plus communication)",
               reference=(one,), unit="×")


def _prefill_flops(m: Llama, prompt: int, requests: int, high: bool) -> float:
    """Prompt FLOPs: the layers' GEMMs on every token, attention (causal half for the lower
    bound, full for the ceiling), the LM head on the last token (lower) or every token."""
    layer_gemm = 2 * m.layers * (m.layer_params - 2 * m.d) * prompt
    attention = (4 if high else 2) * m.layers * prompt * prompt * m.d
    head = 2 * m.vocab * m.d * (prompt if high else 1)
    return requests * (layer_gemm + attention + head)


def ttft(m: Llama, device_key: str, engine: str, precision: str, batch: int, prompt: int,
         output: int, acceptance_ms: float | None = None) -> Row:
    dev = device(device_key)
    fmt = precision if engine == "llama.cpp" else "F16"
    bits_low, bits_high = GGUF_BITS.get(fmt, (16.0, 16.0))
    peak_fast, unit = ((INT8_DENSE_TOPS[device_key] * 1e12, "INT8") if bits_low < 16
                       else fast_peak(dev, "fp16"))
    flops_low = _prefill_flops(m, prompt, 1, high=False)
    lower_s = max(flops_low / (LOWER_PEAK_SHARE * peak_fast),
                  m.streamed_params * bits_low / 8 / (LOWER_BANDWIDTH_SHARE * dev.bandwidth_gbs
                                                      * 1e9))
    flops_high = _prefill_flops(m, prompt, batch, high=True)
    passes = math.ceil(batch * prompt / PREFILL_PASS_TOKENS)
    weights_s = passes * m.params * bits_high / 8 / (BANDWIDTH_FLOOR * dev.bandwidth_gbs * 1e9)
    kernels = passes * (PREFILL_KERNELS_PER_LAYER * m.layers + 10)
    upper_ms = (flops_high / (MFU_FLOOR["large"] * slow_peak(dev, "fp16")) + weights_s
                + kernels * LAUNCH_CEILING_S) * 1e3 + PREFILL_ENGINE_OVERHEAD_MS
    upper_rule = (f"{flops_high / 1e12:,.1f} TFLOP ÷ (15 % × {slow_peak(dev, 'fp16') / 1e12:g} "
                  f"TFLOP/s) + {passes} pass(es) of weights at 50 % bandwidth + {kernels:,} "
                  f"kernels × 50 µs + 50 ms")
    if acceptance_ms is not None and acceptance_ms < upper_ms:
        upper_ms = acceptance_ms
        upper_rule = f"issue 38 acceptance < {acceptance_ms:g} ms (generic ceiling looser)"
    q = Question(m.model, device_key, "generate", precision, batch, engine=engine,
                 input_len=prompt, output_len=output)
    return Row(f"{m.slug}-{engine}-{precision.lower()}-b{batch}-"
               f"in{prompt}-{device_key}-ttft", q, "ttft_ms", lower_s * 1e3, upper_ms,
               f"{flops_low / 1e12:,.2f} TFLOP (one request) ÷ (0.9 × {unit} "
               f"{peak_fast / 1e12:g} T/s)", upper_rule)


def tpot(m: Llama, device_key: str, engine: str, precision: str, batch: int, prompt: int,
         output: int) -> Row:
    dev = device(device_key)
    fmt = precision if engine == "llama.cpp" else "F16"
    bits_low, bits_high = GGUF_BITS.get(fmt, (16.0, 16.0))
    bw = dev.bandwidth_gbs * 1e9
    kv = m.kv_bytes_per_token()
    bytes_low = m.streamed_params * bits_low / 8 + batch * prompt * kv
    bytes_high = m.params * bits_high / 8 + batch * (prompt + output) * kv
    flops = 2 * m.streamed_params * batch
    lower_s = max(bytes_low / (LOWER_BANDWIDTH_SHARE * bw),
                  flops / (LOWER_PEAK_SHARE * fast_peak(dev, "fp16")[0]))
    upper_s = (DECODE_STREAM_MULTIPLE * bytes_high / bw
               + flops / (MFU_FLOOR["large"] * slow_peak(dev, "fp16")))
    q = Question(m.model, device_key, "generate", precision, batch, engine=engine,
                 input_len=prompt, output_len=output)
    return Row(f"{m.slug}-{engine}-{precision.lower()}-b{batch}-"
               f"in{prompt}-out{output}-{device_key}-tpot", q, "tpot_ms", lower_s * 1e3,
               upper_s * 1e3 + DECODE_STEP_OVERHEAD_MS,
               f"{bytes_low / 1e9:.2f} GB ÷ (0.95 × {dev.bandwidth_gbs:g} GB/s)",
               f"3 × {bytes_high / 1e9:.2f} GB ÷ {dev.bandwidth_gbs:g} GB/s + compute at 15 % "
               f"+ 5 ms")


# -------------------------------------------------------------------------------- the table
def rows() -> list[Row]:
    """Every mainstream row, in table order."""
    r50, vit, bert = resnet50(), vit_b16(), bert_base(128)
    out = [
        # ResNet-50
        single_device(r50, "a100-80gb", "infer", "fp32", 1),
        single_device(r50, "t4", "infer", "fp32", 1),
        single_device(r50, "t4", "infer", "amp", 256),
        single_device(r50, "v100-16gb", "infer", "fp32", 32),
        single_device(r50, "cpu", "infer", "fp32", 1),
        single_device(r50, "a100-80gb", "train", "amp", 1),
        single_device(r50, "a100-80gb", "train", "amp", 256),
        single_device(r50, "h100-sxm", "train", "amp", 256),
        single_device(r50, "rtx4090", "train", "amp", 128),
        single_device(r50, "v100-32gb", "train", "amp", 256),
        single_device(r50, "cpu", "train", "fp32", 8),
        # BERT-base, sequence 128
        single_device(bert, "a100-80gb", "infer", "fp32", 1),
        single_device(bert, "t4", "infer", "amp", 64),
        single_device(bert, "cpu", "infer", "fp32", 1),
        single_device(bert, "a100-80gb", "train", "amp", 32),
        single_device(bert, "v100-32gb", "train", "amp", 32),
        single_device(bert, "h100-sxm", "train", "amp", 64),
        # ViT-B/16
        single_device(vit, "rtx4090", "infer", "amp", 1),
        single_device(vit, "h100-sxm", "infer", "amp", 64),
        single_device(vit, "cpu", "infer", "fp32", 1),
        single_device(vit, "a100-80gb", "train", "amp", 64),
        single_device(vit, "v100-32gb", "train", "amp", 32),
        # 8 GPUs, data parallel
        speedup(r50, "a100-80gb", "amp", 256, bounds=(7.0, 8.0),
                why="≥ 7× one GPU at batch 256 (issue 38 acceptance)"),
        speedup(r50, "v100-32gb", "amp", 256),
        speedup(vit, "h100-sxm", "amp", 64),
        speedup(bert, "a100-80gb", "amp", 32),
    ]
    # issue 38's acceptance on ResNet-50 AMP training, one A100-80GB
    b256 = Question(r50.model, "a100-80gb", "train", "amp", 256)
    out.append(Row("resnet50-train-amp-b256-a100-80gb-acceptance", b256, "samples_per_s",
                   1800.0, 3200.0, "1,800 img/s (issue 38 acceptance)",
                   "3,200 img/s (issue 38 acceptance)", unit="img/s"))
    out.append(Row("resnet50-train-amp-b1-b32-b256-a100-80gb-monotone", b256, "monotone",
                   1.0, math.inf, "samples/s strictly increasing over batch 1, 32, 256 (issue "
                   "38 acceptance): least ratio > 1", "—",
                   reference=(replace(b256, batch_size=1), replace(b256, batch_size=32)),
                   lower_strict=True, unit="×"))
    # LLM serving
    out += [
        ttft(LLAMA2_7B, "a100-80gb", "vllm", "fp16", 1, 512, 128),
        tpot(LLAMA2_7B, "a100-80gb", "vllm", "fp16", 1, 512, 128),
        ttft(LLAMA2_7B, "v100-32gb", "vllm", "fp16", 1, 512, 128),
        tpot(LLAMA2_7B, "v100-32gb", "vllm", "fp16", 1, 512, 128),
        ttft(LLAMA3_8B, "h100-sxm", "vllm", "fp16", 1, 1024, 128),
        tpot(LLAMA3_8B, "h100-sxm", "vllm", "fp16", 1, 1024, 128),
        ttft(LLAMA3_8B, "h100-sxm", "vllm", "fp16", 32, 512, 256),
        tpot(LLAMA3_8B, "h100-sxm", "vllm", "fp16", 32, 512, 256),
        ttft(LLAMA3_8B, "rtx4090", "llama.cpp", "Q4_K_M", 1, 1024, 1, acceptance_ms=500.0),
        tpot(LLAMA3_8B, "rtx4090", "llama.cpp", "Q4_K_M", 1, 512, 128),
        ttft(LLAMA3_8B, "t4", "llama.cpp", "Q4_K_M", 1, 512, 128),
        tpot(LLAMA3_8B, "t4", "llama.cpp", "Q4_K_M", 1, 512, 128),
    ]
    return out


# ---------------------------------------------------------------------------- the answering
@functools.cache
def ask(q: Question):
    """perfcast's answer to ``q`` (memoised: rows share questions)."""
    import perfcast

    return perfcast.predict(q.model, **q.kwargs())


def _samples_per_s(p) -> float | None:
    return getattr(p, "throughput_samples_per_s", None) or getattr(p, "samples_per_s", None)


@dataclass
class Outcome:
    """A row's answer: ``value`` in the row's unit (``None``: no answer, which fails),
    ``ok``: within the bounds, ``predictor``: what answered, ``notes``: the answers' notes."""

    row: Row
    value: float | None
    ok: bool
    predictor: str
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        """value ÷ lower bound."""
        if self.value is None or not self.row.lower:
            return None
        return self.value / self.row.lower

    def explain(self) -> str:
        r = self.row
        lines = [f"{r.id}: {fmt(self.value)} {r.unit} — bounds [{fmt(r.lower)}, {fmt(r.upper)}]"
                 f" (value ÷ lower {fmt(self.ratio)}) → {'ok' if self.ok else 'OUT OF BOUNDS'}",
                 f"  asked: {r.question.command()}",
                 f"  lower: {r.lower_rule}", f"  ceiling: {r.upper_rule}",
                 f"  predictor: {self.predictor}"]
        if self.error:
            lines.append(f"  error: {self.error}")
        lines += [f"  note: {n[:400]}" for n in self.notes[:8]]
        return "\n".join(lines)


def fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def evaluate(row: Row) -> Outcome:
    """Ask perfcast the row's question(s) and check the answer against the bounds."""
    from perfcast.errors import PerfcastError

    try:
        p = ask(row.question)
        refs = [ask(q) for q in row.reference]
    except PerfcastError as e:
        return Outcome(row, None, False, "—", error=str(e))
    answers = [*refs, p]
    notes = [n for a in answers for n in a.notes]
    pred = p.predictor.get(row.quantity) or p.predictor.get("time_ms", "?")
    if row.quantity in ("ttft_ms", "tpot_ms", "time_ms"):
        value = getattr(p, row.quantity)
    elif row.quantity == "samples_per_s":
        value = _samples_per_s(p)
    elif row.quantity == "speedup":
        one, many = _samples_per_s(refs[0]), _samples_per_s(p)
        value = many / one if one and many else None
        pred = f"{pred} | 1 GPU: {refs[0].predictor.get('time_ms', '?')}"
    elif row.quantity == "monotone":
        tput = [_samples_per_s(a) for a in answers]
        value = (min(b / a for a, b in zip(tput, tput[1:])) if all(tput) else None)
        pred = " | ".join(f"b{a.batch_size}: {a.predictor.get('time_ms', '?')} "
                          f"{fmt(_samples_per_s(a))}/s" for a in answers)
    else:
        raise ValueError(f"unknown quantity {row.quantity!r}")
    ok = (value is not None and math.isfinite(value)
          and (value > row.lower if row.lower_strict else value >= row.lower)
          and value <= row.upper)
    return Outcome(row, value, ok, pred, notes)


def markdown(outcomes: list[Outcome]) -> str:
    """The outcomes as a Markdown table."""
    head = ("| row | value | lower | ceiling | value ÷ lower | in bounds | predictor |\n"
            "|---|---:|---:|---:|---:|:---:|---|")
    lines = [head]
    for o in outcomes:
        r = o.row
        pred = (o.error or o.predictor).replace("|", "/")
        pred = pred if len(pred) <= 90 else pred[:87] + "…"
        lines.append(f"| `{r.id}` | {fmt(o.value)} {r.unit} | {fmt(r.lower)} | {fmt(r.upper)} "
                     f"| {fmt(o.ratio)} | {'yes' if o.ok else '**no**'} | {pred} |")
    return "\n".join(lines)
