"""The zoo's ``hf:`` builder: a Hugging Face config (:mod:`perfcast.zoo.hf_config`) → a
weightless ``nn.Module`` and its inputs.

The model is built on the ``meta`` device (no weights are downloaded or allocated), with the head
named by ``config.architectures[0]`` when ``transformers`` has that class, SDPA attention when the
architecture supports it (one ``scaled_dot_product_attention`` op), and the KV cache disabled.
:class:`HFWrapper` makes it callable as ``wrapper(input_ids[, decoder_input_ids]) -> Tensor``.
Every model gets :data:`~perfcast.zoo.hf_config.DEFAULT_SEQ_LEN` tokens unless ``--seq-len`` is
given; encoder-decoder models get ``decoder_input_ids`` of the same length. Mixture-of-experts
models are made traceable on meta by :func:`perfcast.zoo.moe.patch_for_tracing` (balanced
routing, stated there).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from perfcast.errors import ModelSpecError, reraise_interrupt
from perfcast.workload import GRAPH_MODES as MODES
from perfcast.zoo.hf_config import (
    _RENAMED_ARCHITECTURES,
    DEFAULT_SEQ_LEN,
    _exc_text,
    resolve_hf_config,
    shipped_model_ids,
)
from perfcast.zoo.moe import patch_for_tracing

__all__ = [
    "DEFAULT_SEQ_LEN",
    "HFWrapper",
    "build_hf_model",
    "hf_example_inputs",
    "load_hf",
    "resolve_hf_config",
    "shipped_model_ids",
]


# --------------------------------------------------------------------------- building


def _model_class(config):
    """The class named by ``config.architectures[0]`` if it exists and fits the config, else AutoModel."""
    import transformers
    from transformers import AutoModel

    for name in list(getattr(config, "architectures", None) or [])[:1]:
        name = _RENAMED_ARCHITECTURES.get(name, name)
        cls = getattr(transformers, name, None)
        config_class = getattr(cls, "config_class", None)
        if (
            isinstance(cls, type)
            and issubclass(cls, nn.Module)
            and config_class is not None
            and isinstance(config, config_class)
        ):
            return cls
    return AutoModel._model_mapping[type(config)] if type(config) in AutoModel._model_mapping else None


def _supports_sdpa(cls) -> bool:
    return bool(getattr(cls, "_supports_sdpa", False))


def build_hf_model(config, mode: str = "infer", *, dtype: torch.dtype | None = None) -> nn.Module:
    """Build the model for ``config`` on the meta device (no weights, no real memory).

    ``mode`` is ``"infer"`` (``model.eval()``) or ``"train"`` (``model.train()``, dropout active).
    ``dtype`` defaults to torch's default dtype (float32) for every model; the config's
    ``torch_dtype`` (float16 for Llama-2, bfloat16 for Mistral ...) is ignored so that the
    precision is always the caller's choice.
    """
    if mode not in MODES:
        raise ModelSpecError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    config.use_cache = False
    for sub in ("text_config", "decoder"):
        sub_cfg = getattr(config, sub, None)
        if sub_cfg is not None and hasattr(sub_cfg, "use_cache"):
            sub_cfg.use_cache = False

    cls = _model_class(config)
    if cls is None:
        raise ModelSpecError(
            f"transformers has no model class for model_type {getattr(config, 'model_type', '?')!r}"
        )
    attn = "sdpa" if _supports_sdpa(cls) else "eager"
    kwargs: dict[str, Any] = {
        "attn_implementation": attn,
        "dtype": torch.get_default_dtype() if dtype is None else dtype,
    }
    # The boundary between the user's config and transformers' own constructor: whatever the
    # constructor raises on a config that passed _check_values is the config's fault (a value
    # the model cannot be built with), so it is reported as such, exit 2.
    refused = (f"hf config {getattr(config, 'name_or_path', '') or config.model_type}: the "
               f"transformers model {cls.__name__} refused it")
    try:
        with torch.device("meta"):
            model = cls._from_config(config, **kwargs)
    except Exception as exc:  # noqa: BLE001
        reraise_interrupt(exc)
        if attn == "sdpa":
            try:
                kwargs["attn_implementation"] = "eager"
                with torch.device("meta"):
                    model = cls._from_config(config, **kwargs)
            except Exception:  # noqa: BLE001
                raise ModelSpecError(f"{refused}: {_exc_text(exc)}") from exc
        else:
            raise ModelSpecError(f"{refused}: {_exc_text(exc)}") from exc
    if hasattr(model, "config"):
        model.config.use_cache = False
    _untie_t5_v1_1_head(model, config)
    patch_for_tracing(model, config)  # MoE only (perfcast.zoo.moe); other models untouched
    model.train(mode == "train")
    return model


def _untie_t5_v1_1_head(model: nn.Module, config) -> None:
    """Give T5 v1.1 / Flan-T5 their own ``lm_head`` weight, as the real checkpoints have.

    transformers 5 always ties T5's ``lm_head`` to the shared embedding and records the config's
    ``tie_word_embeddings: false`` only as ``scale_decoder_outputs = False``. That undercounts
    Flan-T5's parameters (flan-t5-small: 60.5M instead of 77.0M).
    """
    if getattr(config, "scale_decoder_outputs", True) is not False:
        return
    head = getattr(model, "lm_head", None)
    shared = getattr(model, "shared", None)
    if not isinstance(head, nn.Linear) or not isinstance(shared, nn.Embedding):
        return
    if head.weight is shared.weight:
        head.weight = nn.Parameter(torch.empty_like(head.weight, device=head.weight.device))


# --------------------------------------------------------------------------- inputs


def _unwrap(model: nn.Module) -> nn.Module:
    return model.model if isinstance(model, HFWrapper) else model


def _absolute_position_limit(model: nn.Module) -> tuple[int, int] | None:
    """``(table size, usable positions)`` of the model's learned absolute position table, if any."""
    best: tuple[int, int] | None = None
    for name, mod in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if not isinstance(mod, nn.Embedding) or leaf not in ("position_embeddings", "wpe", "embed_positions"):
            continue
        size = mod.num_embeddings
        usable = size - int(getattr(mod, "offset", 0) or 0)  # OPT: ids shifted by 2
        if mod.padding_idx is not None:  # RoBERTa: positions start at padding_idx + 1
            usable -= mod.padding_idx + 1
        if best is None or usable < best[1]:
            best = (size, usable)
    return best


def _is_encoder_decoder(config) -> bool:
    return bool(getattr(config, "is_encoder_decoder", False))


def hf_example_inputs(config, model: nn.Module, batch_size: int, seq_len: int) -> tuple[tuple, dict]:
    """Example inputs on the meta device: ``(args, kwargs)`` for calling ``HFWrapper(model)``.

    ``args`` is ``(input_ids,)`` or, for encoder-decoder models, ``(input_ids, decoder_input_ids)``
    (both ``[batch_size, seq_len]`` int64 zeros); ``kwargs`` is empty.
    """
    for name, value in (("batch-size", batch_size), ("seq-len", seq_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ModelSpecError(f"{name} must be a positive integer, got {value!r}")
    limit = _absolute_position_limit(_unwrap(model))
    if limit is not None and seq_len > limit[1]:
        attr_map = getattr(config, "attribute_map", {}) or {}
        attr = attr_map.get("max_position_embeddings", "max_position_embeddings")
        table = getattr(config, attr, limit[0])
        name = getattr(config, "name_or_path", "") or getattr(config, "model_type", "model")
        extra = "" if table == limit[1] else f" ({limit[1]} usable positions)"
        raise ModelSpecError(f"seq-len {seq_len} exceeds {name}'s {attr} {table}{extra}")
    input_ids = torch.zeros((batch_size, seq_len), dtype=torch.long, device="meta")
    args: tuple = (input_ids,)
    if _is_encoder_decoder(config):
        args = (input_ids, torch.zeros((batch_size, seq_len), dtype=torch.long, device="meta"))
    return args, {}


# --------------------------------------------------------------------------- wrapper


class HFWrapper(nn.Module):
    """Calls a transformers model positionally and returns its main output tensor.

    ``forward(input_ids[, decoder_input_ids])`` -> ``logits`` if the model has a head, else
    ``last_hidden_state``. The KV cache is off and the result is always a single tensor.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        # The padding check reads input values (``.item()``), which fails on meta/fake tensors
        # outside torch.export (DeBERTa calls it). It only emits a warning, so skip it.
        for mod in model.modules():
            if hasattr(type(mod), "warn_if_padding_and_no_attention_mask"):
                object.__setattr__(mod, "warn_if_padding_and_no_attention_mask", _no_padding_check)
        params = inspect.signature(model.forward).parameters
        self._pass_use_cache = "use_cache" in params
        self._pass_return_dict = "return_dict" in params

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None) -> torch.Tensor:
        kwargs: dict[str, Any] = {"input_ids": input_ids}
        if decoder_input_ids is not None:
            kwargs["decoder_input_ids"] = decoder_input_ids
        if self._pass_use_cache:
            kwargs["use_cache"] = False
        if self._pass_return_dict:
            kwargs["return_dict"] = True
        out = self.model(**kwargs)
        return _main_output(out)


def _no_padding_check(input_ids: Any, attention_mask: Any) -> None:
    return None


def _main_output(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state", "prediction_logits"):
        value = getattr(out, key, None)
        if isinstance(value, torch.Tensor):
            return value
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    if hasattr(out, "to_tuple"):
        first = out.to_tuple()[0]
        if isinstance(first, torch.Tensor):
            return first
    raise TypeError(f"cannot find the main output tensor in {type(out).__name__}")


# --------------------------------------------------------------------------- all together


def load_hf(
    spec: str,
    batch_size: int = 1,
    seq_len: int | None = None,
    mode: str = "infer",
    *,
    dtype: torch.dtype | None = None,
) -> tuple[nn.Module, tuple, str]:
    """``hf:<spec>`` -> ``(HFWrapper on meta, example args on meta, model_id)``.

    ``seq_len=None`` means :data:`DEFAULT_SEQ_LEN` (128) for every model; ``dtype=None`` means
    float32 (see :func:`build_hf_model`).
    """
    config, model_id = resolve_hf_config(spec)
    model = build_hf_model(config, mode, dtype=dtype)
    args, _ = hf_example_inputs(config, model, batch_size, DEFAULT_SEQ_LEN if seq_len is None else seq_len)
    wrapper = HFWrapper(model)
    wrapper.train(mode == "train")
    return wrapper, args, model_id


# --------------------------------------------------------------------------- the zoo's builder


def _build(workload, device: str):
    """``hf:`` builder of :func:`perfcast.zoo.build_model`: the :class:`HFWrapper` on meta (or
    random-init on a real device) and token-id inputs (zeros on meta, ``randint`` otherwise)."""
    from perfcast.zoo import finish

    batch = workload.batch_size or 1
    seq = DEFAULT_SEQ_LEN if workload.seq_len is None else workload.seq_len
    if device == "meta":
        wrapper, args, model_id = load_hf(workload.model.name, batch, seq, workload.mode)
        return finish(wrapper, args, f"hf:{model_id}", (seq,), device)
    config, model_id = resolve_hf_config(workload.model.name)
    meta_model = build_hf_model(config, workload.mode)  # picks the architecture class
    meta_args, _ = hf_example_inputs(config, meta_model, batch, seq)
    wrapper = HFWrapper(meta_model.__class__(meta_model.config))  # real, random init
    vocab = int(getattr(config, "vocab_size", 1000) or 1000)
    args = tuple(torch.randint(0, vocab, tuple(a.shape)).to(device) for a in meta_args)
    return finish(wrapper, args, f"hf:{model_id}", (seq,), device)


def _register() -> None:
    from perfcast.zoo import register_builder

    register_builder("hf", _build, lambda w: (DEFAULT_SEQ_LEN if w.seq_len is None else w.seq_len,))


_register()
