"""The memory and time of a LoRA or QLoRA fine-tuning step (``--finetune lora|qlora``), on top
of the per-layer transformer arithmetic of :mod:`perfcast.parallel.model`.

What changes against full fine-tuning of the same layout (:class:`FineTuneCost`):

* **weights** — the base is frozen: LoRA keeps it in 16 bits (fp32 at ``--precision fp32``);
  QLoRA stores every linear layer of the blocks as bitsandbytes' 4-bit NormalFloat with double
  quantisation — 4 bits per weight, an 8-bit absmax per block of 64 weights and an fp32
  constant per 256 of those absmax, 4 + 8/64 + 32/(64·256) = :data:`NF4_DQ_BITS` ≈ 4.127 bits
  (Dettmers et al., QLoRA, 2023, section 3 "Double Quantization") — and PEFT's
  ``prepare_model_for_kbit_training`` casts every other parameter (embeddings, LM head, norms)
  to fp32 (:data:`KBIT_OTHER_BYTES`);
* **adapters** — per adapted projection of ``in → out`` features, ``A`` (r × in) and ``B``
  (out × r): ``r·(in + out)`` parameters, in fp32 (PEFT's ``autocast_adapter_dtype``), with
  their fp32 gradients and the optimizer's state (AdamW: 8 bytes); QLoRA's paged AdamW keeps
  the same state in unified memory: on the GPU while the step fits, its excess paged to the
  host when it does not, paged in and out over PCIe for each optimizer step (QLoRA section 3,
  "Paged Optimizers"; figure 6: some models "do not quite fit" without them). These are the
  only gradients, the only data-parallel all-reduce and the only optimizer step;
* **activations** — as full fine-tuning's (a frozen projection no longer needs its input for a
  weight gradient, but its adapter keeps the same tensor for ``A``'s: PEFT's default
  ``lora_dropout = 0`` shares it), + the adapters' ``A·x`` (r per token per adapter); gradient
  checkpointing is ``--recompute full``;
* **time** — the base's backward computes input gradients only: a frozen projection's
  backward is one product (its forward's FLOPs and bytes), not two, and a frozen embedding
  has none; + the adapters' products and element-wise scale and add (memory-bound at rank r:
  forward ``in + 2r + 6·out`` elements per token moved in 4 kernels, backward twice that in
  6), + for QLoRA the dequantisation of every 4-bit weight to the compute dtype before its
  product, in the forward and again in the backward (bitsandbytes' ``MatMul4Bit``: read
  4.127 bits, write 16, per weight per pass, at the fitted memory efficiency).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.parallel.blocks import GEMM, PRE
from perfcast.parallel.model import MIB, STATE_BYTES, Efficiency, Parts, price
from perfcast.workload.finetune import (
    ADAPTER_METHODS,
    ATTENTION_TARGETS,
    DEFAULT_LORA_RANK,
    DEFAULT_LORA_TARGETS,
    MLP_TARGETS,
)

#: Bits per weight of bitsandbytes' NF4 with double quantisation (QLoRA section 3): 4-bit codes,
#: an 8-bit quantised absmax per block of 64 weights, an fp32 second-level constant per 256
#: first-level absmax.
NF4_BITS = 4.0
NF4_BLOCK = 64
NF4_BLOCK2 = 256
NF4_DQ_BITS = NF4_BITS + 8.0 / NF4_BLOCK + 32.0 / (NF4_BLOCK * NF4_BLOCK2)
#: Without double quantisation: an fp32 absmax per 64 weights (QLoRA section 3: 32/64 = 0.5
#: bits per parameter of constants).
NF4_BITS_NO_DQ = NF4_BITS + 32.0 / NF4_BLOCK
#: Bytes of an adapter parameter, its gradient: fp32 (PEFT casts fp16 / bf16 adapters to fp32,
#: ``autocast_adapter_dtype=True``, peft/tuners/tuners_utils.py ``cast_adapter_dtype``).
ADAPTER_BYTES = 4.0
#: Bytes of a QLoRA base parameter that is not 4-bit (embeddings, LM head, norms): PEFT's
#: ``prepare_model_for_kbit_training`` casts every fp16 / bf16 parameter that is not
#: ``Params4bit`` to fp32 (peft/utils/other.py).
KBIT_OTHER_BYTES = 4.0
#: Elements an adapter moves per token in its forward pass, beside its input (``in``) and its
#: rank: ``A·x`` written and read (2r), ``B·(A·x)`` written, scaled (read + write) and added to
#: the base's output (2 reads, 1 write): 6·out. Kernels: A, B, scale, add.
ADAPTER_OUT_TRAFFIC = 6.0
ADAPTER_FWD_KERNELS = 4
#: Backward: grad B, grad (A·x), grad A, grad x (2× the forward's products) and the scale's and
#: the input gradient's add — twice the forward's traffic, in 6 kernels.
ADAPTER_BWD_RATIO = 2.0
ADAPTER_BWD_KERNELS = 6
#: Host link a paged optimizer's state crosses when the GPU is full: PCIe 4.0 x16, 32 GB/s per
#: direction (PCI-SIG's Gen4 x16 rate; the state is read in and written back each step).
HOST_LINK_GBS = 32.0


@dataclass(frozen=True)
class Adapter:
    """One adapted projection of a layer: ``name``, ``d_in`` → ``d_out`` features, ``copies``
    per layer (a mixture of experts' MLP projections: one per expert) and ``routed`` (each
    token runs ``experts_per_token`` of the copies, not all)."""

    name: str
    d_in: int
    d_out: int
    copies: int = 1
    routed: bool = False

    def params(self, rank: int) -> int:
        return rank * (self.d_in + self.d_out) * self.copies


def projections(arch, gated: bool = True) -> dict[str, Adapter]:
    """Every projection of a decoder layer of ``arch`` (:class:`~perfcast.llm.arch.LLMArch`) by
    Llama's names: q (hidden → heads·head_dim), k and v (hidden → kv_heads·head_dim), o
    (heads·head_dim → hidden), gate and up (hidden → intermediate; no gate in a non-gated MLP)
    and down (intermediate → hidden), an MoE layer's MLP projections once per expert."""
    h, hd = arch.hidden, arch.head_dim
    moe = arch.experts > 1
    copies = arch.experts if moe else 1
    out = {"q_proj": Adapter("q_proj", h, arch.heads * hd),
           "k_proj": Adapter("k_proj", h, arch.kv_heads * hd),
           "v_proj": Adapter("v_proj", h, arch.kv_heads * hd),
           "o_proj": Adapter("o_proj", arch.heads * hd, h),
           "up_proj": Adapter("up_proj", h, arch.intermediate, copies, moe),
           "down_proj": Adapter("down_proj", arch.intermediate, h, copies, moe)}
    if gated:
        out["gate_proj"] = Adapter("gate_proj", h, arch.intermediate, copies, moe)
    return out


def _gated(tm) -> bool:
    """Whether the traced block has a gated MLP (two products to the intermediate width)."""
    inter = tm.shape.intermediate

    def count(tab) -> int:
        return int(((tab.cls == GEMM) & (tab.params > 0) & (tab.n_dim == inter)).sum())

    return count(tm.two) - count(tm.one) >= 2


@dataclass
class FineTuneCost:
    """The LoRA / QLoRA step of one workload on one device (module docstring): ``method``,
    ``rank``, the ``adapters`` of one layer, ``missing`` targets the model has not (a non-gated
    MLP's gate), the compute ``precision``, ``k`` experts per token."""

    method: str
    rank: int
    adapters: tuple[Adapter, ...]
    missing: tuple[str, ...]
    precision: str
    experts_per_token: int = 0
    #: the GPU's memory (MiB): QLoRA's paged optimizer state spills to the host beyond it
    capacity_mb: float | None = None

    # ------------------------------------------------------------------------ sizes
    def layer_params(self) -> float:
        """Adapter parameters of one layer (all GPUs)."""
        return float(sum(a.params(self.rank) for a in self.adapters))

    def _per_gpu(self, T: int, E: int) -> tuple[float, float]:
        """(dense, expert) adapter parameters of one layer on one GPU: ÷ T (split with their
        projection), an MoE layer's expert adapters ÷ E too."""
        dense = sum(a.params(self.rank) for a in self.adapters if not a.routed) / T
        expert = sum(a.params(self.rank) for a in self.adapters if a.routed) / (T * E)
        return dense, expert

    @property
    def base_bytes(self) -> float:
        """Bytes per frozen weight of a LoRA base (the 4-bit ones of QLoRA: :data:`NF4_DQ_BITS`)."""
        return 4.0 if self.precision == "fp32" else 2.0

    def _act_bytes(self) -> float:
        return 4.0 if self.precision == "fp32" else 2.0

    # ------------------------------------------------------------------------ time
    def _adapter_ms(self, tokens: float, T: int, device,
                    eff: Efficiency) -> tuple[float, float, float]:
        """(forward ms, backward ms, forward FLOPs) of one layer's adapters over ``tokens``
        tokens per GPU (÷ T)."""
        from perfcast.parallel.pricing import _matrix_peak

        a_b = self._act_bytes()
        r = self.rank
        peak = _matrix_peak(device, self.precision) * eff.gemm
        bw = float(device.bandwidth_gbs) * 1e9 * eff.memory
        t_f = t_b = flops_all = 0.0
        for a in self.adapters:
            runs = (self.experts_per_token or 1) if a.routed else 1
            n = tokens * runs / T
            flops = 2.0 * n * r * (a.d_in + a.d_out)
            moved = n * (a.d_in + 2 * r + ADAPTER_OUT_TRAFFIC * a.d_out) * a_b
            t = max(flops / peak, moved / bw) * 1e3
            t_f += t + ADAPTER_FWD_KERNELS * eff.launch_us / 1e3
            t_b += ADAPTER_BWD_RATIO * t + ADAPTER_BWD_KERNELS * eff.launch_us / 1e3
            flops_all += flops * T
        return t_f, t_b, flops_all

    def parts(self, pr: Parts, tm, layout, micro_batch: int, device, eff: Efficiency,
              fused: bool) -> Parts:
        """``pr`` (full fine-tuning's :class:`~perfcast.parallel.model.Parts` at the layout's
        T and the micro-batch) as this method's: the frozen weights' gradients taken out of
        the backward pass, the adapters' work (and QLoRA's dequantisation) added, and the
        trained parameters — the adapters — in place of the model's (module docstring)."""
        T = layout.tensor
        C = getattr(layout, "context", 1)
        E = getattr(layout, "expert", 1)
        kw: dict[str, Any] = {"fused": fused, "causal": tm.causal, "seq": tm.seq_len}
        if E > 1:
            kw["expert"] = E
        p1, p2 = (price(t, T, micro_batch / C, self.precision, device, eff, **kw)
                  for t in (tm.one, tm.two))

        def frozen(tab, p) -> np.ndarray:
            """Per node, the backward ms a frozen weight no longer costs: a projection's
            weight gradient (its backward less its forward), an embedding's whole backward."""
            w = tab.params > 0
            gemm = (tab.cls == GEMM) & w
            emb = np.array([o == "embedding" for o in tab.op]) & w
            return np.where(gemm, np.maximum(p.bwd - p.fwd, 0.0), np.where(emb, p.bwd, 0.0))

        s1, s2 = frozen(tm.one, p1), frozen(tm.two, p2)
        save_block = float(s2.sum() - s1.sum())
        pre = tm.part == PRE if tm.part is not None else np.zeros(len(tm.one.op), bool)
        save_pre = float(s1[pre].sum())
        save_post = float(s1.sum()) - save_block - save_pre
        tokens = micro_batch * tm.seq_len / C
        a_f, a_b, a_flops = self._adapter_ms(tokens, T, device, eff)
        dq = self.dequant_ms(tm, T, E, device, eff) if self.method == "qlora" else 0.0
        dense, expert = self._per_gpu(T, E)
        runs = sum(((self.experts_per_token or 1) if a.routed else 1) for a in self.adapters)
        saved = tokens * self.rank * runs / T * self._act_bytes()
        changes = dict(b_fwd=pr.b_fwd + a_f + dq, b_bwd=pr.b_bwd - save_block + a_b + dq,
                       pre_bwd=max(pr.pre_bwd - save_pre, 0.0),
                       post_bwd=max(pr.post_bwd - save_post, 0.0),
                       b_saved=pr.b_saved + saved, b_params=dense + expert, pre_params=0.0,
                       post_params=0.0,
                       model_flops=pr.model_flops * 2.0 / 3.0 + tm.shape.layers * a_flops)
        if "b_expert_params" in {f.name for f in fields(pr)}:
            changes["b_expert_params"] = expert
        return replace(pr, **changes)

    def quantised_block_params(self, tm, T: int = 1, E: int = 1) -> float:
        """Parameters of one block's linear layers on one GPU (÷ T where split, experts ÷ E):
        what QLoRA stores in 4 bits."""
        def q(tab) -> float:
            gemm = (tab.cls == GEMM) & (tab.params > 0)
            div = np.where(tab.div_weights, 1.0 / T, 1.0)
            xp = tab.expert_mask() if hasattr(tab, "expert_mask") else np.zeros(len(tab.op), bool)
            div = div * np.where(xp, 1.0 / max(E, 1), 1.0)
            return float((tab.params * div)[gemm].sum())

        return q(tm.two) - q(tm.one)

    def dequant_ms(self, tm, T: int, E: int, device, eff: Efficiency) -> float:
        """One pass of dequantising a block's 4-bit weights on one GPU (read NF4 + constants,
        write the compute dtype), memory-bound, one kernel per projection."""
        n = self.quantised_block_params(tm, T, E)
        bw = float(device.bandwidth_gbs) * 1e9 * eff.memory
        kernels = int(((tm.two.cls == GEMM) & (tm.two.params > 0)).sum()
                      - ((tm.one.cls == GEMM) & (tm.one.params > 0)).sum())
        return n * (NF4_DQ_BITS / 8.0 + self._act_bytes()) / bw * 1e3 + \
            kernels * eff.launch_us / 1e3

    # ------------------------------------------------------------------------ memory
    def base_weight_bytes(self, tm, pr_full: Parts, layout) -> tuple[float, float, float]:
        """(bytes, 4-bit parameters, other parameters) of the frozen base on the fullest GPU
        (the first or the last pipeline stage; ZeRO-3 is refused with adapters)."""
        T, P = layout.tensor, layout.pipeline
        E = getattr(layout, "expert", 1)
        lps = tm.shape.layers // P
        dup = float(tm.one.params.sum()) - float(tm.one.total_params)
        post = pr_full.post_params
        if P == 1 and dup > 0:
            post = max(0.0, post - dup / T)
        q = lps * self.quantised_block_params(tm, T, E)
        stages = [lps * pr_full.b_params + pr_full.pre_params + (post if P == 1 else 0.0)]
        if P > 1:
            stages.append(lps * pr_full.b_params + post)
        best = (0.0, 0.0, 0.0)
        for total in stages:
            other = max(total - q, 0.0)
            if self.method == "qlora":
                b = q * NF4_DQ_BITS / 8.0 + other * KBIT_OTHER_BYTES
            else:
                b = total * self.base_bytes
            if b > best[0]:
                best = (b, q if self.method == "qlora" else 0.0, other)
        return best

    def finish(self, est, tm, pr_full: Parts, layout, optimizer: str | None) -> Any:
        """The estimate of this method's step (``est``: the layout's estimate with
        :meth:`parts` as its prices): the frozen base's weights, the adapters, their
        gradients and optimizer state in fp32 in the memory breakdown."""
        T, P = layout.tensor, layout.pipeline
        E = getattr(layout, "expert", 1)
        Dg = layout.data * getattr(layout, "context", 1)
        z = layout.zero
        lps = tm.shape.layers // P
        dense, expert = self._per_gpu(T, E)
        adapters = lps * (dense + expert)
        base, _q, _other = self.base_weight_bytes(tm, pr_full, layout)
        opt = optimizer or "none"
        mem = dict(est.memory_breakdown_mb)
        new = {"weights": base / MIB,
               "adapters": adapters * ADAPTER_BYTES / MIB,
               "gradients": adapters * ADAPTER_BYTES / (Dg if z >= 2 else 1) / MIB,
               "optimizer_state": adapters * STATE_BYTES.get(opt, 0.0)
               / (Dg if z >= 1 else 1) / MIB}
        if self.method == "qlora":
            # one projection's weight dequantised to the compute dtype at a time
            new["dequantized_weight"] = self._largest_linear(tm, T) * self._act_bytes() / MIB
        out = {}
        for k, v in mem.items():  # the breakdown's order, the adapters after the weights
            out[k] = new.pop(k, v)
            if k == "weights":
                out["adapters"] = new.pop("adapters")
        out.update(new)
        if self.method == "qlora" and self.capacity_mb and opt != "none":
            self._page(est, out)
        est.memory_breakdown_mb = out
        est.memory_mb = float(sum(out.values()))
        # the GEMMs read the (dequantised) 16-bit base in the forward and the backward pass
        rc = 1 if layout.recompute == "full" else 0
        est.gpu_bytes += est.micro_batches * (2 + rc) * (base + (_q * 2.0 if _q else 0.0))
        return est

    def _page(self, est, mem: dict[str, float]) -> None:
        """QLoRA's paged optimizer (bitsandbytes' paged AdamW on CUDA unified memory): when
        the step needs more than the GPU has, the state's excess is paged to host memory —
        the GPU holds the rest and as much state as fits — and the optimizer step pages it in
        and out over the host link (:data:`HOST_LINK_GBS`)."""
        state = mem.get("optimizer_state", 0.0)
        rest = sum(v for k, v in mem.items() if k != "optimizer_state")
        if rest + state <= self.capacity_mb or state <= 0:
            return
        on_gpu = min(state, max(0.0, self.capacity_mb - rest))
        paged = state - on_gpu
        mem["optimizer_state"] = on_gpu
        t = 2 * paged * MIB / (HOST_LINK_GBS * 1e9) * 1e3
        est.breakdown_ms["optimizer"] = est.breakdown_ms.get("optimizer", 0.0) + t
        est.time_ms += t
        est.notes.append(f"paged optimizer: {paged:,.0f} of the {state:,.0f} MiB of optimizer "
                         f"state paged to host memory (the GPU holds the rest of the step and "
                         f"{on_gpu:,.0f} MiB of it); the optimizer step pages it in and out "
                         f"over PCIe 4.0 x16 ({HOST_LINK_GBS:g} GB/s): +{t:,.1f} ms")

    @staticmethod
    def _largest_linear(tm, T: int) -> float:
        """Parameters of the largest 4-bit projection of a block on one GPU."""
        from perfcast.parallel.blocks import BLOCK

        tab = tm.one
        gemm = (tab.cls == GEMM) & (tab.params > 0)
        gemm &= (tm.part == BLOCK) if tm.part is not None else (tab.n_dim != tm.shape.vocab)
        if not gemm.any():
            return 0.0
        div = np.where(tab.div_weights, 1.0 / T, 1.0)
        return float((tab.params * div)[gemm].max())

    # ------------------------------------------------------------------------ notes
    def notes(self, optimizer: str | None) -> list[str]:
        """What ``notes`` say of the method and its assumptions."""
        names = ", ".join(a.name for a in self.adapters)
        per_layer = self.layer_params()
        out = [f"finetune: {self.method} — rank {self.rank} adapters on {names} "
               f"({per_layer:,.0f} parameters per layer; r·(in + out) each, the projections' "
               f"widths from the model's config), in fp32 with fp32 gradients and "
               f"{optimizer or 'no'} optimizer state (PEFT's autocast_adapter_dtype); the base "
               f"frozen: its backward computes input gradients only (a projection's backward "
               f"one product, not two; no embedding gradient); lora_dropout 0 (PEFT's "
               f"default: the adapters share their projection's saved input)"]
        if self.missing:
            out.append(f"lora_targets: {', '.join(self.missing)} not in this model's layers "
                       f"(no gated MLP); left out")
        if self.method == "qlora":
            out.append(f"finetune: qlora — the blocks' linear weights as bitsandbytes NF4 with "
                       f"double quantisation, {NF4_DQ_BITS:.3f} bits per weight (4 + 8/{NF4_BLOCK}"
                       f" + 32/({NF4_BLOCK}·{NF4_BLOCK2}), QLoRA section 3); embeddings, LM head "
                       f"and norms in fp32 (PEFT's prepare_model_for_kbit_training); every 4-bit "
                       f"weight dequantised to {self.precision} before its product, in the "
                       f"forward and again in the backward pass (bitsandbytes' MatMul4Bit), "
                       f"memory-bound at the fitted memory efficiency; paged AdamW (QLoRA's "
                       f"paged optimizer): its state on the GPU while the step fits, its excess "
                       f"paged to host memory when it does not (+ the PCIe transfer in time)")
        else:
            out.append(f"finetune: lora — the frozen base in "
                       f"{'fp32' if self.base_bytes == 4 else '16 bits'} "
                       f"({self.base_bytes:.0f} bytes per weight; no master copy: it is "
                       f"never updated)")
        return out


def finetune_cost(w, tm, device=None) -> FineTuneCost | None:
    """The :class:`FineTuneCost` of workload ``w`` (``--finetune lora`` / ``qlora``) on its
    traced model ``tm``; ``None`` for full fine-tuning or none. A one-line error when the
    rank exceeds an adapted projection's width or no target is in the model."""
    if w.finetune not in ADAPTER_METHODS:
        return None
    from perfcast.llm.arch import llm_arch

    try:
        arch = llm_arch(w.spec)
    except PerfcastError as e:
        raise PerfcastError(f"--finetune {w.finetune} adapts a decoder LLM's projections: "
                            f"{e}") from None
    rank = w.lora_rank or DEFAULT_LORA_RANK
    targets = w.lora_targets or DEFAULT_LORA_TARGETS
    projs = projections(arch, gated=_gated(tm))
    adapters = tuple(projs[t] for t in (*ATTENTION_TARGETS, *MLP_TARGETS)
                     if t in targets and t in projs)
    missing = tuple(t for t in targets if t not in projs)
    if not adapters:
        raise PerfcastError(f"--lora-targets {','.join(targets)}: none of them is in "
                            f"{arch.model_id}'s layers")
    narrow = min(adapters, key=lambda a: min(a.d_in, a.d_out))
    if rank > min(narrow.d_in, narrow.d_out):
        raise PerfcastError(f"--lora-rank {rank:,} is more than {arch.model_id}'s {narrow.name} "
                            f"width {min(narrow.d_in, narrow.d_out):,} (a rank-r update needs "
                            f"r ≤ min(in, out))")
    precision = w.precision or "bf16"
    return FineTuneCost(method=w.finetune, rank=rank, adapters=adapters, missing=missing,
                        precision=precision, experts_per_token=arch.experts_per_token,
                        capacity_mb=getattr(device, "memory_mb", None))


def memory_note(breakdown_mb: dict[str, float], total_mb: float | None = None) -> str:
    """``memory: weights X MiB + … = total`` — the breakdown an answer states."""
    parts = [f"{k.replace('_', ' ')} {v:,.0f}" for k, v in breakdown_mb.items() if v]
    total = total_mb if total_mb is not None else sum(breakdown_mb.values())
    return f"memory per GPU (MiB): {' + '.join(parts)} = {total:,.0f}"


__all__ = ["ADAPTER_BYTES", "Adapter", "FineTuneCost", "KBIT_OTHER_BYTES", "NF4_DQ_BITS",
           "NF4_BITS_NO_DQ", "finetune_cost", "memory_note", "projections"]


def answer_notes(w, ft: FineTuneCost | None, est) -> list[str]:
    """The notes of a ``--finetune`` answer: the method's assumptions and the memory breakdown
    (none without ``--finetune``)."""
    if w.finetune is None:
        return []
    out = ft.notes(w.train_optimizer) if ft is not None else [
        "finetune: full — every weight trained (weights, gradients and optimizer state of the "
        "whole model), by the per-layer transformer arithmetic"]
    if w.layout.recompute != "full":
        out.append("gradient checkpointing: off (--recompute full keeps each layer's input "
                   "only and runs its forward again in the backward pass — what "
                   "prepare_model_for_kbit_training and most fine-tuning recipes turn on)")
    out.extend(n for n in est.notes if n.startswith("paged optimizer"))
    out.append(memory_note(est.memory_breakdown_mb, est.memory_mb))
    return out


__all__ += ["answer_notes"]
