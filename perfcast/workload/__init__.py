"""The workload: what runs — a model, its batch, input size or sequence length, mode, precision
and optimizer — parsed and validated in one place.

Every layer takes a :class:`Workload`: the frontends build its graph, the graph cache keys it,
the memory simulation simulates it, the profiler measures it, the measurement store records it,
the predictors get its static features and the decisions vary its batch. Nothing below this
module re-parses a spec string or re-declares the allowed values.

A model spec (:class:`ModelSpec`) is one of::

    timm:resnet50 | resnet50        timm model (random init)
    torchvision:resnet18 | tv:…     torchvision model
    hf:gpt2 | hf:path/config.json   Hugging Face architecture from its config, no weights
    path/to/model.onnx              ONNX file
    my.module:make_model            a callable returning an nn.Module
    keras:ResNet50                  keras.applications model (weights=None)     [tensorflow extra]
    path/model.keras | saved_model/ Keras file / TensorFlow SavedModel directory [tensorflow extra]
    paddle:resnet50                 paddle.vision.models model (pretrained=False)   [paddle extra]
    path/model.pdmodel | model.json PaddlePaddle inference program (+ .pdiparams)   [paddle extra]
    jax:my.module:make_fn           a callable returning (JAX function, example inputs) [jax extra]

or, from Python, an ``nn.Module`` object (:meth:`ModelSpec.of_module`; never cached) — or a Keras
model, a ``paddle.nn.Layer`` or a JAX / Flax function with its example inputs
(:meth:`ModelSpec.of_object`; never cached). Files are recognised by their format
(:func:`file_kind`). Spec kinds
are registered (:func:`register_spec_kind`) with the inputs their models take — ``image``
(``C,H,W``), ``tokens`` (a sequence length), ``tensor`` (any per-sample shape) or ``file`` (the
file fixes its shapes) — so validation refuses what does not apply (``--seq-len`` on an image
model, ``--input-size 3,224`` for a 3-channel image model) instead of ignoring it.
"""

from perfcast.choices import (  # noqa: F401  (the commands' own choices, as they always were)
    EVAL_SPLITS,
    EVAL_TASKS,
    OBJECTIVES,
    PREDICTOR_KINDS,
    PRETRAIN_METHODS,
    RISKS,
    TRAIN_RECIPES,
    TRANSFER_RECIPES,
)
from perfcast.workload.choices import (  # noqa: F401
    DEFAULT_ENGINE,
    DEFAULT_OPTIMIZER,
    ENGINES,
    EXTRA_PRECISIONS,
    FLASH_ATTENTION,
    FP8_KV_ENGINES,
    GENERATE_PRECISIONS,
    GGUF_PRECISIONS,
    GRAPH_MODES,
    HF_DEFAULT_OPTIMIZER,
    INPUT_KINDS,
    INTERLEAVED_CHUNKS,
    KV_CACHE_DTYPES,
    LLAMA_CPP_N_BATCH,
    LLAMA_CPP_N_UBATCH,
    MAX_GPUS,
    MAX_SERVING_DEVICES,
    MAX_SIZE,
    MODEL_PRECISIONS,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    RECOMPUTE,
    SCHEDULES,
    TF32_MODES,
    TRAIN_PRECISION_MEANING,
    ZERO_STAGES,
)
from perfcast.workload.core import OPTIMIZER_NOT_GIVEN, Workload, default_optimizer
from perfcast.workload.layout import LAYOUT_KEYWORDS, LAYOUT_OPTIONS, Layout
from perfcast.workload.spec import (
    ModelSpec,
    SpecKind,
    file_kind,
    object_kind,
    parse_input_size,
    register_spec_kind,
    spec_kind,
    spec_kinds,
)

__all__ = ["DEFAULT_ENGINE", "DEFAULT_OPTIMIZER", "ENGINES", "FLASH_ATTENTION",
           "GENERATE_PRECISIONS", "HF_DEFAULT_OPTIMIZER", "OPTIMIZER_NOT_GIVEN",
           "default_optimizer",
           "GGUF_PRECISIONS", "GRAPH_MODES", "LLAMA_CPP_N_BATCH", "LLAMA_CPP_N_UBATCH",
           "INPUT_KINDS", "INTERLEAVED_CHUNKS", "LAYOUT_KEYWORDS", "LAYOUT_OPTIONS", "Layout",
           "MAX_GPUS", "MAX_SIZE", "MODES", "ModelSpec", "OPTIMIZERS", "PRECISIONS", "RECOMPUTE",
           "SCHEDULES", "SpecKind", "Workload", "ZERO_STAGES", "file_kind", "object_kind",
           "EVAL_SPLITS", "EVAL_TASKS", "OBJECTIVES", "PREDICTOR_KINDS", "PRETRAIN_METHODS",
           "RISKS", "TRAIN_RECIPES", "TRANSFER_RECIPES",
           "EXTRA_PRECISIONS", "FP8_KV_ENGINES", "KV_CACHE_DTYPES", "MODEL_PRECISIONS",
           "TRAIN_PRECISION_MEANING",
           "parse_input_size", "register_spec_kind", "spec_kind", "spec_kinds"]
