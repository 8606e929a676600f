"""What a :class:`~perfcast.workload.core.Workload` checks: every field's rules, the generation
and llama.cpp fields, the layout over GPUs and, given a model's shape, whether the layout and
the serving request apply to it — one-line :class:`~perfcast.errors.PerfcastError` (exit 2)."""

from __future__ import annotations

from typing import Any

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.workload.choices import (
    DEFAULT_ENGINE,
    ENGINES,
    GENERATE_PRECISIONS,
    GGUF_PRECISIONS,
    FP8_KV_ENGINES,
    INTERLEAVED_CHUNKS,
    KV_CACHE_DTYPES,
    LLAMA_CPP_N_BATCH,
    MAX_SERVING_DEVICES,
    MAX_SIZE,
    MODEL_PRECISIONS,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    TF32_MODES,
)
from perfcast.workload.finetune import validate_finetune
from perfcast.workload.layout import Layout, _choice, _positive


class WorkloadChecks:
    """The validation of :class:`~perfcast.workload.core.Workload` (mixed into it)."""

    def validate(self) -> None:
        """Raise :class:`PerfcastError` (exit code 2) for anything invalid or inapplicable."""
        if self.batch_size is not None:
            _positive("batch size", self.batch_size)
        _choice("mode", self.mode, MODES)
        generate = self.mode == "generate"
        if self.precision is not None:
            if generate:
                if self.precision not in GENERATE_PRECISIONS:
                    raise unknown_choice("generation precision", self.precision,
                                         GENERATE_PRECISIONS)
            elif self.precision == "fp8" and self.mode != "train":
                raise PerfcastError("--precision fp8 is FP8 training (--mode train: Transformer "
                                    "Engine / torchao float8) or FP8 serving (--mode generate); "
                                    f"--mode {self.mode} takes {', '.join(PRECISIONS)}")
            elif self.precision in GENERATE_PRECISIONS and self.precision not in MODEL_PRECISIONS:
                raise PerfcastError(f"precision {self.precision} is weight-only quantization "
                                    f"for LLM serving (--mode generate); a model run takes "
                                    f"{', '.join(MODEL_PRECISIONS)}")
            else:
                _choice("precision", self.precision, MODEL_PRECISIONS)
        if self.optimizer is not None:
            _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("tf32", self.tf32, TF32_MODES)
        if self.tf32 != "default" and self.precision not in (None, "fp32"):
            raise PerfcastError(f"--tf32 {self.tf32} applies to --precision fp32 (it says how "
                                f"fp32 matmuls and convolutions run), not {self.precision}")
        self._validate_generation()
        self._validate_layout()
        validate_finetune(self)
        if self.seq_len is not None:
            _positive("sequence length", self.seq_len, " (tokens)")
        if self.input_size is not None:
            if not self.input_size or any(isinstance(d, bool) or not isinstance(d, int)
                                          or d <= 0 or d > MAX_SIZE for d in self.input_size):
                raise PerfcastError(f"input size must be positive dimensions like 3,224,224, "
                                    f"got {self.input_size}")
        kind, label = self.model.inputs, self.model.text
        if kind == "image":
            if self.seq_len is not None:
                raise PerfcastError(f"{label} is an image model: it takes --input-size C,H,W, "
                                    f"not --seq-len")
            if self.input_size is not None and len(self.input_size) != 3:
                raise PerfcastError(f"{label} is an image model: its input size is C,H,W (three "
                                    f"numbers, e.g. 3,224,224), got "
                                    f"{','.join(map(str, self.input_size))}")
        elif kind == "tokens":
            if self.input_size is not None:
                raise PerfcastError(f"{label} is a text model: it takes --seq-len (tokens), not "
                                    f"--input-size")
        elif kind == "file":
            if self.input_size is not None and self.seq_len is not None:
                raise PerfcastError(f"{label}: give --input-size or --seq-len, not both (each "
                                    f"binds the ONNX file's symbolic input dimensions)")
        elif self.seq_len is not None:  # tensor: any per-sample shape, no sequence length
            raise PerfcastError(f"{label} takes --input-size (its per-sample input shape), not "
                                f"--seq-len")

    def _validate_generation(self) -> None:
        """``--mode generate``: an ``hf:`` model, token counts instead of input sizes, a known
        engine; outside it none of its options."""
        given = [name for name, v in (("--input-len", self.input_len),
                                      ("--output-len", self.output_len),
                                      ("--engine", self.engine), ("--n-batch", self.n_batch),
                                      ("--n-ubatch", self.n_ubatch),
                                      ("--kv-cache-dtype", self.kv_cache_dtype))
                 if v is not None]
        if self.mode != "generate":
            if given:
                raise PerfcastError(f"{', '.join(given)} apply to --mode generate only")
            return
        if self.model.kind != "hf":
            raise PerfcastError(f"--mode generate serves Hugging Face decoder LLMs (hf:ID or "
                                f"hf:path/config.json), not {self.model.text!r}")
        for name, v in (("--input-len", self.input_len), ("--output-len", self.output_len)):
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise PerfcastError(f"{name} must be a positive integer, got {v!r}")
                if v > MAX_SIZE:
                    raise PerfcastError(f"{name} must be ≤ {MAX_SIZE:,}, got {v:,}")
        bad = [k for k, v in (("--input-size", self.input_size), ("--seq-len", self.seq_len))
               if v is not None]
        if bad:
            raise PerfcastError(f"{', '.join(bad)} do not apply to --mode generate (use "
                                f"--input-len / --output-len)")
        if self.engine is not None:
            _choice("engine", self.engine, ENGINES)
        if self.precision in GGUF_PRECISIONS and self.engine != "llama.cpp":
            raise PerfcastError(f"--precision {self.precision} is a GGUF format of llama.cpp "
                                f"(--engine llama.cpp); {self.engine or DEFAULT_ENGINE} takes "
                                f"fp16, bf16, fp32, int8 or int4")
        self._validate_llama_batches()
        kv = self.kv_cache_dtype
        if kv is not None:
            _choice("kv_cache_dtype", kv, KV_CACHE_DTYPES)
            if kv == "fp8" and (self.engine or DEFAULT_ENGINE) not in FP8_KV_ENGINES:
                raise PerfcastError(f"--kv-cache-dtype fp8 is vLLM's and TensorRT-LLM's FP8 KV "
                                    f"cache (--engine {' or '.join(FP8_KV_ENGINES)}); "
                                    f"{self.engine} keeps it in 16 bits")
        if self.precision == "fp8" and (self.engine or DEFAULT_ENGINE) not in FP8_KV_ENGINES:
            raise PerfcastError(f"--precision fp8 (FP8 weights and activations) is served by "
                                f"--engine {' or '.join(FP8_KV_ENGINES)}; {self.engine} takes "
                                f"fp16, bf16, int8 or int4")

    def _validate_llama_batches(self) -> None:
        """``n_batch`` / ``n_ubatch`` (the one place they are checked): positive token counts,
        for ``--engine llama.cpp`` only, ``n_ubatch`` ≤ ``n_batch`` (the default ``n_batch``,
        :data:`LLAMA_CPP_N_BATCH`, when only ``n_ubatch`` is given)."""
        given = [(o, v) for o, v in (("--n-batch", self.n_batch), ("--n-ubatch", self.n_ubatch))
                 if v is not None]
        if not given:
            return
        engine = self.engine or DEFAULT_ENGINE
        if engine != "llama.cpp":
            what = {"--n-batch": "logical", "--n-ubatch": "physical"}
            raise PerfcastError(f"{' / '.join(o for o, _ in given)} "
                                f"{'is' if len(given) == 1 else 'are'} llama.cpp's "
                                f"{' / '.join(what[o] for o, _ in given)} batch (--engine "
                                f"llama.cpp); --engine {engine} takes --batch-size (concurrent "
                                f"requests) only")
        for o, v in given:
            _positive(o, v, " (tokens)")
        nb = self.n_batch if self.n_batch is not None else LLAMA_CPP_N_BATCH
        if self.n_ubatch is not None and self.n_ubatch > nb:
            raise PerfcastError(f"--n-ubatch {self.n_ubatch:,} is larger than --n-batch {nb:,}"
                                f"{'' if self.n_batch is not None else ' (the default)'}: "
                                f"llama.cpp's physical batch is at most its logical batch")

    def require_lengths(self, *names: str) -> None:
        """Raise the one-line error of a ``generate`` request without ``input_len`` /
        ``output_len`` (``names``: which of them this use needs; default both)."""
        for name in names or ("input_len", "output_len"):
            if getattr(self, name) is None:
                raise PerfcastError(f"--mode generate needs --{name.replace('_', '-')} (tokens)")

    def _validate_layout(self) -> None:
        """The layout's fields, and the rules between them and the rest of the request (those
        against the model's shape: :meth:`check_layout`)."""
        lay = self.layout
        if not isinstance(lay, Layout):
            raise PerfcastError(f"layout must be a perfcast.workload.Layout, not "
                                f"{type(lay).__name__}")
        lay.validate()
        if self.mode == "generate":
            others = [o for o in lay.non_default()
                      if o not in ("--tensor-parallel", "--expert-parallel")]
            if others:
                raise PerfcastError(f"{', '.join(others)} apply to --mode train only (--mode "
                                    f"generate takes --tensor-parallel, --expert-parallel)")
            if lay.expert > MAX_SERVING_DEVICES:
                raise PerfcastError(f"--expert-parallel must be ≤ {MAX_SERVING_DEVICES}, got "
                                    f"{lay.expert}")
            if lay.tensor > MAX_SERVING_DEVICES:
                raise PerfcastError(f"--tensor-parallel must be ≤ {MAX_SERVING_DEVICES}, got "
                                    f"{lay.tensor}")
            return
        if self.mode != "train":
            given = lay.non_default()
            if given:
                also = (" (--tensor-parallel also to --mode generate)"
                        if "--tensor-parallel" in given else "")
                raise PerfcastError(f"{', '.join(given)} "
                                    f"{'applies' if len(given) == 1 else 'apply'} to --mode "
                                    f"train{also}, not --mode {self.mode}")
            return
        if (lay.context > 1 or lay.expert > 1) and self.model.kind != "hf":
            raise PerfcastError(f"context and expert parallelism split a transformer's "
                                f"sequence and experts (hf: models); {self.model.text} takes "
                                f"--data-parallel (and --zero, --micro-batch-size) only")
        if (lay.data * lay.context) % lay.expert:
            raise PerfcastError(f"--expert-parallel {lay.expert} must divide D·C = "
                                f"{lay.data}·{lay.context} = {lay.data * lay.context} "
                                f"(Megatron's rule: the experts are split over GPUs of the "
                                f"data-parallel × context-parallel group, which adds none)")
        if lay.context > 1 and self.seq_len is not None and self.seq_len % (2 * lay.context):
            raise PerfcastError(f"--context-parallel {lay.context} splits each sequence into "
                                f"2·C = {2 * lay.context} chunks (two per GPU, balancing the "
                                f"causal mask as Megatron / Transformer Engine do): "
                                f"--seq-len {self.seq_len:,} must be a multiple of "
                                f"{2 * lay.context}")
        if lay.flash_attention != "auto" and self.model.kind != "hf":
            raise PerfcastError(f"--flash-attention is the attention kernel of an hf: "
                                f"transformer's layers; {self.model.text} has none to set")
        if (lay.tensor > 1 or lay.pipeline > 1) and self.model.kind != "hf":
            raise PerfcastError(f"tensor and pipeline parallelism split a transformer's layers "
                                f"(hf: models); {self.model.text} takes --data-parallel (and "
                                f"--zero, --micro-batch-size) only")
        if lay.pipeline == 1 and lay.schedule != "1f1b":
            raise PerfcastError(f"--schedule {lay.schedule} orders a pipeline's micro-batches; "
                                f"it needs --pipeline-parallel > 1")
        if lay.zero >= 2 and lay.pipeline > 1:
            raise PerfcastError(f"--zero {lay.zero} shards the gradients over the data-parallel "
                                f"replicas during the backward pass, which pipeline "
                                f"parallelism does not support (DeepSpeed refuses ZeRO-2/3 "
                                f"with pipeline stages); use --zero 1 or --pipeline-parallel 1")
        b, d, m = self.batch_size, lay.data, lay.micro_batch
        if b is not None:
            if m is not None and b % (d * m):
                raise PerfcastError(f"the global batch {b:,} (--batch-size) is not a multiple "
                                    f"of D·m = {d} × {m} = {d * m:,} (--data-parallel × "
                                    f"--micro-batch-size): each replica runs whole "
                                    f"micro-batches")
            if b % d:
                raise PerfcastError(f"the global batch {b:,} (--batch-size) does not divide "
                                    f"among --data-parallel {d} replicas")
            if lay.schedule == "interleaved" and m is not None \
                    and (b // (d * m)) % lay.pipeline:
                raise PerfcastError(f"--schedule interleaved needs the micro-batches per "
                                    f"replica (B / (D·m) = {b // (d * m)}) to be a multiple "
                                    f"of --pipeline-parallel {lay.pipeline} (Megatron's rule)")

    def check_layout(self, *, layers: int, heads: int, hidden: int, kv_heads: int | None = None,
                     gpus: int | None = None, name: str | None = None,
                     experts: int | None = None) -> None:
        """The layout against the model's shape (``layers`` transformer blocks, ``heads``
        attention heads of which ``kv_heads`` key/value heads, width ``hidden``) and, with
        ``gpus``, the GPUs one has: T divides the heads, the KV heads and the width, P divides
        the layers (each stage holds L/P; interleaved: L/(P·v)), E divides the ``experts`` of a
        mixture of experts (none: E must be 1), T·P·D·C = ``gpus``. Exit 2 naming the rule
        broken."""
        lay, label = self.layout, name or self.model.text
        t, p = lay.tensor, lay.pipeline
        if gpus is not None and lay.gpus != gpus:
            cp = f"·{lay.context}" if lay.context > 1 else ""
            raise PerfcastError(f"the layout uses T·P·D{'·C' if cp else ''} = "
                                f"{t}·{p}·{lay.data}{cp} = {lay.gpus:,} GPUs, not the "
                                f"{gpus:,} of --gpus")
        if experts is not None and lay.expert > 1:
            if experts <= 1:
                raise PerfcastError(f"--expert-parallel {lay.expert}: {label} is not a mixture "
                                    f"of experts (no experts to split); use 1")
            if experts % lay.expert:
                ok = [d for d in range(1, experts + 1) if experts % d == 0]
                raise PerfcastError(f"--expert-parallel {lay.expert} does not divide {label}'s "
                                    f"{experts} experts (use one of "
                                    f"{', '.join(map(str, ok))})")
        if t > 1:
            if heads % t:
                ok = [d for d in range(1, heads + 1) if heads % d == 0 and hidden % d == 0]
                raise PerfcastError(f"--tensor-parallel {t} does not divide {label}'s {heads} "
                                    f"attention heads (each GPU holds heads / T; use one of "
                                    f"{', '.join(map(str, ok))})")
            if hidden % t:
                raise PerfcastError(f"--tensor-parallel {t} does not divide {label}'s hidden "
                                    f"size {hidden:,} (the column / row-parallel matrices are "
                                    f"split T ways)")
            if kv_heads and kv_heads != heads and kv_heads % t:
                raise PerfcastError(f"--tensor-parallel {t} does not divide {label}'s "
                                    f"{kv_heads} key/value heads (Megatron splits the query "
                                    f"groups T ways)")
        if p > layers:
            raise PerfcastError(f"--pipeline-parallel {p} is more stages than {label}'s "
                                f"{layers} layers")
        if layers % p:
            raise PerfcastError(f"--pipeline-parallel {p} does not divide {label}'s {layers} "
                                f"layers (each stage holds L / P of them)")
        if lay.schedule == "interleaved" and layers % (p * INTERLEAVED_CHUNKS):
            raise PerfcastError(f"--schedule interleaved gives each of the {p} stages "
                                f"{INTERLEAVED_CHUNKS} chunks: {label}'s {layers} layers must "
                                f"divide by P·{INTERLEAVED_CHUNKS} = {p * INTERLEAVED_CHUNKS}")

    def check_serving(self, arch: Any, *, input_len: int | None = None) -> None:
        """``--mode generate`` against the LLM's shape (``arch``: an
        :class:`~perfcast.llm.arch.LLMArch` — ``model_id``, ``layers``, ``heads``,
        ``kv_heads``, ``max_positions``): the context (``input_len``, default the request's, +
        ``output_len``) within its positions; tensor parallelism (every engine but llama.cpp)
        dividing the attention heads and dividing or being a multiple of the KV heads (vLLM's
        rule); llama.cpp's layer split no more devices than layers. Exit 2 naming the rule."""
        i = self.input_len if input_len is None else input_len
        o = self.output_len or 0
        if arch.max_positions and i is not None and i + o > arch.max_positions:
            raise PerfcastError(f"{arch.model_id} holds at most {arch.max_positions:,} "
                                f"positions; input {i:,} + output {o:,} = {i + o:,} tokens")
        tp = self.layout.tensor
        if self.engine == "llama.cpp":
            if tp > arch.layers:
                raise PerfcastError(f"llama.cpp splits {arch.model_id}'s {arch.layers} layers "
                                    f"across devices; --tensor-parallel {tp} is more devices "
                                    f"than layers")
            return
        ok = [t for t in range(1, MAX_SERVING_DEVICES + 1) if arch.heads % t == 0
              and (arch.kv_heads % t == 0 if arch.kv_heads >= t else t % arch.kv_heads == 0)]
        if arch.heads % tp:
            raise PerfcastError(f"--tensor-parallel {tp} does not divide {arch.model_id}'s "
                                f"{arch.heads} attention heads (use one of "
                                f"{', '.join(map(str, ok))})")
        if tp not in ok:
            raise PerfcastError(f"--tensor-parallel {tp} neither divides {arch.model_id}'s "
                                f"{arch.kv_heads} KV heads nor is a multiple of them (use one "
                                f"of {', '.join(map(str, ok))})")
