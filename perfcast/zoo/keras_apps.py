"""The zoo's ``keras:`` specs: a ``keras.applications`` architecture with random init
(``weights=None``; nothing is downloaded), e.g. ``keras:ResNet50`` or ``keras:mobilenetv2``.

Names are matched case-insensitively against the application functions Keras exports; the
per-sample input is ``C,H,W`` like every image spec (``--input-size 3,160,160`` builds the model
with ``input_shape=(160, 160, 3)``; Keras computes channels-last, the exported graph takes
channels-first — see :mod:`perfcast.frontends.tf_frontend`). The default input is the
application's own (224 px for most, 299 for Inception / Xception, 331 for NASNetLarge, the
EfficientNets' native sizes), known without importing Keras.

These are Keras models, not PyTorch modules: their graph comes from the TensorFlow frontend
(``pip install 'perfcast[tensorflow]'``); measuring them on this machine or simulating their
tensor memory needs a PyTorch model, so the zoo's PyTorch builder refuses them with exit 2.
"""

from __future__ import annotations

import difflib
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError, reraise_interrupt
from perfcast.workload import Workload
from perfcast.zoo import BuiltModel, register_builder

#: Default square input side of the applications that do not take 224 px (lower-case names).
_DEFAULT_SIDE = {
    "inceptionv3": 299, "inceptionresnetv2": 299, "xception": 299, "nasnetlarge": 331,
    "efficientnetb1": 240, "efficientnetb2": 260, "efficientnetb3": 300, "efficientnetb4": 380,
    "efficientnetb5": 456, "efficientnetb6": 528, "efficientnetb7": 600,
    "efficientnetv2b1": 240, "efficientnetv2b2": 260, "efficientnetv2b3": 300,
    "efficientnetv2s": 384, "efficientnetv2m": 480, "efficientnetv2l": 480,
}


def default_keras_input(name: str) -> tuple[int, int, int]:
    """``(3, side, side)``: the application's default input, channels first."""
    side = _DEFAULT_SIDE.get(name.lower().replace("_", ""), 224)
    return (3, side, side)


def application_names(keras: Any) -> list[str]:
    """The model constructors ``keras.applications`` exports (``ResNet50``, ``MobileNetV2`` …)."""
    apps = keras.applications
    return sorted(n for n in dir(apps) if n[:1].isupper() and callable(getattr(apps, n)))


def resolve_keras_name(keras: Any, name: str) -> str:
    """The exported application name for ``name`` (case- and underscore-insensitive), or a
    :class:`ModelSpecError` with the nearest names."""
    names = application_names(keras)
    key = name.lower().replace("_", "").replace("-", "")
    for n in names:
        if n.lower() == key:
            return n
    close = difflib.get_close_matches(name, names, n=4, cutoff=0.5) or \
        difflib.get_close_matches(key, [n.lower() for n in names], n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ModelSpecError(f"unknown Keras application {name!r}{hint} (keras:NAME takes a "
                         f"keras.applications model, e.g. keras:ResNet50)")


def keras_application(keras: Any, name: str, input_size: tuple[int, ...] | None = None):
    """``(model, model_id, (C, H, W))``: the application built with ``weights=None`` (random
    init) for the per-sample input ``input_size`` (C,H,W; default: the application's own)."""
    resolved = resolve_keras_name(keras, name)
    shape = tuple(input_size) if input_size is not None else default_keras_input(resolved)
    if len(shape) != 3:
        raise PerfcastError(f"keras:{resolved} takes --input-size C,H,W, got {shape}")
    c, h, w = shape
    try:
        model = getattr(keras.applications, resolved)(weights=None, input_shape=(h, w, c))
    except Exception as exc:  # noqa: BLE001 - Keras refuses the size / channels in words
        reraise_interrupt(exc)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise ModelSpecError(f"could not build keras:{resolved} for input {c},{h},{w}: "
                             f"{type(exc).__name__}: {first}") from exc
    return model, f"keras:{resolved}", (c, h, w)


def _not_pytorch(w: Workload, device: str) -> BuiltModel:
    raise PerfcastError(f"{w.spec} is a Keras model: perfcast reads its graph through tf2onnx "
                        f"(inspect, predict), but measuring it or simulating its memory needs a "
                        f"PyTorch model (timm:, torchvision:, hf:)")


register_builder("keras", _not_pytorch,
                 lambda w: w.input_size or default_keras_input(w.model.name))

__all__ = ["application_names", "default_keras_input", "keras_application",
           "resolve_keras_name"]
