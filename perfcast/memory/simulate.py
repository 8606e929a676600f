"""Tensor-memory simulation: the exact peak of live tensor bytes of one inference pass or of a
training step, computed by running the model under ``FakeTensorMode`` (nothing is allocated).

How
---
The model is built on the ``meta`` device (a 7B LLM costs no memory), its parameters and buffers
become FakeTensors on a fake **CPU** device, and the pass runs eagerly under
:class:`~torch._subclasses.fake_tensor.FakeTensorMode` with a
:class:`~perfcast.memory.tracker.LiveTensorTracker` on top, which charges every storage an ATen
op creates until it is garbage collected. Parameters, buffers and the inputs are live from the
start. Everything else is what PyTorch really does: autograd saves what it saves, the real
``torch.optim`` optimizer creates its state lazily, autocast inserts its casts.

The modelled loop (the same as :func:`perfcast.profiler.measure.make_step`)::

    # mode="train"                                  # mode="infer" (model.eval())
    for step in range(2):                           with torch.no_grad(), autocast:
        opt.zero_grad(set_to_none=True)                 model(*inputs)
        with autocast:                              # one pass
            loss = first_float_output(model(*inputs)).float().mean()
        loss.backward()
        opt.step()

Gradients are freed by ``zero_grad`` at the start of the next step. Two steps are run and the
reported peak is the maximum over both, i.e. the **steady-state** peak of a training run: from
the second step on, the optimizer state created lazily in the first ``opt.step()`` is live during
forward and backward too (the first step alone underestimates it by the state size when the peak
is in backward). ``first_step_peak_mb`` is also reported. ``loss="cross-entropy"`` replaces the
mean by ``F.cross_entropy`` on the last dimension (what timm and HF training do; differs only by
the ``[N, classes]`` log-softmax and its gradient).

The optimizer is PyTorch's: ``SGD(lr=1e-3)``, ``SGD(lr=1e-3, momentum=0.9)`` (``sgd-momentum``),
``Adam(lr=1e-4)``, ``AdamW(lr=1e-4)``. ``foreach=None`` uses the multi-tensor (foreach)
implementation — PyTorch's default for CUDA parameters — whose Adam step holds one extra
parameter-sized temporary (``exp_avg_sq.sqrt()`` for all tensors at once) and which holds the
whole grad list; ``foreach=False`` is the per-tensor loop PyTorch uses by default on CPU.

Precision: ``fp32``; ``amp`` = ``torch.autocast(fp16)`` with **CUDA's autocast op lists**
emulated on the CPU autocast key (:mod:`perfcast.memory.autocast_rules`; ``autocast_rules="cpu"``
keeps CPU autocast's own lists), fp32 master weights, gradients and optimizer state (a
``GradScaler`` only adds a few scalars, not simulated); ``bf16`` in training = the same with
``torch.autocast(dtype=bfloat16)`` (fp32 master weights, gradients and optimizer state: what
``bf16`` means to users), in inference the model cast to bf16 (no master copy to keep);
``fp16`` / ``bf16-pure`` = the whole model and inputs cast (pure low-precision training: 16-bit
grads and optimizer state); ``fp8`` (training) = ``bf16``'s autocast plus the FP8 copy and
transpose of every ``nn.Linear`` weight that Transformer Engine keeps (2 bytes a weight,
:data:`FP8_WEIGHT_COPY_BYTES`, added to the peak — FakeTensor has no FP8 GEMM to run).

What differs from a real CUDA run (what a learned memory predictor must add)
---------------------------------------------------------------------------
``tensor_peak_mb`` corresponds to ``torch.cuda.max_memory_allocated()`` *before* allocator
rounding. ``nvidia-smi`` / NVML used memory additionally includes:

* the **CUDA context** (driver state, the code of loaded kernels, cuBLAS/cuDNN handles):
  ~300–500 MB with lazy module loading (``CUDA_MODULE_LOADING=LAZY``, the default since
  CUDA 11.7 / PyTorch 2.x), ~1–2 GB when every kernel of PyTorch's CUDA libraries is loaded
  eagerly (older stacks);
* **caching-allocator rounding**: every block is rounded up to 512 B; small (≤ 1 MB) requests come
  from 2 MB segments, larger ones from 20 MB segments or their own ``cudaMalloc`` rounded to 2 MB;
  *reserved* memory (what ``nvidia-smi`` sees) exceeds *allocated* by the cached free blocks and
  **fragmentation** (split blocks that cannot be reused for a larger request), typically 5–30 %;
* **cuDNN / cuBLAS workspaces**: convolution algorithms chosen by benchmarking may use up to
  hundreds of MB of workspace, cuBLAS keeps a workspace per handle/stream (a few MB, more for
  cuBLASLt), and these are allocated through the caching allocator so they raise the peak;
* **kernel temporaries** not visible as op outputs (reduction buffers, sort/top-k scratch,
  ``cudnn`` batch-norm reserve space, fused-kernel scratch) and different kernel choices than
  on CPU (e.g. cuDNN batch-norm saves different statistics tensors, flash vs. memory-efficient
  SDPA save different logsumexp layouts) — small differences in saved tensors;
* memory held by other processes, NCCL buffers, pinned host memory (not on the GPU).

Units: all ``*_mb`` values are MiB (2**20 bytes).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError, TraceError
from perfcast.workload import DEFAULT_OPTIMIZER, OPTIMIZERS, Workload

__all__ = ["MemoryEstimate", "simulate_memory", "build_model_on_meta", "make_optimizer",
           "run_training_steps", "run_inference", "first_float"]

LOSSES = ("mean", "cross-entropy")
MiB = float(2**20)
#: Points kept of a memory timeline (:attr:`MemoryEstimate.timeline`).
TIMELINE_POINTS = 1500


def _downsample(timeline: list[tuple[int, str | None]], points: int = TIMELINE_POINTS
                ) -> list[list]:
    """``[op index, MiB, phase]`` per op, or per run of ops (its maximum) when there are more
    than ``points``: the peak survives the thinning."""
    n = len(timeline)
    step = max(1, -(-n // points))
    out = []
    for start in range(0, n, step):
        chunk = timeline[start:start + step]
        j = max(range(len(chunk)), key=lambda i: chunk[i][0])
        out.append([start + j, chunk[j][0] / MiB, chunk[j][1]])
    return out


@dataclass
class MemoryEstimate:
    """Result of :func:`simulate_memory`. Every ``*_mb`` is MiB (2**20 bytes).

    * ``tensor_peak_mb`` — peak of live tensor bytes over the simulated pass/steps;
    * ``param_mb``, ``buffer_mb``, ``input_mb`` — live from the start;
    * ``grad_mb``, ``optimizer_state_mb`` — after the last step (``.grad`` and ``opt.state``);
    * ``activation_peak_mb`` — ``tensor_peak_mb`` minus the persistent state (parameters,
      buffers, gradients, optimizer state): the transient part at the peak (saved activations,
      temporaries, the input, and the foreach optimizer's temporaries when the peak is in the
      step);
    * ``phase_peaks_mb`` — peak per phase (``forward``, ``backward``, ``optimizer``), each
      including what is live when the phase starts; ``peak_phase`` — where the peak is;
    * ``first_step_peak_mb`` — the peak of the first training step alone (no optimizer state
      yet during its forward/backward);
    * ``seconds`` — wall time of the simulation, model building included;
    * ``timeline`` — with ``simulate_memory(..., timeline=True)``: the live tensor MiB after
      each dispatched op, as ``[op index, MiB, phase]`` (at most :data:`TIMELINE_POINTS` points:
      the maximum of each run of ops, so the peak is kept); ``None`` otherwise (and then absent
      from :meth:`to_dict`).
    """

    model: str
    mode: str
    precision: str
    optimizer: str | None
    batch_size: int
    input_shape: list[int]
    tensor_peak_mb: float
    param_mb: float
    buffer_mb: float
    grad_mb: float
    optimizer_state_mb: float
    input_mb: float
    activation_peak_mb: float
    phase_peaks_mb: dict[str, float]
    peak_phase: str | None
    first_step_peak_mb: float | None
    total_params: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    timeline: list[list] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; keys as the ``perfcast memory --json`` output."""
        d = asdict(self)
        if d["timeline"] is None:
            d.pop("timeline")
        d["units"] = "MiB (2**20 bytes)"
        return d

    def features(self) -> dict[str, float]:
        """Flat numeric features (MiB) for learned memory predictors, prefixed ``mem_``."""
        out = {f"mem_{k}": float(getattr(self, k)) for k in (
            "tensor_peak_mb", "param_mb", "buffer_mb", "grad_mb", "optimizer_state_mb",
            "input_mb", "activation_peak_mb")}
        for phase in ("forward", "backward", "optimizer"):
            out[f"mem_{phase}_peak_mb"] = float(self.phase_peaks_mb.get(phase, 0.0))
        return out

    def summary(self) -> str:
        """A few human-readable lines (for the CLI's non-JSON output)."""
        def mib(v: float) -> str:
            return f"{v:12.1f} MiB" if v >= 10 or v == 0 else f"{v:12.4f} MiB"

        what = f"{self.mode}, {self.precision}" + (f", {self.optimizer}" if self.optimizer
                                                    else "")
        lines = [f"{self.model}  batch {self.batch_size}  input {self.input_shape}  ({what})",
                 f"  tensor peak      {mib(self.tensor_peak_mb)}"
                 + (f"  (in {self.peak_phase})" if self.peak_phase else ""),
                 f"  parameters       {mib(self.param_mb)}  ({self.total_params:,} params)",
                 f"  buffers          {mib(self.buffer_mb)}",
                 f"  gradients        {mib(self.grad_mb)}",
                 f"  optimizer state  {mib(self.optimizer_state_mb)}",
                 f"  activations etc. {mib(self.activation_peak_mb)}  (peak − persistent state)"]
        if self.phase_peaks_mb:
            lines.append("  phase peaks      " + ", ".join(
                f"{k} {v:.1f}" for k, v in self.phase_peaks_mb.items()) + " MiB")
        lines.append(f"  simulated in {self.seconds:.2f} s (MiB = 2**20 bytes)")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# --------------------------------------------------------------------------- building
def build_model_on_meta(spec: Any, *, batch_size: int = 1, input_size: Any = None,
                        seq_len: int | None = None, mode: str = "train"):
    """``(model, example args on meta, model_id, notes)`` for a model spec or
    :class:`~perfcast.workload.Workload` (no weights; :func:`perfcast.zoo.build_model`)."""
    from perfcast.zoo import build_model

    w = spec if isinstance(spec, Workload) else Workload.of(
        spec, batch_size=batch_size, input_size=input_size, seq_len=seq_len, mode=mode)
    built = build_model(w, "meta")
    return built.module, built.args, built.model_id, built.notes


class NoStep:
    """The optimizer of ``optimizer="none"`` (forward + backward only): ``zero_grad`` frees the
    gradients, ``step`` does nothing, no state."""

    def __init__(self, params) -> None:
        self.params, self.state = list(params), {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        return None


def make_optimizer(name: str, params, foreach: bool | None = None):
    """The torch.optim optimizer of the simulation and of :mod:`perfcast.profiler` runs
    (:class:`NoStep` for ``none``)."""
    import torch

    if name == "none":
        return NoStep(params)

    kw = {} if foreach is None else {"foreach": foreach}
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, **kw)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, **kw)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, **kw)
    raise PerfcastError(f"unknown optimizer {name!r}: use {', '.join(OPTIMIZERS)}")


# --------------------------------------------------------------------------- the passes
def first_float(out: Any):
    """The model output a loss is computed from: the tensor, ``logits`` / ``last_hidden_state``,
    or the first floating-point tensor of a tuple, list or dict (profiler and simulation)."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state"):
        v = getattr(out, key, None)
        if isinstance(v, torch.Tensor):
            return v
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        for v in out:
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                return v
    raise TraceError("the model output has no floating-point tensor to compute a loss from")


def _loss(out: Any, loss: str):
    import torch
    import torch.nn.functional as F

    t = first_float(out)
    if loss == "cross-entropy" and t.dim() >= 2:
        logits = t.flatten(0, -2) if t.dim() > 2 else t
        target = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
        return F.cross_entropy(logits, target)
    return t.float().mean()


#: Bytes per ``nn.Linear`` weight of FP8 training's copies (TE: the FP8 weight and its
#: transpose), added to a simulated ``fp8`` training step.
FP8_WEIGHT_COPY_BYTES = 2.0
#: The autocast dtype of each autocast precision (``bf16`` / ``fp8``: in training — an
#: inference at ``bf16`` casts the model instead, :func:`simulate_memory`).
AUTOCAST_DTYPES = {"amp": "float16", "bf16": "bfloat16", "fp8": "bfloat16"}


@contextlib.contextmanager
def _autocast(precision: str, device_type: str, rules: str):
    """Autocast for ``amp`` (fp16) and ``bf16`` / ``fp8`` (bf16) — with CUDA's op lists when
    ``rules="cuda"`` —, else nothing."""
    import torch

    if precision not in AUTOCAST_DTYPES:
        yield
        return
    with contextlib.ExitStack() as stack:
        if rules == "cuda" and device_type == "cpu":
            from perfcast.memory.autocast_rules import cuda_autocast_rules

            stack.enter_context(cuda_autocast_rules())
        stack.enter_context(torch.autocast(device_type,
                                           dtype=getattr(torch, AUTOCAST_DTYPES[precision])))
        yield


def _phase(tracker, name: str):
    return contextlib.nullcontext() if tracker is None else tracker.phase(name)


def run_training_steps(model, args: tuple, opt, tracker=None, *, precision: str = "fp32",
                       steps: int = 2, loss: str = "mean", autocast_rules: str = "cuda",
                       device_type: str = "cpu") -> list[int | None]:
    """Run ``steps`` iterations of the modelled training loop; return the peak after each.

    Shared by the simulation (fake tensors) and the CPU validation (real tensors) so that both
    run exactly the same Python code. ``tracker`` (a :class:`LiveTensorTracker`, already
    entered) only labels the phases; ``None`` runs the loop unlabelled.
    """
    peaks: list[int | None] = []
    for _ in range(steps):
        with _phase(tracker, "zero_grad"):
            opt.zero_grad(set_to_none=True)
        with _phase(tracker, "forward"), _autocast(precision, device_type, autocast_rules):
            value = _loss(model(*args), loss)
        with _phase(tracker, "backward"):
            value.backward()
        with _phase(tracker, "optimizer"):
            opt.step()
        del value
        peaks.append(None if tracker is None else int(tracker.peak_bytes))
    return peaks


def run_inference(model, args: tuple, tracker=None, *, precision: str = "fp32",
                  autocast_rules: str = "cuda", device_type: str = "cpu") -> None:
    """One ``no_grad`` forward pass (the output is dropped)."""
    import torch

    with _phase(tracker, "forward"), torch.no_grad(), \
            _autocast(precision, device_type, autocast_rules):
        out = model(*args)
    del out


_BN_OPS = ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
           "_batch_norm_with_update", "_batch_norm_with_update_functional", "_batch_norm_no_update",
           "_native_batch_norm_legit_no_training")


def _mixed_bn_stats_mode():
    """A dispatch mode fixing the meta kernels' dtype of batch-norm statistics.

    With an fp16/bf16 input and fp32 weight (autocast), the real CPU and CUDA kernels return
    ``save_mean``/``save_invstd`` in fp32, the meta kernels in the input dtype. This mode (placed
    between FakeTensorMode and the tracker) returns fp32 statistics, as the real kernels do.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    packets = {getattr(torch.ops.aten, n) for n in _BN_OPS if hasattr(torch.ops.aten, n)}
    low = (torch.float16, torch.bfloat16)

    class MixedBatchNormStats(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket not in packets or not isinstance(out, tuple) or len(args) < 2:
                return out
            x, w = args[0], args[1]
            if (isinstance(x, torch.Tensor) and x.dtype in low and isinstance(w, torch.Tensor)
                    and w.dtype == torch.float32):
                out = tuple(o.float() if 0 < i < 3 and isinstance(o, torch.Tensor)
                            and o.dtype in low else o for i, o in enumerate(out))
            return out

    return MixedBatchNormStats()


def _storage_bytes(tensors) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError):
            continue
        seen[id(st)] = st.nbytes()
    return sum(seen.values())


# --------------------------------------------------------------------------- public entry
def simulate_memory(spec: Any, *, batch_size: int = 1, input_size: Any = None,
                    seq_len: int | None = None, mode: str = "train", precision: str = "fp32",
                    optimizer: str = "sgd-momentum", foreach: bool | None = None,
                    loss: str = "mean", steps: int | None = None,
                    autocast_rules: str = "cuda", timeline: bool = False) -> MemoryEstimate:
    """Simulate the peak live tensor memory of ``spec`` (see the module docstring).

    ``spec``: ``timm:name`` / ``name``, ``torchvision:name``, ``hf:id`` or ``module:callable`` —
    or a :class:`~perfcast.workload.Workload`, which then gives batch (``None`` = 1), input
    size, sequence length, mode, precision and optimizer instead of the keywords.
    ``input_size``: per-sample shape ``(3, H, W)``, ``"3,224,224"`` or an int ``H`` (vision;
    default: the model's default); ``seq_len`` for ``hf:`` models (default 128).
    ``mode``: ``"train"`` (two steps of the modelled loop, steady-state peak) or ``"infer"``.
    ``precision``: ``fp32``, ``amp`` (fp16 autocast with CUDA's op lists), ``fp16``, ``bf16``
    (training: bf16 autocast with fp32 master weights; inference: the model in bf16),
    ``bf16-pure``, ``fp8`` (training: ``bf16`` + the FP8 weight copies).
    ``optimizer``: ``sgd``, ``sgd-momentum``, ``adam``, ``adamw`` (train only).
    ``foreach``: optimizer implementation; ``None`` = PyTorch's CUDA default (multi-tensor).
    ``loss``: ``"mean"`` (as the profiler) or ``"cross-entropy"``.
    ``timeline``: also record the live bytes after every op (:attr:`MemoryEstimate.timeline`).

    Raises :class:`~perfcast.errors.ModelSpecError` for an unknown model and
    :class:`~perfcast.errors.TraceError` when the model cannot run under FakeTensor.
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from perfcast.frontends.torch_frontend import _Fakeifier
    from perfcast.memory.tracker import LiveTensorTracker

    t0 = time.perf_counter()
    if isinstance(spec, Workload):
        w = spec.replace(batch_size=spec.batch_size or 1,
                         precision=spec.precision or "fp32")
    else:
        w = Workload.of(spec, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                        mode=mode, precision=precision, optimizer=optimizer)
        if w.batch_size is None:
            raise PerfcastError(f"batch size must be a positive integer, got {batch_size!r}")
    mode, precision, batch_size = w.mode, w.precision, w.batch_size
    optimizer = w.optimizer or DEFAULT_OPTIMIZER
    if loss not in LOSSES:
        raise PerfcastError(f"unknown loss {loss!r}: use {', '.join(LOSSES)}")
    if autocast_rules not in ("cuda", "cpu"):
        raise PerfcastError("autocast_rules must be 'cuda' or 'cpu'")
    train = mode == "train"
    steps = (2 if train else 1) if steps is None else int(steps)
    if steps < 1:
        raise PerfcastError("steps must be ≥ 1")

    model, args, model_id, notes = build_model_on_meta(w)
    # the model cast (pure 16-bit), or fp32 weights under autocast (``run``: the loop's
    # precision, what its autocast reads)
    cast = precision in ("fp16", "bf16-pure") or (precision == "bf16" and not train)
    run = "fp32" if cast else precision
    fp8_copies = 0
    if precision == "fp8":
        fp8_copies = int(sum(m.weight.numel() for m in model.modules()
                             if isinstance(m, torch.nn.Linear)) * FP8_WEIGHT_COPY_BYTES)
    if cast:
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        model = model.to(dtype)
        args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    model.train(train)

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakeify = _Fakeifier(fake_mode)
    fakeify.module(model)
    fargs = tuple(fakeify(a) for a in args)
    params = list(model.parameters())
    tracker = LiveTensorTracker(record_timeline=timeline)
    tracker.register(params, "param")
    tracker.register(list(model.buffers()), "buffer")
    tracker.register(list(fargs), "input")

    first_peak = None
    opt = None
    bn_fix = _mixed_bn_stats_mode() if run in AUTOCAST_DTYPES else contextlib.nullcontext()
    try:
        with fake_mode, bn_fix, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if train:
                opt = make_optimizer(optimizer, params, foreach=True if foreach is None
                                     else foreach)
                with tracker:
                    peaks = run_training_steps(model, fargs, opt, tracker, precision=run,
                                               steps=steps, loss=loss,
                                               autocast_rules=autocast_rules)
                first_peak = peaks[0]
            else:
                with tracker:
                    for _ in range(steps):
                        run_inference(model, fargs, tracker, precision=run,
                                      autocast_rules=autocast_rules)
    except PerfcastError:
        raise
    except Exception as exc:  # torch raises many exception types under FakeTensor
        msg = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise TraceError(f"could not simulate {model_id} under FakeTensor: "
                         f"{type(exc).__name__}: {msg}") from exc

    param_b = _storage_bytes(params)
    buffer_b = _storage_bytes(list(model.buffers()))
    grad_b = _storage_bytes([p.grad for p in params if p.grad is not None]) if train else 0
    state_b = 0
    if opt is not None:
        state_b = _storage_bytes([v for s in opt.state.values() for v in s.values()
                                  if isinstance(v, torch.Tensor)])
    input_b = _storage_bytes(list(fargs))
    peak = int(tracker.peak_bytes) + fp8_copies
    persistent = param_b + buffer_b + grad_b + state_b + fp8_copies

    if train:
        notes.append(f"steady-state peak over {steps} training step(s) of the loop zero_grad → "
                     f"forward+{loss} loss → backward → {optimizer} step "
                     f"({'foreach' if foreach in (None, True) else 'per-tensor'} "
                     f"implementation)")
    else:
        notes.append("one torch.no_grad() forward pass in eval mode")
    if run in AUTOCAST_DTYPES:
        half = "fp16" if run == "amp" else "bf16"
        notes.append(f"{precision}: {half} autocast with fp32 master weights, gradients and "
                     f"optimizer state, "
                     + ("CUDA's op lists emulated on CPU autocast" if autocast_rules == "cuda"
                        else "CPU's op lists"))
    elif cast and train:
        notes.append(f"{precision}: the model, its gradients and optimizer state in 16 bits "
                     f"(no fp32 master copy)")
    if fp8_copies:
        notes.append(f"fp8: + {fp8_copies / MiB:,.1f} MiB of FP8 weight copies (the FP8 weight "
                     f"and its transpose of every nn.Linear, 2 bytes a weight, as Transformer "
                     f"Engine keeps them) beside bf16's autocast step; the FP8 GEMMs' own "
                     f"buffers are not simulated")
    notes.append("live tensor bytes only: excludes the CUDA context, caching-allocator rounding "
                 "and fragmentation, cuDNN/cuBLAS workspaces and kernel-internal temporaries")

    est = MemoryEstimate(
        model=model_id, mode=mode, precision=precision,
        optimizer=optimizer if train else None, batch_size=batch_size,
        input_shape=[int(d) for d in fargs[0].shape] if fargs else [],
        tensor_peak_mb=peak / MiB, param_mb=param_b / MiB, buffer_mb=buffer_b / MiB,
        grad_mb=grad_b / MiB, optimizer_state_mb=state_b / MiB, input_mb=input_b / MiB,
        activation_peak_mb=max(0, peak - persistent) / MiB,
        phase_peaks_mb={k: v / MiB for k, v in tracker.phase_peaks.items()
                        if k in ("forward", "backward", "optimizer")},
        peak_phase=tracker.peak_phase,
        first_step_peak_mb=None if first_peak is None else first_peak / MiB,
        total_params=int(sum(p.numel() for p in params)),
        seconds=time.perf_counter() - t0, notes=notes,
        timeline=_downsample(tracker.timeline) if tracker.timeline is not None else None)
    return est
