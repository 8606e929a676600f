"""The zoo's ``paddle:`` specs: a ``paddle.vision.models`` architecture with random init
(``pretrained=False``; nothing is downloaded), e.g. ``paddle:resnet50`` or
``paddle:mobilenet_v2``.

Names are the lower-case constructors ``paddle.vision.models`` exports (matched
case-insensitively); the per-sample input is ``C,H,W`` (PaddlePaddle computes channels-first);
the default is 224 px (299 for ``inception_v3``), known without importing PaddlePaddle.

These are PaddlePaddle layers, not PyTorch modules: their graph comes from the PaddlePaddle
frontend (``pip install 'perfcast[paddle]'``); measuring them or simulating their tensor memory
needs a PyTorch model, so the zoo's PyTorch builder refuses them with exit 2.
"""

from __future__ import annotations

import difflib
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError, reraise_interrupt
from perfcast.workload import Workload
from perfcast.zoo import BuiltModel, register_builder


def default_paddle_input(name: str) -> tuple[int, int, int]:
    """``(3, side, side)``: 299 px for Inception-v3, else 224."""
    return (3, 299, 299) if name.lower().startswith("inception") else (3, 224, 224)


def model_names(paddle: Any) -> list[str]:
    """The model constructors ``paddle.vision.models`` exports (``resnet50``,
    ``mobilenet_v2`` …)."""
    models = paddle.vision.models
    return sorted(n for n in getattr(models, "__all__", dir(models))
                  if n[:1].islower() and callable(getattr(models, n, None)))


def resolve_paddle_name(paddle: Any, name: str) -> str:
    """The exported constructor for ``name`` (case-insensitive), or a :class:`ModelSpecError`
    with the nearest names."""
    names = model_names(paddle)
    for n in names:
        if n.lower() == name.lower():
            return n
    close = difflib.get_close_matches(name.lower(), names, n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ModelSpecError(f"unknown PaddlePaddle vision model {name!r}{hint} (paddle:NAME takes "
                         f"a paddle.vision.models constructor, e.g. paddle:resnet50)")


def paddle_vision_model(paddle: Any, name: str, input_size: tuple[int, ...] | None = None):
    """``(layer, model_id, (C, H, W))``: the model built with ``pretrained=False`` (random init)
    in eval mode, for the per-sample input ``input_size`` (default: 224 px, 299 for Inception)."""
    resolved = resolve_paddle_name(paddle, name)
    shape = tuple(input_size) if input_size is not None else default_paddle_input(resolved)
    if len(shape) != 3:
        raise PerfcastError(f"paddle:{resolved} takes --input-size C,H,W, got {shape}")
    try:
        layer = getattr(paddle.vision.models, resolved)(pretrained=False)
    except Exception as exc:  # noqa: BLE001
        reraise_interrupt(exc)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise ModelSpecError(f"could not build paddle:{resolved}: {type(exc).__name__}: "
                             f"{first}") from exc
    layer.eval()
    return layer, f"paddle:{resolved}", tuple(int(d) for d in shape)


def _not_pytorch(w: Workload, device: str) -> BuiltModel:
    raise PerfcastError(f"{w.spec} is a PaddlePaddle model: perfcast reads its graph through "
                        f"paddle2onnx (inspect, predict), but measuring it or simulating its "
                        f"memory needs a PyTorch model (timm:, torchvision:, hf:)")


register_builder("paddle", _not_pytorch,
                 lambda w: w.input_size or default_paddle_input(w.model.name))

__all__ = ["default_paddle_input", "model_names", "paddle_vision_model", "resolve_paddle_name"]
