"""Fine-tuning a Hugging Face decoder LLM (``--finetune``): what may be asked, parsed and checked
in one place — the method, the LoRA rank and the projections it adapts. The cost of each
(memory and time of a step) is :mod:`perfcast.parallel.finetune`'s.

* ``full`` — every weight trained (the per-layer transformer arithmetic of
  :mod:`perfcast.parallel`, on one GPU or a layout);
* ``lora`` — the base frozen in 16 bits, rank-``r`` adapters ``B·A`` beside the projections
  named by ``--lora-targets`` (Hu et al., LoRA, 2021; PEFT's ``LoraConfig``);
* ``qlora`` — the frozen base's linear layers stored as bitsandbytes' 4-bit NormalFloat with
  double quantisation, computed in bf16 / fp16 (Dettmers et al., QLoRA, 2023).
"""

from __future__ import annotations

from typing import Any

from perfcast.errors import PerfcastError

#: ``--finetune`` methods.
FINETUNE = ("full", "lora", "qlora")
#: The methods that train adapters (the ones ``--lora-rank`` and ``--lora-targets`` apply to).
ADAPTER_METHODS = ("lora", "qlora")
#: The projections of a decoder layer LoRA can adapt, by the names of Llama / Mistral / Qwen2
#: in transformers (what PEFT's ``target_modules`` match): attention, then MLP.
ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
LORA_TARGETS = ATTENTION_TARGETS + MLP_TARGETS
#: PEFT's shorthand for every linear layer of the blocks (``target_modules="all-linear"``).
ALL_LINEAR = "all-linear"
#: Default adapted projections: every attention and MLP projection — QLoRA's finding that
#: adapters on all linear layers of the blocks are needed to match full fine-tuning
#: (Dettmers et al. 2023, section 4 and figure 2), what ``all-linear`` selects in PEFT.
DEFAULT_LORA_TARGETS = LORA_TARGETS
#: Default LoRA rank (the QLoRA paper's Guanaco runs used r = 64; 16 is a common default of
#: fine-tuning recipes, e.g. TRL / Axolotl examples; PEFT's own ``LoraConfig.r`` is 8).
DEFAULT_LORA_RANK = 16
#: Largest rank accepted here (it must also be ≤ each adapted projection's smaller width,
#: checked against the model).
MAX_LORA_RANK = 1 << 16
#: Compute precisions of a LoRA step (the frozen base loaded in 16 bits — or fp32 — with
#: autocast) and of QLoRA's (bitsandbytes' ``bnb_4bit_compute_dtype``: bf16 or fp16; ``amp``
#: is fp16 autocast).
LORA_PRECISIONS = ("fp32", "amp", "fp16", "bf16", "bf16-pure")
QLORA_PRECISIONS = ("amp", "fp16", "bf16", "bf16-pure")


def parse_targets(value: Any) -> tuple[str, ...] | None:
    """``--lora-targets``: a comma list (or a list) of projection names of
    :data:`LORA_TARGETS`, or ``all-linear`` (every one), into a tuple in the layer's order;
    ``None`` stays ``None`` (the default). A one-line error names an unknown one."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [str(x).strip() for x in items if str(x).strip()]
    if not names:
        raise PerfcastError(f"--lora-targets is empty; give projection names such as "
                            f"q_proj,v_proj (of {', '.join(LORA_TARGETS)}) or {ALL_LINEAR}")
    if ALL_LINEAR in names:
        return LORA_TARGETS
    bad = [n for n in names if n not in LORA_TARGETS]
    if bad:
        import difflib

        near = difflib.get_close_matches(bad[0], LORA_TARGETS, n=1)
        raise PerfcastError(f"--lora-targets: unknown projection {bad[0]!r}"
                            + (f" — did you mean {near[0]!r}?" if near else "")
                            + f" (one of {', '.join(LORA_TARGETS)}, or {ALL_LINEAR})")
    return tuple(t for t in LORA_TARGETS if t in names)


def _listed(values) -> str:
    """``a, b or c`` of the precisions the workload knows (``bf16-pure`` once it is one)."""
    from perfcast.workload.choices import PRECISIONS

    v = [x for x in values if x in PRECISIONS]
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " or " + v[-1]


def validate_finetune(w) -> None:
    """The rules of ``--finetune`` on a :class:`~perfcast.workload.Workload` ``w`` (exit 2
    naming the rule): the LoRA options only with ``--finetune lora`` / ``qlora``; fine-tuning
    is a training step of an ``hf:`` model; the rank a positive integer; QLoRA computes in
    bf16 or fp16 (bitsandbytes' compute dtypes), LoRA in one of :data:`LORA_PRECISIONS`."""
    method = w.finetune
    lora_given = [flag for flag, v in (("--lora-rank", w.lora_rank),
                                       ("--lora-targets", w.lora_targets)) if v is not None]
    if method not in ADAPTER_METHODS:
        if lora_given:
            raise PerfcastError(f"{' and '.join(lora_given)} "
                                f"{'applies' if len(lora_given) == 1 else 'apply'} to "
                                f"--finetune lora or qlora (the adapters' shape)"
                                + (f", not --finetune {method}" if method else
                                   "; add --finetune lora or --finetune qlora"))
    if method is None:
        return
    if method not in FINETUNE:
        from perfcast.errors import unknown_choice

        raise unknown_choice("finetune", method, FINETUNE)
    if w.mode != "train":
        raise PerfcastError(f"--finetune {method} is a training step (--mode train), not "
                            f"--mode {w.mode}")
    if w.model.kind != "hf":
        raise PerfcastError(f"--finetune {method} fine-tunes a Hugging Face transformer "
                            f"(hf:ID or hf:path/config.json), not {w.model.text!r}")
    r = w.lora_rank
    if r is not None and (isinstance(r, bool) or not isinstance(r, int) or r < 1
                          or r > MAX_LORA_RANK):
        raise PerfcastError(f"--lora-rank must be a positive integer ≤ {MAX_LORA_RANK:,}, "
                            f"got {r!r}")
    p = w.precision
    if p is not None and method == "qlora" and p not in QLORA_PRECISIONS:
        raise PerfcastError(f"--finetune qlora computes in bf16 or fp16 (bitsandbytes' "
                            f"bnb_4bit_compute_dtype) over its 4-bit weights: use --precision "
                            f"{_listed(QLORA_PRECISIONS)}, not {p}")
    if p is not None and method == "lora" and p not in LORA_PRECISIONS:
        raise PerfcastError(f"--finetune lora runs a frozen fp32 or 16-bit base: use "
                            f"--precision {_listed(LORA_PRECISIONS)}, not {p}")
    lay = w.layout
    if method in ADAPTER_METHODS and getattr(lay, "zero", 0) >= 3:
        raise PerfcastError(f"--finetune {method} with --zero 3 (FSDP sharding the frozen "
                            f"base) is not modelled; use --zero 0, 1 or 2 (the adapters' "
                            f"gradients and optimizer state are what they shard)")


__all__ = ["ADAPTER_METHODS", "ALL_LINEAR", "ATTENTION_TARGETS", "DEFAULT_LORA_RANK",
           "DEFAULT_LORA_TARGETS", "FINETUNE", "LORA_PRECISIONS", "LORA_TARGETS",
           "MAX_LORA_RANK", "MLP_TARGETS", "QLORA_PRECISIONS", "parse_targets",
           "validate_finetune"]
