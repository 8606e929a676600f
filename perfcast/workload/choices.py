"""The request's allowed values, one set each (modes, precisions, engines, layouts …): the
workload validates against them and the request schema lists them."""

from __future__ import annotations

#: ``infer``: one forward pass (no grad); ``train``: forward + loss + backward + optimizer step;
#: ``generate``: an LLM serving a batch of requests (a prefill of ``input_len`` prompt tokens,
#: then ``output_len`` generated tokens each, :mod:`perfcast.generation`).
MODES = ("infer", "train", "generate")
#: The modes a model's graph is traced and measured in (``generate`` is priced from them).
GRAPH_MODES = ("infer", "train")
#: The precisions the learned models know (their features encode these four): ``amp`` =
#: float16 autocast with fp32 weights; ``fp16`` = the whole model converted; ``bf16`` —
#: training: bf16 autocast with fp32 master weights, gradients and optimizer state (what
#: ``torch.autocast(dtype=torch.bfloat16)``, FSDP's ``MixedPrecision(param_dtype=bf16)`` and
#: Megatron's ``--bf16`` run: 16 bytes a parameter with AdamW); inference: the weights in bf16
#: (no master copy is needed to run a model).
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
#: Training precisions beyond :data:`PRECISIONS`, answered from the bf16 models plus physics:
#: ``bf16-pure`` = the whole model, its gradients and optimizer state in bf16 (``model.to(
#: torch.bfloat16)``; 8 bytes a parameter with AdamW); ``fp8`` = FP8 training (Transformer
#: Engine / torchao float8): the GEMMs forward and backward in FP8 at the FP8 tensor peak,
#: everything else in bf16, fp32 master weights and optimizer state, an FP8 copy of each GEMM
#: weight (GPUs with FP8 units only: :mod:`perfcast.devices.fp8`).
EXTRA_PRECISIONS = ("bf16-pure", "fp8")
#: What each 16/8-bit training precision means, as ``notes`` say it (``--mode train``).
TRAIN_PRECISION_MEANING = {
    "amp": "amp = float16 autocast: fp32 weights (the master copy), gradients and optimizer "
           "state, 16-bit activations, a GradScaler",
    "bf16": "bf16 = bf16 autocast with fp32 master weights, gradients and optimizer state "
            "(torch.autocast(dtype=bfloat16), FSDP MixedPrecision(param_dtype=bf16), Megatron "
            "--bf16: 16 bytes a parameter with Adam / AdamW); --precision bf16-pure for the "
            "model, gradients and optimizer state all in bf16",
    "bf16-pure": "bf16-pure = the model converted to bf16 (model.to(torch.bfloat16)): "
                 "weights, gradients and optimizer state all in bf16, no fp32 master (8 bytes "
                 "a parameter with Adam / AdamW)",
    "fp16": "fp16 = the model converted to float16: weights, gradients and activations in "
            "16 bits",
    "fp8": "fp8 = FP8 training (Transformer Engine / torchao float8): every linear layer's "
           "GEMMs forward and backward in FP8 (E4M3 / E5M2, per-tensor scaling) at the FP8 "
           "tensor peak with bf16's efficiency, attention, norms, activations and the loss in "
           "bf16; per GEMM the casts of its input, weight and output gradient to FP8 (the amax "
           "taken in the same pass, one scaling launch per pass); a GEMM too small to gain "
           "stays in bf16 (torchao's auto filter); fp32 master weights and optimizer state "
           "as bf16 autocast, plus the FP8 copy and transpose of each GEMM weight (2 bytes a "
           "weight, as TE keeps them); activations saved in bf16 (TE saves FP8 GEMM inputs: "
           "an upper bound)",
}
#: What ``--mode infer`` / ``train`` accept: :data:`PRECISIONS` + :data:`EXTRA_PRECISIONS`
#: (``fp8`` is for ``train`` and ``generate``).
MODEL_PRECISIONS = (*PRECISIONS, *EXTRA_PRECISIONS)
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
#: ``fp8`` = FP8 weights and activations (W8A8-FP8: vLLM ``--quantization fp8``, TensorRT-LLM
#: FP8; GPUs with FP8 units); the GGUF formats (:data:`GGUF_PRECISIONS`) are llama.cpp's.
GENERATE_PRECISIONS = ("fp16", "bf16", "fp32", "int8", "int4", "fp8", *GGUF_PRECISIONS)
#: The KV cache's element type (``--kv-cache-dtype``, ``--mode generate``): ``auto`` = the
#: model's 16-bit type; ``fp8`` = vLLM's ``--kv-cache-dtype fp8`` / TensorRT-LLM's FP8 KV
#: cache (one byte an element: half the cache), in :data:`FP8_KV_ENGINES` on GPUs with FP8.
KV_CACHE_DTYPES = ("auto", "fp16", "bf16", "fp8")
FP8_KV_ENGINES = ("vllm", "trt-llm")
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
#: The optimizer of a training step whose request names none, by the model's source
#: (:func:`perfcast.workload.default_optimizer`): SGD with momentum — timm's and torchvision's
#: reference recipes, and the optimizer of the measured vision data — for every model but
#: ``hf:`` ones, and of a dataset record's run that does not say which
#: (:attr:`perfcast.workload.Workload.run_optimizer`) …
DEFAULT_OPTIMIZER = "sgd-momentum"
#: … and AdamW for ``hf:`` models: Hugging Face Trainer's default (``adamw_torch``), and
#: Megatron-LM's, llm-foundry's and torchtitan's.
HF_DEFAULT_OPTIMIZER = "adamw"
#: Largest batch / dimension / sequence length accepted (a 32-bit signed int, as torch sizes).
MAX_SIZE = 2**31 - 1
#: What a spec kind's models take as input.
INPUT_KINDS = ("image", "tokens", "tensor", "file")
