"""The request's allowed values, one set each (modes, precisions, engines, layouts …): the
workload validates against them and the request schema lists them."""

from __future__ import annotations

#: ``infer``: one forward pass (no grad); ``train``: forward + loss + backward + optimizer step;
#: ``generate``: an LLM serving a batch of requests (a prefill of ``input_len`` prompt tokens,
#: then ``output_len`` generated tokens each, :mod:`perfcast.generation`).
MODES = ("infer", "train", "generate")
#: The modes a model's graph is traced and measured in (``generate`` is priced from them).
GRAPH_MODES = ("infer", "train")
#: ``amp`` = float16 autocast with fp32 weights; ``fp16`` / ``bf16`` = the whole model converted.
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
#: How fp32 matmuls and convolutions run on GPUs with TF32 tensor cores (NVIDIA Ampere and
#: newer): ``default`` — PyTorch's defaults, convolutions in TF32
#: (``torch.backends.cudnn.allow_tf32 = True``) and matmuls in full FP32
#: (``torch.backends.cuda.matmul.allow_tf32 = False``); ``on`` — both in TF32, as NVIDIA's NGC
#: PyTorch containers run (``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``) and as
#: ``torch.set_float32_matmul_precision("high")`` asks; ``off`` — neither
#: (``NVIDIA_TF32_OVERRIDE=0``, or both flags False).
TF32_MODES = ("default", "on", "off")
#: GGUF weight formats of llama.cpp (``--mode generate --engine llama.cpp``), by llama.cpp's
#: names (case-insensitive): 16/32-bit ``F16``, ``BF16``, ``F32`` and the quantized ``Q8_0``,
#: ``Q6_K``, ``Q5_K_M``, ``Q4_K_M``, ``Q4_0`` (bytes per weight: :data:`perfcast.llm.arch.
#: WEIGHT_BYTES`). llama.cpp also takes ``int8`` / ``int4`` / ``fp16`` (read as ``Q8_0`` /
#: ``Q4_K_M`` / ``F16``, :func:`perfcast.generation.resolve`).
GGUF_PRECISIONS = ("F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0")
#: Serving precisions (``--mode generate``): ``int8`` / ``int4`` are weight-only quantization;
#: the GGUF formats (:data:`GGUF_PRECISIONS`) are llama.cpp's.
GENERATE_PRECISIONS = ("fp16", "bf16", "fp32", "int8", "int4", *GGUF_PRECISIONS)
#: Serving engines (``--mode generate``) and the default one.
ENGINES = ("vllm", "trt-llm", "llama.cpp", "deepspeed-mii", "hf")
DEFAULT_ENGINE = "vllm"
#: llama.cpp's logical batch ``n_batch`` (tokens it submits to one ``llama_decode``) and
#: physical batch ``n_ubatch`` (tokens per forward pass, clamped to ``n_batch``): llama-bench's
#: and llama-server's defaults. ``--batch-size`` is concurrent requests in every engine; these
#: are their own options (``--n-batch``, ``--n-ubatch``), for ``--engine llama.cpp`` only.
LLAMA_CPP_N_BATCH = 2048
LLAMA_CPP_N_UBATCH = 512
#: Activation recomputation in training: none, ``selective`` (the attention core, Megatron's
#: selective recomputation) or ``full`` (every layer's forward again in the backward pass).
RECOMPUTE = ("none", "selective", "full")
#: ZeRO stages (DeepSpeed; FSDP's SHARD_GRAD_OP = 2, FULL_SHARD = 3): 1 shards the optimizer
#: state over the data-parallel replicas, 2 the gradients too, 3 the weights too.
ZERO_STAGES = (0, 1, 2, 3)
#: Pipeline schedules: ``1f1b`` (PipeDream-flush, Megatron's default), ``interleaved``
#: (Megatron's virtual stages: each GPU holds :data:`INTERLEAVED_CHUNKS` model chunks) and
#: ``gpipe`` (all forwards, then all backwards).
SCHEDULES = ("1f1b", "interleaved", "gpipe")
#: FlashAttention in training (``--flash-attention``): ``auto`` = on where the GPU runs it
#: (NVIDIA compute capability ≥ 8.0 — FlashAttention-2 — and AMD MI200 / MI300), ``on`` (the
#: GPU must run it), ``off`` (eager attention: the S² scores written, kept, read back).
FLASH_ATTENTION = ("auto", "on", "off")
#: Model chunks per pipeline stage of the interleaved schedule.
INTERLEAVED_CHUNKS = 2
#: Most GPUs one layout may span (a T·P·D beyond it is refused as a typo).
MAX_GPUS = 1 << 20
#: Most devices an LLM is served on with tensor parallelism (``--mode generate``).
MAX_SERVING_DEVICES = 64
#: Training optimizers (torch.optim): SGD, SGD with momentum 0.9, Adam, AdamW — and ``none``:
#: forward + backward without an optimizer step (what NeuSight and others label "training").
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw", "none")
DEFAULT_OPTIMIZER = "sgd-momentum"
#: Largest batch / dimension / sequence length accepted (a 32-bit signed int, as torch sizes).
MAX_SIZE = 2**31 - 1
#: What a spec kind's models take as input.
INPUT_KINDS = ("image", "tokens", "tensor", "file")
