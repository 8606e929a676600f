"""Hugging Face configs for the zoo's ``hf:`` builder, resolved without torch.

The spec after ``hf:`` is resolved to a ``transformers`` config, in this order:

1. a path to a local ``config.json`` (or a directory that contains one);
2. a hub id or short alias from the table shipped in ``hf_configs/`` (case-insensitive) — the
   real public ``config.json`` files of well-known models, so they work offline;
3. otherwise the Hugging Face hub, only when it is reachable and ``HF_HUB_OFFLINE`` is not set.

Every value is checked against perfcast's limits first; any failure is a one-line
:class:`~perfcast.errors.ModelSpecError`.
"""

from __future__ import annotations

import json
import os
import socket
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from perfcast.errors import ModelSpecError, reraise_interrupt
from perfcast.paths import package_data

if TYPE_CHECKING:  # pragma: no cover
    import transformers

__all__ = ["CONFIG_DIR", "DEFAULT_SEQ_LEN", "MAX_LAYERS", "resolve_hf_config", "shipped_model_ids"]

#: Sequence length used when the caller gives none (same for encoders and decoders).
DEFAULT_SEQ_LEN = 128

CONFIG_DIR = package_data("zoo", "hf_configs")

#: Limits of :func:`_check_values`: far above any published model (Llama-3.1-405B: 126 layers,
#: width 53,248, vocabulary 128,256; Doge: 16,384 experts), low enough that a config cannot
#: make the tracer build a billion layers (tracing takes a fraction of a second per layer,
#: more in training mode).
MAX_LAYERS = 1024
MAX_EXPERTS = 2**16
MAX_WIDTH = 2**24
MAX_POSITIONS = 2**31 - 1

#: Config keys (as ``config.json`` files spell them) checked by :func:`_check_values`.
_LAYER_KEYS = frozenset({"num_hidden_layers", "n_layer", "n_layers", "num_layers",
                         "num_decoder_layers", "num_encoder_layers", "encoder_layers",
                         "decoder_layers"})
_EXPERT_KEYS = frozenset({"num_local_experts", "num_experts", "n_routed_experts"})
_POSITION_KEYS = frozenset({"max_position_embeddings", "n_positions", "n_ctx"})
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
_HEAD_SIZE_KEYS = ("head_dim", "d_kv", "kv_channels", "attention_head_size")
_KV_HEAD_KEYS = ("num_key_value_heads", "n_kv_heads")
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
              "decoder_attention_heads", *_KV_HEAD_KEYS)
_WIDTH_KEYS = frozenset({*_HIDDEN_KEYS, "intermediate_size", "n_inner",
                         "hidden_dim", "d_ff", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim",
                         "vocab_size"})
_ACTIVATION_KEYS = frozenset({"hidden_act", "activation_function", "hidden_activation"})

#: ``architectures`` entries of old public configs that no longer exist in ``transformers``.
_RENAMED_ARCHITECTURES = {
    "T5WithLMHeadModel": "T5ForConditionalGeneration",
}



# --------------------------------------------------------------------------- shipped table


@lru_cache(maxsize=1)
def _index() -> tuple[dict[str, str], dict[str, str]]:
    """(lower-cased name -> canonical id, canonical id -> file name)."""
    data = json.loads((CONFIG_DIR / "index.json").read_text())
    files: dict[str, str] = dict(data["models"])
    lookup: dict[str, str] = {}
    for model_id, fname in files.items():
        lookup[model_id.lower()] = model_id
        lookup[model_id.replace("/", "--").lower()] = model_id
        lookup[fname.lower()] = model_id
        lookup[fname[: -len(".json")].lower()] = model_id
    for alias, model_id in data.get("aliases", {}).items():
        if model_id not in files:
            raise RuntimeError(f"hf_configs/index.json: alias {alias!r} points to unknown id {model_id!r}")
        lookup[alias.lower()] = model_id
    return lookup, files


def shipped_model_ids() -> list[str]:
    """Hub ids of the configs shipped with perfcast (usable offline as ``hf:<id>``)."""
    return list(_index()[1])


def _lookup_shipped(spec: str) -> str | None:
    return _index()[0].get(spec.strip().lower())


# --------------------------------------------------------------------------- resolving


def _config_from_dict(data: dict[str, Any], source: str):
    from transformers import CONFIG_MAPPING

    if not isinstance(data, dict):
        raise ModelSpecError(f"{source} is not a JSON object; pass a Hugging Face config.json")
    model_type = data.get("model_type")
    if not model_type:
        raise ModelSpecError(f"{source} has no 'model_type'; pass a Hugging Face config.json")
    if not isinstance(model_type, str):
        raise ModelSpecError(f"{source}: 'model_type' must be a string such as \"gpt2\", got "
                             f"{_value_text(model_type)}")
    archs = data.get("architectures")
    if archs is not None and (not isinstance(archs, list)
                              or not all(isinstance(a, str) for a in archs)):
        raise ModelSpecError(f"{source}: 'architectures' must be a list of class names such as "
                             f"[\"GPT2LMHeadModel\"], got {_value_text(archs)}")
    _check_values(data, source)
    try:
        config_class = CONFIG_MAPPING[model_type]
    except KeyError:
        import transformers

        raise ModelSpecError(
            f"{source}: model_type {model_type!r} is unknown to transformers {transformers.__version__}"
        ) from None
    try:
        return config_class.from_dict(dict(data))
    except Exception as exc:  # noqa: BLE001 - any bad field is a spec problem
        reraise_interrupt(exc)
        raise ModelSpecError(f"{source}: invalid {model_type} config: {_one_line(exc)}") from exc


def _check_values(data: dict[str, Any], source: str, prefix: str = "") -> None:
    """Refuse config values no real model has, naming the key as the file spells it: sizes
    (layers, widths, heads, vocabulary, positions, experts) that are not positive integers or
    are beyond :data:`MAX_LAYERS` / :data:`MAX_EXPERTS` / :data:`MAX_WIDTH` /
    :data:`MAX_POSITIONS`, query heads not divisible by key/value heads, a dropout probability
    outside [0, 1], an activation transformers does not know. Nested sub-configs
    (``text_config``, ``encoder`` …) are checked the same way. transformers itself checks the
    types of its fields; these are values it accepts and then fails on deep inside the model,
    silently builds into nonsense (-1 layers) or traces for ever (a billion layers)."""
    def q(key: str) -> str:
        return repr(f"{prefix}{key}")

    def size(key: str, value: Any, low: int, limit: int, what: str) -> None:
        if value is None:
            return
        if isinstance(value, (list, dict)) and value:  # per stage / part: Swin's "num_heads":
            for v in (value.values() if isinstance(value, dict) else value):  # [3, 6, 12, 24]
                size(key, v, low, limit, what)
            return
        if isinstance(value, float) and value.is_integer():  # 1200.0 (MusicFlamingo)
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ModelSpecError(f"{source}: {q(key)} ({what}) must be an integer ≥ {low}, got "
                                 f"{_value_text(value)}")
        if value > limit:
            raise ModelSpecError(f"{source}: {q(key)} ({what}) is {value:,}, beyond perfcast's "
                                 f"limit of {limit:,} (published models stay far below it)")

    for key, value in data.items():
        if key in _LAYER_KEYS:
            size(key, value, 1, MAX_LAYERS, "layers")
        elif key in _EXPERT_KEYS:
            size(key, value, 0, MAX_EXPERTS, "experts")
        elif key in _POSITION_KEYS:
            size(key, value, 1, MAX_POSITIONS, "positions")
        elif key in _HEAD_SIZE_KEYS:  # 0: derived from the other sizes (e.g. GLM-5 "next")
            size(key, value, 0, MAX_WIDTH, "a size")
        elif key in _WIDTH_KEYS:
            size(key, value, 1, MAX_WIDTH, "a size")
        elif key in _HEAD_KEYS:
            size(key, value, 1, MAX_WIDTH, "attention heads")
        elif (("dropout" in key or "pdrop" in key) and isinstance(value, (int, float))
              and not isinstance(value, bool) and not 0 <= value <= 1):
            raise ModelSpecError(f"{source}: {q(key)} is a dropout probability: it must be "
                                 f"between 0 and 1, got {_value_text(value)}")
        elif key in _ACTIVATION_KEYS and isinstance(value, str):
            import difflib

            from transformers.activations import ACT2FN

            if value not in ACT2FN:
                near = difflib.get_close_matches(value, list(ACT2FN), n=1)
                raise ModelSpecError(f"{source}: {q(key)} is {value!r}, an activation "
                                     f"transformers does not know"
                                     + (f" — did you mean {near[0]!r}?" if near else "")
                                     + f" (use {', '.join(sorted(ACT2FN))})")
    # hidden size % heads is left to the model: GPT-2 and BERT refuse a remainder (exit 2 with
    # their message, see build_hf_model), Llama-style models floor the head size and build.
    for key in _HEAD_KEYS:
        heads = data.get(key)
        if not isinstance(heads, int) or key in _KV_HEAD_KEYS:
            continue
        for kv_key in _KV_HEAD_KEYS:
            kv = data.get(kv_key)
            if isinstance(kv, int) and heads % kv:
                raise ModelSpecError(f"{source}: {q(key)} ({heads}) is not divisible by "
                                     f"{q(kv_key)} ({kv}): each key/value head serves a whole "
                                     f"group of query heads")
    for key, value in data.items():
        if isinstance(value, dict) and (key.endswith("_config") or key in ("encoder", "decoder")):
            _check_values(value, source, f"{prefix}{key}.")


def _value_text(value: Any) -> str:
    """A config value as the user wrote it (JSON), cut to one short line."""
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _load_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelSpecError(f"cannot read {path}: {_one_line(exc)}") from exc
    except json.JSONDecodeError as exc:
        raise ModelSpecError(f"{path} is not valid JSON: {exc}") from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _exc_text(exc: BaseException) -> str:
    """``_one_line`` with the exception type when the message alone says nothing (a
    ``KeyError('abc')`` reads ``'abc'``)."""
    text = _one_line(exc)
    return f"{type(exc).__name__}: {text}" if isinstance(exc, (KeyError, IndexError)) else text


def _looks_like_path(spec: str) -> bool:
    return (
        spec.endswith(".json")
        or spec.startswith((".", "/", "~"))
        or spec.count("/") > 1  # hub ids have at most one "/"
        or "\\" in spec
    )


def _hub_offline() -> bool:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


def _hub_reachable(timeout: float = 2.0) -> bool:
    """Cheap TCP probe of the hub endpoint, so an offline machine fails in ~0 s, not after retries."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # behind a proxy a direct probe says nothing; let transformers try
    try:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    except Exception:  # noqa: BLE001
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname
    if not host:
        return False
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _unknown_spec_message(spec: str, why: str) -> str:
    import difflib

    ids = shipped_model_ids()
    near = difflib.get_close_matches(spec, ids, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    return (
        f"unknown Hugging Face model {spec!r} ({why}); {hint}{len(ids)} configs ship with "
        f"perfcast (e.g. {', '.join(ids[:4])}, … — perfcast.zoo.hf.shipped_model_ids()), or "
        f"pass a local config.json as hf:path/to/config.json"
    )


def resolve_hf_config(spec: str) -> tuple[transformers.PretrainedConfig, str]:
    """Resolve ``spec`` (what follows ``hf:``) to ``(config, model_id)``.

    Never touches the network for a local path or a shipped id/alias, nor when
    ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set.
    """
    spec = spec.strip() if isinstance(spec, str) else ""
    if spec.startswith("hf:"):
        spec = spec[3:].strip()
    if not spec:
        raise ModelSpecError("empty Hugging Face model spec; use hf:<id> or hf:path/to/config.json")

    # 1. local file or directory
    path = Path(spec).expanduser()
    if path.is_dir():
        cfg_path = path / "config.json"
        if not cfg_path.is_file() and _lookup_shipped(spec) is None:
            raise ModelSpecError(f"directory {path} has no config.json")
        path = cfg_path
    if path.is_file():
        data = _load_json(path)
        config = _config_from_dict(data, str(path))
        named = data.get("_name_or_path")  # a dict: _config_from_dict checked it
        model_id = (named.strip() if isinstance(named, str) else "") or (
            path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        )
        config._name_or_path = str(model_id)
        return config, str(model_id)

    # 2. shipped table
    model_id = _lookup_shipped(spec)
    if model_id is not None:
        fname = _index()[1][model_id]
        config = _config_from_dict(_load_json(CONFIG_DIR / fname), f"shipped config {fname}")
        config._name_or_path = model_id
        return config, model_id

    if _looks_like_path(spec):
        raise ModelSpecError(f"no such file or directory: {spec}; pass a config.json or a known model id")

    # 3. the hub, only if allowed and reachable
    if _hub_offline():
        raise ModelSpecError(_unknown_spec_message(spec, "not shipped and HF_HUB_OFFLINE is set"))
    if not _hub_reachable():
        raise ModelSpecError(_unknown_spec_message(spec, "not shipped and the Hugging Face hub is unreachable"))
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(spec, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - network, auth, 404, remote code, bad config ...
        reraise_interrupt(exc)
        raise ModelSpecError(_unknown_spec_message(spec, f"hub lookup failed: {_one_line(exc)}")) from exc
    return config, spec
